#include "realtime/realtime_session.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/base64.h"
#include "base/pcm.h"
#include "base/wav.h"

namespace omni_edge::realtime {
namespace {

std::string NewId(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + "_" + hex;
}

}  // namespace

RealtimeSession::RealtimeSession(pipeline::Session& session, RealtimeOptions options, Emit emit)
    : session_(session), options_(std::move(options)), emit_(std::move(emit)), id_(NewId("sess")) {}

Result<std::unique_ptr<RealtimeSession>> RealtimeSession::Open(pipeline::Session& session, const RealtimeOptions& options,
                                                               Emit emit) {
  std::unique_ptr<RealtimeSession> rt(new RealtimeSession(session, options, std::move(emit)));
  const Json info = session.Info();
  if (!info["streams"].contains("audio") || !info["streams"].contains("text")) {
    return Status::Error("invalid_plan", "a realtime session needs an omni plan: a text and an audio stream");
  }
  rt->stream_rate_ = info["streams"]["audio"].value("sample_rate", int64_t(24000));
  for (const StagePlan& s : session.plan().stages) rt->hears_ |= s.model_stage == "audio_encoder";
  const std::optional<VoiceActivityPlan>& vad = session.plan().voice_activity;
  if (vad && rt->hears_) {
    rt->vad_backends_ = std::make_unique<BackendPool>();
    OE_ASSIGN_OR_RETURN(auto silero, SileroVad::Open(*vad, !options.allow_unqualified, *rt->vad_backends_));
    OE_ASSIGN_OR_RETURN(auto resampler, media::StreamResampler::Create(rt->config_.input_rate, SileroVad::kSampleRate));
    rt->vad_ = std::make_unique<VoiceActivity>(std::move(silero), std::move(resampler), *rt->config_.turn_detection);
  } else {
    rt->config_.turn_detection.reset();  // the client commits each turn
  }
  rt->Send({{"type", "session.created"}, {"session", SessionObject(rt->config_, rt->id_, options.model)}});
  return rt;
}

RealtimeSession::~RealtimeSession() { Close(); }

void RealtimeSession::Close() {
  {
    std::lock_guard<std::mutex> lock(emit_mu_);
    closed_ = true;
  }
  cancel_ = true;
  if (responding_) session_.Cancel();
  WaitResponse();
}

double RealtimeSession::NowMs() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - opened_).count();
}

double RealtimeSession::StreamMs(int64_t samples) const { return 1000.0 * double(samples) / double(config_.input_rate); }

void RealtimeSession::Send(Json event) {
  event["event_id"] = NewId("event");
  std::lock_guard<std::mutex> lock(emit_mu_);
  if (closed_) return;
  emit_(event);
}

void RealtimeSession::Error(const std::string& code, const std::string& message, const Json& client_event_id,
                            const std::string& param) {
  Json error = {{"type", "invalid_request_error"}, {"code", code}, {"message", message},
                {"event_id", client_event_id.is_string() ? client_event_id : Json()}};
  error["param"] = param.empty() ? Json() : Json(param);
  Send({{"type", "error"}, {"error", error}});
}

void RealtimeSession::Receive(const std::string& text) {
  auto parsed = ParseJson(text, "event", 32);
  if (!parsed.ok() || !parsed->is_object()) {
    Error("invalid_json", parsed.ok() ? "an event is a JSON object" : parsed.status().message(), Json());
    return;
  }
  const Json& event = *parsed;
  const Json id = event.contains("event_id") ? event["event_id"] : Json();
  if (!event.contains("type") || !event["type"].is_string()) {
    Error("missing_type", "the event has no \"type\"", id, "type");
    return;
  }
  try {
    Dispatch(event["type"].get<std::string>(), event);
  } catch (const std::exception& e) {  // a field of the wrong JSON type deep in an event
    Error("invalid_event", e.what(), id);
  }
}

