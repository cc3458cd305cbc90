// The C ABI's session: one opaque handle for every plan, one request struct, one event type.
#include <string>
#include <vector>

#include "base/platform/process_stats.h"
#include "capi/capi_internal.h"
#include "capi/session_bridge.h"
#include "contract/types.h"
#include "families/builtin.h"

namespace omni_edge::capi {

Status OpenSession(const OeSessionConfig* config, std::unique_ptr<pipeline::Session>* out) {
  if (config == nullptr || config->plan_path == nullptr) {
    return Status::Error("invalid_argument", "config.plan_path and the output handle are required");
  }
  pipeline::SessionOptions options;
  options.allow_unqualified = config->allow_unqualified != 0;
  if (config->threads > 0) options.backend_options["threads"] = std::to_string(config->threads);
  if (config->ledger != nullptr) {
    options.ledger = &config->ledger->ledger;
    options.wsl = config->ledger->wsl;
  }
  auto session = pipeline::Session::Open(config->plan_path, options, families::Builtin());
  if (!session.ok()) return session.status();
  *out = std::move(session).value();
  return Status::Ok();
}

std::optional<decoding::SamplingParams> SamplingOf(const OeSampling& s) {
  if (s.use_plan_sampling) return std::nullopt;
  return decoding::SamplingParams{s.temperature, s.top_k, s.top_p, s.min_p, s.repetition_penalty, s.seed};
}

void DefaultSampling(OeSampling* s) {
  *s = OeSampling{};
  s->use_plan_sampling = 1;
  s->top_p = 1.0f;
  s->repetition_penalty = 1.0f;
}

pipeline::Request RequestOf(const OeRequest& r) {
  pipeline::Request out;
  if (r.prompt != nullptr) out.prompt = r.prompt;
  out.chat = r.chat != 0;
  if (r.system_prompt != nullptr) out.system_prompt = r.system_prompt;
  if (r.prompt_ids != nullptr && r.n_prompt_ids > 0) out.prompt_ids.assign(r.prompt_ids, r.prompt_ids + r.n_prompt_ids);
  for (int i = 0; r.messages != nullptr && i < r.n_messages; ++i) {
    const OeChatMessage& m = r.messages[i];
    out.messages.push_back({m.role != nullptr ? m.role : "", m.content != nullptr ? m.content : ""});
  }
  out.continue_conversation = r.continue_conversation != 0;
  out.max_new_tokens = r.max_new_tokens;
  out.sampling = SamplingOf(r.sampling);
  for (int i = 0; r.stop_strings != nullptr && i < r.n_stop_strings; ++i) {
    if (r.stop_strings[i] != nullptr) out.stop_strings.emplace_back(r.stop_strings[i]);
  }
  out.ignore_stop_tokens = r.ignore_stop_tokens != 0;
  out.max_frames = r.max_frames;
  out.speech_sampling = SamplingOf(r.speech_sampling);
  out.prebuffer_ms = r.prebuffer_ms;
  out.deadline_ms = r.deadline_ms;
  if (r.observation != nullptr) {
    const OeObservation& o = *r.observation;
    pipeline::Observation obs;
    obs.timestamp_ms = o.timestamp_ms;
    for (int i = 0; o.images != nullptr && i < o.n_images; ++i) {
      const OeCameraImage& c = o.images[i];
      pipeline::CameraImage item;
      if (c.camera != nullptr) item.camera = c.camera;
      item.image.kind = "image";
      if (c.path != nullptr) item.image.path = c.path;
      if (c.data != nullptr && c.size > 0) item.image.data.assign(static_cast<const char*>(c.data), c.size);
      obs.images.push_back(std::move(item));
    }
    if (o.state != nullptr && o.n_state > 0) obs.state.assign(o.state, o.state + o.n_state);
    if (o.noise != nullptr && o.noise_rows > 0 && o.noise_cols > 0) {
      obs.noise.assign(o.noise, o.noise + int64_t(o.noise_rows) * o.noise_cols);
      obs.noise_shape = {o.noise_rows, o.noise_cols};
    }
    obs.noise_seed = o.noise_seed;
    obs.reset_history = o.reset_history != 0;
    out.observation = std::move(obs);
  }
  for (int i = 0; r.media != nullptr && i < r.n_media; ++i) {
    const OeMedia& m = r.media[i];
    pipeline::MediaInput item;
    item.kind = m.kind != nullptr ? m.kind : "";
    item.path = m.path != nullptr ? m.path : "";
    if (m.data != nullptr && m.size > 0) item.data.assign(static_cast<const char*>(m.data), m.size);
    out.media.push_back(std::move(item));
  }
  return out;
}

// A session event as the C ABI's OeEvent, valid during `deliver`.
bool Deliver(const pipeline::SessionEvent& ev, const std::function<int(const OeEvent&)>& on_event) {
  const std::string json = ev.json.dump();
  OeEvent e{ev.stream.c_str(), ev.stage_id, json.c_str(), ev.terminal ? 1 : 0, nullptr, 0, ""};
  if (ev.payload != nullptr) {
    e.data = ev.payload->bytes.data();
    e.n_samples = int64_t(ev.payload->bytes.size()) / contract::DtypeSize(ev.payload->dtype);
    e.dtype = ev.payload->dtype.c_str();
  }
  return !on_event || on_event(e) == 0;
}

Status Submit(pipeline::Session& session, const pipeline::Request& request, const std::function<int(const OeEvent&)>& on_event) {
  auto result = session.Submit(request, [&](const pipeline::SessionEvent& ev) { return Deliver(ev, on_event); });
  return result.ok() ? Status::Ok() : result.status();
}

}  // namespace omni_edge::capi

