// A text LLM as a stage worker: the tokenizer and chat format, the decoder with its resident KV
// cache (a later request may continue the conversation), the sampler and the UTF-8-safe text
// stream. Each step samples one token and emits it as a "token" event ({"token_ids", "text"},
// and the hidden state that produced it when another stage reads this one); the prefill runs
// before the first step. An internal error poisons the worker until Reset().
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "decoding/decoder.h"
#include "decoding/sampler.h"
#include "families/llm/config.h"
#include "media/placeholders.h"
#include "pipeline/stage_worker.h"
#include "text/text_stream.h"
#include "text/tokenizer.h"

namespace omni_edge::llm {

using text::TokenId;

class LlmWorker final : public pipeline::StageWorker {
 public:
  static Result<std::unique_ptr<LlmWorker>> Open(const StagePlan& stage, BackendPool& backends);

  Status Prepare(const pipeline::Request& request) override;
  Status Begin(pipeline::StepContext& ctx) override;
  Result<pipeline::StepResult> Step(pipeline::StepContext& ctx) override;
  Status Flush(pipeline::StepContext& ctx) override;
  Json Metrics(const pipeline::StepContext& ctx) const override;
  Status Withheld(int64_t last_seq, Json* terminal_fields) override;

  bool resident() const override { return true; }
  bool migratable() const override { return config_.decoder.kv.mode == "full" && config_.decoder.kv.buckets.size() > 1; }
  bool continues(const pipeline::Request& request) const override { return request.continue_conversation; }
  Status Forget() override;
  Status Reset() override;
  Status KeepOutput(int64_t tokens) override;

  std::vector<Placement> placements() const override { return decoder_->placements(); }
  // The context, and a hybrid's recurrent state (its digest: two states are equal or not).
  Json Inspect() const override;
  const text::Tokenizer* tokenizer() const override { return tokenizer_.get(); }

 private:
  LlmWorker() = default;
  Result<std::vector<TokenId>> PromptTokens(const pipeline::Request& r) const;
  Result<std::vector<TokenId>> Encode(const std::string& text) const;
  static std::vector<text::ChatMessage> ChatMessages(const pipeline::Request& r);
  Status PrepareMedia(const pipeline::Request& r);
  // Waits for every encoder's rows, then lays out the prompt: the text before the media, each
  // item's start, placeholders and end in the request's order, the text after; the rows to
  // splice at the placeholders and the prompt's M-RoPE position table.
  Status ReceiveMedia(pipeline::StepContext& ctx);
  Status Fail(const Status& status);  // poisons: the cache may hold part of a step
  Status Rewind(int64_t shown);
  Result<bool> EmitToken(pipeline::StepContext& ctx, const std::vector<TokenId>& ids, const std::string& text);
  // The decoder's output at its newest position as a payload named `name`, for the next stage.
  pipeline::Payload HiddenPayload(const std::string& name) const;

  LlmConfig config_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<decoding::Decoder> decoder_;
  std::vector<TokenId> stop_ids_;
  bool poisoned_ = false;
  std::optional<media::PlaceholderIds> placeholders_;  // a Qwen2.5-Omni-style thinker's
  bool multimodal() const { return placeholders_ || minicpm_; }  // it reads encoder stages
  struct MiniCpmMedia {
    TokenId unk = -1;
    bool use_image_id = true;
  };
  std::optional<MiniCpmMedia> minicpm_;  // a MiniCPM-o thinker: its placeholder text
  Result<std::vector<int32_t>> MiniCpmPlaceholders(const pipeline::Input& in, int64_t index, int64_t n, int64_t image) const;
  Result<std::vector<int32_t>> QwenPlaceholders(const pipeline::Input& in, int64_t index, int64_t n,
                                                std::vector<media::ImageGrid>& grids) const;
  void CountMedia(const pipeline::Input& in, int64_t tokens);
  std::vector<TokenId> media_head_, media_tail_;       // the text ids around a request's media
  size_t media_items_ = 0;
  std::vector<float> media_rows_;  // the encoders' rows, in prompt order
  std::vector<decoding::Decoder::Splice> splices_;
  double media_wait_ms_ = 0;
  Json media_kinds_ = Json::object();  // per modality: the encoders' items, tokens and times
  Json MediaMetrics() const;
  int64_t media_tokens_ = 0, media_bytes_ = 0;
  std::vector<TokenId> context_;  // tokens whose keys/values are resident
  std::vector<TokenId> pending_;  // the sampled token not yet fed back

  // The request in flight.
  std::vector<TokenId> prompt_;
  decoding::SamplingParams sampling_;
  int64_t max_new_tokens_ = 0;
  std::optional<decoding::Sampler> sampler_;
  std::optional<text::TextStream> text_;
  const float* logits_ = nullptr;
  std::vector<TokenId> generated_;             // every sampled token, in order
  int64_t kept_ = 0;  // how many of them the resident state holds (a cancel or KeepOutput keeps fewer)
  std::map<int64_t, int64_t> tokens_at_seq_;  // event seq -> tokens the consumer has after it
  int64_t seq_ = 0;
  double begin_ms_ = 0, prefill_ms_ = 0, first_ms_ = -1, last_ms_ = 0, backend_before_ = 0;
  double decode_begin_ms_ = 0, decode_backend_before_ = 0;  // where the decode loop starts (after the prefill)
};

}  // namespace omni_edge::llm
