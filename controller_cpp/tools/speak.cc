// omni-edge-run speak: text -> WAV through a speech plan, on the C ABI only. Without --json a
// summary goes to stderr; with --json every event is a JSON line on stdout (pcm events carry
// their position and length, not the samples) and the last one is the terminal event with
// first_pcm_ms, rtf, underruns, underrun_ms, samples and sample_rate. Ctrl-C cancels.
#include "tools/speak.h"

#include <csignal>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "capi/omni_edge.h"
#include "tools/args.h"
#include "tools/wav_writer.h"

namespace omni_edge::tools {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

// Only a flag (cancelling takes a lock, which a signal handler must not): the next event's
// callback cancels the utterance, and the --repeat loop stops.
void OnSigint(int) { g_interrupted = 1; }

int SpeakUsage(const char* why) {
  std::fprintf(stderr, "omni-edge-run speak: %s\n", why);
  std::fprintf(stderr,
               "usage: omni-edge-run speak --plan PLAN (--text TEXT | --text-ids 1,2,3) --out OUT.wav [--json]\n"
               "                           [--max-frames N] [--prebuffer-ms MS] [--temperature T] [--top-k K]\n"
               "                           [--top-p P] [--min-p M] [--repetition-penalty R] [--seed S]\n"
               "                           [--threads N] [--allow-unqualified] [--info] [--repeat N]\n");
  return 2;
}

int SpeakFail(OeError* error) {
  std::fprintf(stderr, "omni-edge-run speak: %s: %s\n", oe_error_reason(error), oe_error_message(error));
  oe_error_free(error);
  return 1;
}

struct Sink {
  WavWriter* wav = nullptr;
  std::string dtype;
  bool json = false;
  bool write_failed = false;
  std::string terminal;
};

// The session's info (an empty object if it is not JSON), printed to stderr with `print`.
template <typename Handle>
OeError* ReadInfo(Handle* handle, OeError* (*info)(Handle*, char**), const char* what, bool print, Json* out) {
  char* text = nullptr;
  if (OeError* error = info(handle, &text)) return error;
  if (print) std::fprintf(stderr, "%s\n", text);
  auto parsed = ParseJson(text, what);
  oe_string_free(text);
  *out = parsed.ok() && parsed->is_object() ? parsed.value() : Json::object();
  return nullptr;
}

int OnEvent(const char* event_json, const void* pcm, int64_t n_samples, void* user_data) {
  auto* sink = static_cast<Sink*>(user_data);
  if (g_interrupted) return 1;
  if (pcm != nullptr && !sink->wav->Append(pcm, n_samples, sink->dtype)) {
    sink->write_failed = true;
    return 1;  // cancel: the audio can no longer be kept
  }
  if (sink->json) {
    std::printf("%s\n", event_json);
    std::fflush(stdout);
  }
  if (pcm == nullptr) sink->terminal = event_json;
  return 0;
}


}  // namespace

int Speak(int argc, char** argv, int first) {
  OeSessionConfig config;
  oe_session_config_default(&config);
  OeSpeakParams params;
  oe_speak_params_default(&params);
  std::string plan, text, out_path;
  std::vector<int32_t> ids;
  bool json = false, info = false, have_text = false;
  int64_t repeat = 1;
  ArgReader args(argc, argv, first);
  while (const char* flag = args.Next()) {
    const std::string a = flag;
    if (a == "--plan") plan = args.Value("--plan");
    else if (a == "--text") text = args.Value("--text"), have_text = true;
    else if (a == "--text-ids") {
      if (!ParseIds(args.Value("--text-ids"), &ids)) return SpeakUsage("--text-ids takes comma-separated token ids");
      have_text = true;
    } else if (a == "--out") out_path = args.Value("--out");
    else if (a == "--json") json = true;
    else if (a == "--info") info = true;
    else if (a == "--max-frames") params.max_frames = int(args.Whole("--max-frames", 0, 1 << 20));
    else if (a == "--prebuffer-ms") params.prebuffer_ms = double(args.Whole("--prebuffer-ms", 0, 60000));
    else if (ReadSamplingFlag(args, a, &params.sampling)) continue;
    else if (a == "--threads") config.threads = int(args.Whole("--threads", 0, 1024));
    else if (a == "--allow-unqualified") config.allow_unqualified = 1;
    else if (a == "--repeat") repeat = args.Whole("--repeat", 1, 1e6);
    else return SpeakUsage(("unknown argument '" + a + "'").c_str());
  }
  if (plan.empty()) return SpeakUsage("--plan is required");
  if (!have_text) return SpeakUsage("one of --text or --text-ids is required");
  if (out_path.empty()) return SpeakUsage("--out is required");
  config.plan_path = plan.c_str();
  OeSpeech* speech = nullptr;
  if (OeError* error = oe_speech_open(&config, &speech)) return SpeakFail(error);
  Json described;
  if (OeError* error = ReadInfo(speech, oe_speech_info, "speech info", info, &described)) {
    oe_speech_close(speech);
    return SpeakFail(error);
  }
  const int64_t rate = described.value("sample_rate", int64_t(0));
  const std::string dtype = described.value("pcm_dtype", std::string());

  params.text = text.c_str();
  params.text_ids = ids.empty() ? nullptr : ids.data();
  params.n_text_ids = int(ids.size());
  std::signal(SIGINT, OnSigint);
  OeError* error = nullptr;
  Sink sink;
  sink.json = json;
  sink.dtype = dtype;
  bool wav_ok = true;
  for (int64_t i = 0; i < repeat && error == nullptr && !g_interrupted; ++i) {
    WavWriter wav;  // each run rewrites the file: it holds the last utterance
    if (!wav.Open(out_path, rate)) {
      std::fprintf(stderr, "omni-edge-run speak: cannot write %s\n", out_path.c_str());
      wav_ok = false;
      break;
    }
    sink.wav = &wav;
    error = oe_speech_speak(speech, &params, OnEvent, &sink);
    wav_ok = wav.Close() && !sink.write_failed;
    if (!wav_ok) break;
  }
  oe_speech_close(speech);
  if (error != nullptr) return SpeakFail(error);
  if (!wav_ok) {
    std::fprintf(stderr, "omni-edge-run speak: writing %s failed\n", out_path.c_str());
    return 1;
  }
  if (!json) {
    const auto t = ParseJson(sink.terminal, "terminal event");
    if (t.ok()) {
      const Json& e = t.value();
      std::fprintf(stderr,
                   "[%s: %s] %lld frames, %lld samples (%.2f s at %lld Hz) -> %s; first PCM %.1f ms, RTF %.3f, "
                   "%lld underruns (%.1f ms), peak RSS %.0f MB\n",
                   e.value("kind", "").c_str(), e.value("finish_reason", "").c_str(),
                   static_cast<long long>(e.value("frames", int64_t(0))), static_cast<long long>(e.value("samples", int64_t(0))),
                   e.value("audio_ms", 0.0) / 1000.0, static_cast<long long>(rate), out_path.c_str(),
                   e.value("first_pcm_ms", 0.0), e.value("rtf", 0.0), static_cast<long long>(e.value("underruns", int64_t(0))),
                   e.value("underrun_ms", 0.0), e.value("peak_rss_mb", 0.0));
    }
  }
  return 0;
}

