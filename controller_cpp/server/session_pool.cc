#include "server/session_pool.h"

namespace omni_edge::server {
namespace {

PlanFacts FactsOf(OeSession* session) {
  PlanFacts facts;
  auto info = SessionInfo(session);
  if (!info.ok()) return facts;
  const Json streams = info->value("streams", Json::object());
  facts.text = streams.contains("text");
  facts.audio = streams.contains("audio");
  if (facts.audio) facts.sample_rate = streams["audio"].value("sample_rate", int64_t(0));
  facts.inputs = {"text"};
  for (const Json& stage : info->value("stages", Json::array())) {
    const Json describe = stage.value("describe", Json::object());
    if (stage.value("model_stage", "") == "policy") facts.policy = describe;  // π0's family or InternVLA-A1's
    const std::string modality = describe.value("modality", "");
    if (stage.value("family", "") == "encoder" && (modality == "image" || modality == "audio")) {
      facts.inputs.push_back(modality);
    }
  }
  return facts;
}

}  // namespace

Result<Json> SessionInfo(OeSession* session) {
  char* text = nullptr;
  if (OeError* e = oe_session_info(session, &text)) {
    Status status = Status::Error(oe_error_reason(e), oe_error_message(e));
    oe_error_free(e);
    return status;
  }
  auto info = ParseJson(text, "session info");
  oe_string_free(text);
  return info;
}

SessionPool::~SessionPool() {
  for (OeSession* s : all_) oe_session_close(s);
  if (ledger_ != nullptr) oe_ledger_free(ledger_);
}

OeError* SessionPool::Open(const ServeOptions& o) {
  if (OeError* e = oe_ledger_create(o.memory_pools.empty() ? nullptr : o.memory_pools.c_str(), &ledger_)) return e;
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
  facts_ = FactsOf(all_.front());
  return nullptr;
}

OeSession* SessionPool::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return nullptr;
  OeSession* s = free_.back();
  free_.pop_back();
  ++busy_;
  return s;
}

void SessionPool::Give(OeSession* s, bool reset) {
  if (reset) {
    if (OeError* e = oe_session_reset(s)) oe_error_free(e);
  }
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(s);
  --busy_;
  idle_.notify_all();
}

void SessionPool::CancelAll(std::chrono::milliseconds limit) {
  for (OeSession* s : all_) oe_session_cancel(s);
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait_for(lock, limit, [this] { return busy_ == 0; });
}

int SessionPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

LedgerReservation::LedgerReservation(OeLedger* ledger, const char* owner, int64_t bytes) : ledger_(ledger) {
  if (OeError* e = oe_ledger_reserve(ledger, owner, bytes, &id_)) {
    refusal_ = oe_error_message(e);
    oe_error_free(e);
  }
}

}  // namespace omni_edge::server
