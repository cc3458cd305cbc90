// The bounded, credited event stream of one active stage request (CONTRACT.md).
// Thread-safe: one producer (a backend worker) and one consumer (the session or a UI thread).
// Credit comes back only through Acknowledge(); Cancel() fences the epoch and wakes a blocked
// producer with "stream closed". Mirrors omni_edge/contracts/stream.py.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "contract/types.h"

namespace omni_edge::contract {

struct StreamLimits {
  int64_t max_events = 64;
  int64_t max_bytes = 64 << 20;
};
Status Validate(const StreamLimits& limits);

enum class SubmitResult { kAccepted, kBackpressure };

// The bytes of an event's host-copy buffers, one string per BufferRef (the contract JSON only
// describes them). In-process producers attach them; JSON-only producers send none.
using BufferData = std::vector<std::string>;

struct Delivered {
  StageEvent event;
  BufferData data;
};

struct StreamCounters {
  int64_t outstanding_events = 0;  // queued + delivered-but-unacknowledged
  int64_t outstanding_bytes = 0;
  int64_t high_water_bytes = 0;
  int64_t stale_events_dropped = 0;
  int64_t waiting_producers = 0;
  bool closed = false;
  bool cancelled = false;
  bool terminal_accepted = false;
  bool ended = false;  // Receive() can return nothing more
};

class EventStream {
 public:
  using Clock = std::chrono::steady_clock;

  EventStream(StageRequest request, StreamLimits limits);
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  const StageRequest& request() const { return request_; }
  const StreamLimits& limits() const { return limits_; }

  // Producer side. TrySubmit never blocks: it accepts, reports backpressure (nothing
  // changes), or refuses. Submit waits for credit until `deadline` (none = forever).
  Result<SubmitResult> TrySubmit(const StageEvent& event, BufferData data = {});
  Status Submit(const StageEvent& event, BufferData data = {}, std::optional<Clock::time_point> deadline = std::nullopt);
  void Close();

  // Consumer side. TryReceive returns the next event if one is queued; Receive waits for an
  // event or the end of the stream (nullopt) until `deadline`.
  std::optional<Delivered> TryReceive();
  std::optional<Delivered> Receive(std::optional<Clock::time_point> deadline = std::nullopt);
  bool Acknowledge(const std::string& token);

  // Idempotent; returns the epoch the next request on this state must use.
  int64_t Cancel();

  // For a consumer that waits on several streams: `observer` is called, under the stream's
  // lock (it must not call back into the stream), whenever an event is queued or the stream
  // is closed or cancelled.
  void SetObserver(std::function<void()> observer);

  StreamCounters Counters() const;

 private:
  Status CheckLocked(const StageEvent& event, const BufferData& data) const;
  bool FitsLocked(int64_t charge) const;
  void AcceptLocked(const StageEvent& event, BufferData data);
  std::optional<Delivered> PopLocked();
  bool EndedLocked() const;
  int64_t OutstandingEventsLocked() const { return int64_t(queue_.size() + unacked_.size()); }

  const StageRequest request_;
  const StreamLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  int64_t next_seq_ = 1;
  int64_t watermark_ = 0;
  std::set<std::string> used_tokens_;
  std::deque<Delivered> queue_;
  std::map<std::string, int64_t> unacked_;  // delivered token -> charged bytes
  std::optional<StateHandle> bound_state_;
  int64_t outstanding_bytes_ = 0;
  int64_t high_water_bytes_ = 0;
  int64_t stale_ = 0;
  int64_t waiting_producers_ = 0;
  bool closed_ = false;
  bool cancelled_ = false;
  bool terminal_accepted_ = false;
  bool terminal_delivered_ = false;
  std::function<void()> observer_;
};

}  // namespace omni_edge::contract
