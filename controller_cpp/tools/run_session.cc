#include "tools/run_session.h"

#include <csignal>
#include <cstdio>
#include <string>

#include "base/json_fields.h"
#include "tools/wav_writer.h"

namespace omni_edge::tools {
namespace {

OeSession* g_session = nullptr;
volatile std::sig_atomic_t g_interrupted = 0;

void OnSigint(int) {
  g_interrupted = 1;  // also ends a --repeat loop
  if (g_session != nullptr) oe_session_cancel(g_session);  // only sets atomic flags
}

struct Sink {
  const Output* out = nullptr;
  WavWriter* wav = nullptr;
  std::string dtype;
  bool write_failed = false;
  Json terminals = Json::object();  // stream -> its terminal event
};

void PrintJson(const Sink& sink, const OeEvent& e) {
  if (!sink.out->tag_streams) {
    std::printf("%s\n", e.json);
  } else {  // {"kind":...} -> {"stream":"<stream>","kind":...}
    std::printf("{\"stream\":\"%s\",%s\n", e.stream, e.json[0] == '{' ? e.json + 1 : e.json);
  }
  std::fflush(stdout);
}

int OnEvent(const OeEvent* e, void* user_data) {
  auto* sink = static_cast<Sink*>(user_data);
  const std::string stream = e->stream;
  if (e->data != nullptr && sink->wav != nullptr && !sink->wav->Append(e->data, e->n_samples, e->dtype)) {
    sink->write_failed = true;
    return 1;  // cancel: the audio can no longer be kept
  }
  if (e->terminal) {
    auto parsed = ParseJson(e->json, "terminal event");
    if (parsed.ok()) sink->terminals[stream] = parsed.value();
  }
  if (sink->out->json) {
    PrintJson(*sink, *e);
  } else if (stream == "text" && !e->terminal) {
    auto parsed = ParseJson(e->json, "event");
    if (parsed.ok()) std::fputs(parsed->value("text", "").c_str(), stdout);
    std::fflush(stdout);
  }
  return g_interrupted ? 1 : 0;
}

void Summarize(const Json& terminals, const std::string& wav_path) {
  if (terminals.contains("text")) {
    const Json& e = terminals["text"];
    std::fprintf(stderr,
                 "\n[%s: %s] prompt %lld tok, generated %lld tok, TTFT %.1f ms, prefill %.1f tok/s, decode %.2f tok/s, "
                 "peak RSS %.0f MB%s%s\n",
                 e.value("kind", "").c_str(), e.value("finish_reason", "").c_str(),
                 static_cast<long long>(e.value("n_prompt_tokens", int64_t(0))),
                 static_cast<long long>(e.value("n_generated_tokens", int64_t(0))), e.value("ttft_ms", 0.0),
                 e.value("prefill_tok_s", 0.0), e.value("decode_tok_s", 0.0), e.value("peak_rss_mb", 0.0),
                 e.contains("error") ? ", error: " : "", e.value("error", "").c_str());
  }
  if (terminals.contains("audio")) {
    const Json& e = terminals["audio"];
    std::fprintf(stderr,
                 "[audio %s: %s] %lld frames, %lld samples (%.2f s at %lld Hz) -> %s; first PCM %.1f ms, RTF %.3f, "
                 "%lld underruns (%.1f ms), peak RSS %.0f MB\n",
                 e.value("kind", "").c_str(), e.value("finish_reason", "").c_str(),
                 static_cast<long long>(e.value("frames", int64_t(0))), static_cast<long long>(e.value("samples", int64_t(0))),
                 e.value("audio_ms", 0.0) / 1000.0, static_cast<long long>(e.value("sample_rate", int64_t(0))),
                 wav_path.c_str(), e.value("first_pcm_ms", 0.0), e.value("rtf", 0.0),
                 static_cast<long long>(e.value("underruns", int64_t(0))), e.value("underrun_ms", 0.0),
                 e.value("peak_rss_mb", 0.0));
  }
}

// The audio stream's sample rate and dtype, from the session's info (0 without audio).
int64_t AudioFormat(OeSession* session, std::string* dtype) {
  char* text = nullptr;
  if (OeError* error = oe_session_info(session, &text)) {
    oe_error_free(error);
    return 0;
  }
  auto info = ParseJson(text, "session info");
  oe_string_free(text);
  if (!info.ok() || !info->contains("streams") || !(*info)["streams"].contains("audio")) return 0;
  const Json& audio = (*info)["streams"]["audio"];
  *dtype = audio.value("pcm_dtype", std::string());
  return audio.value("sample_rate", int64_t(0));
}

}  // namespace

int Fail(OeError* error) {
  std::fprintf(stderr, "omni-edge-run: %s: %s\n", oe_error_reason(error), oe_error_message(error));
  oe_error_free(error);
  return 1;
}

int RunRequests(OeSession* session, const OeRequest& request, const Output& out, int repeat) {
  Sink sink;
  sink.out = &out;
  const int64_t rate = AudioFormat(session, &sink.dtype);
  if (rate > 0 && out.wav_path.empty()) {
    std::fprintf(stderr, "omni-edge-run: this plan speaks: give the WAV to write (--speak OUT.wav, or speak --out)\n");
    return 2;
  }
  g_session = session;
  std::signal(SIGINT, OnSigint);
  OeError* error = nullptr;
  bool wav_ok = true;
  for (int i = 0; i < repeat && error == nullptr && wav_ok && !g_interrupted; ++i) {
    WavWriter wav;  // each run rewrites the file: it holds the last one
    if (rate > 0 && !wav.Open(out.wav_path, rate)) {
      std::fprintf(stderr, "omni-edge-run: cannot write %s\n", out.wav_path.c_str());
      wav_ok = false;
      break;
    }
    sink.wav = rate > 0 ? &wav : nullptr;
    error = oe_session_submit(session, &request, OnEvent, &sink);
    if (rate > 0) wav_ok = wav.Close() && !sink.write_failed;
  }
  g_session = nullptr;
  if (!out.json) Summarize(sink.terminals, out.wav_path);
  if (error != nullptr) return Fail(error);
  if (!wav_ok) {
    std::fprintf(stderr, "omni-edge-run: writing %s failed\n", out.wav_path.c_str());
    return 1;
  }
  return 0;
}

}  // namespace omni_edge::tools
