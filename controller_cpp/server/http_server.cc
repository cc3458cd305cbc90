#include "server/http_server.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "base/json_fields.h"
#include "server/endpoints.h"

namespace omni_edge::server {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace websocket = beast::websocket;

struct Server : Serving {
  net::io_context ioc;  // the sockets' executor: lives as long as the last connection thread

  enum class Use { http, websocket, closed };
  // A connection's socket and what it serves, known from its accept until its thread lets go.
  // Once shut (Stop), a socket tracked later is shut at once: none is left reading.
  void Track(tcp::socket* socket, Use use) {
    std::lock_guard<std::mutex> lock(sockets_mu_);
    if (use == Use::closed) {
      sockets_.erase(socket);
      return;
    }
    sockets_[socket] = use;
    if (shut_ == Use::http || (shut_ == Use::websocket && use == Use::websocket)) Shut(socket);
  }
  // The reads of every connection serving `use` (websockets first, between observations: a
  // session they hold would keep Stop waiting; then every one) end now, and their threads let
  // go of the server. The one call made on a socket from another thread; a shutdown is safe
  // beside a blocked read.
  void ShutAll(Use use) {
    std::lock_guard<std::mutex> lock(sockets_mu_);
    shut_ = use;
    for (const auto& [socket, serving] : sockets_) {
      if (use == Use::http || serving == use) Shut(socket);
    }
  }

 private:
  static void Shut(tcp::socket* socket) {
    beast::error_code ignored;
    socket->shutdown(tcp::socket::shutdown_both, ignored);
  }

