#include "realtime/voice_activity.h"

namespace omni_edge::realtime {

VoiceActivity::VoiceActivity(std::unique_ptr<SileroVad> vad, media::StreamResampler resampler,
                             TurnDetectionConfig config)
    : vad_(std::move(vad)), resampler_(std::move(resampler)),
      detector_(config, SileroVad::kFrame, SileroVad::kSampleRate) {}

Result<std::vector<TurnDetector::Change>> VoiceActivity::Push(const float* samples, size_t n) {
  const std::vector<float> resampled = resampler_.Push(samples, n);
  pending_.insert(pending_.end(), resampled.begin(), resampled.end());
  std::vector<TurnDetector::Change> changes;
  size_t at = 0;
  for (; pending_.size() - at >= size_t(SileroVad::kFrame); at += SileroVad::kFrame) {
    OE_ASSIGN_OR_RETURN(float p, vad_->Score(pending_.data() + at));
    if (record_) probabilities_.push_back(p);
    const TurnDetector::Change c = detector_.Push(p);
    if (c.started || c.stopped) changes.push_back(c);
  }
  pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(at));
  return changes;
}

}  // namespace omni_edge::realtime
