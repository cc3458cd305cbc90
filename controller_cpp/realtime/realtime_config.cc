#include "realtime/realtime_config.h"

#include <set>

namespace omni_edge::realtime {
namespace {

constexpr int64_t kMinRate = 8000, kMaxRate = 48000;

Status Refuse(const std::string& where, const std::string& why) { return Status::Error("invalid_value", where + ": " + why); }

// {"type": "audio/pcm", "rate": R} (GA) or "pcm16" (beta).
Status ReadFormat(const Json& f, const std::string& where, int64_t* rate) {
  if (f.is_string()) {
    if (f.get<std::string>() != "pcm16") return Refuse(where, "only pcm16 (audio/pcm) is served");
    return Status::Ok();
  }
  FieldReader r(f, where);
  const std::string type = r.String("type");
  const int64_t got = r.Int("rate", false, 1, *rate);
  OE_RETURN_IF_ERROR(r.Done());
  if (type != "audio/pcm") return Refuse(where + ".type", "only audio/pcm is served, not " + type);
  if (got < kMinRate || got > kMaxRate) return Refuse(where + ".rate", "must be in [8000, 48000]");
  *rate = got;
  return Status::Ok();
}

Status ReadTurnDetection(const Json& t, const std::string& where, RealtimeConfig* c) {
  if (t.is_null()) {
    c->turn_detection.reset();
    return Status::Ok();
  }
  OE_ASSIGN_OR_RETURN(TurnDetectionConfig td, TurnDetectionFromJson(t, where));
  c->turn_detection = td;
  return Status::Ok();
}

Status ReadModalities(const Json& m, const std::string& where, RealtimeConfig* c) {
  if (!m.is_array() || m.empty()) return Refuse(where, "a list of \"audio\" and/or \"text\"");
  std::set<std::string> got;
  for (const Json& v : m) {
    if (!v.is_string() || (v != "audio" && v != "text")) return Refuse(where, "only \"audio\" and \"text\"");
    got.insert(v.get<std::string>());
  }
  c->audio_out = got.count("audio") > 0;  // audio always comes with its transcript
  return Status::Ok();
}

Status ReadAudio(const Json& audio, const std::string& where, RealtimeConfig* c) {
  FieldReader r(audio, where);
  const Json* in = r.Object("input", false);
  const Json* out = r.Object("output", false);
  OE_RETURN_IF_ERROR(r.Done());
  if (in != nullptr) {
    for (auto it = in->begin(); it != in->end(); ++it) {
      const std::string w = where + ".input." + it.key();
      if (it.key() == "format") OE_RETURN_IF_ERROR(ReadFormat(it.value(), w, &c->input_rate));
      else if (it.key() == "turn_detection") OE_RETURN_IF_ERROR(ReadTurnDetection(it.value(), w, c));
      else if ((it.key() == "transcription" || it.key() == "noise_reduction") && it.value().is_null()) continue;
      else return Refuse(w, "not served");
    }
  }
  if (out != nullptr) {
    for (auto it = out->begin(); it != out->end(); ++it) {
      const std::string w = where + ".output." + it.key();
      if (it.key() == "format") OE_RETURN_IF_ERROR(ReadFormat(it.value(), w, &c->output_rate));
      else if (it.key() == "voice") {
        if (!it.value().is_string()) return Refuse(w, "a string");
        c->voice = it.value().get<std::string>();
      } else if (it.key() == "speed" && it.value().is_number() && it.value().get<double>() == 1.0) continue;
      else return Refuse(w, "not served");
    }
  }
  return Status::Ok();
}

Status ReadMaxTokens(const Json& v, const std::string& where, int64_t* out) {
  if (v.is_string() && v == "inf") {
    *out = 0;
    return Status::Ok();
  }
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 4096) return Refuse(where, "1 to 4096, or \"inf\"");
  *out = v.get<int64_t>();
  return Status::Ok();
}

}  // namespace

Status ApplySession(const Json& session, RealtimeConfig* config) {
  if (!session.is_object()) return Refuse("session", "must be an object");
  RealtimeConfig c = *config;  // applied whole or not at all
  for (auto it = session.begin(); it != session.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    const std::string w = "session." + k;
    if (k == "type") {
      if (v != "realtime") return Refuse(w, "only \"realtime\" sessions are served");
    } else if (k == "instructions") {
      if (!v.is_string()) return Refuse(w, "a string");
      c.instructions = v.get<std::string>();
    } else if (k == "output_modalities" || k == "modalities") {
      OE_RETURN_IF_ERROR(ReadModalities(v, w, &c));
    } else if (k == "audio") {
      OE_RETURN_IF_ERROR(ReadAudio(v, w, &c));
    } else if (k == "input_audio_format") {
      OE_RETURN_IF_ERROR(ReadFormat(v, w, &c.input_rate));
    } else if (k == "output_audio_format") {
      OE_RETURN_IF_ERROR(ReadFormat(v, w, &c.output_rate));
    } else if (k == "turn_detection") {
      OE_RETURN_IF_ERROR(ReadTurnDetection(v, w, &c));
    } else if (k == "voice") {
      if (!v.is_string()) return Refuse(w, "a string");
      c.voice = v.get<std::string>();
    } else if (k == "max_output_tokens" || k == "max_response_output_tokens") {
      OE_RETURN_IF_ERROR(ReadMaxTokens(v, w, &c.max_output_tokens));
    } else if (k == "tools" && v.is_array() && v.empty()) {
      continue;
    } else if ((k == "model" || k == "tool_choice" || k == "tracing" || k == "include" || k == "id" || k == "object")) {
      continue;  // what clients echo back from session.created
    } else {
      return Refuse(w, "not served");
    }
  }
  if (c.voice != "default") return Refuse("session.audio.output.voice", "this plan speaks one voice, \"default\"");
  *config = c;
  return Status::Ok();
}

Json SessionObject(const RealtimeConfig& c, const std::string& id, const std::string& model) {
  const Json pcm_in = {{"type", "audio/pcm"}, {"rate", c.input_rate}};
  const Json pcm_out = {{"type", "audio/pcm"}, {"rate", c.output_rate}};
  return {{"type", "realtime"},
          {"object", "realtime.session"},
          {"id", id},
          {"model", model},
          {"instructions", c.instructions},
          {"output_modalities", c.audio_out ? Json::array({"audio"}) : Json::array({"text"})},
          {"audio",
           {{"input", {{"format", pcm_in}, {"turn_detection", c.turn_detection ? ToJson(*c.turn_detection) : Json()},
                       {"transcription", nullptr}, {"noise_reduction", nullptr}}},
            {"output", {{"format", pcm_out}, {"voice", c.voice}, {"speed", 1.0}}}}},
          {"max_output_tokens", c.max_output_tokens > 0 ? Json(c.max_output_tokens) : Json("inf")},
          {"tools", Json::array()},
          {"tool_choice", "auto"}};
}

}  // namespace omni_edge::realtime
