// The C ABI's realtime voice session (realtime/realtime_session.h) over an open session.
#include <memory>
#include <string>

#include "capi/capi_internal.h"
#include "realtime/realtime_session.h"

using omni_edge::Json;
using omni_edge::Status;
using omni_edge::capi::CopyString;
using omni_edge::capi::Guard;

struct OeRealtime {
  std::unique_ptr<omni_edge::realtime::RealtimeSession> session;
};

extern "C" {

OeError* oe_realtime_open(OeSession* session, const char* options_json, OeRealtimeHandler on_event, void* user_data,
                          OeRealtime** out_realtime) {
  return Guard([&]() -> Status {
    if (session == nullptr || on_event == nullptr || out_realtime == nullptr) {
      return Status::Error("invalid_argument", "session, on_event and out_realtime are required");
    }
    *out_realtime = nullptr;
    omni_edge::realtime::RealtimeOptions options;
    if (options_json != nullptr && *options_json != '\0') {
      OE_ASSIGN_OR_RETURN(Json j, omni_edge::ParseJson(options_json, "options"));
      omni_edge::FieldReader r(j, "options");
      options.model = r.String("model", false, true, options.model);
      options.allow_unqualified = r.Bool("allow_unqualified", false, false);
      options.max_turn_seconds = r.Int("max_turn_seconds", false, 1, options.max_turn_seconds);
      OE_RETURN_IF_ERROR(r.Done());
      if (options.max_turn_seconds > 600) return Status::Error("invalid_field", "options.max_turn_seconds: at most 600");
    }
    auto emit = [on_event, user_data](const Json& event) { on_event(event.dump().c_str(), user_data); };
    OE_ASSIGN_OR_RETURN(auto rt, omni_edge::realtime::RealtimeSession::Open(*session->session, options, emit));
    *out_realtime = std::make_unique<OeRealtime>(OeRealtime{std::move(rt)}).release();
    return Status::Ok();
  });
}

void oe_realtime_send(OeRealtime* realtime, const char* event_json) {
  if (realtime == nullptr || event_json == nullptr) return;
  OeError* e = Guard([&]() -> Status {
    realtime->session->Receive(event_json);
    return Status::Ok();
  });
  oe_error_free(e);
}

void oe_realtime_append_pcm16(OeRealtime* realtime, const int16_t* samples, int64_t n) {
  if (realtime == nullptr || samples == nullptr || n <= 0) return;
  OeError* e = Guard([&]() -> Status {
    realtime->session->AppendPcm16(samples, size_t(n));
    return Status::Ok();
  });
  oe_error_free(e);
}

OeError* oe_realtime_info(OeRealtime* realtime, char** out_json) {
  return Guard([&]() -> Status {
    if (realtime == nullptr || out_json == nullptr) return Status::Error("invalid_argument", "realtime and out_json are required");
    *out_json = CopyString(realtime->session->Info().dump());
    return Status::Ok();
  });
}

void oe_realtime_close(OeRealtime* realtime) { std::unique_ptr<OeRealtime> owned(realtime); }

}  // extern "C"
