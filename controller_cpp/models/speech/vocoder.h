// The vocoder stage: codes -> PCM through one fixed-size window graph
// (codes [1, G, window] -> wav [1, 1, window x samples_per_frame - tail]), cut as StreamShape
// says. Causal, so right padding never changes the samples a chunk emits.
#pragma once

#include <memory>
#include <vector>

#include "models/speech/stream_shape.h"
#include "runtime/backend_pool.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

namespace omni_edge::speech {

class Vocoder {
 public:
  static Result<std::unique_ptr<Vocoder>> Create(const StagePlan& stage, BackendPool& backends);

  // The samples frames [start, end) make final; `codes` holds every frame so far, G codes per
  // frame. `final`: no frame follows, the tail is flushed (start == end is a flush alone).
  Result<std::vector<float>> Decode(const std::vector<int32_t>& codes, int64_t start, int64_t end, bool final);

  const VocoderConfig& config() const { return config_; }
  const StreamShape& shape() const { return shape_; }
  std::vector<Placement> placements() const { return {graph_->placement()}; }
  double backend_seconds() const { return graph_seconds_; }

 private:
  explicit Vocoder(const VocoderConfig& c) : config_(c), shape_(c) {}

  VocoderConfig config_;
  StreamShape shape_;
  std::unique_ptr<Graph> graph_;
  HostTensor window_, wav_;
  double graph_seconds_ = 0;
};

}  // namespace omni_edge::speech
