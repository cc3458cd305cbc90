#include "pipeline/request.h"

#include <climits>

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
            {"media", Json::array()},
            {"continue_conversation", r.continue_conversation},
            {"max_new_tokens", r.max_new_tokens},
            {"sampling", r.sampling ? ToJson(*r.sampling) : Json()},
            {"stop_strings", r.stop_strings},
            {"ignore_stop_tokens", r.ignore_stop_tokens},
            {"max_frames", r.max_frames},
            {"speech_sampling", r.speech_sampling ? ToJson(*r.speech_sampling) : Json()},
            {"prebuffer_ms", r.prebuffer_ms}};
  for (const auto& m : r.media) {
    Json item = {{"kind", m.kind}, {"path", m.path}};
    if (!m.data.empty()) item["bytes"] = int64_t(m.data.size());
    j["media"].push_back(item);
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
  r.media = Media(f);
  r.continue_conversation = f.Bool("continue_conversation", false);
  r.max_new_tokens = f.Int("max_new_tokens", false, 0, 0);
  const Json* sampling = f.Object("sampling", false);
  r.stop_strings = Strings(f, "stop_strings");
  r.ignore_stop_tokens = f.Bool("ignore_stop_tokens", false);
  r.max_frames = f.Int("max_frames", false, 0, 0);
  const Json* speech_sampling = f.Object("speech_sampling", false);
  r.prebuffer_ms = f.Number("prebuffer_ms", false, kDefaultPrebufferMs);
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
  for (int32_t id : r.prompt_ids) {
    if (id < 0) return Status::Error("invalid_prompt", "prompt token id " + std::to_string(id) + " is negative");
  }
  if (r.sampling) OE_RETURN_IF_ERROR(decoding::Validate(*r.sampling));
  if (r.speech_sampling) OE_RETURN_IF_ERROR(decoding::Validate(*r.speech_sampling));
  return Status::Ok();
}

}  // namespace omni_edge::pipeline
