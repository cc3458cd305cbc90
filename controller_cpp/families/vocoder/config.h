// The "vocoder" section of a streaming vocoder stage (llm_generation, reading a talker's codes):
// each chunk of `chunk` frames (the first `first_chunk`) is decoded after up to `left_context`
// frames of context, in the smallest window graph it fits. The largest window is left_context +
// max(first_chunk, chunk) + 1; smaller ones serve the first chunks (a one-frame first chunk in
// a two-frame window is the low first-PCM latency).
//
// `schedule` says when a chunk is cut. "fixed": every chunk has `chunk` frames (the first
// `first_chunk`). "adaptive" (ChunkSchedule): `first_chunk`, then each chunk at most `growth`
// times the previous one and at most `chunk`, cut early when waiting for one more frame would
// let the audio already sent run out (from the measured talker frame time and window costs).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "runtime/plan.h"

namespace omni_edge::vocoder {

struct ChunkPolicy {
  bool adaptive = false;  // absent from older plans: fixed
  double growth = 2.0;    // the next chunk's most frames, relative to the last one
  double margin_ms = 40;  // kept between a chunk's predicted readiness and the audio running out
};

struct VocoderConfig final : StageConfig {
  int64_t code_groups = 0, samples_per_frame = 0, sample_rate = 0, tail_samples = 0;
  int64_t first_chunk = 1, chunk = 25, left_context = 72;
  std::vector<int64_t> windows = {2, 98};  // ascending, frames per window graph
  std::string pcm_dtype = "float32";       // float32 | int16: what pcm events carry
  ChunkPolicy schedule;
};

Result<std::shared_ptr<const VocoderConfig>> ParseVocoder(const Json& j, const StagePlan& stage, const std::string& where);

}  // namespace omni_edge::vocoder
