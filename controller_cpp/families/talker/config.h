// The "talker" section of a speech stage: a decoder emitting codebook 0 of each audio frame
// from text (or, in an omni plan, from a thinker's hidden states), and the code predictor
// filling codebooks 1..code_groups-1 of the frame; its prompt, special ids, sampling and the
// graph roles it needs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "decoding/decoder_config.h"
#include "decoding/sampler.h"
#include "runtime/plan.h"

namespace omni_edge::talker {

// One row of the talker's prompt: a text token beside a codebook-0 id (kTextOnly: none).
struct PromptRow {
  static constexpr int64_t kTextOnly = -1;
  int64_t text_id = 0, codec_id = kTextOnly;
};

// The talker's prefix around the text: `head` rows, each text token beside `text_codec`, then
// `tail` rows; every frame after reads `frame_text` (a Qwen3-TTS release's role, think-tag,
// language and speaker rows are head rows). With `stream_text` only the first text token is in
// the prefix; frame t's input reads text token t + 1, then `text_end` (if >= 0), then frame_text.
struct TalkerPrompt {
  std::vector<PromptRow> head, tail;
  int64_t text_codec = 0, frame_text = 0;
  bool stream_text = false;
  int64_t text_end = -1;
};

struct TalkerConfig final : StageConfig {
  std::string tokenizer;  // absolute path of tokenizer.json (the text side)
  int64_t text_pad_id = 0;
  int64_t code_groups = 0, codebook_size = 0;
  int64_t codec_pad = 0, codec_bos = 0, codec_eos = 0;  // special ids of codebook 0
  int64_t max_frames = 1500;
  int64_t min_frames = 0;  // frames before end of speech may be said
  TalkerPrompt prompt;     // default: no head, text beside the codec pad, [text pad + codec bos]
  decoding::SamplingParams sampling;
  decoding::DecoderConfig decoder;    // the talker body
  decoding::DecoderConfig predictor;  // the code predictor body: one slot per code group (its width may differ)

  std::vector<std::string> files() const override { return {tokenizer}; }
};

Result<std::shared_ptr<const TalkerConfig>> ParseTalker(const Json& j, const StagePlan& stage, const std::string& where);

}  // namespace omni_edge::talker
