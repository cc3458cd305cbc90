#include "families/llm/llm_worker.h"

#include <algorithm>
#include <cstring>

#include "base/platform/process_stats.h"
#include "text/chat.h"

namespace omni_edge::llm {

Result<std::unique_ptr<LlmWorker>> LlmWorker::Open(const StagePlan& stage, BackendPool& backends) {
  const LlmConfig* config = stage.config_as<LlmConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not an llm stage");
  std::unique_ptr<LlmWorker> w(new LlmWorker());
  w->config_ = *config;
  OE_ASSIGN_OR_RETURN(w->tokenizer_, text::Tokenizer::Load(config->tokenizer));
  for (const auto& stop : config->stop_tokens) {
    auto id = w->tokenizer_->Find(stop);
    if (!id) return Status::Error("invalid_plan", "stop token '" + stop + "' is not in the tokenizer's vocabulary");
    w->stop_ids_.push_back(*id);
  }
  if (w->tokenizer_->vocab_size() > config->decoder.vocab_size) {
    return Status::Error("invalid_plan", "the tokenizer has " + std::to_string(w->tokenizer_->vocab_size()) +
                                             " tokens but the model's vocabulary is " +
                                             std::to_string(config->decoder.vocab_size));
  }
  OE_ASSIGN_OR_RETURN(w->decoder_, decoding::Decoder::Create(config->decoder, stage.graphs, backends));
  return w;
}

Result<std::vector<TokenId>> LlmWorker::PromptTokens(const pipeline::Request& r) const {
  std::vector<TokenId> ids;
  if (r.continue_conversation) ids = pending_;
  if (!r.prompt_ids.empty()) {
    for (TokenId t : r.prompt_ids) {
      if (t < 0 || t >= config_.decoder.vocab_size) {
        return Status::Error("invalid_prompt", "prompt token id " + std::to_string(t) + " is outside the vocabulary");
      }
    }
    ids.insert(ids.end(), r.prompt_ids.begin(), r.prompt_ids.end());
    return ids;
  }
  if (r.prompt.empty()) return Status::Error("invalid_prompt", "the prompt is empty");
  std::string prompt = r.prompt;
  if (r.chat) {
    if (config_.chat_format != "chatml") return Status::Error("invalid_prompt", "this plan has no chat format");
    std::vector<text::ChatMessage> messages;
    if (!r.system_prompt.empty()) messages.push_back({"system", r.system_prompt});
    messages.push_back({"user", r.prompt});
    if (r.continue_conversation && !context_.empty()) {
      // Close an assistant turn that ended without <|im_end|> (length, cancel), then continue.
      const auto im_end = tokenizer_->Find("<|im_end|>");
      const bool closed = !ids.empty() && im_end && ids.back() == *im_end;
      prompt = (closed ? "" : "<|im_end|>") + text::ContinueChatML(messages);
    } else {
      prompt = text::FormatChatML(messages);
    }
  }
  auto encoded = tokenizer_->Encode(prompt);
  if (!encoded.ok()) return Status::Error("invalid_prompt", encoded.status().message());
  ids.insert(ids.end(), encoded->begin(), encoded->end());
  return ids;
}

Status LlmWorker::Prepare(const pipeline::Request& r) {
  if (poisoned_) return Status::Error("session_poisoned", "an earlier error left the session unusable; call Reset()");
  sampling_ = r.sampling.value_or(config_.sampling);
  OE_RETURN_IF_ERROR(decoding::Validate(sampling_));
  max_new_tokens_ = r.max_new_tokens > 0 ? r.max_new_tokens : config_.max_new_tokens;
  OE_ASSIGN_OR_RETURN(prompt_, PromptTokens(r));
  const decoding::KvConfig& kv = config_.decoder.kv;
  const size_t resident = r.continue_conversation ? context_.size() : 0;
  if (kv.mode == "full" && kv.overflow == "refuse" && int64_t(resident + prompt_.size()) > kv.buckets.back()) {
    return Status::Error("context_overflow", "the prompt needs " + std::to_string(resident + prompt_.size()) +
                                                 " positions but the largest KV bucket holds " +
                                                 std::to_string(kv.buckets.back()) + " (plan: kv.overflow = refuse)");
  }
  return Status::Ok();
}

Status LlmWorker::Fail(const Status& status) {
  poisoned_ = true;
  return status;
}

Status LlmWorker::Begin(pipeline::StepContext& ctx) {
  generated_.clear();
  tokens_at_seq_.clear();
  seq_ = 0;
  first_ms_ = -1;
  last_ms_ = 0;
  backend_before_ = decoder_->backend_seconds();
  begin_ms_ = ctx.ElapsedMs();
  auto logits = decoder_->Feed(prompt_);
  if (!logits.ok()) return Fail(logits.status());  // the cache may hold part of the prompt
  logits_ = logits.value();
  context_.insert(context_.end(), prompt_.begin(), prompt_.end());
  pending_.clear();
  prefill_ms_ = ctx.ElapsedMs() - begin_ms_;
  sampler_.emplace(sampling_);
  text_.emplace(*tokenizer_, ctx.request().stop_strings);
  return Status::Ok();
}

Result<bool> LlmWorker::EmitToken(pipeline::StepContext& ctx, const std::vector<TokenId>& ids, const std::string& text) {
  pipeline::Output out;
  out.kind = "token";
  out.fields = {{"token_ids", ids}, {"text", text}};
  out.watermark = int64_t(prompt_.size());
  if (ctx.feeds_stages() && !ids.empty()) {  // what the next stage reads: the state that made the token
    const int64_t H = config_.decoder.hidden_size;
    out.payloads.push_back({"hidden", "float32", {H},
                            std::string(reinterpret_cast<const char*>(decoder_->last_hidden()), size_t(H) * sizeof(float))});
  }
  tokens_at_seq_[++seq_] = (tokens_at_seq_.empty() ? 0 : tokens_at_seq_.rbegin()->second) + int64_t(ids.size());
  return ctx.Emit(std::move(out));
}

Result<pipeline::StepResult> LlmWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  const int64_t i = int64_t(generated_.size());
  const TokenId token = sampler_->Sample(logits_, config_.decoder.vocab_size, context_);
  pending_ = {token};
  generated_.push_back(token);
  if (!ctx.request().ignore_stop_tokens && std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end()) {
    return StepResult::Finish("stop");
  }
  const text::TextStream::Delta delta = text_->Push(token);
  OE_ASSIGN_OR_RETURN(bool listened, EmitToken(ctx, {token}, delta.text));
  last_ms_ = ctx.ElapsedMs();
  if (first_ms_ < 0) first_ms_ = last_ms_;
  if (!listened) return StepResult::Continue();  // the runner stops: nobody listens
  if (delta.stopped) return StepResult::Finish("stop_string");
  if (i + 1 >= max_new_tokens_) return StepResult::Finish("length");
  const decoding::KvConfig& kv = config_.decoder.kv;
  if (kv.mode == "full" && kv.overflow == "refuse" && !decoder_->ringing() &&
      decoder_->position() + 1 > kv.buckets.back()) {
    return StepResult::Finish("context_full");
  }
  auto logits = decoder_->Feed({token});
  if (!logits.ok()) return Fail(logits.status());
  logits_ = logits.value();
  context_.push_back(token);
  pending_.clear();
  return StepResult::Continue();
}

