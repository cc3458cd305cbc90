// The talker stage of a speech model: a decoder that turns text into codebook 0 of each audio
// frame, and the code predictor that fills the frame's other codebooks one after another.
// Both decoders are LlmEngines fed hidden states (their bodies are the text LLM's graphs);
// around them run the stage's own graphs:
//   embed            (text ids [1, N], codes [1, N, G]) -> hidden [1, N, H]; code = V (codebook 0)
//                    or codebook size (the others) is an absent (zero) row
//   head             hidden [1, 1, H] -> (normed [1, 1, Hp], codebook-0 logits [1, 1, V]); normed
//                    is the predictor's first input (Hp: the predictor's width)
//   predictor_embed  id [1, 1] -> hidden [1, 1, Hp] over one table (codebook 0, then 1..G-1)
//   predictor_head   hidden [1, 1, Hp] -> logits [1, G-1, codebook size]
// The prefix is the plan's prompt (TalkerPrompt) around the text; each later position is the
// prompt's frame text plus the sum of the previous frame's G embeddings. Codebook 0 never says
// an id past the codebook but end of speech, and that not before min_frames frames; the
// sampler's repetition penalty sees the codebook-0 codes said so far.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "decoding/decoder.h"
#include "decoding/sampler.h"
#include "families/talker/config.h"
#include "runtime/backend_pool.h"
#include "runtime/graph.h"
#include "runtime/plan.h"

namespace omni_edge::talker {

using Frame = std::vector<int32_t>;  // one code per code group

class Talker {
 public:
  static Result<std::unique_ptr<Talker>> Create(const StagePlan& stage, BackendPool& backends);

  // Positions the prefix of `text_ids` takes; frames can use the rest of the largest bucket.
  int64_t PrefixLength(const std::vector<int32_t>& text_ids) const {
    const TalkerPrompt& p = config_.prompt;
    const size_t inline_text = p.stream_text ? std::min<size_t>(1, text_ids.size()) : text_ids.size();
    return int64_t(p.head.size() + inline_text + p.tail.size());
  }
  int64_t MaxPositions() const;
  // Forgets the last utterance and prefills the prefix of a new one.
  Status Start(const std::vector<int32_t>& text_ids);
  // Forgets the last utterance and starts a dual-track one (the omni pipeline): no prefix, every
  // frame reads one text hidden state through Next(); needs the stage's "embed_hidden" graph.
  Status StartDual();
  // The next frame, or nullopt when codebook 0 says end of speech. `text_hidden` (dual-track
  // only; text_hidden_size() floats) is this frame's text input, nullptr for the text pad.
  Result<std::optional<Frame>> Next(decoding::Sampler& sampler, const float* text_hidden = nullptr);
  // Width of the text hidden states a dual-track talker reads (0 without an embed_hidden graph).
  int64_t text_hidden_size() const { return text_hidden_.empty() ? 0 : text_hidden_.shape()[2]; }

  const TalkerConfig& config() const { return config_; }
  std::vector<Placement> placements() const;
  double backend_seconds() const;

 private:
  explicit Talker(TalkerConfig config) : config_(std::move(config)) {}
  Status Load(const StagePlan& stage, BackendPool& backends);
  Status Run(Graph& g);
  Result<int32_t> PredictorStep(decoding::Sampler& sampler, int64_t group);

  TalkerConfig config_;
  std::unique_ptr<decoding::Decoder> talker_, predictor_;
  std::unique_ptr<Graph> embed_chunk_, embed_step_, embed_hidden_, head_, predictor_embed_, predictor_head_;
  HostTensor text_chunk_, codes_chunk_, hidden_chunk_, text_step_, codes_step_, hidden_step_, text_hidden_;
  HostTensor head_in_, normed_, logits_;
  HostTensor predictor_id_, predictor_in_, predictor_hidden_, predictor_logits_;
  std::vector<float> scores_;
  std::vector<text::TokenId> said_;     // codebook-0 codes of this utterance (repetition penalty)
  std::deque<int64_t> text_queue_;     // stream_text: text ids the next frames read
  std::optional<Frame> unfed_;        // the last frame, fed back at the next step
  const float* last_hidden_ = nullptr;  // the talker's output at the newest position
  double graph_seconds_ = 0;
};

}  // namespace omni_edge::talker
