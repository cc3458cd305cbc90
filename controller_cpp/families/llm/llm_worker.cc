#include "families/llm/llm_worker.h"

#include "base/sha256.h"

#include <algorithm>
#include <cstring>

#include "base/platform/os.h"
#include "base/platform/process_stats.h"
#include "base/sha256.h"
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
  if (!config->media_config.empty()) {
    OE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(config->media_config));
    OE_ASSIGN_OR_RETURN(Json thinker, ParseJson(text, config->media_config));
    if (config->media_style == "minicpmo") {
      // Every media row replaces an <unk> of the item's placeholder text (MiniCPM-o 4.5's processor).
      const auto unk = w->tokenizer_->Find("<unk>");
      if (!unk) return Status::Error("invalid_plan", "a MiniCPM-o thinker's tokenizer has no <unk> token");
      w->minicpm_ = MiniCpmMedia{*unk, thinker.value("use_image_id", true)};
    } else {
      OE_ASSIGN_OR_RETURN(w->placeholders_, media::PlaceholderIdsFromJson(thinker, config->media_config));
    }
  }
  return w;
}

Result<std::vector<TokenId>> LlmWorker::Encode(const std::string& text) const {
  auto encoded = tokenizer_->Encode(text, /*add_special_tokens=*/false);  // the media turn's pieces
  if (!encoded.ok()) return Status::Error("invalid_prompt", encoded.status().message());
  return std::vector<TokenId>(encoded->begin(), encoded->end());
}

// The conversation a chat request formats: its messages, or its system prompt and prompt.
std::vector<text::ChatMessage> LlmWorker::ChatMessages(const pipeline::Request& r) {
  if (!r.messages.empty()) return r.messages;
  std::vector<text::ChatMessage> out;
  if (!r.system_prompt.empty()) out.push_back({"system", r.system_prompt});
  out.push_back({"user", r.prompt});
  return out;
}

Status LlmWorker::PrepareMedia(const pipeline::Request& r) {
  if (!multimodal()) return Status::Error("invalid_prompt", "this plan reads text only: it has no media encoders");
  if (!r.prompt_ids.empty()) return Status::Error("invalid_prompt", "media come with a text prompt, not prompt_ids");
  const bool continues = r.continue_conversation && !context_.empty();
  // The user turn (Qwen2.5-Omni's: <|im_start|>user\n), the media, the text, then the assistant's
  // start; continuing, the last reply's pending token first and its end of turn if it had none.
  std::string head, tail = r.prompt;
  if (r.chat || !r.messages.empty()) {
    if (!config_.chat) return Status::Error("invalid_prompt", "this plan has no chat format");
    const text::ChatFormat& f = *config_.chat;
    std::vector<text::ChatMessage> turns = ChatMessages(r);
    if (continues) {
      const auto end = tokenizer_->Find(f.end_of_turn);
      const bool closed = !pending_.empty() && end && pending_.back() == *end;
      head = (closed ? "" : f.end_of_turn) + f.after_turn;
    } else {
      head = f.begin;
    }
    for (size_t i = 0; i + 1 < turns.size(); ++i) head += f.Turn(turns[i]);
    head += f.Open("user");
    tail = f.Body(turns.back().content) + f.Close() + f.Reply();
  }
  OE_ASSIGN_OR_RETURN(std::vector<TokenId> head_ids, Encode(head));
  media_head_ = continues ? pending_ : std::vector<TokenId>{};
  media_head_.insert(media_head_.end(), head_ids.begin(), head_ids.end());
  OE_ASSIGN_OR_RETURN(media_tail_, Encode(tail));
  media_items_ = r.media.size();
  return Status::Ok();
}

// A Qwen-style item's placeholders between its start and end tokens; an image's grid is kept for
// the position rows.
Result<std::vector<int32_t>> LlmWorker::QwenPlaceholders(const pipeline::Input& in, int64_t index, int64_t n,
                                                         std::vector<media::ImageGrid>& grids) const {
  std::vector<int32_t> ids;
  if (in.fields.value("modality", std::string()) == "image") {
    const Json& g = in.fields.at("grid");
    const media::ImageGrid grid{g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()};
    ids = media::ImagePlaceholders(*placeholders_, grid);
    grids.push_back(grid);
  } else if (placeholders_->audio < 0) {
    return Status::Error("invalid_input", "media[" + std::to_string(index) + "]: this thinker takes no audio "
                                          "(its config has no audio_token_index)");
  } else {
    ids = media::AudioPlaceholders(*placeholders_, n);
  }
  if (int64_t(ids.size()) != n + 2) {
    return Status::Error("invalid_input", "media[" + std::to_string(index) + "]: " + std::to_string(n) +
                                              " rows for " + std::to_string(ids.size() - 2) + " placeholders");
  }
  return ids;
}

