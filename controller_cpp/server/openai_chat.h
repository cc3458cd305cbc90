// OpenAI Chat Completions on the wire: the request body a client sends (the `openai` package's
// fields), read strictly into what the controller runs, and the response objects it reads back
// (a completion, stream chunks, usage, error bodies). No transport here: the server feeds bodies
// in and writes these out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "server/openai_common.h"

namespace omni_edge::server {

struct ChatLimits {
  size_t max_messages = 256;
  size_t max_media = 8;                   // images and audio clips in one request
  size_t max_media_bytes = size_t(20) << 20;  // each, decoded
};

struct Message {
  std::string role;  // system | user | assistant ("developer" is read as system)
  std::string text;  // text parts joined by newlines
};

struct ChatMedia {
  std::string kind;   // "image" | "audio"
  std::string bytes;  // the file (PNG/JPEG/...; WAV)
};

struct ChatCompletionRequest {
  std::string model;
  std::vector<Message> messages;
  std::vector<ChatMedia> media;  // the last user turn's, in order (they precede its text)
  int64_t max_tokens = 0;        // 0: the plan's
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;  // an extension (vLLM's extra_body; -1 there: none)
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;    // stream_options.include_usage
  bool audio_out = false;        // modalities has "audio"
  std::string audio_format = "wav";  // wav | pcm16
  std::string voice;
  bool ignore_eos = false;       // an extension (vLLM's extra_body): always generate max_tokens
  int64_t max_audio_frames = 0;  // an extension: the talker's frames at most (12.5 per second); 0: the plan's
};

// A body that is not a request this server runs is refused with reason "invalid_request" and
// "<param>: <what>" (the param as OpenAI names it: messages[1].content[0].image_url.url).
Result<ChatCompletionRequest> ParseChatCompletion(const std::string& body, const ChatLimits& limits = {});

// What the response objects share.
struct CompletionHead {
  std::string id;  // chatcmpl-...
  int64_t created = 0;
  std::string model;
};

// A finished stream's reason as OpenAI names it: "length" (a token or frame limit) or "stop".
std::string FinishReason(const std::string& controller_reason);
Json Usage(int64_t prompt_tokens, int64_t completion_tokens);
// One chunk of a stream (object chat.completion.chunk): a delta, or the final one with its reason.
Json Chunk(const CompletionHead& head, const Json& delta, const std::string& finish_reason = "");
// The usage chunk that ends a stream asked for it (empty choices).
Json UsageChunk(const CompletionHead& head, const Json& usage);
// A whole completion (object chat.completion); audio: {"id", "data", "expires_at", "transcript"} or null
// (with audio, content is null: the text is the transcript).
Json Completion(const CompletionHead& head, const std::string& text, const std::string& finish_reason, const Json& usage,
                const Json& audio = nullptr);

}  // namespace omni_edge::server
