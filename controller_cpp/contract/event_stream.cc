#include "contract/event_stream.h"

#include <algorithm>
#include <cstdint>

namespace omni_edge::contract {

Status Validate(const StreamLimits& limits) {
  if (limits.max_events <= 0) {
    return Status::Error("invalid_field", "stream_limits.max_events: must be an integer > 0, got " +
                                              std::to_string(limits.max_events));
  }
  if (limits.max_bytes <= 0) {
    return Status::Error("invalid_field",
                         "stream_limits.max_bytes: must be an integer > 0, got " + std::to_string(limits.max_bytes));
  }
  return Status::Ok();
}

EventStream::EventStream(StageRequest request, StreamLimits limits)
    : request_(std::move(request)), limits_(limits), bound_state_(request_.state) {}

Status EventStream::CheckLocked(const StageEvent& event, const BufferData& data) const {
  const StageRequest& req = request_;
  if (cancelled_ || closed_) return Status::Error("stream_closed", "stream closed");
  if (terminal_accepted_) return Status::Error("terminal_sent", "a terminal event was already accepted");
  if (event.request_id != req.request_id) {
    return Status::Error("request_id_mismatch", "request_id mismatch: '" + event.request_id + "' != '" + req.request_id + "'");
  }
  if (event.stage_id != req.stage_id) {
    return Status::Error("stage_id_mismatch", "stage_id mismatch: " + std::to_string(event.stage_id) +
                                                  " != " + std::to_string(req.stage_id));
  }
  if (event.epoch != req.epoch) {
    return Status::Error("epoch_mismatch",
                         "epoch mismatch: " + std::to_string(event.epoch) + " != " + std::to_string(req.epoch));
  }
  if (event.worker_generation != req.worker_generation) {
    return Status::Error("worker_generation_mismatch", "worker_generation mismatch: '" + event.worker_generation +
                                                           "' != '" + req.worker_generation + "'");
  }
  if (event.seq != next_seq_) {
    return Status::Error("seq_out_of_order", "seq out of order: expected " + std::to_string(next_seq_) + ", got " +
                                                 std::to_string(event.seq));
  }
  if (event.input_watermark < watermark_) {
    return Status::Error("watermark_regressed", "input_watermark regressed: " + std::to_string(event.input_watermark) +
                                                    " < " + std::to_string(watermark_));
  }
  if (event.release_token.empty()) return Status::Error("release_token_empty", "release_token must be non-empty");
  if (used_tokens_.count(event.release_token) != 0) {
    return Status::Error("release_token_reused", "release_token '" + event.release_token + "' was already used");
  }
  if (event.Charge() > limits_.max_bytes) {
    return Status::Error("payload_too_large", "payload of " + std::to_string(event.Charge()) +
                                                  " bytes exceeds max_bytes " + std::to_string(limits_.max_bytes));
  }
  if (event.state) {
    if (bound_state_) {
      if (*event.state != *bound_state_) {
        return Status::Error("state_mismatch", "event.state differs from the state the stream is bound to");
      }
    } else {
      if (req.session_id.empty()) {
        return Status::Error("state_unbound_request", "event.state on a request without a session binding");
      }
      if (event.state->session_id != req.session_id || event.state->artifact_id != req.artifact_id ||
          event.state->layout_version != req.state_layout_version) {
        return Status::Error("state_mismatch", "event.state session, artifact or layout differs from the request's");
      }
    }
  }
  if (!data.empty()) {
    if (data.size() != event.buffers.size()) {
      return Status::Error("payload_mismatch", "buffer data for " + std::to_string(data.size()) + " of " +
                                                   std::to_string(event.buffers.size()) + " buffers");
    }
    for (size_t i = 0; i < data.size(); ++i) {
      if (int64_t(data[i].size()) != event.buffers[i].nbytes) {
        return Status::Error("payload_mismatch", "buffer " + event.buffers[i].object_id + " holds " +
                                                     std::to_string(data[i].size()) + " bytes, declared " +
                                                     std::to_string(event.buffers[i].nbytes));
      }
    }
  }
  return Status::Ok();
}

bool EventStream::FitsLocked(int64_t charge) const {
  return OutstandingEventsLocked() + 1 <= limits_.max_events && outstanding_bytes_ + charge <= limits_.max_bytes;
}

void EventStream::AcceptLocked(const StageEvent& event, BufferData data) {
  const int64_t charge = event.Charge();
  ++next_seq_;
  watermark_ = event.input_watermark;
  used_tokens_.insert(event.release_token);
  if (event.state) bound_state_ = event.state;
  if (event.terminal) terminal_accepted_ = true;
  queue_.push_back(Delivered{event, std::move(data)});
  outstanding_bytes_ += charge;
  high_water_bytes_ = std::max(high_water_bytes_, outstanding_bytes_);
  changed_.notify_all();
  if (observer_) observer_();
}

Result<SubmitResult> EventStream::TrySubmit(const StageEvent& event, BufferData data) {
  std::lock_guard<std::mutex> lock(mu_);
  OE_RETURN_IF_ERROR(CheckLocked(event, data));
  if (!FitsLocked(event.Charge())) return SubmitResult::kBackpressure;
  AcceptLocked(event, std::move(data));
  return SubmitResult::kAccepted;
}

Status EventStream::Submit(const StageEvent& event, BufferData data, std::optional<Clock::time_point> deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    OE_RETURN_IF_ERROR(CheckLocked(event, data));
    if (FitsLocked(event.Charge())) break;
    ++waiting_producers_;
    bool timed_out = false;
    if (deadline) {
      timed_out = changed_.wait_until(lock, *deadline) == std::cv_status::timeout;
    } else {
      changed_.wait(lock);
    }
    --waiting_producers_;
    if (timed_out) {
      OE_RETURN_IF_ERROR(CheckLocked(event, data));
      if (FitsLocked(event.Charge())) break;
      return Status::Error("submit_timeout", "no credit before the deadline");
    }
  }
  AcceptLocked(event, std::move(data));
  return Status::Ok();
}