void RealtimeSession::Dispatch(const std::string& type, const Json& event) {
  const Json id = event.value("event_id", Json());
  if (type == "session.update") UpdateSession(event);
  else if (type == "input_audio_buffer.append") Append(event);
  else if (type == "input_audio_buffer.commit") Commit(id, -1, -1, false);
  else if (type == "input_audio_buffer.clear") ClearInput();
  else if (type == "conversation.item.create") CreateItem(event);
  else if (type == "conversation.item.truncate") Truncate(event);
  else if (type == "response.create") CreateResponse(event);
  else if (type == "response.cancel") CancelResponse("client_cancelled", id);
  else if (type == "playback.ack") Ack(event);
  else if (type == "conversation.item.delete" || type == "conversation.item.retrieve" || type == "output_audio_buffer.clear") {
    Error("unsupported", type + " is not served: the thinker's resident context can only be cut back at its end "
                                "(conversation.item.truncate)", id);
  } else {
    Error("unknown_event", "unknown event type '" + type + "'", id, "type");
  }
}

void RealtimeSession::UpdateSession(const Json& event) {
  const Json id = event.value("event_id", Json());
  if (!event.contains("session")) return Error("missing_required_parameter", "session.update needs \"session\"", id, "session");
  RealtimeConfig next = config_;
  Status st = ApplySession(event["session"], &next);
  if (st.ok() && next.turn_detection && !vad_) {
    st = Status::Error("invalid_value", hears_ ? "this plan has no voice_activity component: turn_detection must be null"
                                               : "this plan's thinker does not hear (no audio encoder)");
  }
  if (!st.ok()) return Error(st.reason(), st.message(), id, "session");
  if (next.input_rate != config_.input_rate && vad_) {
    auto resampler = media::StreamResampler::Create(next.input_rate, SileroVad::kSampleRate);
    if (!resampler.ok()) return Error("invalid_value", resampler.status().message(), id, "session");
    vad_->Restart(std::move(resampler.value()));
    input_.clear();
    input_start_ = stream_samples_ = 0;  // the stream starts again at the new rate
  }
  // Only a change of turn detection forgets a turn in progress; other settings leave the input alone.
  if (next.turn_detection != config_.turn_detection) {
    if (vad_ && next.turn_detection) vad_->Configure(*next.turn_detection);
    turn_start_ms_ = -1;
  }
  config_ = next;
  Send({{"type", "session.updated"}, {"session", SessionObject(config_, id_, options_.model)}});
}

void RealtimeSession::Append(const Json& event) {
  const Json id = event.value("event_id", Json());
  if (!event.contains("audio") || !event["audio"].is_string()) {
    return Error("missing_required_parameter", "input_audio_buffer.append needs \"audio\" (base64 PCM16)", id, "audio");
  }
  auto bytes = Base64Decode(event["audio"].get<std::string>());
  if (!bytes.ok() || bytes->size() % 2 != 0) {
    return Error("invalid_value", "audio: not base64 of whole 16-bit samples", id, "audio");
  }
  AppendSamples(DecodePcm16(*bytes), id);
}

void RealtimeSession::AppendPcm16(const int16_t* samples, size_t n) {
  AppendSamples(DecodePcm16(std::string(reinterpret_cast<const char*>(samples), n * sizeof(int16_t))), Json());
}

void RealtimeSession::AppendSamples(const std::vector<float>& samples, const Json& id) {
  const int64_t cap = options_.max_turn_seconds * config_.input_rate;
  if (int64_t(input_.size() + samples.size()) > cap) {
    return Error("input_audio_buffer_full", "the input buffer holds at most " + std::to_string(options_.max_turn_seconds) +
                                                " s: commit or clear it", id);
  }
  input_.insert(input_.end(), samples.begin(), samples.end());
  stream_samples_ += int64_t(samples.size());
  if (!vad_ || !config_.turn_detection) return;
  auto changes = vad_->Push(samples.data(), samples.size());
  if (!changes.ok()) return Error(changes.status().reason(), changes.status().message(), id);
  OnTurnChanges(*changes, id);
  if (turn_start_ms_ < 0) {  // between turns only the prefix padding's worth is kept
    const int64_t keep = (config_.turn_detection->prefix_padding_ms + 1000) * config_.input_rate / 1000;
    const int64_t drop = int64_t(input_.size()) - keep;
    if (drop > 0) {
      input_.erase(input_.begin(), input_.begin() + drop);
      input_start_ += drop;
    }
  }
}

