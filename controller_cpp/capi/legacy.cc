// The per-kind functions of ABI 0.2 (text, speech, omni handles), kept for one version as thin
// wrappers over the one session (deprecated in 0.3.0, removed in 0.4.0).
#include <string>

#include "capi/capi_internal.h"
#include "capi/session_bridge.h"

using omni_edge::Status;
using omni_edge::capi::CopyString;
using omni_edge::capi::Guard;

namespace {

OeRequest FromGenerate(const OeGenerateParams& p) {
  OeRequest r;
  oe_request_default(&r);
  r.prompt = p.prompt;
  r.chat = p.chat;
  r.system_prompt = p.system_prompt;
  r.prompt_ids = p.prompt_ids;
  r.n_prompt_ids = p.n_prompt_ids;
  r.continue_conversation = p.continue_conversation;
  r.max_new_tokens = p.max_new_tokens;
  r.sampling = p.sampling;
  r.stop_strings = p.stop_strings;
  r.n_stop_strings = p.n_stop_strings;
  r.ignore_stop_tokens = p.ignore_stop_tokens;
  return r;
}

void AddSpeak(const OeSpeakParams& p, bool with_text, OeRequest* r) {
  if (with_text) {
    r->prompt = p.text;
    r->prompt_ids = p.text_ids;
    r->n_prompt_ids = p.n_text_ids;
  }
  r->max_frames = p.max_frames;
  r->speech_sampling = p.sampling;
  r->prebuffer_ms = p.prebuffer_ms;
}

// One callback per kind, as 0.2 had them.
int Dispatch(const OeEvent& e, OeEventCallback on_text, OeSpeechCallback on_audio, void* user_data) {
  if (std::string(e.stream) == "audio") return on_audio == nullptr ? 0 : on_audio(e.json, e.data, e.n_samples, user_data);
  return on_text == nullptr ? 0 : on_text(e.json, user_data);
}

Status Run(OeSession* session, const OeRequest& request, OeEventCallback on_text, OeSpeechCallback on_audio,
           void* user_data) {
  if (session == nullptr) return Status::Error("invalid_argument", "the session is required");
  return omni_edge::capi::Submit(*session->session, omni_edge::capi::RequestOf(request),
                                 [&](const OeEvent& e) { return Dispatch(e, on_text, on_audio, user_data); });
}

// {"plan", "sample_rate", "pcm_dtype", "code_groups", "placements", "codes"} of 0.2's speech info.
omni_edge::Json SpeechInfo(const omni_edge::pipeline::Session& session) {
  const omni_edge::Json info = session.Info();
  omni_edge::Json out = {{"plan", info["plan"]}, {"placements", info["placements"]}, {"codes", omni_edge::Json::array()}};
  const omni_edge::Json audio = info["streams"].value("audio", omni_edge::Json::object());
  out["sample_rate"] = audio.value("sample_rate", 0);
  out["pcm_dtype"] = audio.value("pcm_dtype", "");
  for (const auto& stage : info["stages"]) {
    if (stage["last_request"].contains("codes")) out["codes"] = stage["last_request"]["codes"];
    if (stage["describe"].contains("code_groups")) out["code_groups"] = stage["describe"]["code_groups"];
  }
  return out;
}

template <typename Handle>
OeError* OpenAs(const OeSessionConfig* config, Handle** out) {
  return Guard([&]() -> Status {
    if (out == nullptr) return Status::Error("invalid_argument", "the output handle is required");
    *out = nullptr;
    auto owned = std::make_unique<Handle>();
    OE_RETURN_IF_ERROR(omni_edge::capi::OpenSession(config, &owned->session));
    *out = owned.release();
    return Status::Ok();
  });
}

}  // namespace

extern "C" {

void oe_generate_params_default(OeGenerateParams* p) {
  if (p == nullptr) return;
  *p = OeGenerateParams{};
  omni_edge::capi::DefaultSampling(&p->sampling);
}

OeError* oe_session_generate(OeSession* session, const OeGenerateParams* p, OeEventCallback on_event, void* user_data) {
  return Guard([&]() -> Status {
    if (p == nullptr) return Status::Error("invalid_argument", "session and params are required");
    return Run(session, FromGenerate(*p), on_event, nullptr, user_data);
  });
}

OeError* oe_speech_open(const OeSessionConfig* config, OeSpeech** out_speech) { return OpenAs(config, out_speech); }
void oe_speech_close(OeSpeech* speech) {
  try {
    std::unique_ptr<OeSpeech> owned(speech);
  } catch (...) {  // nothing crosses the boundary
  }
}

void oe_speak_params_default(OeSpeakParams* p) {
  if (p == nullptr) return;
  *p = OeSpeakParams{};
  omni_edge::capi::DefaultSampling(&p->sampling);
  p->prebuffer_ms = omni_edge::pipeline::kDefaultPrebufferMs;
}

OeError* oe_speech_speak(OeSpeech* speech, const OeSpeakParams* p, OeSpeechCallback on_event, void* user_data) {
  return Guard([&]() -> Status {
    if (p == nullptr) return Status::Error("invalid_argument", "speech and params are required");
    OeRequest r;
    oe_request_default(&r);
    AddSpeak(*p, /*with_text=*/true, &r);
    return Run(speech, r, nullptr, on_event, user_data);
  });
}

void oe_speech_cancel(OeSpeech* speech) { oe_session_cancel(speech); }

OeError* oe_speech_info(OeSpeech* speech, char** out_json) {
  return Guard([&]() -> Status {
    if (speech == nullptr || out_json == nullptr) return Status::Error("invalid_argument", "speech and out_json are required");
    *out_json = CopyString(SpeechInfo(*speech->session).dump());
    return Status::Ok();
  });
}

OeError* oe_omni_open(const OeSessionConfig* config, OeOmni** out_omni) { return OpenAs(config, out_omni); }
void oe_omni_close(OeOmni* omni) {
  try {
    std::unique_ptr<OeOmni> owned(omni);
  } catch (...) {  // nothing crosses the boundary
  }
}

OeError* oe_omni_run(OeOmni* omni, const OeGenerateParams* text, const OeSpeakParams* speech, OeEventCallback on_text,
                     OeSpeechCallback on_audio, void* user_data) {
  return Guard([&]() -> Status {
    if (text == nullptr || speech == nullptr) return Status::Error("invalid_argument", "omni, text and speech params are required");
    OeRequest r = FromGenerate(*text);
    AddSpeak(*speech, /*with_text=*/false, &r);
    return Run(omni, r, on_text, on_audio, user_data);
  });
}

void oe_omni_cancel(OeOmni* omni) { oe_session_cancel(omni); }

OeError* oe_omni_info(OeOmni* omni, char** out_json) {
  return Guard([&]() -> Status {
    if (omni == nullptr || out_json == nullptr) return Status::Error("invalid_argument", "omni and out_json are required");
    omni_edge::Json info = SpeechInfo(*omni->session);
    info.erase("code_groups");
    *out_json = CopyString(info.dump());
    return Status::Ok();
  });
}

}  // extern "C"
