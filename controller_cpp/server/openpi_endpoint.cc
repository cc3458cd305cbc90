// The OpenPI policy websocket: metadata (msgpack) on connect; then each binary frame is an
// observation, answered with {"actions": [chunk, dim] float32, "server_timing", "policy_timing"}
// or, when the controller refuses it (a stale observation, a missing camera), with a text frame
// saying why, which openpi-client raises as an error; the connection stays open. {"endpoint":
// "reset"} (vLLM-Omni's) forgets the session's state. A connection holds one session, taken at
// the upgrade (none free: 429, no upgrade).
#include <chrono>

#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "server/endpoints.h"
#include "server/openpi_wire.h"

namespace omni_edge::server {
namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
using Socket = websocket::stream<tcp::socket&>;  // the connection keeps the socket
constexpr size_t kMaxFrameBytes = size_t(64) << 20;  // vLLM-Omni's bound: a few cameras' raw frames fit

double NowUnixMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Action {
  Json event;      // the action event
  Json terminal;   // the request's end
};

int OnPolicyEvent(const OeEvent* ev, void* user) {
  auto* a = static_cast<Action*>(user);
  auto json = ParseJson(ev->json, "event");
  if (!json.ok()) return 0;
  if (ev->terminal) a->terminal = std::move(*json);
  else if (json->value("kind", "") == "action") a->event = std::move(*json);
  return 0;
}

// Runs one observation; the reply frame, or the refusal's text.
Result<std::string> Infer(OeSession* session, const PolicyObservation& obs, double prev_total_ms) {
  std::vector<OeCameraImage> images;
  for (const auto& f : obs.images) images.push_back({f.camera.c_str(), f.bmp.data(), f.bmp.size(), nullptr});
  OeObservation o{};
  o.timestamp_ms = obs.timestamp_ms.value_or(NowUnixMs());
  o.images = images.data();
  o.n_images = int(images.size());
  o.state = obs.state.data();
  o.n_state = int(obs.state.size());
  o.noise = obs.noise.empty() ? nullptr : obs.noise.data();
  o.noise_rows = int(obs.noise_rows);
  o.noise_cols = int(obs.noise_cols);
  o.noise_seed = obs.seed.value_or(0);
  OeRequest request;
  oe_request_default(&request);
  request.prompt = obs.prompt.c_str();
  request.observation = &o;
  Action action;
  const auto start = std::chrono::steady_clock::now();
  if (OeError* e = oe_session_submit(session, &request, OnPolicyEvent, &action)) {
    Status status = Status::Error(oe_error_reason(e), oe_error_message(e));
    oe_error_free(e);
    return status;
  }
  if (action.event.is_null()) {
    return Status::Error(action.terminal.value("reason", std::string("failed")),
                         action.terminal.value("error", std::string("the policy made no action")));
  }
  const double infer_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::vector<float> flat;
  for (const Json& row : action.event["actions"]) {
    for (const Json& x : row) flat.push_back(x.get<float>());
  }
  Json timing = {{"infer_ms", infer_ms}};
  if (prev_total_ms >= 0) timing["prev_total_ms"] = prev_total_ms;
  return PackActions(flat, action.event.value("chunk_size", int64_t(0)), action.event.value("action_dim", int64_t(0)),
                     {{"server_timing", timing}, {"policy_timing", action.event.value("timings", Json::object())}});
}

bool WriteFrame(Socket& ws, const std::string& bytes, bool text) {
  beast::error_code ec;
  ws.text(text);
  ws.write(boost::asio::buffer(bytes), ec);
  return !ec;
}

// One observation frame to one reply frame (text: a refusal); false when the socket failed.
bool Answer(Serving& s, Socket& ws, OeSession* session, const std::string& frame, double* prev_total_ms) {
  const auto start = std::chrono::steady_clock::now();
  auto obs = ParseObservation(frame);
  if (!obs.ok()) return WriteFrame(ws, obs.status().reason() + ": " + obs.status().message(), true);
  if (obs->endpoint == "reset") {
    if (OeError* e = oe_session_reset(session)) oe_error_free(e);
    *prev_total_ms = -1;
    return WriteFrame(ws, PackJson({{"status", "reset successful"}}), false);
  }
  auto reply = Infer(session, *obs, *prev_total_ms);
  s.metrics.Record("openpi", reply.ok() ? 200 : int(StatusOf(reply.status().reason())), Json::object());
  if (!reply.ok()) {
    if (OeError* e = oe_session_reset(session)) oe_error_free(e);  // a refusal may leave the session poisoned
    return WriteFrame(ws, reply.status().reason() + ": " + reply.status().message(), true);
  }
  const bool ok = WriteFrame(ws, *reply, false);
  *prev_total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return ok;
}

}  // namespace

void ServeOpenPi(Serving& s, tcp::socket& socket, const HttpRequest& req) {
  if (s.pool.facts().policy.is_null()) {
    SendError(socket, req, http::status::bad_request, "this plan is not a policy: the OpenPI websocket serves policy "
              "plans", "invalid_request_error");
    return;
  }
  SessionLease session(s.pool);
  if (s.stopping || session.get() == nullptr) {
    SendBusy(s, "openpi", socket, req);
    return;
  }
  // A frame as large as the limit, and the camera images decoded out of it, for as long as the
  // connection lives.
  LedgerReservation memory(s.pool.ledger(), "server: websocket", 2 * int64_t(kMaxFrameBytes));
  if (!memory.held()) {
    SendError(socket, req, http::status::too_many_requests, "the server has no memory for a policy connection now: " +
              memory.refusal(), "rate_limit_error", "", "admission");
    return;
  }
  Socket ws(socket);
  ws.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
    res.set(http::field::server, "omni-edge");
  }));
  ws.read_message_max(kMaxFrameBytes);
  beast::error_code ec;
  ws.accept(req, ec);
  if (ec) return;
  const Json& policy = s.pool.facts().policy;
  const Json metadata = {{"model", s.options.model}, {"action_horizon", policy.value("chunk_size", 0)},
                         {"action_dim", policy.value("action_dim", 0)}, {"policy", policy}};
  if (!WriteFrame(ws, PackJson(metadata), false)) return;
  double prev_total_ms = -1;
  while (!s.stopping) {
    beast::flat_buffer buffer;
    ws.read(buffer, ec);
    if (ec) break;  // closed by the client, or a frame over the limit
    if (!ws.got_binary()) continue;  // text frames carry nothing here (vLLM-Omni ignores them too)
    if (!Answer(s, ws, session.get(), beast::buffers_to_string(buffer.data()), &prev_total_ms)) break;
  }
  ws.close(websocket::close_code::normal, ec);
}

}  // namespace omni_edge::server