void RealtimeSession::OnTurnChanges(const std::vector<TurnDetector::Change>& changes, const Json& event_id) {
  for (const auto& c : changes) {
    if (c.started) {
      turn_start_ms_ = c.audio_start_ms;
      speech_item_ = NewId("item");
      const bool barge_in = responding_ && config_.turn_detection->interrupt_response;
      if (barge_in) {  // no audio delta goes out after speech_started
        std::lock_guard<std::mutex> lock(response_mu_);
        timing_.interrupted = NowMs();
        if (cancel_reason_.empty()) cancel_reason_ = "turn_detected";
        cancel_ = true;
      }
      Send({{"type", "input_audio_buffer.speech_started"}, {"audio_start_ms", c.audio_start_ms}, {"item_id", speech_item_}});
      if (barge_in) CancelResponse("turn_detected", Json());
      // What the client acknowledged as played is what was heard.
      Item* last = items_.empty() ? nullptr : items_.back().get();
      if (last != nullptr && last->role == "assistant" && last->played_ms >= 0 && last->played_ms < last->audio_ms) {
        const double heard = last->played_ms;
        Status st = CutReply(last, heard);
        if (st.ok()) SendTruncated(*last, heard);
        else Error(st.reason(), "the reply could not be cut back to what was played: " + st.message(), Json());
      }
    }
    if (c.stopped && turn_start_ms_ >= 0) {
      Send({{"type", "input_audio_buffer.speech_stopped"}, {"audio_end_ms", c.audio_end_ms}, {"item_id", speech_item_}});
      next_timing_ = Timing{};
      next_timing_.end_of_turn_wait = double(c.audio_end_ms - c.speech_end_ms);
      Commit(event_id, turn_start_ms_, c.audio_end_ms, config_.turn_detection->create_response);
    }
  }
}

void RealtimeSession::Commit(const Json& event_id, int64_t start_ms, int64_t end_ms, bool respond) {
  if (!hears_) return Error("unsupported", "this plan's thinker does not hear (no audio encoder)", event_id);
  const int64_t rate = config_.input_rate;
  const int64_t s0 = std::max(input_start_, start_ms < 0 ? input_start_ : start_ms * rate / 1000);
  const int64_t s1 = std::min(stream_samples_, end_ms < 0 ? stream_samples_ : end_ms * rate / 1000);
  if (s1 - s0 < rate / 10) {  // OpenAI's rule: at least 100 ms
    return Error("input_audio_buffer_commit_empty", "the input buffer holds less than 100 ms of audio", event_id);
  }
  std::vector<float> turn(input_.begin() + (s0 - input_start_), input_.begin() + (s1 - input_start_));
  std::string wav = WavHeader(rate, int64_t(turn.size()));
  omni_edge::AppendPcm16(turn.data(), int64_t(turn.size()), "float32", &wav);
  input_.erase(input_.begin(), input_.begin() + (s1 - input_start_));
  input_start_ = s1;
  const std::string previous = items_.empty() ? std::string() : items_.back()->id;
  auto item = std::make_unique<Item>();
  item->id = speech_item_.empty() ? NewId("item") : speech_item_;
  item->role = "user";
  item->audio_ms = StreamMs(int64_t(turn.size()));
  pending_.wavs.push_back(std::move(wav));
  turn_start_ms_ = -1;
  speech_item_.clear();
  const Json object = ItemObject(*item, "completed");
  const std::string item_id = item->id;
  {
    std::lock_guard<std::mutex> lock(response_mu_);
    items_.push_back(std::move(item));
  }
  next_timing_.committed = NowMs();
  Send({{"type", "input_audio_buffer.committed"}, {"previous_item_id", previous.empty() ? Json() : Json(previous)},
        {"item_id", item_id}});
  for (const char* type : {"conversation.item.added", "conversation.item.created", "conversation.item.done"}) {
    Send({{"type", type}, {"previous_item_id", previous.empty() ? Json() : Json(previous)}, {"item", object}});
  }
  if (respond) CreateResponse(Json{{"type", "response.create"}});
}

void RealtimeSession::ClearInput() {
  input_start_ = stream_samples_;
  input_.clear();
  turn_start_ms_ = -1;
  speech_item_.clear();
  if (vad_) vad_->ResetTurn();
  Send({{"type", "input_audio_buffer.cleared"}});
}

