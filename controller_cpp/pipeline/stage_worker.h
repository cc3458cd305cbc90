// What a model family implements to run as a stage of a plan: a StageWorker that prepares a
// request, steps it (emitting events, reading its inputs) and reports metrics. Everything else
// of a stage (its thread, stage controller, credited streams, epochs, cancellation, the fence,
// terminal events, resident-state handles) is the StageRunner's, the same for every family.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "pipeline/request.h"
#include "runtime/graph.h"
#include "text/tokenizer.h"

namespace omni_edge::pipeline {

// A binary part of an event, named as its consumers know it ("token_ids", "hidden", "codes",
// "pcm"); `dtype` is a contract dtype and the bytes hold product(shape) items of it.
struct Payload {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// One event of a stage's output: its kind ("token", "codes", "pcm"; terminal events are the
// runner's), the fields a caller sees as they are, and payloads.
struct Output {
  std::string kind;
  Json fields = Json::object();
  std::vector<Payload> payloads;
  int64_t watermark = 0;  // input positions this event accounts for (non-decreasing)
};

// An event received from an input stage, decoded.
struct Input {
  std::string kind;
  int64_t seq = 0;
  int64_t emitted_monotonic_ns = 0;  // when its producer emitted it (0: not stamped)
  Json fields = Json::object();
  std::vector<Payload> payloads;
  const Payload* Find(const std::string& name) const;
};

class StepContext {
 public:
  virtual ~StepContext() = default;
  virtual const Request& request() const = 0;
  virtual double ElapsedMs() const = 0;  // since the request began
  // Whether another stage reads this one's output (a thinker then hands on hidden states).
  virtual bool feeds_stages() const = 0;
  virtual size_t input_count() const = 0;
  // The next event of input `i` (input_sources order), waiting for it; nullopt once that input
  // ended, normally (its terminal fields are then ended(i)) or not: an input that was cancelled
  // or failed ends this stage the same way, whatever the worker does next.
  virtual std::optional<Input> Next(size_t i) = 0;
  virtual const Json& ended(size_t i) const = 0;
  // Whether input `i` has an event waiting: Next(i) would not wait.
  virtual bool input_queued(size_t i) const = 0;
  // The stage will stop after this step whatever the worker does: a cancel, an input that was
  // cancelled or failed, or no consumer left. A worker waiting for input then just returns.
  virtual bool stopping() const = 0;
  // Emits one event, waiting for credit. false: no consumer listens any more; stop stepping.
  virtual Result<bool> Emit(Output out) = 0;
};

// A step's outcome: go on, or the request is finished for `reason` (eos, length, stop, ...).
struct StepResult {
  std::string finished;
  static StepResult Continue() { return {}; }
  static StepResult Finish(std::string reason) { return {std::move(reason)}; }
};

class StageWorker {
 public:
  virtual ~StageWorker() = default;

  // On the caller's thread before any stage starts: refuse what this stage cannot run (a bad
  // prompt, a context overflow), so that a refused request changes nothing.
  virtual Status Prepare(const Request& request) = 0;
  // On the stage's thread: the work before the first step (a prefill).
  virtual Status Begin(StepContext& ctx) = 0;
  virtual Result<StepResult> Step(StepContext& ctx) = 0;
  // After the last step of a request that finished (not one cancelled or failed): what is held back.
  virtual Status Flush(StepContext& ctx) { return Status::Ok(); }
  // The fields of the terminal event: the request's metrics.
  virtual Json Metrics(const StepContext& ctx) const = 0;
  // After a cancel the consumer received this stage's events up to `last_seq` only (the rest
  // was withheld): keep the state it saw, and correct the terminal's fields.
  virtual Status Withheld(int64_t last_seq, Json* terminal_fields) { return Status::Ok(); }

  // Resident state that a later request continues (a KV cache): the runner names it with state
  // handles and asks the worker to drop it (a new conversation, a fence, Reset()).
  virtual bool resident() const { return false; }
  virtual bool migratable() const { return false; }  // the state can move to a larger bucket
  virtual bool continues(const Request& request) const { return false; }
  virtual Status Forget() { return Status::Ok(); }
  // Between requests: keep only the first `tokens` of the last request's output in the resident
  // state (a spoken reply cut back to what its listener heard), as if it had stopped there.
  virtual Status KeepOutput(int64_t tokens) {
    return Status::Error("unsupported", "this stage cannot cut its last output back");
  }
  // Forget, and clear an error that poisoned the worker.
  virtual Status Reset() { return Forget(); }

  virtual std::vector<Placement> placements() const = 0;
  // What a caller may want to know of the stream (sample_rate, pcm_dtype) and of the last
  // request (context, codes); the tokenizer of a stage that reads text.
  virtual Json Describe() const { return Json::object(); }
  virtual Json Inspect() const { return Json::object(); }
  virtual const text::Tokenizer* tokenizer() const { return nullptr; }
};

}  // namespace omni_edge::pipeline
