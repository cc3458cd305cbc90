#include "pipeline/request.h"

#include <climits>
#include <cmath>

namespace omni_edge::pipeline {
namespace {

std::vector<int32_t> Ids(FieldReader& r, const char* name) {
  std::vector<int32_t> out;
  const Json* list = r.Array(name, false);
  for (size_t i = 0; list != nullptr && r.ok() && i < list->size(); ++i) {
    int64_t v = 0;
    const std::string path = r.Path(name) + "[" + std::to_string(i) + "]";
    Status st = CheckInt((*list)[i], path, 0, &v);
    if (st.ok() && v > INT32_MAX) st = Status::Error("invalid_field", path + ": a token id is at most " + std::to_string(INT32_MAX));
    if (!st.ok()) r.Fail(st);
    out.push_back(int32_t(v));
  }
  return out;
}

std::vector<std::string> Strings(FieldReader& r, const char* name) {
  std::vector<std::string> out;
  const Json* list = r.Array(name, false);
  for (size_t i = 0; list != nullptr && r.ok() && i < list->size(); ++i) {
    if (!(*list)[i].is_string()) {
      r.Fail(Status::Error("invalid_field", r.Path(name) + "[" + std::to_string(i) + "]: expected a string, got " +
                                                JsonTypeName((*list)[i])));
    } else {
      out.push_back((*list)[i].get<std::string>());
    }
  }
  return out;
}

std::vector<text::ChatMessage> Messages(FieldReader& r) {
  std::vector<text::ChatMessage> out;
  const Json* list = r.Array("messages", false);
  for (size_t i = 0; list != nullptr && r.ok() && i < list->size(); ++i) {
    FieldReader m((*list)[i], r.Path("messages") + "[" + std::to_string(i) + "]");
    text::ChatMessage turn;
    turn.role = m.String("role");
    turn.content = m.String("content", true, false);
    if (Status st = m.Done(); !st.ok()) r.Fail(st);
    out.push_back(std::move(turn));
  }
  return out;
}

std::vector<MediaInput> Media(FieldReader& r) {
  std::vector<MediaInput> out;
  const Json* list = r.Array("media", false);
  for (size_t i = 0; list != nullptr && r.ok() && i < list->size(); ++i) {
    FieldReader m((*list)[i], r.Path("media") + "[" + std::to_string(i) + "]");
    MediaInput item;
    item.kind = m.String("kind");
    item.path = m.String("path");
    Status st = m.Done();
    if (st.ok() && item.kind != "image" && item.kind != "audio") {
      st = Status::Error("invalid_field", m.Path("kind") + ": must be image or audio, got '" + item.kind + "'");
    }
    if (!st.ok()) r.Fail(st);
    out.push_back(std::move(item));
  }
  return out;
}

// A finite float32 number at `at`, appended to `out` (at most 4M of them).
Status AppendFloat(const Json& x, const std::string& at, std::vector<float>* out) {
  constexpr size_t kMaxFloats = size_t(1) << 22;
  if (!x.is_number() || x.is_boolean()) return Status::Error("invalid_field", at + ": expected a number, got " + JsonTypeName(x));
  const double d = x.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > 3.0e38) return Status::Error("invalid_field", at + ": not a finite float32");
  if (out->size() >= kMaxFloats) return Status::Error("invalid_field", at + ": more than 4M numbers");
  out->push_back(float(d));
  return Status::Ok();
}

// Numbers, or rows of numbers (a 2-D array, its shape in `shape`), as float32.
Status Floats(const Json& v, const std::string& where, std::vector<float>* out, std::vector<int64_t>* shape) {
  if (!v.is_array()) return Status::Error("invalid_field", where + ": expected an array, got " + JsonTypeName(v));
  const bool rows = !v.empty() && v[0].is_array();
  const size_t width = rows ? v[0].size() : 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (rows != v[i].is_array()) return Status::Error("invalid_field", at + ": rows of numbers, or numbers, not both");
    if (!rows) {
      OE_RETURN_IF_ERROR(AppendFloat(v[i], at, out));
      continue;
    }
    if (v[i].size() != width) return Status::Error("invalid_field", at + ": every row has " + std::to_string(width) + " numbers");
    for (size_t k = 0; k < width; ++k) OE_RETURN_IF_ERROR(AppendFloat(v[i][k], at + "[" + std::to_string(k) + "]", out));
  }
  if (shape != nullptr) *shape = rows ? std::vector<int64_t>{int64_t(v.size()), int64_t(width)} : std::vector<int64_t>{int64_t(v.size())};
  return Status::Ok();
}

