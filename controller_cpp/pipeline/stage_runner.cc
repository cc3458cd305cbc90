#include "pipeline/stage_runner.h"

#include <algorithm>

#include "contract/codec.h"
#include "pipeline/wire.h"

namespace omni_edge::pipeline {
namespace {

constexpr const char* kWorkerGeneration = "wg-1";

int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

const char* EndingName(Ending ending) {
  switch (ending) {
    case Ending::kDone: return "done";
    case Ending::kCancelled: return "cancelled";
    case Ending::kError: return "error";
    case Ending::kFenced: return "fenced";
  }
  return "error";
}

// One request of one stage, as its worker sees it.
class StageRunner::Context final : public StepContext {
 public:
  Context(StageRunner& runner, const Request& request, std::vector<std::shared_ptr<contract::EventStream>> inputs,
          bool feeds_stages, Clock::time_point started)
      : runner_(runner), request_(request), inputs_(std::move(inputs)), feeds_(feeds_stages), started_(started),
        ended_(inputs_.size(), Json::object()), input_done_(inputs_.size(), false) {}

  const Request& request() const override { return request_; }
  double ElapsedMs() const override { return std::chrono::duration<double, std::milli>(Clock::now() - started_).count(); }
  bool feeds_stages() const override { return feeds_; }
  size_t input_count() const override { return inputs_.size(); }
  const Json& ended(size_t i) const override { return ended_.at(i); }
  bool input_queued(size_t i) const override {
    return i < inputs_.size() && !input_done_[i] && inputs_[i]->Counters().outstanding_events > 0;
  }
  bool stopping() const override { return stop.has_value() || retired || runner_.cancel_; }
  std::optional<Input> Next(size_t i) override;
  Result<bool> Emit(Output out) override;

  // Why the stage stops whatever its worker does: an input cancelled or failed, or no consumer.
  std::optional<Ending> stop;
  std::string stop_error;
  bool retired = false;  // no consumer listens: nothing more, not even a terminal event, goes out

  Result<bool> Send(contract::StageEvent ev, contract::BufferData data);
  void ReleaseInputs() {  // a producer still emitting to us is not kept waiting
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (!input_done_[i]) inputs_[i]->Cancel();
    }
  }

 private:
  void Stop(Ending why, std::string error) {
    if (!stop) stop = why, stop_error = std::move(error);
  }

