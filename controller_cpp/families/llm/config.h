// The "llm" section of a text-LLM stage (llm_ar): tokenizer, chat format, stop tokens, the
// decoder's geometry and KV cache, default sampling and length; and the graph roles it needs
// (embed chunk/step, prefill and decode per cache size, lm_head step); for a multimodal thinker,
// where its placeholder ids are (it reads its encoder stages' rows).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "decoding/decoder_config.h"
#include "decoding/sampler.h"
#include "runtime/plan.h"
#include "text/chat.h"

namespace omni_edge::llm {

struct LlmConfig final : StageConfig {
  std::string tokenizer;  // absolute path of tokenizer.json
  std::string chat_format;  // chatml | llama3 | none
  std::optional<text::ChatFormat> chat;  // chat_format's markers (none: --chat is refused)
  std::vector<std::string> stop_tokens;
  decoding::DecoderConfig decoder;
  decoding::SamplingParams sampling;
  int64_t max_new_tokens = 256;
  // At a stop token, hand the next stage the state after the last token too (payload
  // "closing_hidden" on an event without a token): a talker that pairs each token with the
  // state after it (MiniCPM-o's) needs it for the reply's last token.
  bool closing_state = false;

  // A multimodal thinker: the config.json its placeholder ids come from (absolute), its input
  // sources the encoder stages whose rows replace them. Empty: text only.
  std::string media_config;
  std::string media_style = "qwen2.5-omni";  // or minicpmo: its placeholders and plain positions
  std::vector<std::string> files() const override {
    return media_config.empty() ? std::vector<std::string>{tokenizer} : std::vector<std::string>{tokenizer, media_config};
  }
};

Result<std::shared_ptr<const LlmConfig>> ParseLlm(const Json& j, const StagePlan& stage, const std::string& where);

}  // namespace omni_edge::llm