std::optional<Observation> ObservationFrom(FieldReader& r) {
  const Json* j = r.Object("observation", false);
  if (j == nullptr || !r.ok()) return std::nullopt;
  FieldReader o(*j, r.Path("observation"));
  Observation obs;
  obs.timestamp_ms = o.Number("timestamp_ms", false, -1.0);
  const Json* images = o.Array("images", false);
  const Json* state = o.Array("state", false);
  const Json* noise = o.Array("noise", false);
  obs.noise_seed = uint64_t(o.Int("noise_seed", false, 0, 0));
  obs.reset_history = o.Bool("reset_history", false, false);
  Status st = o.Done();
  for (size_t i = 0; st.ok() && images != nullptr && i < images->size(); ++i) {
    FieldReader m((*images)[i], o.Path("images") + "[" + std::to_string(i) + "]");
    CameraImage c;
    c.camera = m.String("camera");
    c.image.kind = "image";
    c.image.path = m.String("path");
    st = m.Done();
    obs.images.push_back(std::move(c));
  }
  if (st.ok() && state != nullptr) st = Floats(*state, o.Path("state"), &obs.state, nullptr);
  if (st.ok() && noise != nullptr) st = Floats(*noise, o.Path("noise"), &obs.noise, &obs.noise_shape);
  if (st.ok() && obs.timestamp_ms != -1 && !(obs.timestamp_ms >= 0 && obs.timestamp_ms < 1.0e15)) {
    st = Status::Error("invalid_field", o.Path("timestamp_ms") + ": milliseconds since the Unix epoch (or -1: unknown)");
  }
  if (!st.ok()) r.Fail(st);
  return obs;
}

}  // namespace

Result<decoding::SamplingParams> SamplingFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  decoding::SamplingParams p;
  p.temperature = float(r.Number("temperature", false, 0.0));
  p.top_k = int32_t(r.Int("top_k", false, 0, 0));
  p.top_p = float(r.Number("top_p", false, 1.0));
  p.min_p = float(r.Number("min_p", false, 0.0));
  p.repetition_penalty = float(r.Number("repetition_penalty", false, 1.0));
  p.seed = uint64_t(r.Int("seed", false, 0, 0));
  OE_RETURN_IF_ERROR(r.Done());
  if (p.top_k > INT32_MAX) return Status::Error("invalid_sampling", where + ".top_k: at most " + std::to_string(INT32_MAX));
  OE_RETURN_IF_ERROR(decoding::Validate(p));
  return p;
}

Json ToJson(const decoding::SamplingParams& p) {
  return {{"temperature", p.temperature}, {"top_k", p.top_k},   {"top_p", p.top_p},
          {"min_p", p.min_p},             {"repetition_penalty", p.repetition_penalty}, {"seed", p.seed}};
}

Json RequestSchema() { return ToJson(Request{}); }

Json ToJson(const Request& r) {
  Json j = {{"prompt", r.prompt},
            {"chat", r.chat},
            {"system_prompt", r.system_prompt},
            {"prompt_ids", r.prompt_ids},
            {"messages", Json::array()},
            {"media", Json::array()},
            {"continue_conversation", r.continue_conversation},
            {"max_new_tokens", r.max_new_tokens},
            {"sampling", r.sampling ? ToJson(*r.sampling) : Json()},
            {"stop_strings", r.stop_strings},
            {"ignore_stop_tokens", r.ignore_stop_tokens},
            {"max_frames", r.max_frames},
            {"speech_sampling", r.speech_sampling ? ToJson(*r.speech_sampling) : Json()},
            {"prebuffer_ms", r.prebuffer_ms},
            {"observation", Json()},
            {"deadline_ms", r.deadline_ms}};
  for (const auto& t : r.messages) j["messages"].push_back({{"role", t.role}, {"content", t.content}});
  for (const auto& m : r.media) {
    Json item = {{"kind", m.kind}, {"path", m.path}};
    if (!m.data.empty()) item["bytes"] = int64_t(m.data.size());
    j["media"].push_back(item);
  }
  if (r.observation) {
    const Observation& o = *r.observation;
    Json images = Json::array();
    for (const auto& c : o.images) {
      Json item = {{"camera", c.camera}, {"path", c.image.path}};
      if (!c.image.data.empty()) item["bytes"] = int64_t(c.image.data.size());
      images.push_back(item);
    }
    j["observation"] = {{"timestamp_ms", o.timestamp_ms}, {"images", images}, {"state", o.state},
                        {"noise_shape", o.noise_shape}, {"noise_seed", o.noise_seed},
                        {"reset_history", o.reset_history}};
  }
  return j;
}

