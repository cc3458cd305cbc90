// A codec_lm talker as a stage worker. Begin() reads the thinker's whole reply: each token event
// carries the hidden state that produced its token, so token k's own state (after it was fed)
// arrives with token k + 1, and the last token's with the thinker's closing event at a stop
// token; a reply that ends otherwise (length, a stop string, a full context) loses its last
// token, as upstream's does at its length limit. A hidden state on an event without exactly one
// id, anything after the closing state, and ids outside the text table are refused. The rows
// go through the condition graph, then text_eos and audio_bos, into the decoder's prefill; each
// Step says one code ("codes" event, one int32) until the end code.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "decoding/decoder.h"
#include "decoding/sampler.h"
#include "families/codec_lm/config.h"
#include "pipeline/stage_worker.h"
#include "runtime/backend_pool.h"
#include "runtime/graph.h"

namespace omni_edge::codec_lm {

class CodecLmWorker final : public pipeline::StageWorker {
 public:
  static Result<std::unique_ptr<CodecLmWorker>> Open(const StagePlan& stage, BackendPool& backends);

  Status Prepare(const pipeline::Request& request) override;
  Status Begin(pipeline::StepContext& ctx) override;
  Result<pipeline::StepResult> Step(pipeline::StepContext& ctx) override;
  Json Metrics(const pipeline::StepContext& ctx) const override;
  std::vector<Placement> placements() const override;
  // The last request's codes, one per frame (as a talker's frames).
  Json Inspect() const override;

 private:
  explicit CodecLmWorker(const CodecLmConfig& c) : config_(c) {}
  // The thinker's spoken span: ids and their hidden states (thinker_hidden floats each).
  Status ReadSpan(pipeline::StepContext& ctx);
  Status Prefill();
  Status Row(Graph& g, int64_t id, const float* hidden, float* out);
  int32_t Pick();

  CodecLmConfig config_;
  std::unique_ptr<decoding::Decoder> decoder_;
  std::unique_ptr<Graph> condition_, text_embed_;
  HostTensor id_, hidden_, row_;
  decoding::SamplingParams sampling_;
  std::optional<decoding::Sampler> sampler_;
  int64_t max_codes_ = 0;
  std::vector<int64_t> span_ids_;
  std::vector<float> span_hidden_;
  std::vector<float> scores_;
  const float* logits_ = nullptr;
  std::vector<int32_t> codes_;
  double backend_before_ = 0, graph_seconds_ = 0, prefill_ms_ = 0;
};

}  // namespace omni_edge::codec_lm
