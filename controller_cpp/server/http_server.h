// omni-edge-run serve: a loaded plan over HTTP, as the OpenAI client libraries expect it —
// GET /v1/models, POST /v1/chat/completions (plain or streamed as server-sent events; text, and
// audio on an omni plan), POST /v1/audio/speech (a speech plan), GET /metrics (Prometheus) — on
// Boost.Beast. One thread per connection (at most --max-connections); each request runs on a
// session of a fixed pool opened at start (--max-sessions, admitted by the memory ledger): none
// free is 429 at once, never a queue. Connections and request bodies are charged to the same
// ledger; what does not fit is 429 too. A client that goes away cancels its request at the next step.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

namespace omni_edge::server {

struct ServeOptions {
  std::string plan;
  std::string model;          // the id clients name; empty: the plan's directory name
  std::string host = "127.0.0.1";
  int port = 8000;            // 0: any free port (the listening line says which)
  std::string api_key;        // empty: none asked
  int max_sessions = 1;
  int threads = 0;            // per session's backends; 0: all cores
  bool allow_unqualified = false;
  size_t max_body_bytes = size_t(32) << 20;
  int max_connections = 32;   // each on a thread; one beyond is answered 429 and closed
  std::string memory_pools;   // the ledger's pools as JSON ({"device_ram": bytes}); empty: this machine's
};

// A server in this process: listening once Start returns, accepting on a thread of its own
// until Stop (or its end): then running requests are cancelled (each stream still ends with its
// terminal chunk), open connections are shut, and the sessions close once the last connection
// thread has let go. What an app embeds (the C ABI's oe_server_start).
class HttpServer {
 public:
  // Opens the plan's sessions and listens. Errors: the plan's (its reason), or "listen".
  static Result<std::unique_ptr<HttpServer>> Start(const ServeOptions& options);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  const std::string& url() const;    // "http://HOST:PORT/v1", the port as bound
  const std::string& model() const;  // the id clients name
  void Stop();

 private:
  HttpServer() = default;
  struct Running;
  std::unique_ptr<Running> running_;
};

// omni-edge-run serve: Start, print {"kind": "listening", "url": ..., "model": ID} as one stdout
// line, serve until `stop()` turns true (polled every 50 ms), Stop. The exit code: 0, or 1 when
// the plan or the address could not be opened.
int Serve(const ServeOptions& options, bool (*stop)());

}  // namespace omni_edge::server
