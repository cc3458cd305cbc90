#include "realtime/turn_detector.h"

#include <algorithm>
#include <cmath>

namespace omni_edge::realtime {
namespace {
constexpr double kNegativeGap = 0.15;  // the end threshold sits this far below the start threshold
constexpr double kMinThreshold = 0.15;
}  // namespace

Result<TurnDetectionConfig> TurnDetectionFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  TurnDetectionConfig c;
  const std::string type = r.String("type", false, false, "server_vad");
  c.threshold = r.Number("threshold", false, c.threshold);
  c.prefix_padding_ms = r.Int("prefix_padding_ms", false, 0, c.prefix_padding_ms);
  c.silence_duration_ms = r.Int("silence_duration_ms", false, 0, c.silence_duration_ms);
  c.min_speech_duration_ms = r.Int("min_speech_duration_ms", false, 0, c.min_speech_duration_ms);
  c.create_response = r.Bool("create_response", false, c.create_response);
  c.interrupt_response = r.Bool("interrupt_response", false, c.interrupt_response);
  OE_RETURN_IF_ERROR(r.Done());
  if (type != "server_vad") return Status::Error("invalid_field", where + ".type: only \"server_vad\" is served");
  if (!(c.threshold > kMinThreshold && c.threshold <= 1.0)) {
    return Status::Error("invalid_field", where + ".threshold: must be above 0.15 and at most 1");
  }
  constexpr int64_t kMaxMs = 60000;
  if (c.prefix_padding_ms > kMaxMs || c.silence_duration_ms > kMaxMs || c.min_speech_duration_ms > kMaxMs) {
    return Status::Error("invalid_field", where + ": durations are at most 60000 ms");
  }
  return c;
}

Json ToJson(const TurnDetectionConfig& c) {
  return {{"type", "server_vad"}, {"threshold", c.threshold}, {"prefix_padding_ms", c.prefix_padding_ms},
          {"silence_duration_ms", c.silence_duration_ms}, {"min_speech_duration_ms", c.min_speech_duration_ms},
          {"create_response", c.create_response}, {"interrupt_response", c.interrupt_response}};
}

TurnDetector::TurnDetector(TurnDetectionConfig config, int64_t frame_samples, int64_t sample_rate)
    : config_(config), frame_(frame_samples), rate_(sample_rate) {}

int64_t TurnDetector::Ms(int64_t samples) const { return int64_t(std::llround(double(samples) * 1000.0 / double(rate_))); }

TurnDetector::Change TurnDetector::Push(double p) {
  Change change;
  const int64_t frame_start = processed_;
  processed_ += frame_;
  const int64_t min_speech = std::max<int64_t>(1, std::llround(double(config_.min_speech_duration_ms) * double(rate_) / 1000));
  const int64_t min_silence = std::max<int64_t>(1, std::llround(double(config_.silence_duration_ms) * double(rate_) / 1000));
  const double negative = std::max(config_.threshold - kNegativeGap, 0.01);
  if (active_) {
    if (p >= config_.threshold) {
      silence_ = 0;
      return change;
    }
    if (p >= negative && silence_ == 0) return change;
    if (silence_ == 0) silence_start_ = frame_start;
    silence_ += frame_;
    if (p >= negative || silence_ < min_silence) return change;
    active_ = false;
    silence_ = 0;
    change.stopped = true;
    change.audio_end_ms = Ms(processed_);
    change.speech_end_ms = Ms(silence_start_);
    return change;
  }
  if (p < config_.threshold) {
    candidate_ = 0;
    return change;
  }
  if (candidate_ == 0) candidate_start_ = frame_start;
  candidate_ += frame_;
  if (candidate_ < min_speech) return change;
  active_ = true;
  candidate_ = silence_ = 0;
  change.started = true;
  change.audio_start_ms = std::max(Ms(stream_start_), std::max<int64_t>(0, Ms(candidate_start_) - config_.prefix_padding_ms));
  return change;
}

void TurnDetector::Reset() {
  active_ = false;
  candidate_ = silence_ = 0;
  stream_start_ = processed_;
}

}  // namespace omni_edge::realtime