using omni_edge::Status;
using omni_edge::capi::CopyString;
using omni_edge::capi::Guard;

extern "C" {

void oe_session_config_default(OeSessionConfig* config) {
  if (config != nullptr) *config = OeSessionConfig{nullptr, 0, 0, nullptr};
}

OeError* oe_session_open(const OeSessionConfig* config, OeSession** out_session) {
  return Guard([&]() -> Status {
    if (out_session == nullptr) return Status::Error("invalid_argument", "the output handle is required");
    *out_session = nullptr;
    auto owned = std::make_unique<OeSession>();
    OE_RETURN_IF_ERROR(omni_edge::capi::OpenSession(config, &owned->session));
    *out_session = owned.release();
    return Status::Ok();
  });
}

void oe_session_close(OeSession* session) {
  try {
    { std::unique_ptr<OeSession> owned(session); }
    if (session != nullptr) omni_edge::ReturnFreeHeapPages();  // a closed session's memory goes back to the OS
  } catch (...) {  // nothing crosses the boundary
  }
}

void oe_request_default(OeRequest* request) {
  if (request == nullptr) return;
  *request = OeRequest{};
  omni_edge::capi::DefaultSampling(&request->sampling);
  omni_edge::capi::DefaultSampling(&request->speech_sampling);
  request->prebuffer_ms = omni_edge::pipeline::kDefaultPrebufferMs;
}

OeError* oe_session_submit(OeSession* session, const OeRequest* request, OeEventHandler on_event, void* user_data) {
  return Guard([&]() -> Status {
    if (session == nullptr || request == nullptr) return Status::Error("invalid_argument", "session and request are required");
    return omni_edge::capi::Submit(*session->session, omni_edge::capi::RequestOf(*request), [&](const OeEvent& e) {
      return on_event == nullptr ? 0 : on_event(&e, user_data);
    });
  });
}

OeError* oe_session_post(OeSession* session, const OeRequest* request, OeEventHandler on_event, OeDoneHandler on_done,
                         void* user_data) {
  return Guard([&]() -> Status {
    if (session == nullptr || request == nullptr) return Status::Error("invalid_argument", "session and request are required");
    omni_edge::pipeline::Request r = omni_edge::capi::RequestOf(*request);
    OE_RETURN_IF_ERROR(omni_edge::pipeline::Validate(r));
    std::lock_guard<std::mutex> lock(session->queue_mu);
    if (!session->queue) session->queue = std::make_unique<omni_edge::pipeline::LatestQueue>(*session->session);
    const auto listener = [on_event, user_data](const omni_edge::pipeline::SessionEvent& ev) {
      return omni_edge::capi::Deliver(ev, [&](const OeEvent& e) { return on_event == nullptr ? 0 : on_event(&e, user_data); });
    };
    const auto done = [on_done, user_data](const omni_edge::Result<omni_edge::Json>& result) {
      if (on_done == nullptr) return;
      if (result.ok()) {
        on_done(nullptr, result->dump().c_str(), user_data);
      } else {
        const OeError error{result.status().reason(), result.status().message()};
        on_done(&error, nullptr, user_data);
      }
    };
    session->queue->Post(std::move(r), listener, done);
    return Status::Ok();
  });
}

void oe_session_cancel(OeSession* session) {
  if (session != nullptr) session->session->Cancel();  // atomic stores only
}

void oe_session_abort(OeSession* session) {
  try {
    if (session != nullptr) session->session->Abort();
  } catch (...) {  // nothing crosses the boundary
  }
}

OeError* oe_session_reset(OeSession* session) {
  return Guard([&]() -> Status {
    if (session == nullptr) return Status::Error("invalid_argument", "session is required");
    return session->session->Reset();
  });
}

OeError* oe_session_info(OeSession* session, char** out_json) {
  return Guard([&]() -> Status {
    if (session == nullptr || out_json == nullptr) return Status::Error("invalid_argument", "session and out_json are required");
    *out_json = CopyString(session->session->Info().dump());
    return Status::Ok();
  });
}

OeError* oe_session_trace(OeSession* session, int enable) {
  return Guard([&]() -> Status {
    if (session == nullptr) return Status::Error("invalid_argument", "session is required");
    session->session->Trace(enable != 0);
    return Status::Ok();
  });
}

OeError* oe_session_trace_json(OeSession* session, char** out_json) {
  return Guard([&]() -> Status {
    if (session == nullptr || out_json == nullptr) return Status::Error("invalid_argument", "session and out_json are required");
    *out_json = CopyString(session->session->TraceJson().dump());
    return Status::Ok();
  });
}

}  // extern "C"