  std::mutex sockets_mu_;
  std::map<tcp::socket*, Use> sockets_;
  Use shut_ = Use::closed;  // nothing shut yet; websocket: those; http: all
};

// --- Routing and connections -----------------------------------------------------------------

// The key as OpenAI clients send it (Bearer), openpi-client (Api-Key), or a browser's realtime
// websocket, which can set no header but its subprotocols (OpenAI's "openai-insecure-api-key.KEY").
bool Authorized(const Server& s, const HttpRequest& req) {
  if (s.options.api_key.empty()) return true;
  const auto header = req[http::field::authorization];
  const std::string sent(header.data(), header.size());
  if (sent == "Bearer " + s.options.api_key || sent == "Api-Key " + s.options.api_key) return true;
  const auto protocols = req[http::field::sec_websocket_protocol];
  const std::string offered(protocols.data(), protocols.size());
  const std::string wanted = "openai-insecure-api-key." + s.options.api_key;
  for (size_t at = 0; at <= offered.size();) {
    size_t end = offered.find(',', at);
    if (end == std::string::npos) end = offered.size();
    std::string one = offered.substr(at, end - at);
    one.erase(0, one.find_first_not_of(' '));
    one.erase(one.find_last_not_of(' ') + 1);
    if (one == wanted) return true;
    at = end + 1;
  }
  return false;
}

bool JsonPost(Server& s, tcp::socket& socket, const HttpRequest& req, bool (*serve)(Serving&, tcp::socket&, const HttpRequest&)) {
  if (req.method() != http::verb::post) {
    return SendError(socket, req, http::status::method_not_allowed, "use POST", "invalid_request_error");
  }
  const auto type = req[http::field::content_type];
  if (std::string(type.data(), type.size()).rfind("application/json", 0) != 0) {
    return SendError(socket, req, http::status::unsupported_media_type, "the body must be application/json",
                     "invalid_request_error");
  }
  return serve(s, socket, req);
}

Json ModelCard(const Serving& s) {
  const PlanFacts& plan = s.pool.facts();
  Json outputs = Json::array();
  if (plan.text) outputs.push_back("text");
  if (plan.audio) outputs.push_back("audio");
  return {{"id", s.options.model}, {"object", "model"}, {"created", 0}, {"owned_by", "omni-edge"},
          {"input_modalities", plan.inputs}, {"output_modalities", outputs}};
}

// The voice page (server/voice_page.html, compiled in).
constexpr char kVoicePage[] =
#include "server/voice_page.inc"
    ;

bool Route(Server& s, tcp::socket& socket, const HttpRequest& req) {
  const std::string target(req.target().data(), req.target().size());
  const std::string path = target.substr(0, target.find('?'));
  // A page holds no data: a browser's navigation cannot send the key (its websocket sends it).
  if (path == "/voice" && req.method() == http::verb::get) {
    return Send(socket, req, http::status::ok, kVoicePage, "text/html; charset=utf-8");
  }
  if (!Authorized(s, req)) {
    return SendError(socket, req, http::status::unauthorized, "a valid API key is needed (Authorization: Bearer KEY)",
                     "invalid_request_error", "", "invalid_api_key");
  }
  const bool get = req.method() == http::verb::get;
  if (path == "/healthz" && get) return Send(socket, req, http::status::ok, "OK\n", "text/plain");  // openpi's
  if (path == "/v1/models" && get) {
    return Send(socket, req, http::status::ok, Json{{"object", "list"}, {"data", Json::array({ModelCard(s)})}}.dump());
  }
  if (path == "/v1/models/" + s.options.model && get) return Send(socket, req, http::status::ok, ModelCard(s).dump());
  if (path == "/metrics" && get) {
    return Send(socket, req, http::status::ok, s.metrics.Prometheus(s.pool), "text/plain; version=0.0.4");
  }
  if (path == "/v1/chat/completions") return JsonPost(s, socket, req, ServeChat);
  if (path == "/v1/audio/speech") return JsonPost(s, socket, req, ServeSpeech);
  return SendError(socket, req, http::status::not_found, "no route " + path, "invalid_request_error");
}

// A websocket upgrade where openpi-client (any path: openpi's own server) or vLLM-Omni's route points.
bool IsOpenPi(const HttpRequest& req) {
  const std::string target(req.target().data(), req.target().size());
  return websocket::is_upgrade(req) && (target == "/" || target.rfind("/v1/realtime/robot/openpi", 0) == 0);
}

// OpenAI Realtime (the openai package's client connects to BASE/realtime?model=ID).
bool IsRealtime(const HttpRequest& req) {
  const std::string target(req.target().data(), req.target().size());
  const std::string path = target.substr(0, target.find('?'));
  return websocket::is_upgrade(req) && path == "/v1/realtime";
}

// What the ledger is charged for the server's own memory. A connection: its thread's stack, read
// buffer and a request's header (an idle keep-alive one measured 16 KiB of RSS after a request;
// the rest is a request's stack depth). A request's body, before it is read: its text, the JSON
// parsed from it, media decoded out of it and the allocator's slack (the peak RSS grew 3.4-5.3x
// the body for bodies of 1-24 MiB, measured with VmHWM reset before each).
constexpr int64_t kConnectionBytes = int64_t(256) << 10;
constexpr int64_t kBodyCopies = 6;
constexpr uint32_t kHeaderLimit = 16 * 1024;

// Reads what is left of a refused request (2 s at most) before closing: closing a socket with
// unread data resets it, and the client would lose the answer just written.
struct Draining : std::enable_shared_from_this<Draining> {
  explicit Draining(tcp::socket socket) : stream(std::move(socket)) {}
  void Next() {
    stream.async_read_some(net::buffer(scrap), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->Next();  // ends at the client's close, an error, or the deadline
    });
  }
  beast::tcp_stream stream;
  std::array<char, 16 * 1024> scrap{};
};

void Drain(tcp::socket socket) {
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  auto d = std::make_shared<Draining>(std::move(socket));
  d->stream.expires_after(std::chrono::seconds(2));
  d->Next();
}

// What a connection's thread owns; its members end in reverse order: the reservation, the
// socket, and last the server (whose ledger and io_context the first two still use).
struct ConnectionState {
  std::shared_ptr<Server> s;
  tcp::socket socket;
  LedgerReservation memory;  // released when the connection ends
};

