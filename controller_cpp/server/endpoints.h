// The endpoints' handlers: each reads one request from its connection's socket and writes the
// whole response; false when the connection should close (the client went away, or a write
// failed).
#pragma once

#include "server/http_io.h"
#include "server/serving.h"

namespace omni_edge::server {

// POST /v1/chat/completions: text, and on an omni plan audio too.
bool ServeChat(Serving& s, tcp::socket& socket, const HttpRequest& req);
// POST /v1/audio/speech on a speech plan.
bool ServeSpeech(Serving& s, tcp::socket& socket, const HttpRequest& req);
// The OpenPI policy websocket (an upgrade on / or /v1/realtime/robot/openpi) on a policy plan:
// the connection holds one session until it closes.
void ServeOpenPi(Serving& s, tcp::socket& socket, const HttpRequest& req);
// OpenAI Realtime (an upgrade on /v1/realtime) on an omni plan that hears: the connection holds
// one session, and its conversation, until it closes.
void ServeRealtime(Serving& s, tcp::socket& socket, const HttpRequest& req);

// What the endpoints share: the model a request names must be the one served (else reason
// model_not_found), the voice "default" or none; a request refused before it runs is counted and
// answered (404 for an unknown model, else 400, the param named); every session busy is 429 at
// once (no queue).
Status CheckModel(const Serving& s, const std::string& model);
Status CheckVoice(const std::string& voice, const std::string& param);
bool SendUnservable(Serving& s, const char* endpoint, tcp::socket& socket, const HttpRequest& req, const Status& no);
bool SendBusy(Serving& s, const char* endpoint, tcp::socket& socket, const HttpRequest& req);

// The header a response's metrics travel in (non-streamed responses; a stream ends with a
// ": metrics {...}" comment instead).
inline constexpr char kMetricsHeader[] = "x-omni-edge-metrics";

}  // namespace omni_edge::server
