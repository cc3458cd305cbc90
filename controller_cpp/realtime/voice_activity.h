// Voice activity of one input stream: audio at the client's rate, resampled to 16 kHz as it
// arrives (media::StreamResampler), cut into 32 ms frames, scored by Silero VAD and turned into
// turn starts and ends (TurnDetector). Positions are milliseconds of the stream's own audio.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "media/stream_resampler.h"
#include "realtime/silero_vad.h"
#include "realtime/turn_detector.h"

namespace omni_edge::realtime {

class VoiceActivity {
 public:
  VoiceActivity(std::unique_ptr<SileroVad> vad, media::StreamResampler resampler, TurnDetectionConfig config);

  // Audio in [-1, 1] at the resampler's input rate: the turn changes it completed, in order.
  Result<std::vector<TurnDetector::Change>> Push(const float* samples, size_t n);
  // New turn detection settings (a turn in progress is forgotten).
  void Configure(const TurnDetectionConfig& config) { detector_.Configure(config); }
  // A new stream at another input rate: the clock starts again at 0.
  void Restart(media::StreamResampler resampler) {
    resampler_ = std::move(resampler);
    pending_.clear();
    detector_ = TurnDetector(detector_.config(), SileroVad::kFrame, SileroVad::kSampleRate);
    vad_->Reset();
  }
  // Forgets a turn in progress (after a commit or a clear); the clock goes on.
  void ResetTurn() { detector_.Reset(); }

  bool speaking() const { return detector_.active(); }
  int64_t processed_ms() const { return detector_.processed_ms(); }
  const TurnDetectionConfig& config() const { return detector_.config(); }
  // Every frame's probability so far, when recording (omni-edge-run vad --frames).
  void Record(bool on) { record_ = on; }
  const std::vector<float>& probabilities() const { return probabilities_; }
  Placement placement() const { return vad_->placement(); }

 private:
  std::unique_ptr<SileroVad> vad_;
  media::StreamResampler resampler_;
  TurnDetector detector_;
  std::vector<float> pending_;  // 16 kHz samples short of a whole frame
  bool record_ = false;
  std::vector<float> probabilities_;
};

}  // namespace omni_edge::realtime
