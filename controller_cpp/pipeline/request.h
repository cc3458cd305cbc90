// One request to a session, whatever its plan: what the entry stages read (a prompt, a text to
// speak, exact token ids) and how each stream is generated. One JSON codec serves the CLI, the
// C ABI and the Python binding; RequestSchema() lists its fields and defaults so that the
// Python mirror (omni_edge.runtime.request) is checked against it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "decoding/sampler.h"
#include "text/chat.h"

namespace omni_edge::pipeline {

// prebuffer_ms: -1 asks for the plan's (0 when the vocoder's chunk schedule is adaptive, playback
// from the first PCM; kFixedSchedulePrebufferMs with a fixed one, whose second chunk would stall).
inline constexpr double kDefaultPrebufferMs = -1;
inline constexpr double kFixedSchedulePrebufferMs = 200;

// An image or audio item of a multimodal prompt: a file to read, or its bytes.
struct MediaInput {
  std::string kind;  // "image" | "audio"
  std::string path;
  std::string data;  // when set, `path` is only its name in reports
};

// What a policy (vision-language-action) plan acts on: camera images by name, the robot state,
// when it was captured, and optionally the flow's initial noise (to compare with a reference).
struct CameraImage {
  std::string camera;
  MediaInput image;  // kind "image"
};

struct Observation {
  double timestamp_ms = -1;  // capture time, milliseconds since the Unix epoch (system clock); -1: unknown
  std::vector<CameraImage> images;
  std::vector<float> state;
  std::vector<float> noise;          // [chunk, action_dim] row-major; empty: drawn from noise_seed
  std::vector<int64_t> noise_shape;  // its shape as given
  uint64_t noise_seed = 0;
  bool reset_history = false;  // a policy with a frame history starts it again (a new episode)
};

struct Request {
  // The input of the entry stage: text (raw, or the user message when `chat`), or exact ids.
  std::string prompt;
  bool chat = false;
  std::string system_prompt;  // chat only
  std::vector<int32_t> prompt_ids;
  // Or a whole conversation in the plan's chat format, ending with a user's turn (a stateless
  // server's request): instead of prompt, system_prompt and prompt_ids; chat is implied.
  std::vector<text::ChatMessage> messages;  // system (first only) | user | assistant
  // Images and audio before the text, in this order (a multimodal plan's encoders read them).
  std::vector<MediaInput> media;
  bool continue_conversation = false;  // append to the resident context (multi-turn)
  // The text stream (an llm stage).
  int64_t max_new_tokens = 0;  // 0: the plan's
  std::optional<decoding::SamplingParams> sampling;  // none: the plan's
  std::vector<std::string> stop_strings;
  bool ignore_stop_tokens = false;  // generate exactly max_new_tokens (reference checks)
  // The audio stream (talker -> vocoder).
  int64_t max_frames = 0;  // 0: the plan's
  std::optional<decoding::SamplingParams> speech_sampling;  // none: the plan's
  // Audio the playback clock queues before it starts; -1: the plan's (see kDefaultPrebufferMs).
  double prebuffer_ms = kDefaultPrebufferMs;
  // A policy plan's input (the prompt above is its task text) and the application's deadline:
  // the action is due `deadline_ms` after the observation's capture (0: none).
  std::optional<Observation> observation;
  double deadline_ms = 0;
};

// The fields a request may carry, with their defaults: {"prompt": "", "chat": false, ...}.
Json RequestSchema();
Result<Request> RequestFromJson(const Json& j);
Json ToJson(const Request& r);

Result<decoding::SamplingParams> SamplingFromJson(const Json& j, const std::string& where);
Json ToJson(const decoding::SamplingParams& p);

// Refuses what no plan could run (negative counts, an out-of-range prebuffer, invalid sampling).
Status Validate(const Request& r);

}  // namespace omni_edge::pipeline
