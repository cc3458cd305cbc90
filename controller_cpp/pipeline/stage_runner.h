// Runs one stage of a session's plan: its stage controller and the contract request of each
// session request, the worker thread that steps the family's StageWorker, the credited streams
// it emits to (one per consumer), cancel at the next step, the fence, the terminal event with
// the request's metrics, and the handle of the resident state a later request continues.
// The same for every model family.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/trace.h"
#include "contract/stage_controller.h"
#include "pipeline/stage_worker.h"
#include "runtime/plan.h"

namespace omni_edge::pipeline {

using Clock = std::chrono::steady_clock;

// How a stage's part of a request ended; kFenced: no terminal event could be delivered.
enum class Ending { kDone, kCancelled, kError, kFenced };
const char* EndingName(Ending ending);

class StageRunner {
 public:
  struct Identity {
    std::string session_id;
    std::string artifact_id;  // checkpoint/component of the stage's artifact
    std::string backend;
    std::string instance_id;
    // The layout of the state a resident stage keeps (its manifest's): 1 a KV cache, 2 a KV cache
    // beside a hybrid's recurrent states. A state handle of another layout is refused.
    int64_t state_layout_version = 1;
  };
  using OnEnd = std::function<void(Ending, const std::string& error)>;

  StageRunner(const StagePlan& stage, std::unique_ptr<StageWorker> worker, Identity identity);
  ~StageRunner();

  const StagePlan& stage() const { return stage_; }
  // Where the stage's spans go (the session's trace), set before the first request.
  void set_trace(trace::Recorder* trace) { trace_ = trace; }
  trace::Recorder* tracing() const { return trace_ != nullptr && trace_->enabled() ? trace_ : nullptr; }
  StageWorker& worker() { return *worker_; }
  const StageWorker& worker() const { return *worker_; }

  // Before a request, on the caller's thread: the worker's checks (nothing changes yet)...
  Status Check(const Request& request);
  // ...then, once every stage accepted it, the resident state: a request that does not
  // continue releases the last one's state (the two-step release).
  Status Settle(const Request& request);
  // Begins the contract request with the stage controller; returns one stream per consumer
  // (the controller's first). Withdraw() undoes it when the request will not start.
  Result<std::vector<std::shared_ptr<contract::EventStream>>> Begin(const Request& request, const std::string& request_id,
                                                                    int64_t epoch, const contract::StreamLimits& limits,
                                                                    size_t consumers);
  void Withdraw();
  // Runs the begun request on the stage's own thread, reading `inputs` (one per input source);
  // `on_end` is called from that thread once the stage has ended.
  void Start(const Request& request, std::vector<std::shared_ptr<contract::EventStream>> inputs, bool feeds_stages,
             Clock::time_point started, OnEnd on_end);
  void Cancel();  // thread-safe: the stage ends at its next step with a "cancelled" terminal event
  void Fence();   // thread-safe: the contract's cancel; queued events dropped, no terminal delivered
  void Join();

  Ending ending() const;         // after Join
  // After Join: why the stage failed; `propagated` when it only failed because an input did.
  const Status& error() const { return error_; }
  bool propagated() const { return propagated_; }
  Json terminal_fields() const;  // thread-safe; set before the terminal event is emitted
  double ended_ms() const;       // thread-safe: when the stage emitted its terminal event
  std::optional<contract::StateHandle> state() const { return state_; }

  // After a fence: the resident state is gone (the next request runs at a new epoch).
  void DropState();
  // Forgets the resident state and clears a poisoned worker.
  Status Reset();

 private:
  class Context;
  void Run(Context& ctx);
  Status ReleaseState();
  contract::StateHandle NewState(int64_t epoch);

  StagePlan stage_;
  std::unique_ptr<StageWorker> worker_;
  Identity identity_;
  std::unique_ptr<contract::StageController> controller_;
  std::optional<contract::StateHandle> state_;
  int64_t state_counter_ = 0;

  mutable std::mutex mu_;  // guards what other threads read: active_, outputs_, terminal_, ended_ms_
  std::optional<contract::StageRequest> active_;
  std::vector<std::shared_ptr<contract::EventStream>> outputs_;
  Json terminal_ = Json::object();
  double ended_ms_ = 0;
  Ending ending_ = Ending::kDone;
  Status error_;
  bool propagated_ = false;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
  trace::Recorder* trace_ = nullptr;
};

}  // namespace omni_edge::pipeline