void RealtimeSession::CreateItem(const Json& event) {
  const Json id = event.value("event_id", Json());
  if (!event.contains("item") || !event["item"].is_object()) {
    return Error("missing_required_parameter", "conversation.item.create needs \"item\"", id, "item");
  }
  const Json& item = event["item"];
  if (item.value("type", std::string("message")) != "message" || item.value("role", std::string()) != "user") {
    return Error("unsupported", "only user messages are added: the thinker's context holds the replies it made itself",
                 id, "item.role");
  }
  if (!item.contains("content") || !item["content"].is_array() || item["content"].empty()) {
    return Error("missing_required_parameter", "a user message needs content", id, "item.content");
  }
  PendingInput add;
  for (const Json& part : item["content"]) {
    const std::string type = part.value("type", std::string());
    if (type == "input_text" && part.contains("text") && part["text"].is_string()) {
      add.texts.push_back(part["text"].get<std::string>());
    } else if (type == "input_audio" && part.contains("audio") && part["audio"].is_string() && hears_) {
      auto bytes = Base64Decode(part["audio"].get<std::string>());
      if (!bytes.ok() || bytes->size() % 2 != 0) return Error("invalid_value", "input_audio: not base64 PCM16", id, "item.content");
      std::string wav = WavHeader(config_.input_rate, int64_t(bytes->size() / 2)) + *bytes;
      add.wavs.push_back(std::move(wav));
    } else {
      return Error("invalid_value", "content parts are input_text or input_audio (on a plan that hears)", id, "item.content");
    }
  }
  pending_.texts.insert(pending_.texts.end(), add.texts.begin(), add.texts.end());
  pending_.wavs.insert(pending_.wavs.end(), add.wavs.begin(), add.wavs.end());
  const std::string previous = items_.empty() ? std::string() : items_.back()->id;
  auto stored = std::make_unique<Item>();
  stored->id = item.value("id", NewId("item"));
  stored->role = "user";
  const Json object = ItemObject(*stored, "completed");
  {
    std::lock_guard<std::mutex> lock(response_mu_);
    items_.push_back(std::move(stored));
  }
  for (const char* type : {"conversation.item.added", "conversation.item.created", "conversation.item.done"}) {
    Send({{"type", type}, {"previous_item_id", previous.empty() ? Json() : Json(previous)}, {"item", object}});
  }
}

void RealtimeSession::SendTruncated(const Item& item, double audio_end_ms) {
  // Extension fields: the transcript the thinker now holds and how the audio was mapped to it.
  Send({{"type", "conversation.item.truncated"}, {"item_id", item.id}, {"content_index", 0},
        {"audio_end_ms", int64_t(std::llround(audio_end_ms))}, {"transcript", item.transcript},
        {"kept_tokens", item.kept_tokens}, {"alignment", item.alignment}});
}

Json RealtimeSession::ItemObject(const Item& item, const std::string& status) const {
  Json content = Json::array();
  if (item.role == "user") {
    content.push_back({{"type", "input_audio"}, {"transcript", nullptr}});
  } else if (config_.audio_out) {
    content.push_back({{"type", "output_audio"}, {"transcript", item.transcript}});
  } else {
    content.push_back({{"type", "output_text"}, {"text", item.transcript}});
  }
  return {{"id", item.id}, {"object", "realtime.item"}, {"type", "message"}, {"role", item.role}, {"status", status},
          {"content", content}};
}

void RealtimeSession::WaitResponse() {
  if (response_thread_.joinable() && response_thread_.get_id() != std::this_thread::get_id()) response_thread_.join();
}

Json RealtimeSession::Info() const {
  std::lock_guard<std::mutex> lock(response_mu_);
  Json items = Json::array();
  for (const auto& it : items_) {
    items.push_back({{"id", it->id}, {"role", it->role}, {"transcript", it->transcript}, {"audio_ms", it->audio_ms},
                     {"played_ms", it->played_ms}, {"cut", it->cut}, {"tokens", it->ledger.tokens()},
                     {"kept_tokens", it->kept_tokens}, {"alignment", it->alignment}});
  }
  const int64_t context = ContextTokens(session_.Info());
  return {{"session", SessionObject(config_, id_, options_.model)}, {"items", items}, {"context_tokens", context},
          {"responses", responses_}, {"speaking", vad_ != nullptr && vad_->speaking()}, {"responding", responding_.load()},
          {"last_timing", last_timing_}};
}

}  // namespace omni_edge::realtime
