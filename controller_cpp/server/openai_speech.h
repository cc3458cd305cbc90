// OpenAI's Audio Speech on the wire (POST /v1/audio/speech, the `openai` package's
// audio.speech.create): the body read strictly, and the server-sent events of a speech stream as
// vLLM-Omni sends them (speech.audio.delta / speech.audio.done / speech.audio.error).
#pragma once

#include <cstdint>
#include <string>

#include "base/json_fields.h"
#include "base/status.h"

namespace omni_edge::server {

struct SpeechRequest {
  std::string model;
  std::string input;                  // the text to speak
  std::string voice;                  // "" when not given
  std::string response_format = "wav";  // wav | pcm (16-bit little-endian mono at the plan's rate)
  std::string stream_format;          // "": the whole file at the end; "audio": the bytes as made; "sse": events
  int64_t max_frames = 0;             // an extension (vLLM-Omni's max_new_tokens): the talker's frames; 0: the plan's
};

// A body that is not a request this server runs is refused with reason "invalid_request" and
// "<param>: <what>".
Result<SpeechRequest> ParseSpeech(const std::string& body, size_t max_input_chars = 4096);

// The media type of a response format: audio/wav, audio/pcm.
const char* SpeechMediaType(const std::string& response_format);
// {"type": "speech.audio.delta", "audio": base64, "response_format"}.
Json SpeechDelta(const std::string& bytes, const std::string& response_format);
// {"type": "speech.audio.done", "usage": {"input_tokens", "output_tokens", "total_tokens"}}: output
// tokens are the talker's frames.
Json SpeechDone(int64_t input_tokens, int64_t frames);
// {"type": "speech.audio.error", "error": {"message", "type", "param", "code"}}.
Json SpeechError(const std::string& message, const std::string& type, const std::string& code);

}  // namespace omni_edge::server
