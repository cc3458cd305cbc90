#include "server/endpoints.h"

#include "server/openai_common.h"

namespace omni_edge::server {

Status CheckModel(const Serving& s, const std::string& model) {
  if (model == s.options.model) return Status::Ok();
  return Status::Error("model_not_found", "model: '" + model + "' is not served here (this server serves '" +
                       s.options.model + "')");
}

Status CheckVoice(const std::string& voice, const std::string& param) {
  if (voice.empty() || voice == "default") return Status::Ok();
  return Status::Error("invalid_request", param + ": this plan speaks one voice, 'default'; got '" + voice + "'");
}

bool SendUnservable(Serving& s, const char* endpoint, tcp::socket& socket, const HttpRequest& req, const Status& no) {
  const bool unknown = no.reason() == "model_not_found";
  s.metrics.Record(endpoint, unknown ? 404 : 400, Json::object());
  return SendError(socket, req, unknown ? http::status::not_found : http::status::bad_request, no.message(),
                   "invalid_request_error", ErrorParam(no), unknown ? "model_not_found" : "");
}

bool SendBusy(Serving& s, const char* endpoint, tcp::socket& socket, const HttpRequest& req) {
  s.metrics.Record(endpoint, 429, Json::object());
  return SendError(socket, req, http::status::too_many_requests, "all " + std::to_string(s.pool.size()) +
                   " sessions are busy (--max-sessions); retry when one finishes", "rate_limit_error", "", "sessions_busy");
}

}  // namespace omni_edge::server
