// The stage controller of one stage worker (CONTRACT.md, "The stage controller"): one active
// request at a time, identity and continuation checks at begin, emit with state ownership
// checks, finish/cancel semantics and the two-step state release. Thread-safe.
// Mirrors omni_edge/contracts/controller.py.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "base/status.h"
#include "contract/event_stream.h"
#include "contract/types.h"
#include "contract/used_requests.h"

namespace omni_edge::contract {

struct BackendIdentity {
  std::string backend;
  std::string backend_instance_id;
  std::string worker_generation;
};

enum class EmitResult { kAccepted, kBackpressure, kRetired };
const char* EmitResultName(EmitResult r);

class StageController {
 public:
  explicit StageController(std::map<int64_t, BackendIdentity> identities);

  Result<std::shared_ptr<EventStream>> Begin(const StageRequest& request, const StreamLimits& limits);
  Result<EmitResult> Emit(const StageRequest& request, const StageEvent& event, BufferData data = {});
  // The producer side of a backend worker: waits for credit instead of reporting backpressure.
  // A cancel while waiting (or before) gives kRetired.
  Result<EmitResult> EmitWait(const StageRequest& request, const StageEvent& event, BufferData data = {},
                              std::optional<EventStream::Clock::time_point> deadline = std::nullopt);
  // The backend's statement that it stopped. Without a terminal event (and no cancel) the
  // request is still marked finished, its state retired, and "no_terminal" returned.
  Status Finish(const StageRequest& request);
  Result<int64_t> Cancel(const StageRequest& request);
  Result<std::string> RequestRelease(int64_t stage_id, const StateHandle& state);
  Status ConfirmRelease(int64_t stage_id, const StateHandle& state, const std::string& op_id);

  bool IsLive(int64_t stage_id, const StateHandle& state) const;
  std::shared_ptr<EventStream> active_stream() const;

 private:
  using StateKey = std::pair<int64_t, std::string>;      // (stage, state_id)
  using HandleKey = std::pair<int64_t, std::string>;     // (stage, every field of the handle)
  struct Active {
    StageRequest request;
    std::shared_ptr<EventStream> stream;
    std::optional<StateHandle> state;
    bool finished = false;
  };

  static HandleKey KeyOf(int64_t stage_id, const StateHandle& state);
  bool BusyLocked() const;
  bool LiveLocked(int64_t stage_id, const StateHandle& state) const;
  void RetireLocked(int64_t stage_id, const std::optional<StateHandle>& state);
  Active* MatchingActiveLocked(const StageRequest& request);
  // The active request the event may be emitted for, nullptr when emitting is retired.
  Result<Active*> CheckEmitLocked(const StageRequest& request, const StageEvent& event);
  void RecordAcceptedLocked(const StageRequest& request, const StageEvent& event);

  const std::map<int64_t, BackendIdentity> identities_;
  mutable std::mutex mu_;
  std::optional<Active> active_;
  UsedRequests used_;  // bounded for counted ids (contract/used_requests.h)
  // A handle names one state at one epoch: cancel retires that handle, and the backend may
  // later bind the same state to the next epoch with a new handle.
  std::map<StateKey, StateHandle> live_;
  std::set<HandleKey> retired_;
  std::map<HandleKey, std::string> pending_;  // -> release operation id
  int64_t release_counter_ = 0;
};

}  // namespace omni_edge::contract