  StageRunner& runner_;
  const Request& request_;
  std::vector<std::shared_ptr<contract::EventStream>> inputs_;
  bool feeds_;
  Clock::time_point started_;
  std::vector<Json> ended_;
  std::vector<bool> input_done_;
  int64_t seq_ = 0;
  int64_t watermark_ = 0;
  int64_t consumed_ = 0;
};

std::optional<Input> StageRunner::Context::Next(size_t i) {
  if (i >= inputs_.size() || input_done_[i]) return std::nullopt;
  std::optional<trace::Span> wait;
  if (trace::Recorder* t = runner_.tracing()) {
    wait.emplace(t, "wait input from stage " + std::to_string(runner_.stage_.input_sources.at(i)), "queue");
  }
  auto delivered = inputs_[i]->Receive();
  wait.reset();
  if (!delivered) {  // fenced before its terminal event
    input_done_[i] = true;
    Stop(Ending::kCancelled, "");
    return std::nullopt;
  }
  inputs_[i]->Acknowledge(delivered->event.release_token);
  ++consumed_;
  const contract::StageEvent ev = delivered->event;
  Input in = Decode(std::move(*delivered));
  if (!ev.terminal) return in;
  input_done_[i] = true;
  ended_[i] = in.fields;
  const std::string source = std::to_string(runner_.stage_.input_sources.at(i));
  if (ev.kind == "cancelled") Stop(Ending::kCancelled, "");
  if (ev.kind == "error") Stop(Ending::kError, "stage " + source + ": " + ev.error.value_or("failed"));
  return std::nullopt;
}

Result<bool> StageRunner::Context::Emit(Output out) {
  contract::StageEvent ev;
  ev.kind = out.kind;
  ev.started_monotonic_ns = MonotonicNs();
  ev.emitted_monotonic_ns = ev.started_monotonic_ns;
  watermark_ = std::max({watermark_, out.watermark, consumed_});
  contract::BufferData data;
  const std::string& owner = runner_.stage_.model_stage;
  const std::string& generation = runner_.active_->request_id;
  AddFields(out.fields, owner, generation, &ev, &data);
  for (auto& p : out.payloads) OE_RETURN_IF_ERROR(AddPayload(std::move(p), owner, generation, &ev, &data));
  std::optional<trace::Span> send;  // includes waiting for the consumers' credit
  if (trace::Recorder* t = runner_.tracing()) send.emplace(t, "emit " + ev.kind, "queue");
  return Send(std::move(ev), std::move(data));
}

Result<bool> StageRunner::Context::Send(contract::StageEvent ev, contract::BufferData data) {
  const contract::StageRequest& req = *runner_.active_;
  ev.request_id = req.request_id;
  ev.stage_id = req.stage_id;
  ev.epoch = req.epoch;
  ev.worker_generation = req.worker_generation;
  ev.seq = seq_ + 1;
  ev.input_watermark = watermark_;
  ev.release_token = req.request_id + ":" + std::to_string(req.stage_id) + ":" + std::to_string(ev.seq);
  for (const auto& b : ev.buffers) ev.payload_nbytes += b.nbytes;
  std::vector<std::shared_ptr<contract::EventStream>> outputs;
  {
    std::lock_guard<std::mutex> lock(runner_.mu_);
    outputs = runner_.outputs_;
  }
  // The controller's stream first (it checks state ownership and keeps the request's books):
  // its refusal is the stage's error, and then no stream has taken the event, so its seq stays
  // free. Then each further consumer's: one that went away or cannot take it is dropped (its
  // stream cancelled). If no consumer listens any more, the stage stops.
  bool listened = false;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k] == nullptr) continue;
    contract::BufferData copy = k + 1 < outputs.size() ? data : std::move(data);
    bool gone = false;
    if (k == 0) {
      OE_ASSIGN_OR_RETURN(contract::EmitResult r, runner_.controller_->EmitWait(req, ev, std::move(copy)));
      gone = r == contract::EmitResult::kRetired;
    } else if (Status st = outputs[k]->Submit(ev, std::move(copy)); !st.ok()) {
      outputs[k]->Cancel();
      gone = true;
    }
    if (gone) {
      std::lock_guard<std::mutex> lock(runner_.mu_);
      runner_.outputs_[k] = nullptr;
    }
    listened = listened || !gone;
  }
  seq_ = ev.seq;
  if (!listened) retired = true;
  return listened;
}

StageRunner::StageRunner(const StagePlan& stage, std::unique_ptr<StageWorker> worker, Identity identity)
    : stage_(stage), worker_(std::move(worker)), identity_(std::move(identity)) {
  std::map<int64_t, contract::BackendIdentity> identities;
  identities[stage_.stage_id] = {identity_.backend, identity_.instance_id, kWorkerGeneration};
  controller_ = std::make_unique<contract::StageController>(std::move(identities));
}

StageRunner::~StageRunner() {
  Fence();
  Join();
}

contract::StateHandle StageRunner::NewState(int64_t epoch) {
  contract::StateHandle h;
  h.session_id = identity_.session_id;
  h.backend = identity_.backend;
  h.artifact_id = identity_.artifact_id;
  h.layout_version = identity_.state_layout_version;
  h.epoch = epoch;
  h.replayable = true;  // the state can be rebuilt by feeding its inputs again
  h.migratable = worker_->migratable();
  h.backend_instance_id = identity_.instance_id;
  h.worker_generation = kWorkerGeneration;
  h.state_id = "state-" + std::to_string(stage_.stage_id) + "-" + std::to_string(++state_counter_);
  return h;
}

