// A text LLM session: the native controller's user-facing object (what the CLI, the C ABI and
// the Android app drive). It owns the engine with its resident KV cache, the tokenizer and
// the sampler, and runs each request as a stage-contract request: events (seq, watermark,
// credit, release token) flow through a bounded credited stream from a producer thread to the
// consumer, the KV cache is a StateHandle that a follow-up turn continues from (epoch-fenced),
// and a fresh conversation releases the old state through the two-step release.
//
// Like ExecuTorch's runner: Generate (prefill + decode), Cancel (effective at the next
// token, ending with a terminal "cancelled" event), Reset. An internal error poisons the
// session until Reset.
#pragma once

#include <atomic>
#include <mutex>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "contract/stage_controller.h"
#include "models/llm/llm_engine.h"
#include "models/llm/sampler.h"
#include "models/llm/tokenizer.h"
#include "runtime/plan.h"

namespace omni_edge::llm {

struct SessionOptions {
  bool allow_unqualified = false;
  std::map<std::string, std::string> backend_options;  // added to every graph group (e.g. threads)
};

struct GenerateRequest {
  std::string prompt;                 // raw text, or the user message when `chat`
  bool chat = false;
  std::string system_prompt;          // chat only
  std::vector<TokenId> prompt_ids;    // exact token input instead of `prompt`
  bool continue_conversation = false; // append to the resident context instead of starting over
  int64_t max_new_tokens = 0;         // 0: the plan's default
  std::optional<SamplingParams> sampling;
  std::vector<std::string> stop_strings;
  bool ignore_stop_tokens = false;    // generate exactly max_new_tokens (reference checks)
  bool emit_hidden = false;           // token events carry the hidden state that produced them (omni)
};

struct Metrics {
  int64_t n_prompt_tokens = 0;
  int64_t n_generated_tokens = 0;
  int64_t context_tokens = 0;
  double ttft_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  double total_ms = 0;
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
  double backend_ms = 0;                 // inside graph runs
  double controller_ms_per_token = 0;    // outside graph runs, per generated token
  double peak_rss_mb = 0;
  Json ToJson() const;
};

struct OutputEvent {
  std::string kind;  // token | done | cancelled | error
  int64_t seq = 0;
  std::vector<TokenId> token_ids;
  std::string text;
  std::vector<float> hidden;  // with emit_hidden: the thinker's last hidden state before this token
  std::string finish_reason;  // terminal: stop | stop_string | length | context_full | cancelled | error
  std::string error;
  Metrics metrics;  // terminal
  std::optional<contract::StateHandle> state;
  // One JSON object: {"kind": "token", "seq", "token_ids", "text"} or, for a terminal event,
  // {"kind": "done" | "cancelled" | "error", "finish_reason", metrics..., "state"}.
  Json ToJson() const;
};

class LlmSession {
 public:
  static Result<std::unique_ptr<LlmSession>> Open(const std::string& plan_path, const SessionOptions& options = {});
  // A plan already loaded (the C ABI's admission and the omni session read it once).
  static Result<std::unique_ptr<LlmSession>> Open(Plan plan, const SessionOptions& options = {});
  ~LlmSession();

  // Runs one request to its terminal event. `on_event` sees every event in order (it runs on
  // the calling thread); returning false cancels the request at the next token.
  Result<Metrics> Generate(const GenerateRequest& request, const std::function<bool(const OutputEvent&)>& on_event);
  // Graceful: the request ends at its next token with a terminal "cancelled" event; the
  // conversation stays resident and can be continued.
  void Cancel();
  // The stage contract's fence, for a consumer that goes away (an app torn down mid-reply):
  // queued events are dropped as stale, the producer is woken and stops, no terminal event is
  // delivered, Generate returns "aborted", the KV state is retired and the next request runs
  // at the next epoch on a fresh context. Thread-safe.
  void Abort();
  Status Reset();

  const Plan& plan() const { return plan_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  std::vector<Placement> placements() const { return engine_->placements(); }
  // Tokens whose keys/values are resident, and the sampled token not yet fed back.
  const std::vector<TokenId>& context() const { return context_; }
  const std::vector<TokenId>& pending() const { return pending_; }
  std::optional<contract::StateHandle> kv_state() const { return kv_state_; }
  int64_t epoch() const { return epoch_; }
  bool poisoned() const { return poisoned_; }

 private:
  struct Run;  // one request in flight
  LlmSession() = default;
  Result<std::vector<TokenId>> PromptTokens(const GenerateRequest& request) const;
  Status ReleaseState();
  void Produce(Run& run);
  static OutputEvent DecodeEvent(const contract::Delivered& delivered);
  Status RewindTo(const std::vector<TokenId>& generated, int64_t shown);

  Plan plan_;
  const StagePlan* stage_ = nullptr;
  std::string artifact_id_;
  BackendPool backends_;
  std::unique_ptr<LlmEngine> engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<TokenId> stop_ids_;
  std::unique_ptr<contract::StageController> controller_;
  std::string session_id_;
  std::string backend_instance_id_;
  std::string worker_generation_ = "wg-1";
  int64_t epoch_ = 0;
  int64_t request_counter_ = 0;
  int64_t context_counter_ = 0;
  std::optional<contract::StateHandle> kv_state_;
  std::vector<TokenId> context_;
  std::vector<TokenId> pending_;
  std::atomic<bool> cancel_{false};
  std::mutex active_mu_;
  std::optional<contract::StageRequest> active_;  // the request in flight, for Abort()
  bool aborted_ = false;
  bool poisoned_ = false;
};

}  // namespace omni_edge::llm
