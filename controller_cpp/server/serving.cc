#include "server/serving.h"

#include <cstdio>
#include <random>

namespace omni_edge::server {
namespace {

void Gauge(std::string* out, const char* name, const char* help, double value) {
  char line[64];
  std::snprintf(line, sizeof(line), "%.6g", value);
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + line + "\n";
}

// What the ledger holds: for the sessions (owned by their plan) and for the server itself
// (owners "server: ..."), and what is free, per pool.
std::string LedgerGauges(OeLedger* ledger) {
  char* text = nullptr;
  if (ledger == nullptr) return "";
  if (OeError* e = oe_ledger_snapshot(ledger, &text)) {
    oe_error_free(e);
    return "";
  }
  auto snapshot = ParseJson(text, "ledger");
  oe_string_free(text);
  if (!snapshot.ok()) return "";
  std::map<std::string, int64_t> held = {{"server", 0}, {"sessions", 0}};
  for (const Json& r : snapshot->value("reservations", Json::array())) {
    const bool server = r.value("owner", "").rfind("server: ", 0) == 0;
    const Json bytes = r.value("bytes", Json::object());  // named: items() refers into it
    for (const auto& [pool, n] : bytes.items()) held[server ? "server" : "sessions"] += n.get<int64_t>();
  }
  std::string out = "# HELP omni_edge_memory_reserved_bytes Memory the admission ledger holds, by holder.\n"
                    "# TYPE omni_edge_memory_reserved_bytes gauge\n";
  for (const auto& [holder, bytes] : held) {
    out += "omni_edge_memory_reserved_bytes{holder=\"" + holder + "\"} " + std::to_string(bytes) + "\n";
  }
  out += "# HELP omni_edge_memory_free_bytes Memory the admission ledger can still give, by pool.\n"
         "# TYPE omni_edge_memory_free_bytes gauge\n";
  const Json pools = snapshot->value("pools", Json::object());
  for (const auto& [pool, p] : pools.items()) {
    out += "omni_edge_memory_free_bytes{pool=\"" + pool + "\"} " + std::to_string(p.value("free", int64_t(0))) + "\n";
  }
  return out;
}

}  // namespace

void ServerMetrics::Record(const std::string& endpoint, int status, const Json& metrics) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[{endpoint, status}];
  if (metrics.contains("text")) {
    tokens_ += metrics["text"].value("n_generated_tokens", int64_t(0));
    prompt_tokens_ += metrics["text"].value("n_prompt_tokens", int64_t(0));
  }
  if (metrics.contains("audio")) audio_ms_ += metrics["audio"].value("audio_ms", 0.0);
  for (const auto& [stream, m] : metrics.items()) {
    if (m.value("kind", "") == "cancelled") {
      ++cancelled_;  // the client went away (or the server is stopping)
      break;
    }
  }
  if (!metrics.empty()) last_ = metrics;
}

std::string ServerMetrics::Prometheus(const SessionPool& pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = "# HELP omni_edge_responses_total Responses sent, by endpoint and HTTP status.\n"
                    "# TYPE omni_edge_responses_total counter\n";
  for (const auto& [key, n] : responses_) {
    out += "omni_edge_responses_total{endpoint=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  }
  out += "# HELP omni_edge_generated_tokens_total Text tokens generated.\n# TYPE omni_edge_generated_tokens_total counter\n"
         "omni_edge_generated_tokens_total " + std::to_string(tokens_) + "\n";
  out += "# HELP omni_edge_prompt_tokens_total Prompt tokens read.\n# TYPE omni_edge_prompt_tokens_total counter\n"
         "omni_edge_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  out += "# HELP omni_edge_cancelled_total Requests cancelled before their end (the client went away, or shutdown).\n"
         "# TYPE omni_edge_cancelled_total counter\nomni_edge_cancelled_total " + std::to_string(cancelled_) + "\n";
  Gauge(&out, "omni_edge_audio_seconds_total", "Audio generated, in seconds.", audio_ms_ / 1000);
  Gauge(&out, "omni_edge_sessions", "Sessions the server opened.", double(pool.size()));
  Gauge(&out, "omni_edge_sessions_busy", "Sessions running a request now.", double(pool.busy()));
  Gauge(&out, "omni_edge_connections", "Connections open now (each on a thread).", double(connections_));
  out += "# HELP omni_edge_connections_refused_total Connections refused (over --max-connections, or no memory for one).\n"
         "# TYPE omni_edge_connections_refused_total counter\nomni_edge_connections_refused_total " +
         std::to_string(connections_refused_) + "\n";
  out += LedgerGauges(pool.ledger());
  const Json text = last_.value("text", Json::object()), audio = last_.value("audio", Json::object());
  Gauge(&out, "omni_edge_last_ttft_ms", "The last text response's time to first token.", text.value("ttft_ms", 0.0));
  Gauge(&out, "omni_edge_last_decode_tokens_per_second", "The last text response's decode rate.",
        text.value("decode_tok_s", 0.0));
  Gauge(&out, "omni_edge_last_first_pcm_ms", "The last audio response's time to its first samples.",
        audio.value("first_pcm_ms", 0.0));
  Gauge(&out, "omni_edge_last_rtf", "The last audio response's real-time factor.", audio.value("rtf", 0.0));
  return out;
}

std::string NewId(const char* prefix) {
  static std::mt19937_64 gen{std::random_device{}()};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  char id[48];
  std::snprintf(id, sizeof(id), "%s-%016llx", prefix, static_cast<unsigned long long>(gen()));
  return id;
}

}  // namespace omni_edge::server
