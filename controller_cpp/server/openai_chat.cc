#include "server/openai_chat.h"

#include <cstdio>
#include <limits>

#include "base/base64.h"
#include "server/openai_common.h"

namespace omni_edge::server {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();  // the C ABI's int fields

// "0", "2", "0.5": a bound as a person writes it.
std::string Bound(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", x);
  return text;
}

// A data URL's bytes: data:<type>;base64,<data> (a server on a device fetches no URLs).
Result<std::string> DataUrl(const std::string& url, const std::string& param, size_t max_bytes) {
  const size_t comma = url.find(',');
  if (url.rfind("data:", 0) != 0 || comma == std::string::npos || comma < 12 || url.compare(comma - 7, 7, ";base64") != 0) {
    return Refuse(param, "a data URL (data:<type>;base64,<data>) is needed: this server fetches nothing");
  }
  const size_t encoded = url.size() - comma - 1;
  if (encoded == 0) return Refuse(param, "an empty data URL");
  if (encoded / 4 * 3 > max_bytes + 2) {
    return Refuse(param, "about " + std::to_string(encoded / 4 * 3) + " bytes (at most " + std::to_string(max_bytes) + ")");
  }
  return Base64Decode(url.substr(comma + 1));
}

Status AddMedia(const std::string& kind, Result<std::string> bytes, const std::string& param, const ChatLimits& limits,
                ChatCompletionRequest* out) {
  if (!bytes.ok()) return Refuse(param, bytes.status().message());
  if (bytes->size() > limits.max_media_bytes) {
    return Refuse(param, std::to_string(bytes->size()) + " bytes (at most " + std::to_string(limits.max_media_bytes) + ")");
  }
  if (out->media.size() >= limits.max_media) return Refuse(param, "more than " + std::to_string(limits.max_media) + " media items");
  out->media.push_back({kind, std::move(*bytes)});
  return Status::Ok();
}

// One part of a message's content: text, an image (a data URL) or audio (base64 WAV).
Status ReadPart(const Json& part, const std::string& where, bool media_allowed, const ChatLimits& limits,
                ChatCompletionRequest* out, std::string* text) {
  FieldReader f(part, where);
  const std::string type = f.String("type");
  f.Raw("prompt_cache_breakpoint");  // a hint for a hosted cache: nothing to do here
  if (!f.ok()) return f.status();
  if (type == "text") {
    const std::string piece = f.String("text", true, false);
    *text += (text->empty() ? "" : "\n") + piece;  // parts are joined by newlines, as vLLM does
    OE_RETURN_IF_ERROR(NoNul(piece, where + ".text"));
    return f.Done();
  }
  if (type != "image_url" && type != "input_audio") {
    return Refuse(where + ".type", "must be text, image_url or input_audio, got '" + type + "'");
  }
  if (!media_allowed) return Refuse(where, "images and audio are read in the last message, the user's, only");
  const Json* inner = f.Object(type.c_str());
  if (!f.ok()) return f.status();
  FieldReader item(*inner, f.Path(type));
  if (type == "image_url") {
    const std::string url = item.String("url");
    item.OptionalString("detail");
    OE_RETURN_IF_ERROR(item.Done());
    OE_RETURN_IF_ERROR(AddMedia("image", DataUrl(url, item.Path("url"), limits.max_media_bytes), item.Path("url"), limits, out));
  } else {
    const std::string data = item.String("data");
    const std::string format = item.String("format");
    OE_RETURN_IF_ERROR(item.Done());
    if (format != "wav") return Refuse(item.Path("format"), "must be wav, got '" + format + "'");
    OE_RETURN_IF_ERROR(AddMedia("audio", Base64Decode(data), item.Path("data"), limits, out));
  }
  return f.Done();
}

Status ReadMessage(const Json& message, const std::string& where, bool last, const ChatLimits& limits,
                   ChatCompletionRequest* out) {
  FieldReader f(message, where);
  Message turn;
  turn.role = f.String("role");
  f.OptionalString("name");
  const Json* content = f.Raw("content");
  // What a returned assistant message carries when a client sends it back (openai's
  // model_dump keeps every key): read and let go, unless it asks for a tool.
  for (const char* echoed : {"refusal", "annotations", "audio"}) f.Raw(echoed);
  for (const char* tool : {"tool_calls", "function_call"}) {
    const Json* call = f.Raw(tool);
    if (call != nullptr && !call->is_null() && !call->empty()) return Refuse(where + "." + tool, "tools are not served");
  }
  OE_RETURN_IF_ERROR(f.Done());
  if (turn.role == "developer") turn.role = "system";
  if (turn.role != "system" && turn.role != "user" && turn.role != "assistant") {
    return Refuse(where + ".role", "must be system, developer, user or assistant, got '" + turn.role + "'");
  }
  const std::string path = where + ".content";
  if (content == nullptr || content->is_null()) {
    if (turn.role != "assistant") return Refuse(path, "required");
  } else if (content->is_string()) {
    turn.text = content->get<std::string>();
    OE_RETURN_IF_ERROR(NoNul(turn.text, path));
  } else if (content->is_array()) {
    for (size_t i = 0; i < content->size(); ++i) {
      OE_RETURN_IF_ERROR(ReadPart((*content)[i], path + "[" + std::to_string(i) + "]", last && turn.role == "user", limits,
                                  out, &turn.text));
    }
  } else {
    return Refuse(path, std::string("expected a string or a list of parts, got ") + JsonTypeName(*content));
  }
  out->messages.push_back(std::move(turn));
  return Status::Ok();
}

// A present, non-null number within [lo, hi] (inclusive unless `open_low`).
Status OptionalNumber(FieldReader& f, const char* name, double lo, double hi, bool open_low, std::optional<double>* out) {
  const Json* v = f.Raw(name);
  if (v == nullptr || v->is_null()) return Status::Ok();
  const double x = v->is_number() ? v->get<double>() : std::numeric_limits<double>::quiet_NaN();
  if (!(open_low ? x > lo : x >= lo) || !(x <= hi)) {
    return Refuse(name, "must be a number in " + std::string(open_low ? "(" : "[") + Bound(lo) + ", " + Bound(hi) + "]");
  }
  *out = x;
  return Status::Ok();
}

Status ReadStop(FieldReader& f, ChatCompletionRequest* out) {
  const Json* stop = f.Raw("stop");
  if (stop == nullptr || stop->is_null()) return Status::Ok();
  if (stop->is_string()) {
    out->stop.push_back(stop->get<std::string>());
  } else if (stop->is_array() && stop->size() <= 4) {
    for (const Json& s : *stop) {
      if (!s.is_string()) return Refuse("stop", "expected strings");
      out->stop.push_back(s.get<std::string>());
    }
  } else {
    return Refuse("stop", "expected a string or a list of up to 4");
  }
  for (const auto& s : out->stop) {
    if (s.empty()) return Refuse("stop", "an empty stop string");
    OE_RETURN_IF_ERROR(NoNul(s, "stop"));
  }
  return Status::Ok();
}

// modalities, audio {format, voice} and vLLM-Omni's top-level voice.
Status ReadAudio(FieldReader& f, ChatCompletionRequest* out) {
  if (const Json* modalities = f.Array("modalities", false)) {
    for (const Json& m : *modalities) {
      if (!m.is_string() || (m != "text" && m != "audio")) return Refuse("modalities", "each is \"text\" or \"audio\"");
      if (m == "audio") out->audio_out = true;
    }
  }
  if (const Json* audio = f.Object("audio", false)) {
    FieldReader a(*audio, f.Path("audio"));
    out->audio_format = a.String("format");
    auto voice = ReadVoice(a.Raw("voice"), "audio.voice");
    OE_RETURN_IF_ERROR(a.Done());
    if (out->audio_format != "wav" && out->audio_format != "pcm16") {
      return Refuse("audio.format", "must be wav or pcm16, got '" + out->audio_format + "'");
    }
    if (!voice.ok()) return voice.status();
    out->voice = *voice;
  }
  if (auto voice = f.OptionalString("voice")) out->voice = *voice;
  return Status::Ok();
}

// Fields a client may send that change nothing here, refused only when they would.
Status ReadInert(FieldReader& f) {
  f.OptionalString("user");
  f.Object("metadata", false);
  f.Bool("store", false);
  f.OptionalString("service_tier");
  if (f.Int("n", false, 1, 1) != 1) return Refuse("n", "only 1 choice is made");
  if (f.Bool("logprobs", false)) return Refuse("logprobs", "not reported by this server");
  for (const char* penalty : {"frequency_penalty", "presence_penalty"}) {
    if (f.Number(penalty, false, 0.0) != 0.0) return Refuse(penalty, "only 0 is supported (see top_k, top_p, temperature)");
  }
  return f.status();
}

}  // namespace