Status StageRunner::ReleaseState() {
  if (!state_) return worker_->Forget();
  // The two-step release: ask, the worker frees the state, confirm. A handle that no event
  // ever announced (its request was cut short) is not the controller's: it is just dropped.
  auto op = controller_->RequestRelease(stage_.stage_id, *state_);
  if (!op.ok() && op.status().reason() != "state_not_live") return op.status();
  OE_RETURN_IF_ERROR(worker_->Forget());
  if (op.ok()) OE_RETURN_IF_ERROR(controller_->ConfirmRelease(stage_.stage_id, *state_, op.value()));
  state_.reset();
  return Status::Ok();
}

Status StageRunner::Check(const Request& request) {
  OE_RETURN_IF_ERROR(worker_->Prepare(request));
  if (worker_->resident() && worker_->continues(request) && !state_) {
    return Status::Error("no_conversation", "nothing to continue: the session holds no resident context");
  }
  return Status::Ok();
}

Status StageRunner::Settle(const Request& request) {
  if (!worker_->resident() || worker_->continues(request)) return Status::Ok();
  return ReleaseState();
}

Result<std::vector<std::shared_ptr<contract::EventStream>>> StageRunner::Begin(const Request& request,
                                                                              const std::string& request_id,
                                                                              int64_t epoch,
                                                                              const contract::StreamLimits& limits,
                                                                              size_t consumers) {
  contract::StageRequest req;
  req.request_id = request_id;
  req.stage_id = stage_.stage_id;
  req.epoch = epoch;
  req.worker_generation = kWorkerGeneration;
  req.artifact_id = identity_.artifact_id;
  req.state_layout_version = identity_.state_layout_version;
  req.session_id = identity_.session_id;
  if (worker_->resident() && worker_->continues(request)) req.state = state_;
  OE_ASSIGN_OR_RETURN(std::shared_ptr<contract::EventStream> primary, controller_->Begin(req, limits));
  if (worker_->resident() && !state_) state_ = NewState(epoch);
  std::vector<std::shared_ptr<contract::EventStream>> streams = {primary};
  for (size_t k = 1; k < consumers; ++k) streams.push_back(std::make_shared<contract::EventStream>(req, limits));
  std::lock_guard<std::mutex> lock(mu_);
  active_ = req;
  outputs_ = streams;
  terminal_ = Json::object();
  ended_ms_ = 0;
  cancel_ = false;
  return streams;
}

void StageRunner::Withdraw() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_) return;
  (void)controller_->Cancel(*active_);
  (void)controller_->Finish(*active_);
  for (auto& s : outputs_) {
    if (s != nullptr) s->Cancel();
  }
  active_.reset();
  outputs_.clear();
}

void StageRunner::Start(const Request& request, std::vector<std::shared_ptr<contract::EventStream>> inputs,
                        bool feeds_stages, Clock::time_point started, OnEnd on_end) {
  thread_ = std::thread([this, &request, inputs = std::move(inputs), feeds_stages, started,
                         on_end = std::move(on_end)]() mutable {
    Context ctx(*this, request, std::move(inputs), feeds_stages, started);
    if (trace::Recorder* t = tracing()) t->NameThread("stage " + std::to_string(stage_.stage_id) + " " + stage_.model_stage);
    try {
      trace::Span whole(tracing(), stage_.model_stage, "stage", Json{{"stage_id", stage_.stage_id}});
      Run(ctx);
    } catch (const std::exception& e) {  // nothing inside should throw; if it does, the stage fails
      ending_ = Ending::kError;
      error_ = Status::Error("internal", std::string("stage ") + std::to_string(stage_.stage_id) + ": " + e.what());
      (void)controller_->Finish(*active_);
    }
    ctx.ReleaseInputs();
    std::string error;
    {
      std::lock_guard<std::mutex> lock(mu_);
      error = terminal_.value("error", std::string());
      // Every consumer's stream ends: after its terminal event, or (the stage could not send
      // one) right away, so that no consumer waits for an event that will not come.
      for (size_t k = 1; k < outputs_.size(); ++k) {
        if (outputs_[k] != nullptr) outputs_[k]->Close();
      }
      active_.reset();  // a later fence has nothing to cancel
    }
    if (on_end) on_end(ending_, error.empty() ? error_.ToString() : error);
  });
}

