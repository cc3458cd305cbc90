#include "families/codec_lm/codec_lm_worker.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

namespace omni_edge::codec_lm {

Result<std::unique_ptr<CodecLmWorker>> CodecLmWorker::Open(const StagePlan& stage, BackendPool& backends) {
  const CodecLmConfig* config = stage.config_as<CodecLmConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not a codec_lm stage");
  std::unique_ptr<CodecLmWorker> w(new CodecLmWorker(*config));
  const CodecLmConfig& c = w->config_;
  std::map<std::string, GraphGroup> body;
  for (const char* role : {"embed", "prefill", "decode", "lm_head"}) {
    auto it = stage.graphs.find(role);
    if (it != stage.graphs.end()) body[role] = it->second;
  }
  OE_ASSIGN_OR_RETURN(w->decoder_, decoding::Decoder::Create(c.decoder, body, backends, "talker_"));
  OE_ASSIGN_OR_RETURN(w->condition_, LoadGraph(backends, stage.graphs.at("condition"), "step", "talker_condition"));
  OE_ASSIGN_OR_RETURN(w->text_embed_, LoadGraph(backends, stage.graphs.at("text_embed"), "step", "talker_text_embed"));
  const int64_t H = c.decoder.hidden_size;
  w->id_ = HostTensor(DType::kInt64, {1, 1});
  w->hidden_ = HostTensor(DType::kFloat32, {1, 1, c.thinker_hidden});
  w->row_ = HostTensor(DType::kFloat32, {1, 1, H});
  OE_RETURN_IF_ERROR(ExpectIo(*w->condition_, "talker_condition", {w->id_.view(), w->hidden_.view()}, {w->row_.view()}));
  OE_RETURN_IF_ERROR(ExpectIo(*w->text_embed_, "talker_text_embed", {w->id_.view()}, {w->row_.view()}));
  OE_RETURN_IF_ERROR(w->condition_->Bind({w->id_.view(), w->hidden_.view()}, {w->row_.view()}));
  OE_RETURN_IF_ERROR(w->text_embed_->Bind({w->id_.view()}, {w->row_.view()}));
  return w;
}

std::vector<Placement> CodecLmWorker::placements() const {
  std::vector<Placement> out = decoder_->placements();
  out.push_back(condition_->placement());
  out.push_back(text_embed_->placement());
  return out;
}

Status CodecLmWorker::Prepare(const pipeline::Request& r) {
  sampling_ = r.speech_sampling.value_or(config_.sampling);
  OE_RETURN_IF_ERROR(decoding::Validate(sampling_));
  max_codes_ = std::min(r.max_frames > 0 ? r.max_frames : config_.max_codes, config_.max_codes);
  return Status::Ok();
}

Status CodecLmWorker::ReadSpan(pipeline::StepContext& ctx) {
  const int64_t W = config_.thinker_hidden;
  // The spoken span holds at most what the talker's cache has room for (its rows, text_eos,
  // audio_bos and one code): refused as soon as the reply passes it, before it is all held.
  const int64_t room = decoding::CacheSizes(config_.decoder).back() - 3;
  std::vector<int64_t> ids;
  std::vector<float> hidden;  // hidden[k]: the state after ids[k - 1] (the one that produced ids[k])
  bool closed = false;
  while (auto in = ctx.Next(0)) {
    const pipeline::Payload* h = in->Find("hidden");
    const pipeline::Payload* closing = in->Find("closing_hidden");
    if (h == nullptr && closing == nullptr) continue;  // the text stream's tail
    if (closed) return Status::Error("invalid_input", "a thinker event after its closing state");
    const Json* token_ids = in->fields.contains("token_ids") ? &in->fields["token_ids"] : nullptr;
    const size_t n_ids = token_ids != nullptr && token_ids->is_array() ? token_ids->size() : 0;
    if (h != nullptr && (n_ids != 1 || !(*token_ids)[0].is_number_integer())) {
      return Status::Error("invalid_input", "a thinker hidden state on an event without exactly one token id");
    }
    if (h == nullptr && n_ids != 0) return Status::Error("invalid_input", "a thinker closing state on an event with token ids");
    const pipeline::Payload* state = h != nullptr ? h : closing;
    if (state->dtype != "float32" || int64_t(state->bytes.size()) != W * int64_t(sizeof(float))) {
      return Status::Error("invalid_input", "a thinker hidden state of " + std::to_string(state->bytes.size()) +
                                                " bytes; this talker reads " + std::to_string(W) + " float32 values");
    }
    int64_t id = -1;  // the closing state belongs to the last token
    if (h != nullptr) {
      id = (*token_ids)[0].get<int64_t>();
      if (id < 0 || id >= config_.text_vocab) {
        return Status::Error("invalid_input", "thinker token id " + std::to_string(id) + " is outside the talker's text table (" +
                                                  std::to_string(config_.text_vocab) + ")");
      }
    }
    closed = h == nullptr;
    if (int64_t(ids.size()) > room + 1) {
      return Status::Error("context_overflow", "the spoken reply passes the " + std::to_string(room) +
                                                   " positions the talker's cache has room for");
    }
    const size_t at = hidden.size();
    hidden.resize(at + size_t(W));
    std::memcpy(&hidden[at], state->bytes.data(), state->bytes.size());
    ids.push_back(id);
  }
  // Pair each token with the state after it: the next event's.
  span_ids_.clear();
  span_hidden_.clear();
  for (size_t k = 0; k + 1 < ids.size(); ++k) {
    if (ids[k] < 0) continue;
    if (config_.span_start >= 0 && ids[k] == config_.span_start) {  // the span starts after its last mark
      span_ids_.clear();
      span_hidden_.clear();
      continue;
    }
    span_ids_.push_back(ids[k]);
    span_hidden_.insert(span_hidden_.end(), hidden.begin() + int64_t(k + 1) * W, hidden.begin() + int64_t(k + 2) * W);
  }
  return Status::Ok();
}

Status CodecLmWorker::Row(Graph& g, int64_t id, const float* hidden, float* out) {
  id_.data<int64_t>()[0] = id;
  if (hidden != nullptr) std::memcpy(hidden_.data<float>(), hidden, hidden_.nbytes());
  const auto t0 = std::chrono::steady_clock::now();
  OE_RETURN_IF_ERROR(g.Run());
  graph_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::memcpy(out, row_.data<float>(), row_.nbytes());
  return Status::Ok();
}

Status CodecLmWorker::Prefill() {
  const int64_t H = config_.decoder.hidden_size, W = config_.thinker_hidden;
  const int64_t n = int64_t(span_ids_.size()) + 2;
  const int64_t room = decoding::CacheSizes(config_.decoder).back();
  if (n + 1 > room) {
    return Status::Error("context_overflow", "the spoken reply takes " + std::to_string(n) + " talker positions but its cache holds " +
                                                 std::to_string(room));
  }
  max_codes_ = std::min(max_codes_, room - n);
  std::vector<float> rows(size_t(n * H));
  for (size_t k = 0; k < span_ids_.size(); ++k) {
    OE_RETURN_IF_ERROR(Row(*condition_, span_ids_[k], &span_hidden_[k * size_t(W)], &rows[k * size_t(H)]));
  }
  OE_RETURN_IF_ERROR(Row(*text_embed_, config_.text_eos, nullptr, &rows[size_t((n - 2) * H)]));
  OE_RETURN_IF_ERROR(Row(*text_embed_, config_.audio_bos, nullptr, &rows[size_t((n - 1) * H)]));
  std::vector<decoding::Decoder::Splice> splices;
  for (int64_t p = 0; p < n; ++p) splices.push_back({p, &rows[size_t(p * H)]});
  OE_RETURN_IF_ERROR(decoder_->Reset());
  OE_ASSIGN_OR_RETURN(logits_, decoder_->Feed(std::vector<text::TokenId>(size_t(n), 0), splices));
  return Status::Ok();
}

Status CodecLmWorker::Begin(pipeline::StepContext& ctx) {
  codes_.clear();
  backend_before_ = decoder_->backend_seconds() + graph_seconds_;
  sampler_.emplace(decoding::SamplingParams{sampling_.temperature, sampling_.top_k, sampling_.top_p, sampling_.min_p, 1.0f,
                                            sampling_.seed});
  OE_RETURN_IF_ERROR(ReadSpan(ctx));
  if (ctx.stopping()) return Status::Ok();
  const double t0 = ctx.ElapsedMs();
  OE_RETURN_IF_ERROR(Prefill());
  prefill_ms_ = ctx.ElapsedMs() - t0;
  return Status::Ok();
}

int32_t CodecLmWorker::Pick() {
  const int64_t V = config_.decoder.vocab_size;
  scores_.assign(logits_, logits_ + V);
  const float penalty = sampling_.repetition_penalty;
  if (penalty != 1.0f && !codes_.empty()) {
    std::map<int32_t, int> uses;
    const size_t from = codes_.size() > size_t(config_.repetition_window) ? codes_.size() - size_t(config_.repetition_window) : 0;
    for (size_t i = from; i < codes_.size(); ++i) ++uses[codes_[i]];
    for (const auto& [code, count] : uses) {
      const float alpha = std::pow(penalty, float(count));
      float& s = scores_[size_t(code)];
      s = s < 0 ? s * alpha : s / alpha;
    }
  }
  if (int64_t(codes_.size()) < config_.min_codes) scores_[size_t(config_.end_code)] = -std::numeric_limits<float>::infinity();
  return sampler_->Sample(scores_.data(), V, {});
}

Result<pipeline::StepResult> CodecLmWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  if (span_ids_.empty()) return StepResult::Finish("empty");  // nothing to say (upstream: zero codes)
  if (int64_t(codes_.size()) >= max_codes_) return StepResult::Finish("length");
  const int32_t code = Pick();
  if (code == config_.end_code) return StepResult::Finish("eos");
  codes_.push_back(code);
  pipeline::Output out;
  out.kind = "codes";
  out.watermark = int64_t(span_ids_.size());
  out.payloads.push_back({"codes", "int32", {1}, std::string(reinterpret_cast<const char*>(&code), sizeof(code))});
  OE_ASSIGN_OR_RETURN(bool listened, ctx.Emit(std::move(out)));
  if (!listened) return StepResult::Continue();
  OE_ASSIGN_OR_RETURN(logits_, decoder_->Feed({code}));
  return StepResult::Continue();
}

Json CodecLmWorker::Inspect() const {
  Json frames = Json::array();
  for (int32_t code : codes_) frames.push_back(Json::array({code}));
  return {{"codes", frames}, {"span_tokens", int64_t(span_ids_.size())}};
}

Json CodecLmWorker::Metrics(const pipeline::StepContext& ctx) const {
  const double ms = 1000.0 * (decoder_->backend_seconds() + graph_seconds_ - backend_before_);
  const int64_t n = int64_t(codes_.size());
  return {{"frames", n}, {"text_tokens", int64_t(span_ids_.size())}, {"prefill_ms", prefill_ms_},
          {"talker_ms_per_frame", n > 0 ? ms / double(n) : 0.0}};
}

}  // namespace omni_edge::codec_lm