void EventStream::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  changed_.notify_all();
  if (observer_) observer_();
}

std::optional<Delivered> EventStream::PopLocked() {
  if (terminal_delivered_ || queue_.empty()) return std::nullopt;
  Delivered d = std::move(queue_.front());
  queue_.pop_front();
  unacked_[d.event.release_token] = d.event.Charge();
  if (d.event.terminal) terminal_delivered_ = true;
  return d;
}

bool EventStream::EndedLocked() const { return terminal_delivered_ || ((closed_ || cancelled_) && queue_.empty()); }

std::optional<Delivered> EventStream::TryReceive() {
  std::lock_guard<std::mutex> lock(mu_);
  return PopLocked();
}

std::optional<Delivered> EventStream::Receive(std::optional<Clock::time_point> deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [this] { return !queue_.empty() || EndedLocked(); };
  if (deadline) {
    changed_.wait_until(lock, *deadline, ready);
  } else {
    changed_.wait(lock, ready);
  }
  return PopLocked();
}

bool EventStream::Acknowledge(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = unacked_.find(token);
  if (it == unacked_.end()) return false;
  outstanding_bytes_ -= it->second;
  unacked_.erase(it);
  changed_.notify_all();
  return true;
}

int64_t EventStream::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cancelled_) {
    cancelled_ = true;
    stale_ += int64_t(queue_.size());
    for (const auto& d : queue_) outstanding_bytes_ -= d.event.Charge();
    queue_.clear();
    changed_.notify_all();
    if (observer_) observer_();
  }
  // Saturate rather than overflow; the Python reference caps the same way.
  return request_.epoch == INT64_MAX ? INT64_MAX : request_.epoch + 1;
}

void EventStream::SetObserver(std::function<void()> observer) {
  std::lock_guard<std::mutex> lock(mu_);
  observer_ = std::move(observer);
}

StreamCounters EventStream::Counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  StreamCounters c;
  c.outstanding_events = OutstandingEventsLocked();
  c.outstanding_bytes = outstanding_bytes_;
  c.high_water_bytes = high_water_bytes_;
  c.stale_events_dropped = stale_;
  c.waiting_producers = waiting_producers_;
  c.closed = closed_;
  c.cancelled = cancelled_;
  c.terminal_accepted = terminal_accepted_;
  c.ended = EndedLocked();
  return c;
}

}  // namespace omni_edge::contract