void Connection(std::unique_ptr<ConnectionState> c) {
  Server& s = *c->s;
  tcp::socket& socket = c->socket;
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(s.options.max_body_bytes);
    beast::error_code ec;
    http::read_header(socket, buffer, parser, ec);
    // The body's memory is admitted before it is read; a chunked one, at the limit.
    int64_t body_bytes = 0;
    if (!ec) {  // the parser answers these once a whole header was read
      const auto length = parser.content_length();
      body_bytes = int64_t(length ? std::min<uint64_t>(*length, s.options.max_body_bytes)
                                  : parser.chunked() ? s.options.max_body_bytes : 0);
    }
    std::optional<LedgerReservation> body;
    if (body_bytes > 0) {
      body.emplace(s.pool.ledger(), "server: request body", kBodyCopies * body_bytes);
      if (!body->held()) {
        HttpRequest req = parser.get();
        req.keep_alive(false);  // its body is left unread
        SendError(socket, req, http::status::too_many_requests, "the server has no memory for this body now: " +
                  body->refusal(), "rate_limit_error", "", "admission");
        s.Track(&socket, Server::Use::closed);
        Drain(std::move(socket));
        break;
      }
    }
    if (!ec) http::read(socket, buffer, parser, ec);
    if (ec == http::error::body_limit) {
      HttpRequest req;
      req.keep_alive(false);
      SendError(socket, req, http::status::payload_too_large, "the body is over " +
                std::to_string(s.options.max_body_bytes) + " bytes", "invalid_request_error");
      s.Track(&socket, Server::Use::closed);
      Drain(std::move(socket));
      break;
    }
    if (ec) break;  // the client closed, or sent what is not HTTP
    const HttpRequest& req = parser.get();
    if (IsOpenPi(req) && Authorized(s, req)) {
      s.Track(&socket, Server::Use::websocket);
      ServeOpenPi(s, socket, req);  // a websocket on this socket until it closes
      break;
    }
    if (IsRealtime(req) && Authorized(s, req)) {
      s.Track(&socket, Server::Use::websocket);
      ServeRealtime(s, socket, req);  // a conversation on this socket until it closes
      break;
    }
    if (!Route(s, socket, req) || !req.keep_alive() || s.stopping) break;
  }
  s.Track(&socket, Server::Use::closed);
  if (socket.is_open()) {
    beast::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
  }
  s.metrics.Connected(-1);
}

// A connection the server cannot take (over --max-connections, or no memory for it), answered
// on the accepting thread without a thread of its own: its request's header is read (2 s at
// most), then 429 with the reason, and it is drained and closed.
void Refuse(Server& s, tcp::socket socket, std::string reason) {
  struct Refused {
    explicit Refused(tcp::socket socket) : stream(std::move(socket)) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request_parser<http::string_body> parser;
    http::response<http::string_body> res;
  };
  s.metrics.ConnectionRefused();
  auto r = std::make_shared<Refused>(std::move(socket));
  r->parser.header_limit(kHeaderLimit);
  r->stream.expires_after(std::chrono::seconds(2));
  http::async_read_header(r->stream, r->buffer, r->parser, [r, reason = std::move(reason)](beast::error_code ec, size_t) {
    if (ec) return;  // nothing asked in time: closed
    HttpRequest req = r->parser.get();
    req.keep_alive(false);
    r->res = ErrorResponse(req, http::status::too_many_requests, reason, "rate_limit_error", "", "connections");
    http::async_write(r->stream, r->res, [r](beast::error_code written, size_t) {
      if (!written) Drain(r->stream.release_socket());
    });
  });
}

