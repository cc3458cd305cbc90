// A realtime session's settings as OpenAI Realtime's `session` object carries them
// (session.update), in the GA nesting (session.audio.input.format, ...) or the beta's flat keys
// (input_audio_format, turn_detection, modalities), and the object session.created/updated send.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "realtime/turn_detector.h"

namespace omni_edge::realtime {

struct RealtimeConfig {
  std::string instructions;            // the system prompt of the conversation's first turn
  std::string voice = "default";       // the plan's voice (one per export)
  bool audio_out = true;               // output_modalities ["audio"] (a transcript comes with it) or ["text"]
  int64_t input_rate = 24000;          // audio/pcm, 16-bit little-endian mono
  int64_t output_rate = 24000;
  std::optional<TurnDetectionConfig> turn_detection = TurnDetectionConfig{};  // nullopt: the client commits
  int64_t max_output_tokens = 0;       // 0 ("inf"): the plan's
};

// Applies a `session` object onto `config`; refuses what is not served, naming the field (an
// unknown key, a format other than audio/pcm, a rate out of range, another voice, tools).
Status ApplySession(const Json& session, RealtimeConfig* config);
// The GA `session` object: {"type": "realtime", "object": "realtime.session", "id", "model",
// "instructions", "output_modalities", "audio": {"input": {...}, "output": {...}}, "max_output_tokens"}.
Json SessionObject(const RealtimeConfig& config, const std::string& id, const std::string& model);

}  // namespace omni_edge::realtime