namespace {

Result<ChatCompletionRequest> Parse(const std::string& body, const ChatLimits& limits) {
  auto json = ParseBody(body);
  if (!json.ok()) return json.status();
  FieldReader f(*json, kRequestRoot);
  ChatCompletionRequest r;
  r.model = f.String("model");
  const Json* messages = f.Array("messages");
  const int64_t max_tokens = f.Int("max_tokens", false, 1, 0);
  const int64_t max_completion_tokens = f.Int("max_completion_tokens", false, 1, 0);
  r.max_tokens = max_completion_tokens > 0 ? max_completion_tokens : max_tokens;
  if (r.max_tokens > kMaxInt) return Refuse("max_tokens", "at most " + std::to_string(kMaxInt));
  if (const Json* k = f.Raw("top_k"); k != nullptr && !k->is_null()) {
    int64_t top_k = 0;
    if (!CheckInt(*k, "top_k", -1, &top_k).ok() || top_k > kMaxInt) return Refuse("top_k", "must be an integer in [-1, 2^31)");
    r.top_k = std::max<int64_t>(top_k, 0);  // -1 (vLLM) and 0: no top-k
  }
  if (const Json* seed = f.Raw("seed"); seed != nullptr && !seed->is_null()) {
    int64_t value = 0;
    if (!CheckInt(*seed, "seed", std::nullopt, &value).ok()) return Refuse("seed", "must be an integer within int64");
    r.seed = uint64_t(value);
  }
  r.stream = f.Bool("stream", false);
  r.ignore_eos = f.Bool("ignore_eos", false);
  r.max_audio_frames = f.Int("max_audio_frames", false, 1, 0);
  if (r.max_audio_frames > kMaxInt) return Refuse("max_audio_frames", "at most " + std::to_string(kMaxInt));
  if (const Json* options = f.Object("stream_options", false)) {
    FieldReader o(*options, f.Path("stream_options"));
    r.include_usage = o.Bool("include_usage", false);
    o.Bool("include_obfuscation", false);
    OE_RETURN_IF_ERROR(o.Done());
  }
  OE_RETURN_IF_ERROR(OptionalNumber(f, "temperature", 0, 2, false, &r.temperature));
  OE_RETURN_IF_ERROR(OptionalNumber(f, "top_p", 0, 1, true, &r.top_p));
  OE_RETURN_IF_ERROR(ReadStop(f, &r));
  OE_RETURN_IF_ERROR(ReadAudio(f, &r));
  if (r.audio_out && r.stream && r.audio_format != "pcm16") {
    return Refuse("audio.format", "a stream carries its audio as pcm16 chunks (as OpenAI's does): ask for pcm16, or "
                  "for wav without stream");
  }
  OE_RETURN_IF_ERROR(ReadInert(f));
  OE_RETURN_IF_ERROR(f.Done());
  if (messages->empty() || messages->size() > limits.max_messages) {
    return Refuse("messages", "from 1 to " + std::to_string(limits.max_messages) + " messages");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    OE_RETURN_IF_ERROR(ReadMessage((*messages)[i], "messages[" + std::to_string(i) + "]", i + 1 == messages->size(), limits, &r));
  }
  return r;
}

}  // namespace

