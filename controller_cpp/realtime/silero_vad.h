// Silero VAD v6 on a backend: the plan's `voice_activity` component (hashed; refused unless its
// reports passed, as stages are) scoring one 32 ms frame at 16 kHz at a time. The graph reads 64
// samples of the previous frame as context before the 512 new ones and a recurrent state
// [2, 1, 128]; both are carried here from frame to frame, so one detector follows one stream.
#pragma once

#include <memory>

#include "runtime/backend_pool.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "runtime/tensor.h"

namespace omni_edge::realtime {

class SileroVad {
 public:
  static constexpr int64_t kSampleRate = 16000, kFrame = 512, kContext = 64;

  // Verifies the component (its manifest hashes the graph; qualified unless allowed) and loads
  // the graph through `backends` (which records the verified files).
  static Result<std::unique_ptr<SileroVad>> Open(const VoiceActivityPlan& plan, bool require_qualified,
                                                 BackendPool& backends);
  // The speech probability of the next kFrame samples (16 kHz, [-1, 1]).
  Result<float> Score(const float* frame);
  // A new stream: zero state and context.
  void Reset();
  Placement placement() const { return graph_->placement(); }

 private:
  SileroVad() = default;
  std::unique_ptr<Graph> graph_;
  HostTensor input_, state_, rate_, probability_, next_state_;
};

}  // namespace omni_edge::realtime