Status LlmWorker::ReceiveMedia(pipeline::StepContext& ctx) {
  const double start = ctx.ElapsedMs();
  std::map<int64_t, pipeline::Input> items;
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    while (auto in = ctx.Next(i)) {
      if (in->kind != "embeddings") continue;
      const int64_t index = in->fields.value("media_index", int64_t(-1));
      items[index] = std::move(*in);
    }
  }
  media_wait_ms_ = ctx.ElapsedMs() - start;
  if (ctx.stopping()) return Status::Ok();  // an encoder failed or the request was cancelled
  if (items.size() != media_items_) {
    return Status::Error("internal", "the encoders sent " + std::to_string(items.size()) + " of " +
                                         std::to_string(media_items_) + " media items");
  }
  const int64_t H = config_.decoder.hidden_size;
  const int64_t resident = int64_t(context_.size());  // 0 unless the request continues the conversation
  prompt_ = media_head_;
  media_rows_.clear();
  std::vector<media::ImageGrid> grids;
  std::vector<int64_t> positions;
  int64_t images_seen = 0;
  media_tokens_ = media_bytes_ = 0;
  media_kinds_ = Json::object();
  for (const auto& [index, in] : items) {
    const pipeline::Payload* rows = in.Find("embeds");
    const int64_t n = in.fields.value("tokens", int64_t(0));
    if (rows == nullptr || rows->dtype != "float32" || n < 1 || int64_t(rows->bytes.size()) != n * H * int64_t(sizeof(float))) {
      return Status::Error("invalid_input", "media[" + std::to_string(index) + "]: the encoder's rows are not [tokens, " +
                                                std::to_string(H) + "] float32");
    }
    std::vector<int32_t> ids;
    if (minicpm_) {
      OE_ASSIGN_OR_RETURN(ids, MiniCpmPlaceholders(in, index, n, images_seen++));
      for (size_t k = 0; k < ids.size(); ++k) {
        if (ids[k] == minicpm_->unk) positions.push_back(resident + int64_t(prompt_.size() + k));
      }
      const float* f = reinterpret_cast<const float*>(rows->bytes.data());
      prompt_.insert(prompt_.end(), ids.begin(), ids.end());
      media_rows_.insert(media_rows_.end(), f, f + n * H);
      media_tokens_ += n;
      media_bytes_ += int64_t(rows->bytes.size());
      CountMedia(in, n);
      continue;
    }
    OE_ASSIGN_OR_RETURN(ids, QwenPlaceholders(in, index, n, grids));
    for (int64_t k = 0; k < n; ++k) positions.push_back(resident + int64_t(prompt_.size()) + 1 + k);
    prompt_.insert(prompt_.end(), ids.begin(), ids.end());
    const float* f = reinterpret_cast<const float*>(rows->bytes.data());
    media_rows_.insert(media_rows_.end(), f, f + n * H);
    media_tokens_ += n;
    media_bytes_ += int64_t(rows->bytes.size());
    CountMedia(in, n);
  }
  prompt_.insert(prompt_.end(), media_tail_.begin(), media_tail_.end());
  const decoding::KvConfig& kv = config_.decoder.kv;
  if (kv.mode == "full" && kv.overflow == "refuse" && resident + int64_t(prompt_.size()) > kv.buckets.back()) {
    return Status::Error("context_overflow", "the prompt with its media needs " + std::to_string(resident + int64_t(prompt_.size())) +
                                                 " positions but the largest KV bucket holds " + std::to_string(kv.buckets.back()));
  }
  splices_.clear();
  for (size_t k = 0; k < positions.size(); ++k) splices_.push_back({positions[k], media_rows_.data() + k * size_t(H)});
  if (minicpm_) return Status::Ok();  // plain positions 0..N-1
  OE_ASSIGN_OR_RETURN(media::MropePositions rope, media::ComputeMropePositions(prompt_, *placeholders_, grids));
  std::vector<int64_t> table;
  for (const auto& row : rope.rows) table.insert(table.end(), row.begin(), row.end());
  return decoder_->SetPositionTable(std::move(table), rope.next);
}

