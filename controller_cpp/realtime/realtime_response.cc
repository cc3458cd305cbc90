// RealtimeSession's responses: one at a time on a thread of their own, cancelled at the
// pipeline's next step, and cut back to what the listener heard.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/base64.h"
#include "base/pcm.h"
#include "base/wav.h"
#include "realtime/realtime_session.h"

namespace omni_edge::realtime {
namespace {

std::vector<float> PayloadSamples(const pipeline::Payload& p) {
  if (p.dtype == "int16") return DecodePcm16(p.bytes);
  std::vector<float> out(p.bytes.size() / sizeof(float));
  std::memcpy(out.data(), p.bytes.data(), out.size() * sizeof(float));
  return out;
}

std::vector<int64_t> TalkerAlignment(const Json& info) {
  for (const Json& stage : info["stages"]) {
    const Json& last = stage["last_request"];
    if (last.is_object() && last.contains("text_tokens_at_frame")) return last["text_tokens_at_frame"].get<std::vector<int64_t>>();
  }
  return {};
}

}  // namespace

int64_t RealtimeSession::ContextTokens(const Json& info, int64_t* reply_kept) {
  for (const Json& stage : info["stages"]) {
    const Json& last = stage["last_request"];
    if (last.is_object() && last.contains("context")) {
      if (reply_kept != nullptr) *reply_kept = last.value("reply_kept", int64_t(0));
      return int64_t(last["context"].size());
    }
  }
  return 0;
}

void RealtimeSession::CreateResponse(const Json& event) {
  const Json id = event.value("event_id", Json());
  if (responding_) return Error("conversation_already_has_active_response", "a response is in progress", id);
  WaitResponse();
  const Json options = event.contains("response") && event["response"].is_object() ? event["response"] : Json::object();
  RealtimeConfig c = config_;  // a response may override what the session says, for itself
  Json session_like = Json::object();
  for (const char* key : {"output_modalities", "modalities", "max_output_tokens", "instructions"}) {
    if (options.contains(key)) session_like[key] = options[key];
  }
  if (Status st = ApplySession(session_like, &c); !st.ok()) return Error(st.reason(), st.message(), id, "response");
  if (pending_.texts.empty() && pending_.wavs.empty()) {
    return Error("empty_input", "nothing new from the user to respond to (append audio or create a user item first)", id);
  }
  pipeline::Request r;
  r.chat = true;
  r.continue_conversation = conversation_;
  if (!conversation_) r.system_prompt = c.instructions;
  for (const std::string& t : pending_.texts) r.prompt += (r.prompt.empty() ? "" : "\n") + t;
  for (size_t i = 0; i < pending_.wavs.size(); ++i) {
    r.media.push_back({"audio", "turn-" + std::to_string(responses_ + 1) + "-" + std::to_string(i) + ".wav", pending_.wavs[i]});
  }
  r.max_new_tokens = c.max_output_tokens;
  pending_ = PendingInput{};
  const std::string previous = items_.empty() ? std::string() : items_.back()->id;
  auto item = std::make_unique<Item>();
  item->id = "item_" + id_.substr(5) + "_" + std::to_string(responses_ + 1);
  item->role = "assistant";
  item->ledger.set_sample_rate(stream_rate_);
  Item* raw = item.get();
  const std::string response_id = "resp_" + id_.substr(5) + "_" + std::to_string(++responses_);
  {
    std::lock_guard<std::mutex> lock(response_mu_);
    items_.push_back(std::move(item));
    cancel_reason_.clear();
    timing_ = next_timing_;
    timing_.started = NowMs();
  }
  next_timing_ = Timing{};
  cancel_ = false;
  responding_ = true;
  response_audio_out_ = c.audio_out;
  response_thread_ = std::thread([this, r, response_id, raw, previous] { RunResponse(r, response_id, raw, previous); });
}

void RealtimeSession::RunResponse(const pipeline::Request& request, const std::string& response_id, Item* item,
                                  const std::string& previous) {
  const int64_t resident = ContextTokens(session_.Info());
  Send({{"type", "response.created"},
        {"response", {{"id", response_id}, {"object", "realtime.response"}, {"status", "in_progress"},
                      {"output", Json::array()}, {"output_modalities", Json::array({response_audio_out_ ? "audio" : "text"})}}}});
  const Json object = ItemObject(*item, "in_progress");
  Send({{"type", "response.output_item.added"}, {"response_id", response_id}, {"output_index", 0}, {"item", object}});
  for (const char* type : {"conversation.item.added", "conversation.item.created"}) {
    Send({{"type", type}, {"previous_item_id", previous.empty() ? Json() : Json(previous)}, {"item", object}});
  }
  const Json part = response_audio_out_ ? Json{{"type", "audio"}, {"transcript", ""}} : Json{{"type", "text"}, {"text", ""}};
  Send({{"type", "response.content_part.added"}, {"response_id", response_id}, {"item_id", item->id}, {"output_index", 0},
        {"content_index", 0}, {"part", part}});
  output_resampler_.reset();
  if (stream_rate_ != config_.output_rate) {
    auto resampler = media::StreamResampler::Create(stream_rate_, config_.output_rate);
    if (resampler.ok()) output_resampler_ = std::make_unique<media::StreamResampler>(std::move(resampler.value()));
  }
  Result<Json> result = session_.Submit(request, [&](const pipeline::SessionEvent& e) { return Listen(e, response_id, item); });
  FinishResponse(result, response_id, item, resident);
}

bool RealtimeSession::Listen(const pipeline::SessionEvent& e, const std::string& response_id, Item* item) {
  if (cancel_) return false;
  if (e.terminal) return true;
  const Json scope = {{"response_id", response_id}, {"item_id", item->id}, {"output_index", 0}, {"content_index", 0}};
  if (e.stream == "text" && e.json.value("kind", std::string()) == "token") {
    const std::string text = e.json.value("text", std::string());
    {
      std::lock_guard<std::mutex> lock(response_mu_);
      item->ledger.Text(text, int64_t(e.json.value("token_ids", Json::array()).size()));
      if (!text.empty() && timing_.first_text < 0) timing_.first_text = NowMs();
    }
    if (text.empty()) return !cancel_;
    Json delta = scope;
    delta["type"] = response_audio_out_ ? "response.output_audio_transcript.delta" : "response.output_text.delta";
    delta["delta"] = text;
    Send(delta);
  } else if (e.stream == "audio" && e.payload != nullptr) {
    std::vector<float> samples = PayloadSamples(*e.payload);
    {
      std::lock_guard<std::mutex> lock(response_mu_);
      item->ledger.Audio(int64_t(samples.size()), e.json.value("frames_final", int64_t(0)));
    }
    if (!response_audio_out_) return !cancel_;
    if (output_resampler_) samples = output_resampler_->Push(samples.data(), samples.size());
    if (samples.empty()) return !cancel_;
    std::string bytes;
    omni_edge::AppendPcm16(samples.data(), int64_t(samples.size()), "float32", &bytes);
    {
      std::lock_guard<std::mutex> lock(response_mu_);
      if (timing_.first_audio < 0) timing_.first_audio = NowMs();
      timing_.last_audio = NowMs();
    }
    Json delta = scope;
    delta["type"] = "response.output_audio.delta";
    delta["delta"] = Base64Encode(bytes);
    if (cancel_) return false;  // nothing more once the response is cancelled
    Send(delta);
  }
  return !cancel_;
}

Json RealtimeSession::TimingJson(const Json& metrics) const {
  const Timing& t = timing_;
  auto since = [](double a, double b) { return a >= 0 && b >= 0 ? Json(b - a) : Json(); };
  // Voice to voice: the VAD's wait in audio time (a client streaming in real time waits as long),
  // then the processing from the commit to the first audio delta.
  const Json to_audio = since(t.committed, t.first_audio);
  Json out = {{"end_of_turn_wait_ms", t.end_of_turn_wait >= 0 ? Json(t.end_of_turn_wait) : Json()},
              {"commit_to_first_audio_ms", to_audio},
              {"voice_to_voice_ms", t.end_of_turn_wait >= 0 && to_audio.is_number()
                                        ? Json(t.end_of_turn_wait + to_audio.get<double>()) : Json()},
              {"first_text_ms", since(t.started, t.first_text)},
              {"first_audio_ms", since(t.started, t.first_audio)},
              {"interrupt_to_last_audio_ms", t.interrupted >= 0 ? Json(std::max(0.0, t.last_audio - t.interrupted)) : Json()},
              {"interrupt_to_done_ms", since(t.interrupted, t.done)}};
  const Json& text = metrics.value("text", Json::object());
  const Json& audio = metrics.value("audio", Json::object());
  out["prefill_ms"] = text.value("prefill_ms", Json());
  if (text.contains("media") && text["media"].is_object()) {
    const Json& media = text["media"];
    out["media_wait_ms"] = media.value("wait_ms", Json());
    if (media.contains("audio")) {
      out["audio_preprocess_ms"] = media["audio"].value("preprocess_ms", Json());
      out["audio_encode_ms"] = media["audio"].value("encode_ms", Json());
    }
  }
  out["pipeline_first_pcm_ms"] = audio.value("first_pcm_ms", Json());
  return out;
}

void RealtimeSession::FinishResponse(const Result<Json>& result, const std::string& response_id, Item* item,
                                     int64_t resident) {
  std::string status = "completed", reason;
  Json details = Json();
  {
    std::lock_guard<std::mutex> lock(response_mu_);
    timing_.done = NowMs();
    if (!cancel_reason_.empty()) {
      status = "cancelled";
      reason = cancel_reason_;
    } else if (cancel_) {
      status = "cancelled";
      reason = "client_cancelled";
    }
    item->transcript = item->ledger.transcript();
    item->audio_ms = item->ledger.audio_ms();
  }
  const Json terminals = result.ok() ? *result : Json::object();
  if (status == "cancelled") {
    details = {{"type", "cancelled"}, {"reason", reason}};
  } else if (!result.ok()) {
    status = "failed";
    details = {{"type", "failed"}, {"error", {{"type", result.status().reason()}, {"message", result.status().message()}}}};
  } else if (terminals.value("text", Json::object()).value("finish_reason", std::string()) == "length") {
    status = "incomplete";
    details = {{"type", "incomplete"}, {"reason", "max_output_tokens"}};
  }
  const Json scope = {{"response_id", response_id}, {"item_id", item->id}, {"output_index", 0}, {"content_index", 0}};
  Json done = scope;
  if (response_audio_out_) {
    done["type"] = "response.output_audio.done";
    Send(done);
    done["type"] = "response.output_audio_transcript.done";
    done["transcript"] = item->transcript;
  } else {
    done["type"] = "response.output_text.done";
    done["text"] = item->transcript;
  }
  Send(done);
  Json part = scope;
  part["type"] = "response.content_part.done";
  part["part"] = response_audio_out_ ? Json{{"type", "audio"}, {"transcript", item->transcript}}
                                     : Json{{"type", "text"}, {"text", item->transcript}};
  Send(part);
  const Json object = ItemObject(*item, status == "completed" ? "completed" : "incomplete");
  Send({{"type", "response.output_item.done"}, {"response_id", response_id}, {"output_index", 0}, {"item", object}});
  Send({{"type", "conversation.item.done"}, {"item", object}});
  const Json text = terminals.value("text", Json::object());
  const int64_t prompt = text.value("n_prompt_tokens", int64_t(0)), output = item->ledger.tokens();
  const Json usage = {{"total_tokens", resident + prompt + output}, {"input_tokens", resident + prompt},
                      {"output_tokens", output},
                      {"input_token_details", {{"cached_tokens", resident}, {"text_tokens", resident + prompt}}}};
  Json response = {{"id", response_id}, {"object", "realtime.response"}, {"status", status}, {"status_details", details},
                   {"output", Json::array({object})}, {"usage", usage},
                   {"output_modalities", Json::array({response_audio_out_ ? "audio" : "text"})}};
  Json timing;
  {
    std::lock_guard<std::mutex> lock(response_mu_);
    timing = TimingJson(terminals);
    last_timing_ = timing;
  }
  // Extension: the latency parts and the stages' own metrics (clients ignore unknown fields).
  Send({{"type", "response.done"}, {"response", response}, {"timing", timing}, {"metrics", terminals}});
  if (result.ok() || status == "cancelled") conversation_ = true;  // the thinker holds the conversation
  responding_ = false;
}

void RealtimeSession::CancelResponse(const std::string& reason, const Json& event_id) {
  if (!responding_) {
    if (reason == "client_cancelled") Error("response_cancel_not_active", "no response is in progress", event_id);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(response_mu_);
    if (cancel_reason_.empty()) cancel_reason_ = reason;
  }
  cancel_ = true;
  session_.Cancel();
  WaitResponse();  // within one step of each stage
}

Status RealtimeSession::CutReply(Item* item, double audio_end_ms) {
  if (responding_) return Status::Error("busy", "a response is in progress");
  const Item* last_assistant = nullptr;
  for (const auto& it : items_) {
    if (it->role == "assistant") last_assistant = it.get();
  }
  if (item != last_assistant) {
    return Status::Error("unsupported", "only the last reply can be cut back: later turns were built on the others");
  }
  const Json info = session_.Info();
  int64_t kept = 0;
  ContextTokens(info, &kept);
  const ReplyLedger::Cut cut = item->ledger.CutAt(audio_end_ms, TalkerAlignment(info), kept);
  if (cut.tokens < kept) OE_RETURN_IF_ERROR(session_.KeepOutput("text", cut.tokens));
  std::lock_guard<std::mutex> lock(response_mu_);
  item->transcript = cut.transcript;
  item->audio_ms = std::min(item->audio_ms, audio_end_ms);
  item->cut = true;
  item->kept_tokens = cut.tokens;
  item->alignment = cut.alignment;
  return Status::Ok();
}

void RealtimeSession::Truncate(const Json& event) {
  const Json id = event.value("event_id", Json());
  if (!event.contains("item_id") || !event["item_id"].is_string() || !event.contains("audio_end_ms") ||
      !event["audio_end_ms"].is_number() || event["audio_end_ms"].get<double>() < 0) {
    return Error("missing_required_parameter", "conversation.item.truncate needs item_id and audio_end_ms >= 0", id);
  }
  Item* item = nullptr;
  for (auto& it : items_) {
    if (it->id == event["item_id"].get<std::string>()) item = it.get();
  }
  if (item == nullptr || item->role != "assistant") return Error("item_not_found", "no assistant item with that id", id, "item_id");
  if (responding_ && items_.back().get() == item) CancelResponse("client_cancelled", Json());
  const double end = event["audio_end_ms"].get<double>();
  if (end > item->audio_ms + 1.0) {
    return Error("invalid_value", "audio_end_ms " + std::to_string(int64_t(end)) + " is past the item's " +
                                      std::to_string(int64_t(item->audio_ms)) + " ms of audio", id, "audio_end_ms");
  }
  if (Status st = CutReply(item, end); !st.ok()) return Error(st.reason(), st.message(), id, "item_id");
  SendTruncated(*item, end);
}

void RealtimeSession::Ack(const Json& event) {
  const Json id = event.value("event_id", Json());
  if (!event.contains("played_ms") || !event["played_ms"].is_number() || event["played_ms"].get<double>() < 0) {
    return Error("missing_required_parameter", "playback.ack needs played_ms >= 0", id, "played_ms");
  }
  std::lock_guard<std::mutex> lock(response_mu_);
  Item* item = nullptr;
  const std::string wanted = event.value("item_id", std::string());
  for (auto& it : items_) {
    if (it->role == "assistant" && (wanted.empty() || it->id == wanted)) item = it.get();
  }
  if (item != nullptr) item->played_ms = std::max(item->played_ms, event["played_ms"].get<double>());
}

}  // namespace omni_edge::realtime
