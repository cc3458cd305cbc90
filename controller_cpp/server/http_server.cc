#include "server/http_server.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/json_fields.h"
#include "capi/omni_edge.h"
#include "server/chat_request.h"
#include "server/openai_chat.h"

namespace omni_edge::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Request = http::request<http::string_body>;

// --- Sessions --------------------------------------------------------------------------------

// The sessions requests run on, opened at start; Take gives a free one or none.
class SessionPool {
 public:
  ~SessionPool() {
    for (OeSession* s : all_) oe_session_close(s);
    if (ledger_ != nullptr) oe_ledger_free(ledger_);
  }
  OeError* Open(const ServeOptions& o) {
    if (OeError* e = oe_ledger_create(nullptr, &ledger_)) return e;
    OeSessionConfig config;
    oe_session_config_default(&config);
    config.plan_path = o.plan.c_str();
    config.allow_unqualified = o.allow_unqualified ? 1 : 0;
    config.threads = o.threads;
    config.ledger = ledger_;
    for (int i = 0; i < o.max_sessions; ++i) {
      OeSession* s = nullptr;
      if (OeError* e = oe_session_open(&config, &s)) return e;
      all_.push_back(s);
      free_.push_back(s);
    }
    return nullptr;
  }
  OeSession* Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return nullptr;
    OeSession* s = free_.back();
    free_.pop_back();
    ++busy_;
    return s;
  }
  void Give(OeSession* s, bool reset) {
    if (reset) {
      if (OeError* e = oe_session_reset(s)) oe_error_free(e);
    }
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(s);
    --busy_;
    idle_.notify_all();
  }
  // Cancels every running request and waits (up to `limit`) for them to end.
  void CancelAll(std::chrono::milliseconds limit) {
    for (OeSession* s : all_) oe_session_cancel(s);
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait_for(lock, limit, [this] { return busy_ == 0; });
  }
  size_t size() const { return all_.size(); }

 private:
  OeLedger* ledger_ = nullptr;
  std::vector<OeSession*> all_;
  std::mutex mu_;
  std::condition_variable idle_;
  std::vector<OeSession*> free_;
  int busy_ = 0;
};

struct Server {
  net::io_context ioc;  // the sockets' executor: lives as long as the last connection thread
  ServeOptions options;
  SessionPool pool;
  std::atomic<bool> stopping{false};
};

// --- Responses -------------------------------------------------------------------------------

bool Send(tcp::socket& socket, const Request& req, http::status status, const std::string& body,
          const char* content_type = "application/json") {
  http::response<http::string_body> res{status, req.version()};
  res.set(http::field::server, "omni-edge");
  res.set(http::field::content_type, content_type);
  res.keep_alive(req.keep_alive());
  res.body() = body;
  res.prepare_payload();
  beast::error_code ec;
  http::write(socket, res, ec);
  return !ec;
}

bool SendError(tcp::socket& socket, const Request& req, http::status status, const std::string& message,
               const std::string& type, const std::string& param = "", const std::string& code = "") {
  return Send(socket, req, status, ErrorBody(message, type, param, code).dump());
}

// The HTTP status and OpenAI type of a request the controller refused.
std::pair<http::status, const char*> StatusOf(const std::string& reason) {
  for (const char* bad : {"invalid_prompt", "invalid_argument", "invalid_field", "invalid_media", "invalid_input",
                          "context_overflow", "invalid_base64"}) {
    if (reason == bad) return {http::status::bad_request, "invalid_request_error"};
  }
  if (reason == "admission") return {http::status::too_many_requests, "rate_limit_error"};
  return {http::status::internal_server_error, "server_error"};
}

std::string NewCompletionId() {
  static std::mt19937_64 gen{std::random_device{}()};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  char id[32];
  std::snprintf(id, sizeof(id), "chatcmpl-%016llx", static_cast<unsigned long long>(gen()));
  return id;
}

// --- Chat completions ------------------------------------------------------------------------

// What one request's text stream produced, as the events arrive.
struct TextStream {
  std::string text;
  Json terminal;  // the text stream's last event
};

// One event of the text stream: its text (token events), or its terminal fields.
void Collect(const OeEvent& ev, TextStream* out, std::string* piece) {
  if (std::string(ev.stream) != "text") return;
  auto json = ParseJson(ev.json, "event");
  if (!json.ok()) return;
  if (ev.terminal) {
    out->terminal = std::move(*json);
  } else if (json->value("kind", "") == "token") {
    *piece = json->value("text", "");
    out->text += *piece;
  }
}

struct Streamer {
  tcp::socket* socket = nullptr;
  CompletionHead head;
  TextStream text;
  bool first = true;
  bool gone = false;