namespace {

struct OmniSink {
  Sink audio;
  OeEventCallback on_text = nullptr;
  void* text_user = nullptr;
};

void PrintTagged(const char* stream, const char* event_json) {
  // {"kind":...} -> {"stream":"<stream>","kind":...}
  std::printf("{\"stream\":\"%s\",%s\n", stream, event_json[0] == '{' ? event_json + 1 : event_json);
  std::fflush(stdout);
}

int OnOmniText(const char* event_json, void* user_data) {
  auto* sink = static_cast<OmniSink*>(user_data);
  if (g_interrupted) return 1;
  if (sink->audio.json) {
    PrintTagged("text", event_json);
    return 0;
  }
  return sink->on_text(event_json, sink->text_user);
}

int OnOmniAudio(const char* event_json, const void* pcm, int64_t n_samples, void* user_data) {
  auto* sink = static_cast<OmniSink*>(user_data);
  const bool json = sink->audio.json;
  sink->audio.json = false;  // printed here, tagged
  const int rc = OnEvent(event_json, pcm, n_samples, &sink->audio);
  sink->audio.json = json;
  if (json) PrintTagged("audio", event_json);
  return rc;
}

}  // namespace

int RunOmni(const OeSessionConfig& config, const OeGenerateParams& text, int max_frames, const std::string& wav_path,
            bool json, OeEventCallback on_text, void* text_user) {
  OeOmni* omni = nullptr;
  if (OeError* error = oe_omni_open(&config, &omni)) return SpeakFail(error);
  Json described;
  if (OeError* error = ReadInfo(omni, oe_omni_info, "omni info", false, &described)) {
    oe_omni_close(omni);
    return SpeakFail(error);
  }
  OeSpeakParams speech;
  oe_speak_params_default(&speech);
  speech.max_frames = max_frames;
  WavWriter wav;
  if (!wav.Open(wav_path, described.value("sample_rate", int64_t(0)))) {
    oe_omni_close(omni);
    std::fprintf(stderr, "omni-edge-run: cannot write %s\n", wav_path.c_str());
    return 1;
  }
  OmniSink sink;
  sink.audio.wav = &wav;
  sink.audio.json = json;
  sink.audio.dtype = described.value("pcm_dtype", std::string());
  sink.on_text = on_text;
  sink.text_user = text_user;
  std::signal(SIGINT, OnSigint);
  OeError* error = oe_omni_run(omni, &text, &speech, OnOmniText, OnOmniAudio, &sink);
  oe_omni_close(omni);
  const bool wav_ok = wav.Close() && !sink.audio.write_failed;
  if (error != nullptr) return SpeakFail(error);
  if (!wav_ok) {
    std::fprintf(stderr, "omni-edge-run: writing %s failed\n", wav_path.c_str());
    return 1;
  }
  if (!json) {
    const auto t = ParseJson(sink.audio.terminal, "terminal event");
    if (t.ok()) {
      std::fprintf(stderr, "[audio: %s] %lld samples -> %s; first PCM %.1f ms, RTF %.3f, %lld underruns\n",
                   t->value("finish_reason", "").c_str(), static_cast<long long>(t->value("samples", int64_t(0))),
                   wav_path.c_str(), t->value("first_pcm_ms", 0.0), t->value("rtf", 0.0),
                   static_cast<long long>(t->value("underruns", int64_t(0))));
    }
  }
  return 0;
}

}  // namespace omni_edge::tools