// Per modality, what the encoders report: items, tokens, preprocessing and graph time, and for
// audio its length (tokens per second: how the encoder's rows align with the audio).
void LlmWorker::CountMedia(const pipeline::Input& in, int64_t tokens) {
  Json& kind = media_kinds_[in.fields.value("modality", std::string("unknown"))];
  if (!kind.is_object()) kind = Json::object();
  for (const char* key : {"preprocess_ms", "encode_ms", "seconds"}) {
    if (in.fields.contains(key)) kind[key] = kind.value(key, 0.0) + in.fields.value(key, 0.0);
  }
  kind["items"] = kind.value("items", int64_t(0)) + 1;
  kind["tokens"] = kind.value("tokens", int64_t(0)) + tokens;
}

// MiniCPM-o 4.5's text for one item, tokenized: an image is its id, the source slice's <unk>s
// between <image> and </image>, then the grid's rows (one line each) of <slice>...</slice>;
// audio is its <unk>s between <|audio_start|> and <|audio_end|>.
Result<std::vector<int32_t>> LlmWorker::MiniCpmPlaceholders(const pipeline::Input& in, int64_t index, int64_t n,
                                                             int64_t image) const {
  std::string text;
  auto unks = [](int64_t k) {
    std::string out;
    for (int64_t i = 0; i < k; ++i) out += "<unk>";
    return out;
  };
  if (in.fields.value("modality", std::string()) == "image") {
    const Json& g = in.fields.at("grid");  // slices, grid columns, grid rows (0 x 0: not cut)
    const int64_t slices = g[0].get<int64_t>(), cols = g[1].get<int64_t>(), grid_rows = g[2].get<int64_t>();
    if (slices < 1 || n % slices || slices != 1 + cols * grid_rows) {
      return Status::Error("invalid_input", "media[" + std::to_string(index) + "]: " + std::to_string(n) +
                                                " rows do not divide into the image's " + std::to_string(slices) + " slices");
    }
    const std::string slice = unks(n / slices);
    if (minicpm_->use_image_id) text += "<image_id>" + std::to_string(image) + "</image_id>";
    text += "<image>" + slice + "</image>";
    for (int64_t r = 0; r < grid_rows; ++r) {
      if (r > 0) text += "\n";
      for (int64_t c = 0; c < cols; ++c) text += "<slice>" + slice + "</slice>";
    }
  } else {
    text = "<|audio_start|>" + unks(n) + "<|audio_end|>";
  }
  OE_ASSIGN_OR_RETURN(std::vector<TokenId> ids, Encode(text));
  int64_t found = 0;
  for (TokenId t : ids) found += t == minicpm_->unk;
  if (found != n) {
    return Status::Error("invalid_plan", "media[" + std::to_string(index) + "]: the tokenizer made " + std::to_string(found) +
                                             " <unk> placeholders of " + std::to_string(n));
  }
  return std::vector<int32_t>(ids.begin(), ids.end());
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
  if (r.prompt.empty() && r.messages.empty()) return Status::Error("invalid_prompt", "the prompt is empty");
  if (!r.messages.empty() && r.messages.back().content.empty()) {
    return Status::Error("invalid_prompt", "the last user message is empty");
  }
  std::string prompt = r.prompt;
  // A plain prompt that starts a conversation gets the post-processor's tokens (Llama 3's
  // <|begin_of_text|>), as transformers' tokenizer(prompt) does; a chat prompt carries its own.
  const bool chat = r.chat || !r.messages.empty();
  const bool add_special_tokens = !chat && !(r.continue_conversation && !context_.empty());
  if (chat) {
    if (!config_.chat) return Status::Error("invalid_prompt", "this plan has no chat format");
    const text::ChatFormat& f = *config_.chat;
    const std::vector<text::ChatMessage> messages = ChatMessages(r);
    if (r.continue_conversation && !context_.empty()) {
      // Close an assistant turn that ended without its end-of-turn token (length, cancel), then continue.
      const auto end = tokenizer_->Find(f.end_of_turn);
      const bool closed = !ids.empty() && end && ids.back() == *end;
      prompt = (closed ? "" : f.end_of_turn) + f.Continue(messages);
    } else {
      prompt = f.Format(messages);
    }
  }
  auto encoded = tokenizer_->Encode(prompt, add_special_tokens);
  if (!encoded.ok()) return Status::Error("invalid_prompt", encoded.status().message());
  ids.insert(ids.end(), encoded->begin(), encoded->end());
  return ids;
}

