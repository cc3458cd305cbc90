#include "contract/stage_controller.h"

#include "contract/codec.h"

namespace omni_edge::contract {

const char* EmitResultName(EmitResult r) {
  switch (r) {
    case EmitResult::kAccepted: return "accepted";
    case EmitResult::kBackpressure: return "backpressure";
    case EmitResult::kRetired: return "retired";
  }
  return "retired";
}

StageController::StageController(std::map<int64_t, BackendIdentity> identities)
    : identities_(std::move(identities)) {}

StageController::HandleKey StageController::KeyOf(int64_t stage_id, const StateHandle& state) {
  return {stage_id, ToJson(state).dump()};
}

bool StageController::BusyLocked() const {
  return active_ && (!active_->finished || active_->stream->Counters().outstanding_events > 0);
}

bool StageController::LiveLocked(int64_t stage_id, const StateHandle& state) const {
  auto it = live_.find({stage_id, state.state_id});
  return it != live_.end() && it->second == state;
}

bool StageController::IsLive(int64_t stage_id, const StateHandle& state) const {
  std::lock_guard<std::mutex> lock(mu_);
  return LiveLocked(stage_id, state);
}

std::shared_ptr<EventStream> StageController::active_stream() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_ ? active_->stream : nullptr;
}

void StageController::RetireLocked(int64_t stage_id, const std::optional<StateHandle>& state) {
  if (!state) return;
  if (LiveLocked(stage_id, *state)) live_.erase({stage_id, state->state_id});
  retired_.insert(KeyOf(stage_id, *state));
}

StageController::Active* StageController::MatchingActiveLocked(const StageRequest& request) {
  return active_ && active_->request.SameKey(request) ? &*active_ : nullptr;
}

Result<std::shared_ptr<EventStream>> StageController::Begin(const StageRequest& request, const StreamLimits& limits) {
  OE_RETURN_IF_ERROR(Validate(limits));
  std::lock_guard<std::mutex> lock(mu_);
  if (BusyLocked()) return Status::Error("busy", "the previous request still has work or unacknowledged payloads");
  if (!pending_.empty()) return Status::Error("release_pending", "a state release is unresolved");
  if (request.operation != Operation::kRun) {
    return Status::Error("invalid_operation",
                         std::string("begin takes run requests, got '") + OperationName(request.operation) + "'");
  }
  if (request.artifact_id.empty()) return Status::Error("missing_identity", "request.artifact_id: required to begin");
  if (request.session_id.empty()) return Status::Error("missing_identity", "request.session_id: required to begin");
  if (request.state_layout_version <= 0) {
    return Status::Error("missing_identity", "request.state_layout_version: must be > 0 to begin");
  }
  auto identity = identities_.find(request.stage_id);
  if (identity == identities_.end()) {
    return Status::Error("unknown_stage", "stage " + std::to_string(request.stage_id) + " is not served by this worker");
  }
  if (request.worker_generation != identity->second.worker_generation) {
    return Status::Error("worker_generation_mismatch", "worker_generation '" + request.worker_generation +
                                                           "' is not stage " + std::to_string(request.stage_id) +
                                                           "'s '" + identity->second.worker_generation + "'");
  }
  if (used_.Contains(request.request_id, request.stage_id, request.epoch, request.worker_generation)) {
    return Status::Error("duplicate_request", "request " + request.request_id + " was used before");
  }
  if (request.state && !LiveLocked(request.stage_id, *request.state)) {
    return Status::Error("state_not_live", "the continuation state is unknown, different or retired");
  }
  auto stream = std::make_shared<EventStream>(request, limits);
  used_.Insert(request.request_id, request.stage_id, request.epoch, request.worker_generation);
  active_ = Active{request, stream, request.state, false};
  return stream;
}

Result<StageController::Active*> StageController::CheckEmitLocked(const StageRequest& request, const StageEvent& event) {
  Active* a = MatchingActiveLocked(request);
  if (a == nullptr || a->finished) return static_cast<Active*>(nullptr);
  const StreamCounters counters = a->stream->Counters();
  if (counters.cancelled || counters.terminal_accepted) return static_cast<Active*>(nullptr);
  if (event.state) {
    const StateHandle& s = *event.state;
    const BackendIdentity& id = identities_.at(request.stage_id);
    if (s.backend != id.backend || s.backend_instance_id != id.backend_instance_id ||
        s.worker_generation != id.worker_generation) {
      return Status::Error("state_foreign", "event.state does not belong to this worker's backend");
    }
    if (s.session_id != request.session_id || s.artifact_id != request.artifact_id ||
        s.layout_version != request.state_layout_version || s.epoch != request.epoch) {
      return Status::Error("state_mismatch", "event.state session, artifact, layout or epoch differs from the request's");
    }
    if (retired_.count(KeyOf(request.stage_id, s)) != 0) {
      return Status::Error("state_retired",
                           "state '" + s.state_id + "' at epoch " + std::to_string(s.epoch) + " is retired");
    }
  }
  return a;
}

