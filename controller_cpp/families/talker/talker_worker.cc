#include "families/talker/talker_worker.h"

#include <algorithm>

namespace omni_edge::talker {

Result<std::unique_ptr<TalkerWorker>> TalkerWorker::Open(const StagePlan& stage, BackendPool& backends) {
  const TalkerConfig* config = stage.config_as<TalkerConfig>();
  if (config == nullptr) return Status::Error("internal", "stage " + std::to_string(stage.stage_id) + " is not a talker stage");
  std::unique_ptr<TalkerWorker> w(new TalkerWorker());
  OE_ASSIGN_OR_RETURN(w->tokenizer_, text::Tokenizer::Load(config->tokenizer));
  const TalkerPrompt& p = config->prompt;
  std::vector<int64_t> prompt_text = {p.frame_text};
  if (p.text_end >= 0) prompt_text.push_back(p.text_end);
  for (const auto* rows : {&p.head, &p.tail}) {
    for (const PromptRow& r : *rows) prompt_text.push_back(r.text_id);
  }
  for (int64_t id : prompt_text) {
    if (id >= w->tokenizer_->vocab_size()) {
      return Status::Error("invalid_plan", "the talker prompt's text id " + std::to_string(id) + " is outside the tokenizer's " +
                                               std::to_string(w->tokenizer_->vocab_size()) + " tokens");
    }
  }
  OE_ASSIGN_OR_RETURN(w->talker_, Talker::Create(stage, backends));
  w->dual_ = !stage.input_sources.empty();
  if (w->dual_ && w->talker_->text_hidden_size() == 0) {
    return Status::Error("invalid_plan", "stage " + std::to_string(stage.stage_id) +
                                             " reads another stage's hidden states but has no embed_hidden graph");
  }
  return w;
}

Status TalkerWorker::Prepare(const pipeline::Request& r) {
  const TalkerConfig& c = talker_->config();
  sampling_ = r.speech_sampling.value_or(c.sampling);
  OE_RETURN_IF_ERROR(decoding::Validate(sampling_));
  text_ids_.clear();
  if (!dual_ && !r.messages.empty()) {
    return Status::Error("invalid_prompt", "a speech plan speaks a text (prompt), not a conversation");
  }
  if (!dual_ && !r.prompt_ids.empty()) {
    for (int32_t id : r.prompt_ids) {
      if (id < 0 || id >= tokenizer_->vocab_size()) {
        return Status::Error("invalid_prompt", "text token id " + std::to_string(id) + " is outside the vocabulary");
      }
    }
    text_ids_ = r.prompt_ids;
  } else if (!dual_) {
    if (r.prompt.empty()) return Status::Error("invalid_prompt", "the text is empty");
    auto ids = tokenizer_->Encode(r.prompt, /*add_special_tokens=*/false);
    if (!ids.ok()) return Status::Error("invalid_prompt", ids.status().message());
    if (ids->empty()) return Status::Error("invalid_prompt", "the text has no tokens");
    text_ids_.assign(ids->begin(), ids->end());
  }
  const int64_t prefix = dual_ ? 0 : talker_->PrefixLength(text_ids_);
  const int64_t room = talker_->MaxPositions() - prefix;
  if (room < 1) {
    return Status::Error("context_overflow", "the text takes " + std::to_string(prefix) + " positions but the talker holds " +
                                                 std::to_string(talker_->MaxPositions()));
  }
  max_frames_ = std::min(r.max_frames > 0 ? r.max_frames : c.max_frames, room);
  return Status::Ok();
}

Status TalkerWorker::Begin(pipeline::StepContext& ctx) {
  frames_.clear();
  text_tokens_at_frame_.clear();
  text_ended_ = !dual_;
  text_tokens_ = int64_t(text_ids_.size());
  backend_before_ = talker_->backend_seconds();
  sampler_.emplace(sampling_);
  return dual_ ? talker_->StartDual() : talker_->Start(text_ids_);
}

Result<bool> TalkerWorker::NextText(pipeline::StepContext& ctx) {
  while (auto in = ctx.Next(0)) {
    const pipeline::Payload* hidden = in->Find("hidden");
    if (hidden == nullptr) continue;  // an event without a token (the text stream's tail)
    const int64_t width = talker_->text_hidden_size();
    if (hidden->dtype != "float32" || int64_t(hidden->bytes.size()) != width * int64_t(sizeof(float))) {
      return Status::Error("invalid_input", "a text hidden state of " + std::to_string(hidden->bytes.size()) +
                                                " bytes; this talker reads " + std::to_string(width) + " float32 values");
    }
    text_hidden_.resize(size_t(width));
    std::copy_n(reinterpret_cast<const float*>(hidden->bytes.data()), width, text_hidden_.data());
    ++text_tokens_;
    return true;
  }
  return false;
}

Result<pipeline::StepResult> TalkerWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  if (int64_t(frames_.size()) >= max_frames_) return StepResult::Finish("length");
  if (!text_ended_) {  // dual-track: frame t waits for text hidden state t
    OE_ASSIGN_OR_RETURN(bool more, NextText(ctx));
    if (!more && ctx.stopping()) return StepResult::Continue();  // the text was cancelled or failed
    text_ended_ = !more;
  }
  auto frame = talker_->Next(*sampler_, text_ended_ ? nullptr : text_hidden_.data());
  if (!frame.ok()) return frame.status();
  if (!frame.value()) return StepResult::Finish("eos");
  const Frame& f = *frame.value();
  frames_.push_back(f);
  text_tokens_at_frame_.push_back(text_tokens_);
  pipeline::Output out;
  out.kind = "codes";
  out.watermark = text_tokens_;
  out.payloads.push_back({"codes", "int32", {int64_t(f.size())},
                          std::string(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(int32_t))});
  OE_RETURN_IF_ERROR(ctx.Emit(std::move(out)).status());
  return StepResult::Continue();
}

Json TalkerWorker::Metrics(const pipeline::StepContext& ctx) const {
  const double talker_ms = 1000.0 * (talker_->backend_seconds() - backend_before_);
  const int64_t frames = int64_t(frames_.size());
  return {{"frames", frames}, {"text_tokens", text_tokens_},
          {"talker_ms_per_frame", frames > 0 ? talker_ms / double(frames) : 0.0}};
}

}  // namespace omni_edge::talker
