// GET /v1/realtime (a websocket upgrade): OpenAI Realtime's events over an omni plan, as the
// `openai` package's realtime client and vLLM-Omni 0.30 speak them; the conversation is the C
// ABI's realtime session (oe_realtime_*) over one session of the pool, held while the socket is
// open (none free: 429 at the upgrade). The socket's reads and writes are asynchronous on the
// server's I/O thread (one read and one write at a time, never from two threads); each client
// event is handled on this connection's own thread, and the server's events, which a response
// emits from its thread too, are queued for that I/O thread.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "server/endpoints.h"

namespace omni_edge::server {
namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
constexpr size_t kMaxEventBytes = size_t(16) << 20;  // an append of a few minutes of 24 kHz PCM in base64

// The websocket's I/O: reads and writes on the socket's executor (the server's I/O thread).
class Channel : public std::enable_shared_from_this<Channel> {
 public:
  explicit Channel(tcp::socket& socket) : ws_(socket) {}
  websocket::stream<tcp::socket&>& ws() { return ws_; }

  void StartReading() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }
  // Any thread: queued, written in order (dropped once the socket is done).
  void Write(std::string text) {
    boost::asio::post(ws_.get_executor(), [self = shared_from_this(), text = std::move(text)]() mutable {
      if (self->dead_) return;
      self->out_.push_back(std::move(text));
      if (!self->writing_) self->WriteNext();
    });
  }
  // The next client event (text), waiting; false once the socket is done (closed, failed, shut).
  bool Next(std::string* text, const std::atomic<bool>& stopping) {
    std::unique_lock<std::mutex> lock(mu_);
    while (in_.empty() && !read_ended_ && !stopping) cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (in_.empty()) return false;
    *text = std::move(in_.front());
    in_.pop_front();
    return true;
  }
  // Closes (after what is queued is written) and waits until no operation is left on the socket:
  // the reads and writes ended, and every write posted before this one was handled (the I/O
  // thread runs posts in order), so nothing touches the socket once it returns.
  void Finish(tcp::socket& socket) {
    boost::asio::post(ws_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      if (self->dead_) {
        self->Ended();
      } else if (!self->writing_) {
        self->WriteNext();
      }
    });
    std::unique_lock<std::mutex> lock(mu_);
    const auto done = [&] { return read_ended_ && write_ended_ && closing_seen_; };
    if (!cv_.wait_for(lock, std::chrono::seconds(2), done)) {
      beast::error_code ignored;
      socket.shutdown(tcp::socket::shutdown_both, ignored);  // a client that never answers the close
      cv_.wait(lock, done);
    }
  }

 private:
  void OnRead(beast::error_code ec) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ec) {
      read_ended_ = true;
    } else {
      in_.push_back(beast::buffers_to_string(buffer_.data()));
      buffer_.consume(buffer_.size());
    }
    cv_.notify_all();
    if (!ec) StartReading();
  }
  void WriteNext() {
    if (out_.empty()) {
      writing_ = false;
      if (closing_ && !close_sent_) {
        close_sent_ = true;
        ws_.async_close(websocket::close_code::normal, [self = shared_from_this()](beast::error_code) {
          self->dead_ = true;
          self->Ended();
        });
      }
      return;
    }
    writing_ = true;
    ws_.text(true);
    ws_.async_write(boost::asio::buffer(out_.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->out_.pop_front();
      if (ec) {
        self->out_.clear();
        self->writing_ = false;
        self->dead_ = true;
        self->Ended();
        return;
      }
      self->WriteNext();
    });
  }
  void Ended() {  // the I/O thread's: writes are over (failed, or the close was sent)
    std::lock_guard<std::mutex> lock(mu_);
    write_ended_ = true;
    closing_seen_ = closing_seen_ || closing_;
    cv_.notify_all();
  }

  websocket::stream<tcp::socket&> ws_;
  beast::flat_buffer buffer_;
  std::deque<std::string> out_;  // the I/O thread's
  bool writing_ = false, closing_ = false, close_sent_ = false, dead_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> in_;
  bool read_ended_ = false, write_ended_ = false, closing_seen_ = false;
};

void OnRealtimeEvent(const char* event_json, void* user) { static_cast<Channel*>(user)->Write(event_json); }

// The model a client names in the URL (?model=ID), if it names one.
std::string QueryModel(const HttpRequest& req) {
  const std::string target(req.target().data(), req.target().size());
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  const std::string query = target.substr(q + 1);
  for (size_t at = 0; at < query.size();) {
    const size_t end = std::min(query.find('&', at), query.size());
    const std::string pair = query.substr(at, end - at);
    if (pair.rfind("model=", 0) == 0) return pair.substr(6);
    at = end + 1;
  }
  return "";
}

}  // namespace

void ServeRealtime(Serving& s, tcp::socket& socket, const HttpRequest& req) {
  const PlanFacts& facts = s.pool.facts();
  if (!facts.text || !facts.audio || std::find(facts.inputs.begin(), facts.inputs.end(), "audio") == facts.inputs.end()) {
    SendError(socket, req, http::status::bad_request, "this plan does not hear and speak: /v1/realtime serves omni plans "
              "with an audio encoder and a speech stream", "invalid_request_error");
    return;
  }
  const std::string model = QueryModel(req);
  if (!model.empty()) {
    if (Status no = CheckModel(s, model); !no.ok()) {
      SendUnservable(s, "realtime", socket, req, no);
      return;
    }
  }
  SessionLease session(s.pool);
  if (s.stopping || session.get() == nullptr) {
    SendBusy(s, "realtime", socket, req);
    return;
  }
  LedgerReservation memory(s.pool.ledger(), "server: websocket", 2 * int64_t(kMaxEventBytes));
  if (!memory.held()) {
    SendError(socket, req, http::status::too_many_requests, "the server has no memory for a realtime connection now: " +
              memory.refusal(), "rate_limit_error", "", "admission");
    return;
  }
  auto channel = std::make_shared<Channel>(socket);
  // A browser that offered subprotocols (its key travels in one) needs one chosen: "realtime".
  const auto offered = req[http::field::sec_websocket_protocol];
  const bool realtime_protocol = std::string(offered.data(), offered.size()).find("realtime") != std::string::npos;
  channel->ws().set_option(websocket::stream_base::decorator([realtime_protocol](websocket::response_type& res) {
    res.set(http::field::server, "omni-edge");
    if (realtime_protocol) res.set(http::field::sec_websocket_protocol, "realtime");
  }));
  channel->ws().read_message_max(kMaxEventBytes);
  beast::error_code ec;
  channel->ws().accept(req, ec);
  if (ec) return;
  const Json options = {{"model", s.options.model}, {"allow_unqualified", s.options.allow_unqualified}};
  OeRealtime* rt = nullptr;
  channel->StartReading();
  if (OeError* e = oe_realtime_open(session.get(), options.dump().c_str(), OnRealtimeEvent, channel.get(), &rt)) {
    channel->Write(Json{{"type", "error"}, {"event_id", NewId("event")},
                        {"error", {{"type", "server_error"}, {"code", oe_error_reason(e)}, {"message", oe_error_message(e)}}}}
                       .dump());
    oe_error_free(e);
  } else {
    std::string text;
    while (channel->Next(&text, s.stopping)) oe_realtime_send(rt, text.c_str());
    oe_realtime_close(rt);  // a response in flight is cancelled; nothing is emitted after
  }
  s.metrics.Record("realtime", 101, Json::object());
  channel->Finish(socket);
  session.Release(true);  // the next connection starts a new conversation
}

}  // namespace omni_edge::server