void StageController::RecordAcceptedLocked(const StageRequest& request, const StageEvent& event) {
  if (!event.state) return;
  Active* a = MatchingActiveLocked(request);
  if (a == nullptr || a->stream->Counters().cancelled) {
    RetireLocked(request.stage_id, event.state);  // cancelled while the producer waited for credit
    return;
  }
  live_[{request.stage_id, event.state->state_id}] = *event.state;
  a->state = event.state;
}

Result<EmitResult> StageController::Emit(const StageRequest& request, const StageEvent& event, BufferData data) {
  std::lock_guard<std::mutex> lock(mu_);
  OE_ASSIGN_OR_RETURN(Active * a, CheckEmitLocked(request, event));
  if (a == nullptr) return EmitResult::kRetired;
  OE_ASSIGN_OR_RETURN(SubmitResult submitted, a->stream->TrySubmit(event, std::move(data)));
  if (submitted == SubmitResult::kBackpressure) return EmitResult::kBackpressure;
  RecordAcceptedLocked(request, event);
  return EmitResult::kAccepted;
}

Result<EmitResult> StageController::EmitWait(const StageRequest& request, const StageEvent& event, BufferData data,
                                              std::optional<EventStream::Clock::time_point> deadline) {
  std::shared_ptr<EventStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    OE_ASSIGN_OR_RETURN(Active * a, CheckEmitLocked(request, event));
    if (a == nullptr) return EmitResult::kRetired;
    stream = a->stream;
  }
  // Wait for credit without holding the controller, so the consumer can acknowledge or cancel.
  Status submitted = stream->Submit(event, std::move(data), deadline);
  std::lock_guard<std::mutex> lock(mu_);
  if (!submitted.ok()) {
    if (submitted.reason() == "stream_closed" && stream->Counters().cancelled) return EmitResult::kRetired;
    return submitted;
  }
  RecordAcceptedLocked(request, event);
  return EmitResult::kAccepted;
}

Status StageController::Finish(const StageRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  Active* a = MatchingActiveLocked(request);
  if (a == nullptr) return Status::Error("not_active", "request " + request.request_id + " is not the active request");
  if (a->finished) return Status::Ok();
  a->finished = true;
  a->stream->Close();
  const StreamCounters counters = a->stream->Counters();
  if (!counters.cancelled && !counters.terminal_accepted) {
    RetireLocked(request.stage_id, a->state);
    return Status::Error("no_terminal", "stopped without a terminal event");
  }
  return Status::Ok();
}

Result<int64_t> StageController::Cancel(const StageRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  Active* a = MatchingActiveLocked(request);
  if (a == nullptr) return Status::Error("not_active", "request " + request.request_id + " is not the active request");
  RetireLocked(request.stage_id, a->state);
  return a->stream->Cancel();
}

Result<std::string> StageController::RequestRelease(int64_t stage_id, const StateHandle& state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (identities_.count(stage_id) == 0) {
    return Status::Error("unknown_stage", "stage " + std::to_string(stage_id) + " is not served by this worker");
  }
  const HandleKey key = KeyOf(stage_id, state);
  if (!LiveLocked(stage_id, state) && retired_.count(key) == 0) {
    return Status::Error("state_not_live", "release of an unknown or different state");
  }
  if (BusyLocked()) return Status::Error("busy", "work or payload is still outstanding");
  auto pending = pending_.find(key);
  if (pending != pending_.end()) return pending->second;
  const std::string op_id = "release-" + std::to_string(stage_id) + "-" + std::to_string(++release_counter_);
  pending_[key] = op_id;
  return op_id;
}

Status StageController::ConfirmRelease(int64_t stage_id, const StateHandle& state, const std::string& op_id) {
  std::lock_guard<std::mutex> lock(mu_);
  const HandleKey key = KeyOf(stage_id, state);
  auto pending = pending_.find(key);
  if (pending == pending_.end() || pending->second != op_id) {
    return Status::Error("release_mismatch", "no pending release with that id for that state");
  }
  pending_.erase(pending);
  if (LiveLocked(stage_id, state)) live_.erase({stage_id, state.state_id});
  retired_.erase(key);
  return Status::Ok();
}

}  // namespace omni_edge::contract
