// When a streaming vocoder cuts the next chunk. A fixed schedule waits for `chunk` frames (the
// first chunk `first_chunk`). An adaptive one starts with `first_chunk` so that sound starts
// at once, then lets chunks grow (each at most `growth` times the last, at most `chunk`) for
// as long as the audio already sent covers the wait: with one more frame the chunk would be
// ready at now + (the talker's frame time, unless a frame is already queued) + (the cost of
// the window it would need), and it is cut now if that, plus the margin, reaches the moment
// the listener's queued audio runs out. Big chunks amortize the left context each window
// recomputes; small ones early keep the first seconds from stalling.
//
// The schedule only decides; the worker measures (frame times from the talker's emission
// stamps, window costs from the vocoder's own runs) and keeps the listener's playback clock.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "families/vocoder/config.h"

namespace omni_edge::vocoder {

struct ChunkMoment {
  int64_t start = 0;         // the first frame not yet decoded
  int64_t pending = 0;       // frames received from `start` on
  bool frame_queued = false; // another frame is already waiting at the input
  bool ended = false;        // no frame follows
  double now_ms = 0;
  double runs_out_ms = 0;    // when the audio emitted so far has played (infinity: not playing yet)
  double frame_ms = 0;       // the talker's time per frame, as measured
};

class ChunkSchedule {
 public:
  // Predicted milliseconds to decode frames [start, start + n) (the window it needs).
  using CostMs = std::function<double(int64_t start, int64_t n)>;

  ChunkSchedule(VocoderConfig config, CostMs cost) : c_(std::move(config)), cost_(std::move(cost)) {}

  void Begin() { last_chunk_ = 0; }
  // The most frames the chunk starting at `start` may take.
  int64_t Limit(int64_t start) const;
  // Whether to decode the pending frames now (never more than Limit: the caller cuts there).
  bool CutNow(const ChunkMoment& m) const;
  void Cut(int64_t frames) { last_chunk_ = frames; }

  bool adaptive() const { return c_.schedule.adaptive; }

 private:
  VocoderConfig c_;  // its own copy: its lifetime is not tied to the caller's
  CostMs cost_;
  int64_t last_chunk_ = 0;
};

// A running estimate (exponentially weighted): starts at the first sample.
class Ewma {
 public:
  explicit Ewma(double weight = 0.3) : weight_(weight) {}
  void Add(double x) { value_ = seen_ ? value_ + weight_ * (x - value_) : x, seen_ = true; }
  bool seen() const { return seen_; }
  double value() const { return value_; }

 private:
  double weight_;
  double value_ = 0;
  bool seen_ = false;
};

}  // namespace omni_edge::vocoder
