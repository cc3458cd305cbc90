// What every endpoint of a running server shares: its options, its sessions, whether it is
// stopping, and the counters GET /metrics reports (Prometheus text format).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/json_fields.h"
#include "server/http_server.h"
#include "server/session_pool.h"

namespace omni_edge::server {

class ServerMetrics {
 public:
  // One response: its endpoint ("chat", "speech"), HTTP status, and the request's metrics
  // (Collected::Metrics(); {} for a refusal).
  void Record(const std::string& endpoint, int status, const Json& metrics);
  // Connections: one opened (+1) or closed (-1); one refused over --max-connections.
  void Connected(int delta) { connections_ += delta; }
  void ConnectionRefused() { ++connections_refused_; }
  int connections() const { return connections_; }
  // The counters and the last response's latencies, with the sessions' state and the memory
  // the ledger holds for the sessions and for the server itself.
  std::string Prometheus(const SessionPool& pool) const;

 private:
  std::atomic<int> connections_{0};
  std::atomic<int64_t> connections_refused_{0};
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> responses_;
  int64_t tokens_ = 0, prompt_tokens_ = 0, cancelled_ = 0;
  double audio_ms_ = 0;
  Json last_ = Json::object();
};

struct Serving {
  ServeOptions options;
  SessionPool pool;
  std::atomic<bool> stopping{false};
  ServerMetrics metrics;
};

// "<prefix>-<16 hex digits>", random per call (completion and audio ids).
std::string NewId(const char* prefix);

}  // namespace omni_edge::server
