#include "server/openai_common.h"

namespace omni_edge::server {

Status Refuse(const std::string& param, const std::string& what) { return Status::Error("invalid_request", param + ": " + what); }

Status NoNul(const std::string& text, const std::string& param) {
  return text.find('\0') == std::string::npos ? Status::Ok() : Refuse(param, "a NUL character");
}

Result<Json> ParseBody(const std::string& body) {
  auto json = ParseJson(body, "request body", 32);
  if (!json.ok()) return Status::Error("invalid_request", "the body is not JSON: " + json.status().message());
  if (!json->is_object()) return Status::Error("invalid_request", "the body is not a JSON object");
  return json;
}

Result<std::string> ReadVoice(const Json* voice, const std::string& param) {
  if (voice == nullptr || voice->is_null()) return std::string();
  if (voice->is_string()) return voice->get<std::string>();
  if (voice->is_object() && voice->size() == 1 && voice->contains("id") && (*voice)["id"].is_string()) {
    return (*voice)["id"].get<std::string>();
  }
  return Refuse(param, "expected a voice's name or {\"id\": name}");
}

Status AsInvalidRequest(const Status& status) {
  return status.ok() ? status : Status::Error("invalid_request", status.message());
}

std::string ErrorParam(const Status& status) {
  std::string param = status.message().substr(0, status.message().find(": "));
  const std::string prefix = std::string(kRequestRoot) + ".";
  if (param.rfind(prefix, 0) == 0) param = param.substr(prefix.size());
  return param.find(' ') == std::string::npos ? param : "";
}

Json ErrorBody(const std::string& message, const std::string& type, const std::string& param, const std::string& code) {
  return {{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? Json() : Json(param)},
                     {"code", code.empty() ? Json() : Json(code)}}}};
}

}  // namespace omni_edge::server
