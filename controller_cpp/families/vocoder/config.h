// The "vocoder" section of a streaming vocoder stage (llm_generation, reading a talker's codes):
// each chunk of `chunk` frames (the first `first_chunk`) is decoded after up to `left_context`
// frames of context, in the smallest window graph it fits. The largest window is left_context +
// max(first_chunk, chunk) + 1; smaller ones serve the first chunks (a one-frame first chunk in
// a two-frame window is the low first-PCM latency).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "runtime/plan.h"

namespace omni_edge::vocoder {

struct VocoderConfig final : StageConfig {
  int64_t code_groups = 0, samples_per_frame = 0, sample_rate = 0, tail_samples = 0;
  int64_t first_chunk = 1, chunk = 25, left_context = 72;
  std::vector<int64_t> windows = {2, 98};  // ascending, frames per window graph
  std::string pcm_dtype = "float32";       // float32 | int16: what pcm events carry
};

Result<std::shared_ptr<const VocoderConfig>> ParseVocoder(const Json& j, const StagePlan& stage, const std::string& where);

}  // namespace omni_edge::vocoder
