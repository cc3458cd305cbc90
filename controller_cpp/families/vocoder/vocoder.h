// The vocoder stage: codes -> PCM through fixed-size window graphs
// (codes [1, G, W] -> wav [1, 1, W x samples_per_frame - tail]), cut as StreamShape says, each
// chunk in the smallest window it fits. Causal, so neither right padding nor the window size
// changes the samples a chunk emits.
#pragma once

#include <memory>
#include <vector>

#include "families/vocoder/chunk_schedule.h"
#include "families/vocoder/config.h"
#include "families/vocoder/stream_shape.h"
#include "runtime/backend_pool.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

namespace omni_edge::vocoder {

class Vocoder {
 public:
  static Result<std::unique_ptr<Vocoder>> Create(const StagePlan& stage, BackendPool& backends);

  // The samples frames [start, end) make final; `codes` holds every frame so far, G codes per
  // frame. `final`: no frame follows, the tail is flushed (start == end is a flush alone).
  Result<std::vector<float>> Decode(const std::vector<int32_t>& codes, int64_t start, int64_t end, bool final);

  // Runs the smallest and the largest window once on silence and keeps their times: the first
  // estimates (an adaptive schedule needs them before the first request).
  Status WarmUp();
  // Predicted milliseconds for frames [start, start + n): the measured cost of the window it
  // needs, interpolated in frames between the smallest and the largest until it has run.
  double CostMs(int64_t start, int64_t n) const;

  const VocoderConfig& config() const { return config_; }
  const StreamShape& shape() const { return shape_; }
  std::vector<Placement> placements() const;
  double backend_seconds() const { return graph_seconds_; }

 private:
  explicit Vocoder(const VocoderConfig& c) : config_(c), shape_(c) {}

  VocoderConfig config_;
  StreamShape shape_;
  struct Window {
    int64_t frames = 0;
    std::unique_ptr<Graph> graph;
    HostTensor codes, wav;
    Ewma cost_ms;
  };
  // The smallest window with room for `n` frames and the one that releases the tail.
  size_t Pick(int64_t n) const;
  Status Run(Window& w);

  std::vector<Window> windows_;  // ascending
  double graph_seconds_ = 0;
};

}  // namespace omni_edge::vocoder