Status LlmWorker::Prepare(const pipeline::Request& r) {
  if (poisoned_) return Status::Error("session_poisoned", "an earlier error left the session unusable; call Reset()");
  sampling_ = r.sampling.value_or(config_.sampling);
  OE_RETURN_IF_ERROR(decoding::Validate(sampling_));
  max_new_tokens_ = r.max_new_tokens > 0 ? r.max_new_tokens : config_.max_new_tokens;
  media_items_ = 0;
  media_kinds_ = Json::object();
  media_wait_ms_ = 0;
  media_tokens_ = media_bytes_ = 0;
  if (!r.media.empty()) return PrepareMedia(r);  // the prompt is laid out when the encoders' rows arrive
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
  kept_ = 0;
  tokens_at_seq_.clear();
  seq_ = 0;
  first_ms_ = -1;
  last_ms_ = 0;
  backend_before_ = decoder_->backend_seconds();
  begin_ms_ = ctx.ElapsedMs();
  splices_.clear();
  if (multimodal()) {  // a multimodal thinker reads its encoders, whether or not this request has media
    if (media_items_ > 0) {
      OE_RETURN_IF_ERROR(ReceiveMedia(ctx));
    } else {
      for (size_t i = 0; i < ctx.input_count(); ++i) {
        while (ctx.Next(i)) {
        }
      }
    }
    if (ctx.stopping()) return Status::Ok();
  }
  auto logits = decoder_->Feed(prompt_, splices_);
  if (!logits.ok()) return Fail(logits.status());  // the cache may hold part of the prompt
  logits_ = logits.value();
  context_.insert(context_.end(), prompt_.begin(), prompt_.end());
  pending_.clear();
  prefill_ms_ = ctx.ElapsedMs() - begin_ms_;
  decode_begin_ms_ = ctx.ElapsedMs();
  decode_backend_before_ = decoder_->backend_seconds();
  sampler_.emplace(sampling_);
  text_.emplace(*tokenizer_, ctx.request().stop_strings);
  return Status::Ok();
}

pipeline::Payload LlmWorker::HiddenPayload(const std::string& name) const {
  const int64_t H = config_.decoder.hidden_size;
  return {name, "float32", {H}, std::string(reinterpret_cast<const char*>(decoder_->last_hidden()), size_t(H) * sizeof(float))};
}

Result<bool> LlmWorker::EmitToken(pipeline::StepContext& ctx, const std::vector<TokenId>& ids, const std::string& text) {
  pipeline::Output out;
  out.kind = "token";
  out.fields = {{"token_ids", ids}, {"text", text}};
  out.watermark = int64_t(prompt_.size());
  if (ctx.feeds_stages() && !ids.empty()) out.payloads.push_back(HiddenPayload("hidden"));  // the state that made the token
  tokens_at_seq_[++seq_] = (tokens_at_seq_.empty() ? 0 : tokens_at_seq_.rbegin()->second) + int64_t(ids.size());
  return ctx.Emit(std::move(out));
}