Result<ChatCompletionRequest> ParseChatCompletion(const std::string& body, const ChatLimits& limits) {
  auto r = Parse(body, limits);
  if (!r.ok()) return AsInvalidRequest(r.status());  // the field readers' too
  return r;
}

std::string FinishReason(const std::string& controller_reason) {
  for (const char* limit : {"length", "context_full", "max_frames"}) {
    if (controller_reason == limit) return "length";
  }
  return "stop";
}

Json Usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

Json Chunk(const CompletionHead& head, const Json& delta, const std::string& finish_reason) {
  Json choice = {{"index", 0}, {"delta", delta}, {"logprobs", nullptr},
                 {"finish_reason", finish_reason.empty() ? Json() : Json(finish_reason)}};
  return {{"id", head.id}, {"object", "chat.completion.chunk"}, {"created", head.created}, {"model", head.model},
          {"choices", Json::array({choice})}};
}

Json UsageChunk(const CompletionHead& head, const Json& usage) {
  return {{"id", head.id}, {"object", "chat.completion.chunk"}, {"created", head.created}, {"model", head.model},
          {"choices", Json::array()}, {"usage", usage}};
}

Json Completion(const CompletionHead& head, const std::string& text, const std::string& finish_reason, const Json& usage,
                const Json& audio) {
  // With audio the text is its transcript, and content is null (as OpenAI answers).
  Json message = {{"role", "assistant"}, {"content", audio.is_null() ? Json(text) : Json()}, {"refusal", nullptr}};
  if (!audio.is_null()) message["audio"] = audio;
  Json choice = {{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  return {{"id", head.id}, {"object", "chat.completion"}, {"created", head.created}, {"model", head.model},
          {"choices", Json::array({choice})}, {"usage", usage}};
}

}  // namespace omni_edge::server
