// The C ABI's voice activity detector: a plan's Silero VAD component over a live input stream.
#include <memory>
#include <string>

#include "capi/capi_internal.h"
#include "families/builtin.h"
#include "realtime/voice_activity.h"

using omni_edge::Json;
using omni_edge::Status;
using omni_edge::capi::CopyString;
using omni_edge::capi::Guard;

struct OeVoiceActivity {
  omni_edge::BackendPool backends;  // outlives the detector's graph
  std::unique_ptr<omni_edge::realtime::VoiceActivity> activity;
};

extern "C" {

OeError* oe_vad_open(const char* plan_path, int sample_rate, const char* turn_detection_json, int allow_unqualified,
                     OeVoiceActivity** out_vad) {
  return Guard([&]() -> Status {
    if (plan_path == nullptr || out_vad == nullptr) return Status::Error("invalid_argument", "plan_path and out_vad are required");
    *out_vad = nullptr;
    omni_edge::realtime::TurnDetectionConfig turn;
    if (turn_detection_json != nullptr && *turn_detection_json != '\0') {
      OE_ASSIGN_OR_RETURN(Json j, omni_edge::ParseJson(turn_detection_json, "turn_detection"));
      OE_ASSIGN_OR_RETURN(turn, omni_edge::realtime::TurnDetectionFromJson(j, "turn_detection"));
    }
    OE_ASSIGN_OR_RETURN(omni_edge::Plan plan, omni_edge::LoadPlan(plan_path, omni_edge::families::Builtin()));
    if (!plan.voice_activity) return Status::Error("invalid_plan", std::string(plan_path) + ": no voice_activity section");
    OE_ASSIGN_OR_RETURN(omni_edge::media::StreamResampler resampler,
                        omni_edge::media::StreamResampler::Create(sample_rate, omni_edge::realtime::SileroVad::kSampleRate));
    auto vad = std::make_unique<OeVoiceActivity>();
    OE_ASSIGN_OR_RETURN(auto silero, omni_edge::realtime::SileroVad::Open(*plan.voice_activity, allow_unqualified == 0,
                                                                          vad->backends));
    vad->activity = std::make_unique<omni_edge::realtime::VoiceActivity>(std::move(silero), std::move(resampler), turn);
    *out_vad = vad.release();
    return Status::Ok();
  });
}

void oe_vad_close(OeVoiceActivity* vad) { std::unique_ptr<OeVoiceActivity> owned(vad); }

void oe_vad_record(OeVoiceActivity* vad, int record) {
  if (vad != nullptr) vad->activity->Record(record != 0);
}

OeError* oe_vad_push(OeVoiceActivity* vad, const float* samples, int64_t n, char** out_json) {
  return Guard([&]() -> Status {
    if (vad == nullptr || out_json == nullptr || n < 0 || (samples == nullptr && n > 0)) {
      return Status::Error("invalid_argument", "vad, out_json and n samples are required");
    }
    *out_json = nullptr;
    OE_ASSIGN_OR_RETURN(auto changes, vad->activity->Push(samples, size_t(n)));
    Json out = Json::array();
    for (const auto& c : changes) {
      if (c.started) out.push_back({{"kind", "speech_started"}, {"audio_start_ms", c.audio_start_ms}});
      if (c.stopped) {
        out.push_back({{"kind", "speech_stopped"}, {"audio_end_ms", c.audio_end_ms}, {"speech_end_ms", c.speech_end_ms}});
      }
    }
    *out_json = CopyString(out.dump());
    return Status::Ok();
  });
}

OeError* oe_vad_info(OeVoiceActivity* vad, int probabilities, char** out_json) {
  return Guard([&]() -> Status {
    if (vad == nullptr || out_json == nullptr) return Status::Error("invalid_argument", "vad and out_json are required");
    const auto& a = *vad->activity;
    Json info = {{"processed_ms", a.processed_ms()}, {"speaking", a.speaking()}, {"turn_detection", ToJson(a.config())},
                 {"device", a.placement().device}, {"engine", a.placement().engine}};
    if (probabilities != 0) info["probabilities"] = a.probabilities();
    *out_json = CopyString(info.dump());
    return Status::Ok();
  });
}

}  // extern "C"
