#include "server/openai_speech.h"

#include "base/base64.h"
#include "server/openai_common.h"

namespace omni_edge::server {
namespace {

Result<SpeechRequest> Parse(const std::string& body, size_t max_input_chars) {
  auto json = ParseBody(body);
  if (!json.ok()) return json.status();
  FieldReader f(*json, kRequestRoot);
  SpeechRequest r;
  r.model = f.String("model");
  r.input = f.String("input", true, false);
  auto voice = ReadVoice(f.Raw("voice"), "voice");
  r.response_format = f.String("response_format", false, true, "wav");
  const double speed = f.Number("speed", false, 1.0);
  const std::string instructions = f.String("instructions", false, false);
  const bool stream = f.Bool("stream", false);
  r.stream_format = f.String("stream_format", false, true, stream ? "sse" : "");
  r.max_frames = f.Int("max_new_tokens", false, 1, 0);
  OE_RETURN_IF_ERROR(f.Done());
  if (!voice.ok()) return voice.status();
  r.voice = *voice;
  if (r.input.empty()) return Refuse("input", "nothing to speak");
  if (r.input.size() > max_input_chars) return Refuse("input", "at most " + std::to_string(max_input_chars) + " bytes");
  OE_RETURN_IF_ERROR(NoNul(r.input, "input"));
  if (r.response_format != "wav" && r.response_format != "pcm") {
    return Refuse("response_format", "must be wav or pcm (this server encodes no mp3, opus, aac or flac), got '" +
                  r.response_format + "'");
  }
  if (speed != 1.0) return Refuse("speed", "only 1.0: the plan speaks at its own rate");
  if (!instructions.empty()) return Refuse("instructions", "this plan takes no speaking instructions");
  if (r.stream_format != "" && r.stream_format != "audio" && r.stream_format != "sse") {
    return Refuse("stream_format", "must be audio or sse, got '" + r.stream_format + "'");
  }
  if (r.max_frames > (int64_t(1) << 31) - 1) return Refuse("max_new_tokens", "at most 2^31 - 1");
  return r;
}

}  // namespace

Result<SpeechRequest> ParseSpeech(const std::string& body, size_t max_input_chars) {
  auto r = Parse(body, max_input_chars);
  if (!r.ok()) return AsInvalidRequest(r.status());
  return r;
}

const char* SpeechMediaType(const std::string& response_format) {
  return response_format == "pcm" ? "audio/pcm" : "audio/wav";
}

Json SpeechDelta(const std::string& bytes, const std::string& response_format) {
  return {{"type", "speech.audio.delta"}, {"audio", Base64Encode(bytes)}, {"response_format", response_format}};
}

Json SpeechDone(int64_t input_tokens, int64_t frames) {
  return {{"type", "speech.audio.done"},
          {"usage", {{"input_tokens", input_tokens}, {"output_tokens", frames}, {"total_tokens", input_tokens + frames}}}};
}

Json SpeechError(const std::string& message, const std::string& type, const std::string& code) {
  return {{"type", "speech.audio.error"}, {"error", ErrorBody(message, type, "", code)["error"]}};
}

}  // namespace omni_edge::server
