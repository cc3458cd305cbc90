#include "server/http_io.h"

#include <boost/asio/write.hpp>

#include "server/openai_common.h"

namespace omni_edge::server {

namespace net = boost::asio;
namespace beast = boost::beast;

namespace {

http::response<http::string_body> Response(const HttpRequest& req, http::status status, const std::string& body,
                                           const char* content_type, const Headers& headers) {
  http::response<http::string_body> res{status, req.version()};
  res.set(http::field::server, "omni-edge");
  res.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) res.set(name, value);
  res.keep_alive(req.keep_alive());
  res.body() = body;
  res.prepare_payload();
  return res;
}

}  // namespace

bool Send(tcp::socket& socket, const HttpRequest& req, http::status status, const std::string& body,
          const char* content_type, const Headers& headers) {
  const auto res = Response(req, status, body, content_type, headers);
  beast::error_code ec;
  http::write(socket, res, ec);
  return !ec;
}

http::response<http::string_body> ErrorResponse(const HttpRequest& req, http::status status, const std::string& message,
                                                const std::string& type, const std::string& param,
                                                const std::string& code) {
  Headers headers;
  if (status == http::status::too_many_requests || status == http::status::service_unavailable) {
    headers.push_back({"x-should-retry", "false"});  // busy now: retrying at once would not help
  }
  return Response(req, status, ErrorBody(message, type, param, code).dump(), "application/json", headers);
}

bool SendError(tcp::socket& socket, const HttpRequest& req, http::status status, const std::string& message,
               const std::string& type, const std::string& param, const std::string& code) {
  const auto res = ErrorResponse(req, status, message, type, param, code);
  beast::error_code ec;
  http::write(socket, res, ec);
  return !ec;
}

bool SendRefusal(tcp::socket& socket, const HttpRequest& req, const Status& refusal) {
  return SendError(socket, req, http::status::bad_request, refusal.message(), "invalid_request_error", ErrorParam(refusal));
}

const char* ErrorType(const std::string& reason) {
  for (const char* bad : {"invalid_prompt", "invalid_argument", "invalid_field", "invalid_media", "invalid_input",
                          "context_overflow", "invalid_base64", "invalid_request"}) {
    if (reason == bad) return "invalid_request_error";
  }
  return reason == "admission" ? "rate_limit_error" : "server_error";
}

http::status StatusOf(const std::string& reason) {
  const std::string type = ErrorType(reason);
  return type == "invalid_request_error" ? http::status::bad_request
         : type == "rate_limit_error"    ? http::status::too_many_requests
                                         : http::status::internal_server_error;
}

bool SendFailure(tcp::socket& socket, const HttpRequest& req, const std::string& reason, const std::string& message) {
  return SendError(socket, req, StatusOf(reason), message, ErrorType(reason), "", reason);
}

bool PeerClosed(tcp::socket& socket) {
  char byte;
  beast::error_code ec;
  socket.non_blocking(true, ec);
  const size_t n = socket.receive(net::buffer(&byte, 1), tcp::socket::message_peek, ec);
  const bool closed = (!ec && n == 0) || (ec && ec != net::error::would_block && ec != net::error::try_again);
  beast::error_code ignored;
  socket.non_blocking(false, ignored);
  return closed;
}

ChunkedResponse::ChunkedResponse(tcp::socket& socket, const HttpRequest& req, const char* content_type, Headers headers)
    : socket_(socket), head_{http::status::ok, req.version()}, serializer_{head_} {
  head_.set(http::field::server, "omni-edge");
  head_.set(http::field::content_type, content_type);
  head_.set(http::field::cache_control, "no-cache");
  for (const auto& [name, value] : headers) head_.set(name, value);
  head_.keep_alive(req.keep_alive());
  head_.chunked(true);
}

bool ChunkedResponse::Start() {
  if (started_ || gone_) return !gone_;
  started_ = true;
  beast::error_code ec;
  http::write_header(socket_, serializer_, ec);
  gone_ = bool(ec);
  return !gone_;
}

bool ChunkedResponse::Write(const std::string& bytes) {
  if (!Start()) return false;
  beast::error_code ec;
  net::write(socket_, http::make_chunk(net::buffer(bytes)), ec);
  gone_ = bool(ec);
  return !gone_;
}

bool ChunkedResponse::End() {
  if (!Start()) return false;
  beast::error_code ec;
  net::write(socket_, http::make_chunk_last(), ec);
  gone_ = bool(ec);
  return !gone_;
}

}  // namespace omni_edge::server