Result<pipeline::StepResult> LlmWorker::Step(pipeline::StepContext& ctx) {
  using pipeline::StepResult;
  const int64_t i = int64_t(generated_.size());
  const TokenId token = sampler_->Sample(logits_, config_.decoder.vocab_size, context_);
  pending_ = {token};
  generated_.push_back(token);
  kept_ = int64_t(generated_.size());
  if (!ctx.request().ignore_stop_tokens && std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end()) {
    if (config_.closing_state && ctx.feeds_stages()) {
      pipeline::Output out;
      out.kind = "token";
      out.fields = {{"token_ids", Json::array()}, {"text", ""}};
      out.watermark = int64_t(prompt_.size());
      out.payloads.push_back(HiddenPayload("closing_hidden"));
      tokens_at_seq_[++seq_] = tokens_at_seq_.empty() ? 0 : tokens_at_seq_.rbegin()->second;  // an event, no token
      OE_RETURN_IF_ERROR(ctx.Emit(std::move(out)).status());
    }
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

Json LlmWorker::MediaMetrics() const {
  Json out = {{"items", int64_t(media_items_)}, {"tokens", media_tokens_}, {"bytes_received", media_bytes_},
              {"wait_ms", media_wait_ms_}};
  for (const auto& [kind, fields] : media_kinds_.items()) {
    out[kind] = fields;
    const double seconds = fields.value("seconds", 0.0);
    if (kind == "audio" && seconds > 0) out[kind]["tokens_per_second"] = fields.value("tokens", 0.0) / seconds;
  }
  return out;
}

Json LlmWorker::Metrics(const pipeline::StepContext& ctx) const {
  const int64_t n = int64_t(generated_.size());
  const double total_ms = ctx.ElapsedMs();
  const double decode_ms = n > 1 && last_ms_ > first_ms_ ? last_ms_ - first_ms_ : 0;
  const double backend_ms = 1000.0 * (decoder_->backend_seconds() - backend_before_);
  // The controller's own time per generated token is the decode loop's only: the prefill's (its
  // cache migrations: allocating, copying and moving the larger buckets onto huge pages) is
  // reported apart, so it does not read as a cost that grows with every token.
  const double decode_controller_ms =
      (total_ms - decode_begin_ms_) - 1000.0 * (decoder_->backend_seconds() - decode_backend_before_);
  const double prefill_backend_ms = 1000.0 * (decode_backend_before_ - backend_before_);
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
          {"controller_ms_per_token", n > 0 ? decode_controller_ms / double(n) : 0.0},
          {"prefill_controller_ms", std::max(0.0, prefill_ms_ - prefill_backend_ms)},
          {"bytes_per_decode_step", StepBytesJson(decoder_->last_decode_bytes())},
          {"bytes_per_prefill_chunk", StepBytesJson(decoder_->last_prefill_bytes())},
          {"kv_cache_pages", {{"bytes", decoder_->kv_pages().eligible_bytes},
                              {"huge_bytes", decoder_->kv_pages().huge_bytes},
                              {"detail", decoder_->kv_pages().detail}}},
          {"peak_rss_mb", PeakRssMb()},
          {"media", MediaMetrics()}};
}

Json LlmWorker::Inspect() const {
  Json out = {{"context", context_}, {"pending", pending_}, {"reply_kept", kept_}};
  const std::string bytes = decoder_->recurrent_state();
  if (!bytes.empty()) {
    out["recurrent"] = {{"position", decoder_->position()}, {"sha256", Sha256Hex(bytes.data(), bytes.size())},
                        {"bytes", int64_t(bytes.size())}, {"last_rewind", decoder_->last_rewind()}};
  }
  return out;
}

Status LlmWorker::Rewind(int64_t shown) {
  // Of the reply's first kept_ tokens in the state, all but a pending last one were fed back;
  // keep the first `shown`.
  const int64_t k = kept_;
  if (shown >= k) return Status::Ok();
  const int64_t fed = pending_.empty() ? k : k - 1;
  const int64_t keep_fed = std::max<int64_t>(0, shown - 1);
  const int64_t length = int64_t(context_.size()) - (fed - keep_fed);
  Status st = decoder_->Rewind(length, context_);
  if (!st.ok()) return Fail(st);
  context_.resize(size_t(length));
  pending_.clear();
  if (shown > 0) pending_.push_back(generated_[size_t(shown - 1)]);
  kept_ = shown;
  return Status::Ok();
}

Status LlmWorker::KeepOutput(int64_t tokens) {
  if (poisoned_) return Status::Error("session_poisoned", "an earlier error left the session unusable; call Reset()");
  if (tokens < 0 || tokens > kept_) {
    return Status::Error("invalid_argument", "the last reply holds " + std::to_string(kept_) + " tokens in the context; "
                                             "cannot keep " + std::to_string(tokens));
  }
  return Rewind(tokens);
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
  kept_ = 0;
  return decoder_->Reset();
}

Status LlmWorker::Reset() {
  poisoned_ = false;
  return Forget();
}

}  // namespace omni_edge::llm
