// The "llm" section of a text-LLM stage (llm_ar): tokenizer, chat format, stop tokens, the
// decoder's geometry and KV cache, default sampling and length; and the graph roles it needs
// (embed chunk/step, prefill and decode per cache size, lm_head step).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "decoding/decoder_config.h"
#include "decoding/sampler.h"
#include "runtime/plan.h"

namespace omni_edge::llm {

struct LlmConfig final : StageConfig {
  std::string tokenizer;  // absolute path of tokenizer.json
  std::string chat_format;  // chatml | none
  std::vector<std::string> stop_tokens;
  decoding::DecoderConfig decoder;
  decoding::SamplingParams sampling;
  int64_t max_new_tokens = 256;

  std::vector<std::string> files() const override { return {tokenizer}; }
};

Result<std::shared_ptr<const LlmConfig>> ParseLlm(const Json& j, const StagePlan& stage, const std::string& where);

}  // namespace omni_edge::llm