Result<Request> RequestFromJson(const Json& j) {
  FieldReader f(j, "request");
  Request r;
  r.prompt = f.String("prompt", false, false);
  r.chat = f.Bool("chat", false);
  r.system_prompt = f.String("system_prompt", false, false);
  r.prompt_ids = Ids(f, "prompt_ids");
  r.messages = Messages(f);
  r.media = Media(f);
  r.continue_conversation = f.Bool("continue_conversation", false);
  r.max_new_tokens = f.Int("max_new_tokens", false, 0, 0);
  const Json* sampling = f.Object("sampling", false);
  r.stop_strings = Strings(f, "stop_strings");
  r.ignore_stop_tokens = f.Bool("ignore_stop_tokens", false);
  r.max_frames = f.Int("max_frames", false, 0, 0);
  const Json* speech_sampling = f.Object("speech_sampling", false);
  r.prebuffer_ms = f.Number("prebuffer_ms", false, kDefaultPrebufferMs);
  r.observation = ObservationFrom(f);
  r.deadline_ms = f.Number("deadline_ms", false, 0.0);
  OE_RETURN_IF_ERROR(f.Done());
  if (sampling != nullptr) {
    OE_ASSIGN_OR_RETURN(r.sampling, SamplingFromJson(*sampling, "request.sampling"));
  }
  if (speech_sampling != nullptr) {
    OE_ASSIGN_OR_RETURN(r.speech_sampling, SamplingFromJson(*speech_sampling, "request.speech_sampling"));
  }
  OE_RETURN_IF_ERROR(Validate(r));
  return r;
}

namespace {

// A conversation given whole: a system turn first if any, then user and assistant turns, the last
// a user's (the one to answer); it stands alone, so no prompt, ids or resident context beside it.
Status ValidateMessages(const Request& r) {
  if (r.messages.empty()) return Status::Ok();
  if (!r.prompt.empty() || !r.system_prompt.empty() || !r.prompt_ids.empty() || r.continue_conversation) {
    return Status::Error("invalid_argument", "messages are the whole conversation: without prompt, system_prompt, "
                                             "prompt_ids or continue_conversation");
  }
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const std::string& role = r.messages[i].role;
    const std::string where = "messages[" + std::to_string(i) + "].role";
    if (role == "system" && i > 0) return Status::Error("invalid_argument", where + ": a system turn comes first only");
    if (role != "system" && role != "user" && role != "assistant") {
      return Status::Error("invalid_argument", where + ": must be system, user or assistant, got '" + role + "'");
    }
  }
  if (r.messages.back().role != "user") {
    return Status::Error("invalid_argument", "messages: the last turn is the user's to answer, got " + r.messages.back().role);
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const Request& r) {
  if (r.max_new_tokens < 0) return Status::Error("invalid_argument", "max_new_tokens must be >= 0 (0: the plan's default)");
  if (r.max_frames < 0) return Status::Error("invalid_argument", "max_frames must be >= 0 (0: the plan's default)");
  if (r.prebuffer_ms != kDefaultPrebufferMs && (!(r.prebuffer_ms >= 0) || r.prebuffer_ms > 60000)) {
    return Status::Error("invalid_argument", "prebuffer_ms must be within [0, 60000] (or -1: the plan's)");
  }
  for (const auto& m : r.media) {
    if (m.kind != "image" && m.kind != "audio") return Status::Error("invalid_argument", "media kind must be image or audio");
    if (m.path.empty() && m.data.empty()) return Status::Error("invalid_argument", "a media item needs a path or its bytes");
  }
  if (!(r.deadline_ms >= 0 && r.deadline_ms <= 3.6e6)) {
    return Status::Error("invalid_argument", "deadline_ms must be within [0, 3600000] (0: none)");
  }
  if (r.observation) {
    for (const auto& c : r.observation->images) {
      if (c.camera.empty()) return Status::Error("invalid_argument", "an observation image needs its camera's name");
      if (c.image.path.empty() && c.image.data.empty()) return Status::Error("invalid_argument", "an observation image needs a path or its bytes");
    }
  }
  OE_RETURN_IF_ERROR(ValidateMessages(r));
  for (int32_t id : r.prompt_ids) {
    if (id < 0) return Status::Error("invalid_prompt", "prompt token id " + std::to_string(id) + " is negative");
  }
  if (r.sampling) OE_RETURN_IF_ERROR(decoding::Validate(*r.sampling));
  if (r.speech_sampling) OE_RETURN_IF_ERROR(decoding::Validate(*r.speech_sampling));
  return Status::Ok();
}

}  // namespace omni_edge::pipeline