void StageRunner::Run(Context& ctx) {
  Status failed = worker_->Begin(ctx);
  std::string reason;
  while (failed.ok() && reason.empty() && !ctx.stop && !ctx.retired) {
    if (cancel_) break;
    trace::Span span(tracing(), "step", "stage");
    auto step = worker_->Step(ctx);
    if (!step.ok()) failed = step.status();
    else reason = step->finished;
  }
  Ending ending = Ending::kDone;
  std::string error;
  error_ = Status::Ok();
  propagated_ = false;
  if (ctx.stop) {
    ending = *ctx.stop, error = ctx.stop_error;
    if (ending == Ending::kError) error_ = Status::Error("stage_failed", error), propagated_ = true;
  } else if (!failed.ok()) {
    ending = Ending::kError, error = failed.ToString(), error_ = failed;
  }
  else if (reason.empty()) ending = Ending::kCancelled;  // the loop ended on a cancel
  if (ending == Ending::kDone && !ctx.retired) {
    Status flushed = worker_->Flush(ctx);
    if (!flushed.ok()) ending = Ending::kError, error = flushed.ToString(), error_ = flushed;
  }
  if (ctx.retired) ending = Ending::kFenced;
  if (ending != Ending::kFenced) {
    Json fields = worker_->Metrics(ctx);
    fields["finish_reason"] = ending == Ending::kDone ? reason : EndingName(ending);
    contract::StageEvent ev;
    ev.kind = EndingName(ending);
    ev.terminal = true;
    if (!error.empty()) ev.error = error, fields["error"] = error;
    if (ending != Ending::kError && state_) {
      ev.state = *state_;
      ev.state->epoch = active_->epoch;
      fields["state"] = contract::ToJson(*ev.state);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      terminal_ = fields;
      ended_ms_ = ctx.ElapsedMs();
    }
    contract::BufferData data;
    AddFields(fields, stage_.model_stage, active_->request_id, &ev, &data);
    auto sent = ctx.Send(std::move(ev), std::move(data));
    if (!sent.ok()) {  // even the terminal event was refused: its consumers see the stream end without it
      ending = Ending::kError;
      if (error_.ok()) error_ = sent.status();
    } else if (!sent.value()) {
      ending = Ending::kFenced;
    }
  }
  ending_ = ending;
  (void)controller_->Finish(*active_);
}

void StageRunner::Cancel() { cancel_ = true; }

void StageRunner::Fence() {
  cancel_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_) return;
  (void)controller_->Cancel(*active_);
  for (auto& s : outputs_) {
    if (s != nullptr) s->Cancel();
  }
}

void StageRunner::Join() {
  if (thread_.joinable()) thread_.join();
}

Ending StageRunner::ending() const { return ending_; }

Json StageRunner::terminal_fields() const {
  std::lock_guard<std::mutex> lock(mu_);
  return terminal_;
}

double StageRunner::ended_ms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_ms_;
}

void StageRunner::DropState() {
  if (state_ && !controller_->IsLive(stage_.stage_id, *state_)) {
    // Retired by the fence (a continued state) or never announced (a fresh one): release what
    // the controller knows of, so its books end clean.
    auto op = controller_->RequestRelease(stage_.stage_id, *state_);
    if (op.ok()) (void)controller_->ConfirmRelease(stage_.stage_id, *state_, op.value());
  }
  state_.reset();
  (void)worker_->Forget();
}

Status StageRunner::Reset() {
  Status released = state_ ? ReleaseState() : Status::Ok();
  state_.reset();
  OE_RETURN_IF_ERROR(worker_->Reset());
  return released.ok() || released.reason() == "state_not_live" ? Status::Ok() : released;
}

}  // namespace omni_edge::pipeline
