// What the OpenAI wire formats here share: a body read as a JSON object, refusals that name the
// param as OpenAI does ("messages[1].content[0].image_url.url: <what>", reason invalid_request),
// a voice as a name or {"id": name}, and the error body every error response carries.
#pragma once

#include <string>

#include "base/json_fields.h"
#include "base/status.h"

namespace omni_edge::server {

// The root the field readers name paths from ("request.model"): ErrorParam drops it.
inline constexpr char kRequestRoot[] = "request";

Status Refuse(const std::string& param, const std::string& what);
// Text the C ABI carries as C strings: a NUL inside would cut it short unseen.
Status NoNul(const std::string& text, const std::string& param);
// The body as a JSON object (nesting at most 32 deep), or a refusal.
Result<Json> ParseBody(const std::string& body);
// A voice as a name or {"id": name} (absent or null: ""), or a refusal naming `param`.
Result<std::string> ReadVoice(const Json* voice, const std::string& param);
// Any refusal as reason invalid_request (the field readers' invalid_field among them).
Status AsInvalidRequest(const Status& status);

// The param a refusal names (the text before ": "), or "".
std::string ErrorParam(const Status& status);

// {"error": {"message", "type", "param", "code"}}: the body every error response carries.
Json ErrorBody(const std::string& message, const std::string& type, const std::string& param, const std::string& code);

}  // namespace omni_edge::server
