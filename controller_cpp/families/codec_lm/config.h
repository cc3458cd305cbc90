// The "codec_lm" section of a talker stage that speaks a thinker's whole reply at once (MiniCPM-o
// 4.5's, as vLLM-Omni's llm2tts bridge feeds it): each spoken token's id and the thinker's hidden
// state at it become one prefill row (graph "condition"), then the rows of `text_eos` and
// `audio_bos` (graph "text_embed"); the decoder (its "embed", "prefill", "decode", "lm_head"
// graphs) then says one code a step, fed back by id, until `end_code`, which is masked for the
// first `min_codes`. Sampling runs in vLLM-Omni's order (its sampler: penalty, temperature,
// top-k, top-p); the repetition penalty counts each code's uses among the last
// `repetition_window` codes (penalty^count, the release's logits processor's rule). The thinker
// stage must hand on its closing state (llm.closing_state), or every reply loses its last token.
#pragma once

#include <memory>
#include <string>

#include "base/json_fields.h"
#include "decoding/decoder_config.h"
#include "decoding/sampler.h"
#include "runtime/plan.h"

namespace omni_edge::codec_lm {

struct CodecLmConfig final : StageConfig {
  decoding::DecoderConfig decoder;  // vocab_size: the codes, end_code the last
  int64_t end_code = 0, min_codes = 0, max_codes = 4096;
  int64_t text_eos = 0, audio_bos = 0;
  int64_t text_vocab = 0;  // rows of the condition and text_embed graphs' table (thinker ids below it)
  int64_t span_start = -1;  // a thinker id after whose last appearance the spoken span begins (-1: its reply)
  int64_t thinker_hidden = 0;  // width of the thinker's hidden states
  decoding::SamplingParams sampling;
  int64_t repetition_window = 16;
};

Result<std::shared_ptr<const CodecLmConfig>> ParseCodecLm(const Json& j, const StagePlan& stage, const std::string& where);

}  // namespace omni_edge::codec_lm
