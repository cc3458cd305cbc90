// A session over a plan, whatever families its stages are. Each stage runs on its own thread
// (a StageRunner); the stages are connected as the plan's input_sources say by bounded credited
// streams, one per edge, so a slow consumer anywhere slows its producers and memory stays
// bounded; the caller's thread consumes the final-output streams, one event at a time, tagged
// by stream ("text", "audio"). Admission happens at Open, before anything is loaded: the plan's
// own memory cap and, with a ledger, a reservation of the plan's budget (released at close).
//
// Like ExecuTorch's runner: Submit (one request to its terminal events), Cancel (at every
// stage's next step), Abort (the contract's fence), Reset; an error in a stage cancels the
// others, and a stage's internal error may poison it until Reset().
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/family.h"
#include "pipeline/request.h"
#include "pipeline/stage_runner.h"
#include "runtime/admission.h"
#include "runtime/backend_pool.h"
#include "runtime/plan.h"

namespace omni_edge::pipeline {

struct SessionOptions {
  bool allow_unqualified = false;                      // run artifacts whose validation did not pass
  std::map<std::string, std::string> backend_options;  // added to every graph group (e.g. threads)
  AdmissionLedger* ledger = nullptr;                   // reserve the plan's budget here; released at close
  bool wsl = false;                                    // size state against a WSL VM's pool
};

struct SessionEvent {
  std::string stream;            // the final stage's output type: text | audio | ...
  int64_t stage_id = 0;
  Json json;                     // {"kind", "seq", fields...}
  bool terminal = false;
  const Payload* payload = nullptr;  // what a consumer plays (pcm), if the event has it
};

class Session {
 public:
  using Listener = std::function<bool(const SessionEvent&)>;

  static Result<std::unique_ptr<Session>> Open(const std::string& plan_path, const SessionOptions& options,
                                               const FamilyRegistry& families);
  static Result<std::unique_ptr<Session>> Open(Plan plan, const SessionOptions& options, const FamilyRegistry& families);
  ~Session();

  // Runs one request to the terminal event of every final-output stream. `listener` runs on
  // the calling thread, one event at a time, in order per stream; false cancels the request
  // (events still queued are withheld, and each stage keeps the state its consumer saw). A
  // listener that throws cancels the request, which then returns "listener_failed". Returns
  // the terminal fields of each stream: {"text": {...}, "audio": {...}}.
  Result<Json> Submit(const Request& request, const Listener& listener);
  void Cancel();   // thread-safe
  // Thread-safe: the contract's fence for a consumer that goes away. No terminal event is
  // delivered, Submit returns "aborted", and the next request runs at the next epoch on fresh state.
  void Abort();
  Status Reset();
  // Between requests: the stage whose final output is `stream` ("text") keeps only the first
  // `tokens` of its last output in its resident state, as if the request had stopped there (a
  // spoken reply cut back to what was heard). A later request continues from there.
  Status KeepOutput(const std::string& stream, int64_t tokens);

  const Plan& plan() const { return plan_; }
  int64_t epoch() const { return epoch_; }
  std::vector<Placement> placements() const;
  // {"plan", "epoch", "streams": {type: {...}}, "placements": [...], "stages": [{stage_id, family,
  //  model_stage, state, ...}]}: what a caller may want to know, and each stage's last request.
  Json Info() const;
  // In the tokens of the stage that reads the request's text.
  Result<std::vector<int32_t>> Tokenize(const std::string& text) const;
  // The budget this session reserved (its plan's, for one session).
  const PlanBudget& budget() const { return budget_; }
  // Tracing: while on, each request replaces the trace with its own (stage threads, worker
  // steps, graph runs with their device and bytes copied, input waits, emits, the listener).
  void Trace(bool on);
  Json TraceJson() const;  // Chrome trace event format (Perfetto, chrome://tracing)
  // The credit books of every stream of the last request (all zero once it ended cleanly).
  std::vector<contract::StreamCounters> LastStreamCounters() const;

 private:
  struct Stream;
  using Outputs = std::vector<std::vector<std::shared_ptr<contract::EventStream>>>;
  Session() = default;
  Status Wire(const FamilyRegistry& families);
  Status CheckGraph();  // no cycle; the downstream sets; no join of one stage's output
  Status Admit(const SessionOptions& options, const FamilyRegistry& families);
  Status OpenStages(const SessionOptions& options, const FamilyRegistry& families);
  Status BeginAll(const Request& request, Outputs* outputs);
  std::vector<Stream> StartAll(const Request& request, Outputs& outputs);
  void Deliver(std::vector<Stream>& finals, const Listener& listener);
  void Consume(Stream& s, contract::Delivered&& delivered, const Listener& listener);
  Json AudioFields(const Stream& s, Json fields, double now_ms) const;
  bool Call(const Listener& listener, const SessionEvent& event);
  Result<Json> Conclude(std::vector<Stream>& finals, const Listener& listener);
  // A failed stage: the stages it does not feed stop (those it feeds end with its error).
  void CancelAround(size_t failed);
  // Each stage's view of the last request (Inspect), taken when no stage thread runs.
  void Snapshot();
  Json LastRequest(size_t stage) const;
  double ElapsedMs() const;

  Plan plan_;
  PlanBudget budget_;
  AdmissionLedger* ledger_ = nullptr;
  int64_t reservation_ = 0;
  BackendPool backends_;  // outlives the workers' graphs
  std::vector<std::unique_ptr<StageRunner>> runners_;  // plan order
  // consumers_[s]: who reads stage s's output, one stream each: -1 the caller, else a stage index;
  // edges_[t][j]: (s, k) for input j of stage t, stream k of stage s.
  std::vector<std::vector<int64_t>> consumers_;
  std::vector<std::vector<std::pair<size_t, size_t>>> edges_;
  std::vector<std::vector<bool>> downstream_;  // downstream_[s][t]: stage t reads s, directly or not
  std::vector<std::shared_ptr<contract::EventStream>> last_streams_;
  std::string session_id_;
  std::atomic<int64_t> epoch_{0};
  int64_t requests_ = 0;
  Clock::time_point started_;
  std::atomic<bool> cancel_{false}, aborted_{false}, busy_{false};
  std::mutex flight_mu_;     // Abort() fences only a request in flight
  bool in_flight_ = false;
  mutable std::mutex inspect_mu_;
  std::vector<Json> inspected_;  // each stage's view of the last request, taken once it ended
  std::string listener_error_;  // the caller's thread only
};

}  // namespace omni_edge::pipeline