  bool Write(const std::string& data) {
    beast::error_code ec;
    net::write(*socket, http::make_chunk(net::buffer(data)), ec);
    gone = gone || bool(ec);
    return !gone;
  }
  bool Event(const Json& payload) { return Write("data: " + payload.dump() + "\n\n"); }
};

int OnStreamEvent(const OeEvent* ev, void* user) {
  auto* s = static_cast<Streamer*>(user);
  std::string piece;
  Collect(*ev, &s->text, &piece);
  if (piece.empty()) return s->gone ? 1 : 0;
  Json delta = {{"content", piece}};
  if (s->first) delta["role"] = "assistant";
  s->first = false;
  return s->Event(Chunk(s->head, delta)) ? 0 : 1;  // a client that went away cancels the request
}

int OnPlainEvent(const OeEvent* ev, void* user) {
  std::string piece;
  Collect(*ev, static_cast<TextStream*>(user), &piece);
  return 0;
}

Json UsageOf(const Json& terminal) {
  return Usage(terminal.value("n_prompt_tokens", int64_t(0)), terminal.value("n_generated_tokens", int64_t(0)));
}

// The error a failed request ends with: the terminal event's, else the submit's.
std::pair<std::string, std::string> Failure(const Json& terminal, OeError* error) {
  if (error != nullptr) return {oe_error_reason(error), oe_error_message(error)};
  return {terminal.value("reason", std::string("failed")), terminal.value("error", std::string("the request failed"))};
}

bool StreamChat(Server& s, tcp::socket& socket, const Request& req, OeSession* session, const ControllerRequest& cr,
                bool* failed) {
  http::response<http::empty_body> res{http::status::ok, req.version()};
  res.set(http::field::server, "omni-edge");
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.keep_alive(req.keep_alive());
  res.chunked(true);
  http::response_serializer<http::empty_body> serializer{res};
  beast::error_code ec;
  http::write_header(socket, serializer, ec);
  if (ec) return false;
  Streamer st;
  st.socket = &socket;
  st.head = {NewCompletionId(), int64_t(std::time(nullptr)), s.options.model};
  OeError* error = oe_session_submit(session, &cr.get(), OnStreamEvent, &st);
  const std::string kind = st.text.terminal.value("kind", "");
  if (error != nullptr || kind == "error") {
    *failed = true;
    auto [reason, message] = Failure(st.text.terminal, error);
    st.Event(ErrorBody(message, StatusOf(reason).second, "", reason));  // after the header: the error as an event
  } else {
    const std::string finish = kind == "cancelled" ? "stop" : FinishReason(st.text.terminal.value("finish_reason", ""));
    st.Event(Chunk(st.head, Json::object(), finish));
    if (cr.chat().include_usage) st.Event(UsageChunk(st.head, UsageOf(st.text.terminal)));
  }
  if (error != nullptr) oe_error_free(error);
  st.Write("data: [DONE]\n\n");
  net::write(socket, http::make_chunk_last(), ec);
  return !st.gone && !ec;
}

bool PlainChat(Server& s, tcp::socket& socket, const Request& req, OeSession* session, const ControllerRequest& cr,
               bool* failed) {
  TextStream text;
  OeError* error = oe_session_submit(session, &cr.get(), OnPlainEvent, &text);
  if (error != nullptr || text.terminal.value("kind", "") == "error") {
    *failed = true;
    auto [reason, message] = Failure(text.terminal, error);
    if (error != nullptr) oe_error_free(error);
    auto [status, type] = StatusOf(reason);
    return SendError(socket, req, status, message, type, "", reason);
  }
  const CompletionHead head{NewCompletionId(), int64_t(std::time(nullptr)), s.options.model};
  const std::string finish = FinishReason(text.terminal.value("finish_reason", ""));
  return Send(socket, req, http::status::ok, Completion(head, text.text, finish, UsageOf(text.terminal)).dump());
}

bool Chat(Server& s, tcp::socket& socket, const Request& req) {
  auto parsed = ParseChatCompletion(req.body());
  if (!parsed.ok()) {
    return SendError(socket, req, http::status::bad_request, parsed.status().message(), "invalid_request_error",
                     ErrorParam(parsed.status()));
  }
  if (parsed->model != s.options.model) {
    return SendError(socket, req, http::status::not_found, "model '" + parsed->model + "' is not served here (this "
                     "server serves '" + s.options.model + "')", "invalid_request_error", "model", "model_not_found");
  }
  if (parsed->audio_out) {
    return SendError(socket, req, http::status::bad_request, "modalities: audio output is not served yet",
                     "invalid_request_error", "modalities");
  }
  OeSession* session = s.stopping ? nullptr : s.pool.Take();
  if (session == nullptr) {
    return SendError(socket, req, http::status::too_many_requests, "all " + std::to_string(s.pool.size()) +
                     " sessions are busy (--max-sessions); retry when one finishes", "rate_limit_error", "",
                     "sessions_busy");
  }
  const ControllerRequest cr(std::move(*parsed));
  bool failed = false;
  const bool ok = cr.chat().stream ? StreamChat(s, socket, req, session, cr, &failed)
                                   : PlainChat(s, socket, req, session, cr, &failed);
  s.pool.Give(session, failed);
  return ok;
}

