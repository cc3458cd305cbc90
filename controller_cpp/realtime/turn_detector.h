// Server-side turn detection over voice activity probabilities, as OpenAI Realtime's
// `server_vad` is configured and vLLM-Omni 0.30 runs it (engine/duplex/vad.py): a turn starts
// after `min_speech_duration_ms` of frames at or above `threshold` (reported `prefix_padding_ms`
// earlier, never before the last reset), and ends only on a frame below max(threshold - 0.15,
// 0.01) once `silence_duration_ms` of silence has accumulated; frames between the two thresholds
// keep a started silence running but cannot close the turn, and confirmed speech cancels it.
#pragma once

#include <cstdint>

#include "base/json_fields.h"
#include "base/status.h"

namespace omni_edge::realtime {

struct TurnDetectionConfig {
  double threshold = 0.5;
  int64_t prefix_padding_ms = 300;
  int64_t silence_duration_ms = 500;
  int64_t min_speech_duration_ms = 96;
  bool create_response = true;     // a detected end of turn commits and asks for a response
  bool interrupt_response = true;  // speech during a response cancels it (barge-in)

  bool operator==(const TurnDetectionConfig& o) const {
    return threshold == o.threshold && prefix_padding_ms == o.prefix_padding_ms &&
           silence_duration_ms == o.silence_duration_ms && min_speech_duration_ms == o.min_speech_duration_ms &&
           create_response == o.create_response && interrupt_response == o.interrupt_response;
  }
  bool operator!=(const TurnDetectionConfig& o) const { return !(*this == o); }
};

// {"type": "server_vad", ...}: unknown fields and out-of-range values are refused by name (a
// misspelled knob that silently does nothing would still look applied).
Result<TurnDetectionConfig> TurnDetectionFromJson(const Json& j, const std::string& where);
Json ToJson(const TurnDetectionConfig& c);

class TurnDetector {
 public:
  struct Change {
    bool started = false, stopped = false;
    int64_t audio_start_ms = 0;  // started: where the turn's audio begins (prefix padding included)
    int64_t audio_end_ms = 0;    // stopped: the end of the audio that closed it (its silence included)
    int64_t speech_end_ms = 0;   // stopped: where that silence began
  };

  TurnDetector(TurnDetectionConfig config, int64_t frame_samples, int64_t sample_rate);
  // One frame's probability, in stream order.
  Change Push(double probability);
  // Forgets a turn in progress; the clock goes on (positions stay the session's).
  void Reset();
  // New settings; a turn in progress is forgotten, the clock goes on.
  void Configure(const TurnDetectionConfig& config) {
    config_ = config;
    Reset();
  }

  bool active() const { return active_; }
  int64_t processed_ms() const { return Ms(processed_); }
  const TurnDetectionConfig& config() const { return config_; }

 private:
  int64_t Ms(int64_t samples) const;

  TurnDetectionConfig config_;
  int64_t frame_ = 512, rate_ = 16000;
  bool active_ = false;
  int64_t candidate_ = 0, candidate_start_ = 0, silence_ = 0, silence_start_ = 0, processed_ = 0, stream_start_ = 0;
};

}  // namespace omni_edge::realtime
