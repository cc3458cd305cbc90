// scipy.signal.resample_poly as a stream: audio arrives in pieces (a microphone's, a realtime
// client's appends) and each output sample is given as soon as every input it reads has arrived.
// The outputs of a stream, pushed in any pieces and finished, equal those of the whole signal
// resampled at once, bit for bit (the same taps, summed in the same order).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace omni_edge::media {

inline constexpr int64_t kMaxSampleRate = 384000;

class StreamResampler {
 public:
  // Refuses rates outside [1, kMaxSampleRate].
  static Result<StreamResampler> Create(int64_t rate, int64_t target);

  // Appends input; returns the outputs that became final.
  std::vector<float> Push(const float* x, size_t n);
  // The end of the input: the outputs left (reading no input past the end).
  std::vector<float> Finish();
  // Forgets the stream (a new one starts at sample 0).
  void Reset();

  int64_t rate() const { return rate_; }
  int64_t target() const { return target_; }

 private:
  StreamResampler() = default;
  // Output `o`'s input range [lo, hi] (hi may pass the input's end), and its value.
  void Range(int64_t o, int64_t* lo, int64_t* hi) const;
  float Output(int64_t o, int64_t last_input) const;
  void Trim();

  int64_t rate_ = 0, target_ = 0, up_ = 1, down_ = 1, pre_ = 0, skip_ = 0;
  std::vector<double> taps_;
  std::vector<float> held_;  // inputs [base_, base_ + held_.size())
  int64_t base_ = 0, inputs_ = 0, outputs_ = 0;
};

}  // namespace omni_edge::media