// Each connection on its own thread, holding the server and its memory's reservation. The
// accept loop holds the server weakly: a handler still queued at Stop must not keep it alive.
void Accept(const std::weak_ptr<Server>& weak, tcp::acceptor* acceptor) {
  acceptor->async_accept([weak, acceptor](beast::error_code ec, tcp::socket socket) {
    const std::shared_ptr<Server> s = weak.lock();
    if (s == nullptr || s->stopping || ec == net::error::operation_aborted) return;  // closed at Stop
    if (ec) {  // out of descriptors, a connection reset before it was taken: try again shortly
      auto retry = std::make_shared<net::steady_timer>(s->ioc, std::chrono::milliseconds(100));
      retry->async_wait([weak, acceptor, retry](beast::error_code) { Accept(weak, acceptor); });
      return;
    }
    const int open = s->metrics.connections();
    if (open >= s->options.max_connections) {
      Refuse(*s, std::move(socket), "the server has " + std::to_string(open) + " connections open, its limit "
             "(--max-connections " + std::to_string(s->options.max_connections) + "); close one or retry later");
    } else if (LedgerReservation memory(s->pool.ledger(), "server: connection", kConnectionBytes); !memory.held()) {
      Refuse(*s, std::move(socket), "the server has no memory for another connection now: " + memory.refusal());
    } else {
      s->metrics.Connected(+1);
      auto c = std::make_unique<ConnectionState>(ConnectionState{s, std::move(socket), std::move(memory)});
      s->Track(&c->socket, Server::Use::http);  // before its thread runs: Stop sees it either way
      std::thread(Connection, std::move(c)).detach();
    }
    Accept(weak, acceptor);
  });
}

std::string ModelId(const ServeOptions& o) {
  if (!o.model.empty()) return o.model;
  const auto dir = std::filesystem::absolute(o.plan).parent_path().filename().string();
  return dir.empty() ? "omni-edge" : dir;
}

}  // namespace

struct HttpServer::Running {
  std::shared_ptr<Server> server;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::thread io;
  std::string url;
};

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const ServeOptions& options) {
  auto server = std::make_shared<Server>();
  server->options = options;
  server->options.model = ModelId(options);
  if (OeError* e = server->pool.Open(server->options)) {
    Status status = Status::Error(oe_error_reason(e), oe_error_message(e));
    oe_error_free(e);
    return status;
  }
  auto acceptor = std::make_unique<tcp::acceptor>(server->ioc);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  if (!ec) acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Error("listen", "cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
                                       ec.message());
  }
  const auto bound = acceptor->local_endpoint();
  std::unique_ptr<HttpServer> running(new HttpServer());
  running->running_ = std::make_unique<Running>();
  Running& r = *running->running_;
  r.url = "http://" + bound.address().to_string() + ":" + std::to_string(bound.port()) + "/v1";
  r.server = server;
  r.acceptor = std::move(acceptor);
  Accept(server, r.acceptor.get());  // weakly
  r.io = std::thread([server] { server->ioc.run(); });  // until Stop: the acceptor keeps it busy
  return running;
}

HttpServer::~HttpServer() { Stop(); }

const std::string& HttpServer::url() const { return running_->url; }
const std::string& HttpServer::model() const { return running_->server->options.model; }

void HttpServer::Stop() {
  if (!running_ || !running_->io.joinable()) return;
  Server& s = *running_->server;
  s.stopping = true;
  net::post(s.ioc, [acceptor = running_->acceptor.get()] {
    beast::error_code ignored;
    acceptor->close(ignored);
  });
  s.ShutAll(Server::Use::websocket);  // a policy connection holds its session between observations
  s.pool.CancelAll(std::chrono::seconds(10));  // each running request ends with its terminal chunk
  s.ShutAll(Server::Use::http);
  s.ioc.stop();
  running_->io.join();
  // What the io thread left queued (an accept, a refusal's read) ends here, with its sockets.
  beast::error_code ignored;
  running_->acceptor->close(ignored);
  s.ioc.restart();
  s.ioc.poll();
}

int Serve(const ServeOptions& options, bool (*stop)()) {
  auto running = HttpServer::Start(options);
  if (!running.ok()) {
    std::fprintf(stderr, "omni-edge-run serve: %s: %s\n", running.status().reason().c_str(),
                 running.status().message().c_str());
    return 1;
  }
  const Json listening = {{"kind", "listening"}, {"model", (*running)->model()}, {"url", (*running)->url()}};
  std::printf("%s\n", listening.dump().c_str());
  std::fflush(stdout);
  while (!stop()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*running)->Stop();
  return 0;
}

}  // namespace omni_edge::server