// --- Routing and connections -----------------------------------------------------------------

bool Authorized(const Server& s, const Request& req) {
  if (s.options.api_key.empty()) return true;
  const auto header = req[http::field::authorization];
  return std::string(header.data(), header.size()) == "Bearer " + s.options.api_key;
}

bool Route(Server& s, tcp::socket& socket, const Request& req) {
  const std::string target(req.target().data(), req.target().size());
  const std::string path = target.substr(0, target.find('?'));
  if (!Authorized(s, req)) {
    return SendError(socket, req, http::status::unauthorized, "a valid API key is needed (Authorization: Bearer KEY)",
                     "invalid_request_error", "", "invalid_api_key");
  }
  const Json model = {{"id", s.options.model}, {"object", "model"}, {"created", 0}, {"owned_by", "omni-edge"}};
  if (path == "/v1/models" && req.method() == http::verb::get) {
    return Send(socket, req, http::status::ok, Json{{"object", "list"}, {"data", Json::array({model})}}.dump());
  }
  if (path == "/v1/models/" + s.options.model && req.method() == http::verb::get) {
    return Send(socket, req, http::status::ok, model.dump());
  }
  if (path == "/v1/chat/completions") {
    if (req.method() != http::verb::post) {
      return SendError(socket, req, http::status::method_not_allowed, "use POST", "invalid_request_error");
    }
    const auto type = req[http::field::content_type];
    if (std::string(type.data(), type.size()).rfind("application/json", 0) != 0) {
      return SendError(socket, req, http::status::unsupported_media_type, "the body must be application/json",
                       "invalid_request_error");
    }
    return Chat(s, socket, req);
  }
  return SendError(socket, req, http::status::not_found, "no route " + path, "invalid_request_error");
}

void Connection(std::shared_ptr<Server> s, tcp::socket socket) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(s->options.max_body_bytes);
    beast::error_code ec;
    http::read(socket, buffer, parser, ec);
    if (ec == http::error::body_limit) {
      Request req;
      SendError(socket, req, http::status::payload_too_large, "the body is over " +
                std::to_string(s->options.max_body_bytes) + " bytes", "invalid_request_error");
      break;
    }
    if (ec) break;  // the client closed, or sent what is not HTTP
    const Request& req = parser.get();
    if (!Route(*s, socket, req) || !req.keep_alive() || s->stopping) break;
  }
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
}

// Each connection on its own thread, holding the server: one idle in a keep-alive read at
// shutdown keeps it alive until the process ends.
void Accept(const std::shared_ptr<Server>& s, tcp::acceptor* acceptor) {
  acceptor->async_accept([s, acceptor](beast::error_code ec, tcp::socket socket) {
    if (ec) return;  // closed at shutdown
    std::thread(Connection, s, std::move(socket)).detach();
    Accept(s, acceptor);
  });
}

std::string ModelId(const ServeOptions& o) {
  if (!o.model.empty()) return o.model;
  const auto dir = std::filesystem::absolute(o.plan).parent_path().filename().string();
  return dir.empty() ? "omni-edge" : dir;
}

}  // namespace

int Serve(const ServeOptions& options, bool (*stop)()) {
  auto server = std::make_shared<Server>();
  server->options = options;
  server->options.model = ModelId(options);
  if (OeError* e = server->pool.Open(server->options)) {
    std::fprintf(stderr, "omni-edge-run serve: %s: %s\n", oe_error_reason(e), oe_error_message(e));
    oe_error_free(e);
    return 1;
  }
  tcp::acceptor acceptor(server->ioc);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  if (!ec) acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "omni-edge-run serve: cannot listen on %s:%d: %s\n", options.host.c_str(), options.port,
                 ec.message().c_str());
    return 1;
  }
  const auto bound = acceptor.local_endpoint();
  const Json listening = {{"kind", "listening"}, {"model", server->options.model},
                          {"url", "http://" + bound.address().to_string() + ":" + std::to_string(bound.port()) + "/v1"}};
  std::printf("%s\n", listening.dump().c_str());
  std::fflush(stdout);
  Accept(server, &acceptor);
  while (!stop()) server->ioc.run_for(std::chrono::milliseconds(50));
  server->stopping = true;
  acceptor.close(ec);
  server->pool.CancelAll(std::chrono::seconds(10));
  return 0;
}

}  // namespace omni_edge::server
