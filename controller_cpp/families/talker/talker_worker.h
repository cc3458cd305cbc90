// A talker as a stage worker: one step speaks one frame (codebook 0 from the talker, the rest
// from the code predictor) and emits it as a "codes" event. An entry stage speaks the request's
// text after the plan's prompt; a stage that reads another (an omni plan's thinker) runs
// dual-track: frame t reads text hidden state t from its input as the thinker makes it (the
// text pad once the text has ended) plus the codes of frame t-1.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "decoding/sampler.h"
#include "families/talker/talker.h"
#include "pipeline/stage_worker.h"
#include "text/tokenizer.h"

namespace omni_edge::talker {

class TalkerWorker final : public pipeline::StageWorker {
 public:
  static Result<std::unique_ptr<TalkerWorker>> Open(const StagePlan& stage, BackendPool& backends);

  Status Prepare(const pipeline::Request& request) override;
  Status Begin(pipeline::StepContext& ctx) override;
  Result<pipeline::StepResult> Step(pipeline::StepContext& ctx) override;
  Json Metrics(const pipeline::StepContext& ctx) const override;

  std::vector<Placement> placements() const override { return talker_->placements(); }
  Json Describe() const override { return {{"code_groups", talker_->config().code_groups}}; }
  // The codes, and how many text tokens each frame had read: frame t of a dual-track talker reads
  // token t, so what a listener heard maps back to the thinker's tokens (a realtime barge-in).
  Json Inspect() const override { return {{"codes", frames_}, {"text_tokens_at_frame", text_tokens_at_frame_}}; }
  const text::Tokenizer* tokenizer() const override { return tokenizer_.get(); }

 private:
  TalkerWorker() = default;
  // Dual-track: the next text hidden state into text_hidden_; false once the text ended.
  Result<bool> NextText(pipeline::StepContext& ctx);

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<Talker> talker_;
  bool dual_ = false;  // reads a thinker's hidden states

  // The request in flight.
  std::vector<int32_t> text_ids_;
  decoding::SamplingParams sampling_;
  int64_t max_frames_ = 0;
  std::optional<decoding::Sampler> sampler_;
  std::vector<Frame> frames_;
  std::vector<float> text_hidden_;
  bool text_ended_ = false;
  int64_t text_tokens_ = 0;
  std::vector<int64_t> text_tokens_at_frame_;
  double backend_before_ = 0;
};

}  // namespace omni_edge::talker