Status LlmWorker::Flush(pipeline::StepContext& ctx) {
  const std::string tail = text_->Flush();  // an unfinished character, or text held for a stop string
  if (tail.empty()) return Status::Ok();
  return EmitToken(ctx, {}, tail).status();
}

namespace {
// What crossed between the controller and the backends in one step (see Decoder::StepBytes).
Json StepBytesJson(const decoding::Decoder::StepBytes& b) {
  return {{"controller", b.controller}, {"backend", b.backend}};
}
}  // namespace

Json LlmWorker::Metrics(const pipeline::StepContext& ctx) const {
  const int64_t n = int64_t(generated_.size());
  const double total_ms = ctx.ElapsedMs();
  const double decode_ms = n > 1 && last_ms_ > first_ms_ ? last_ms_ - first_ms_ : 0;
  const double backend_ms = 1000.0 * (decoder_->backend_seconds() - backend_before_);
  const double loop_ms = total_ms - begin_ms_;
  return {{"n_prompt_tokens", int64_t(prompt_.size())},
          {"n_generated_tokens", n},
          {"context_tokens", decoder_->position()},
          {"ttft_ms", std::max(0.0, first_ms_)},
          {"prefill_ms", prefill_ms_},
          {"decode_ms", decode_ms},
          {"total_ms", total_ms},
          {"prefill_tok_s", prefill_ms_ > 0 ? 1000.0 * double(prompt_.size()) / prefill_ms_ : 0.0},
          {"decode_tok_s", decode_ms > 0 ? 1000.0 * double(n - 1) / decode_ms : 0.0},
          {"backend_ms", backend_ms},
          {"controller_ms_per_token", n > 0 ? (loop_ms - backend_ms) / double(n) : 0.0},
          {"bytes_per_decode_step", StepBytesJson(decoder_->last_decode_bytes())},
          {"bytes_per_prefill_chunk", StepBytesJson(decoder_->last_prefill_bytes())},
          {"peak_rss_mb", PeakRssMb()}};
}

Status LlmWorker::Rewind(int64_t shown) {
  // generated_[0..k-1) were fed back, generated_[k-1] is pending; keep what the consumer saw.
  const int64_t k = int64_t(generated_.size());
  if (shown >= k) return Status::Ok();
  const int64_t fed = pending_.empty() ? k : k - 1;
  const int64_t keep_fed = std::max<int64_t>(0, shown - 1);
  const int64_t length = int64_t(context_.size()) - (fed - keep_fed);
  Status st = decoder_->Rewind(length, context_);
  if (!st.ok()) return Fail(st);
  context_.resize(size_t(length));
  pending_.clear();
  if (shown > 0) pending_.push_back(generated_[size_t(shown - 1)]);
  return Status::Ok();
}

Status LlmWorker::Withheld(int64_t last_seq, Json* terminal_fields) {
  auto it = tokens_at_seq_.upper_bound(last_seq);
  const int64_t shown = it == tokens_at_seq_.begin() ? 0 : std::prev(it)->second;
  (*terminal_fields)["n_generated_tokens"] = shown;
  return Rewind(shown);
}

Status LlmWorker::Forget() {
  context_.clear();
  pending_.clear();
  return decoder_->Reset();
}

Status LlmWorker::Reset() {
  poisoned_ = false;
  return Forget();
}

}  // namespace omni_edge::llm
