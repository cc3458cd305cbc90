// Writing HTTP responses on Boost.Beast: whole ones (JSON, error bodies, audio files) and
// chunked ones sent as they are made (server-sent events, audio bytes), whose header waits for
// the first bytes so a request that fails before any output still gets its error status.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>

#include "base/status.h"

namespace omni_edge::server {

namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using HttpRequest = http::request<http::string_body>;
using Headers = std::vector<std::pair<std::string, std::string>>;

// An OpenAI error response (for a write of its own; SendError writes one at once).
http::response<http::string_body> ErrorResponse(const HttpRequest& req, http::status status, const std::string& message,
                                                const std::string& type, const std::string& param = "",
                                                const std::string& code = "");
bool Send(tcp::socket& socket, const HttpRequest& req, http::status status, const std::string& body,
          const char* content_type = "application/json", const Headers& headers = {});
// An OpenAI error body; 429 and 503 also say x-should-retry: false (the client would retry).
bool SendError(tcp::socket& socket, const HttpRequest& req, http::status status, const std::string& message,
               const std::string& type, const std::string& param = "", const std::string& code = "");
// A request body refused (400, the param named).
bool SendRefusal(tcp::socket& socket, const HttpRequest& req, const Status& refusal);
// A request the controller refused or failed: its status and OpenAI error type by reason.
bool SendFailure(tcp::socket& socket, const HttpRequest& req, const std::string& reason, const std::string& message);
// The OpenAI error type and HTTP status of a controller reason.
const char* ErrorType(const std::string& reason);
http::status StatusOf(const std::string& reason);

// Whether the client closed its side (checked without blocking or consuming: a pipelined next
// request is data, not a close). A request whose response is not streamed polls it per event.
bool PeerClosed(tcp::socket& socket);

class ChunkedResponse {
 public:
  ChunkedResponse(tcp::socket& socket, const HttpRequest& req, const char* content_type, Headers headers = {});
  // Sends the header first if it has not gone yet. False once the client is gone.
  bool Write(const std::string& bytes);
  // The last chunk (after the header, if nothing was written).
  bool End();
  bool started() const { return started_; }
  bool gone() const { return gone_; }

 private:
  bool Start();

  tcp::socket& socket_;
  http::response<http::empty_body> head_;
  http::response_serializer<http::empty_body> serializer_;
  bool started_ = false, gone_ = false;
};

}  // namespace omni_edge::server
