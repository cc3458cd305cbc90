#include "tools/run_session.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "base/json_fields.h"
#include "base/platform/os.h"
#include "server/session_pool.h"
#include "tools/wav_writer.h"

namespace omni_edge::tools {
namespace {

std::atomic<OeSession*> g_session{nullptr};  // lock-free: read by the signal handler
volatile std::sig_atomic_t g_signal = 0;

void PrepareFaultLines(const Output& out, const std::vector<std::string>& streams) {
  std::string lines;
  if (out.json) {
    const Json end{{"kind", "error"}, {"finish_reason", "error"}, {"seq", 0}, {"reason", "weights_changed"},
                   {"error", "a mapped weights file changed during the run"}};
    for (const std::string& stream : streams) {
      const bool tag = out.tag_streams && !stream.empty();
      lines += (tag ? "{\"stream\":\"" + stream + "\"," + end.dump().substr(1) : end.dump()) + "\n";
    }
  }
  SetFaultLines(lines);
}

void OnSignal(int signo) {
  g_signal = signo;  // also ends a --repeat loop, or a run before it starts
  if (OeSession* s = g_session.load()) oe_session_cancel(s);  // only sets atomic flags
}

struct Sink {
  const Output* out = nullptr;
  WavWriter* wav = nullptr;
  bool write_failed = false;
  Json terminals = Json::object();  // stream -> its terminal event
  Json action;                      // a policy's action event, held for its terminal's timings
};

void PrintJson(const Output& out, const std::string& stream, const char* json) {
  if (!out.tag_streams || stream.empty()) {
    std::printf("%s\n", json);
  } else {  // {"kind":...} -> {"stream":"<stream>","kind":...}
    std::printf("{\"stream\":\"%s\",%s\n", stream.c_str(), json[0] == '{' ? json + 1 : json);
  }
  std::fflush(stdout);
}

// A policy's stream: the action is held until its terminal event, and then (--json) printed as the
// last line with the terminal's timings (total included); a request that ends without one ends
// with its terminal ("cancelled", "error") instead.
int OnAction(Sink* sink, const OeEvent* e) {
  auto parsed = ParseJson(e->json, "action event");
  if (!parsed.ok()) return 0;
  if (!e->terminal) {
    if (parsed->value("kind", "") == "action") sink->action = std::move(parsed.value());
    return g_signal != 0 ? 1 : 0;
  }
  const bool acted = parsed->value("kind", "") == "done" && sink->action.is_object();
  if (acted && parsed->contains("timings")) sink->action["timings"] = (*parsed)["timings"];
  if (sink->out->json) {
    PrintJson(*sink->out, "", (acted ? sink->action : parsed.value()).dump().c_str());
  } else if (acted) {
    const Json& a = sink->action;
    for (const auto& row : a["actions"]) std::printf("%s\n", row.dump().c_str());
    const Json& age = a["observation_age_ms"];
    std::fprintf(stderr, "[action] %lld x %lld every %.0f ms; observation age %.1f ms at start, %.1f ms at emission; %s\n",
                 static_cast<long long>(a.value("chunk_size", int64_t(0))), static_cast<long long>(a.value("action_dim", int64_t(0))),
                 a.value("dt_ms", 0.0), age.value("at_start", 0.0), age.value("at_emission", 0.0),
                 a.value("deadline_missed", false) ? "deadline MISSED" : "deadline met or none");
  }
  std::fflush(stdout);
  return 0;
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
    sink->terminals[stream] = parsed.ok() ? parsed.value() : Json{{"kind", "error"}};
  }
  if (sink->out->consumer_delay_ms > 0 && !e->terminal) {  // the controller's credit holds the producers back
    std::this_thread::sleep_for(std::chrono::milliseconds(sink->out->consumer_delay_ms));
  }
  if (stream == "action") return OnAction(sink, e);
  if (sink->out->json) {
    PrintJson(*sink->out, stream, e->json);
  } else if (stream == "text" && !e->terminal) {
    auto parsed = ParseJson(e->json, "event");
    if (parsed.ok()) std::fputs(parsed->value("text", "").c_str(), stdout);
    std::fflush(stdout);
  }
  return g_signal != 0 ? 1 : 0;
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
                 "[audio %s: %s] %lld frames, %lld samples (%.2f s at %lld Hz) -> %s; first PCM %.1f ms, playback "
                 "from %.1f ms (%s chunks, prebuffer %.0f ms), RTF %.3f, %lld underruns (%.1f ms), least lead %.0f ms, "
                 "peak RSS %.0f MB\n",
                 e.value("kind", "").c_str(), e.value("finish_reason", "").c_str(),
                 static_cast<long long>(e.value("frames", int64_t(0))), static_cast<long long>(e.value("samples", int64_t(0))),
                 e.value("audio_ms", 0.0) / 1000.0, static_cast<long long>(e.value("sample_rate", int64_t(0))),
                 wav_path.c_str(), e.value("first_pcm_ms", 0.0), e.value("playback_start_ms", 0.0),
                 e.value("chunk_schedule", "fixed").c_str(), e.value("prebuffer_ms", 0.0), e.value("rtf", 0.0),
                 static_cast<long long>(e.value("underruns", int64_t(0))), e.value("underrun_ms", 0.0),
                 e.value("lead_min_ms", -1.0), e.value("peak_rss_mb", 0.0));
  }
}

// The session's final streams and its audio format (rate 0 without audio).
struct Streams {
  std::vector<std::string> names;
  int64_t sample_rate = 0;
};

Streams StreamsOf(OeSession* session) {
  Streams s;
  auto info = server::SessionInfo(session);
  if (!info.ok() || !info->contains("streams") || !(*info)["streams"].is_object()) return s;
  for (const auto& [name, stream] : (*info)["streams"].items()) {
    s.names.push_back(name);
    if (name == "audio" && stream.is_object()) s.sample_rate = stream.value("sample_rate", int64_t(0));
  }
  return s;
}

// With --json every stream's last line is its terminal event: one the request did not deliver
// (it never started, or failed before its stream ended) is written here.
void EndStreams(const Output& out, const std::vector<std::string>& streams, const Json& delivered, const Json& end) {
  if (!out.json) return;
  for (const std::string& stream : streams) {
    if (!delivered.contains(stream)) PrintJson(out, stream, end.dump().c_str());
  }
}

Json TerminalOf(const char* kind, const std::string& reason, const std::string& message) {
  Json t{{"kind", kind}, {"finish_reason", kind}, {"seq", 0}};
  if (!reason.empty()) t["reason"] = reason;
  if (!message.empty()) t["error"] = message;
  return t;
}

bool AnyCancelled(const Json& terminals) {
  for (const auto& [stream, t] : terminals.items()) {
    if (t.value("kind", "") == "cancelled") return true;
  }
  return false;
}

}  // namespace

void InstallCancelSignals() {
  platform::OnCancelSignals(OnSignal);
  ReportFaultsInMappedFiles("omni-edge-run");
}

int CancelledBy() { return g_signal; }

int Fail(OeError* error) {
  std::fprintf(stderr, "omni-edge-run: %s: %s\n", oe_error_reason(error), oe_error_message(error));
  oe_error_free(error);
  return 1;
}

int FailBeforeRun(OeError* error, const Output& out) {
  if (g_signal != 0) {  // the load was interrupted and then failed: it is a cancel
    oe_error_free(error);
    EndStreams(out, {""}, Json::object(), TerminalOf("cancelled", "", ""));
    return 128 + g_signal;
  }
  EndStreams(out, {""}, Json::object(), TerminalOf("error", oe_error_reason(error), oe_error_message(error)));
  return Fail(error);
}

int RunRequests(OeSession* session, const OeRequest& request, const Output& out, int repeat) {
  Sink sink;
  sink.out = &out;
  const Streams streams = StreamsOf(session);
  if (streams.sample_rate > 0 && out.wav_path.empty()) {
    const char* why = "this plan speaks: give the WAV to write (--speak OUT.wav, or speak --out)";
    EndStreams(out, streams.names, sink.terminals, TerminalOf("error", "invalid_argument", why));
    std::fprintf(stderr, "omni-edge-run: %s\n", why);
    return 2;
  }
  g_session = session;
  PrepareFaultLines(out, streams.names);
  OeError* error = nullptr;
  bool wav_ok = true;
  for (int i = 0; i < repeat && error == nullptr && wav_ok && g_signal == 0; ++i) {
    WavWriter wav;  // each run replaces the file: it holds the last one
    if (streams.sample_rate > 0 && !wav.Open(out.wav_path, streams.sample_rate)) {
      std::fprintf(stderr, "omni-edge-run: cannot write beside %s\n", out.wav_path.c_str());
      wav_ok = false;
      break;
    }
    sink.wav = streams.sample_rate > 0 ? &wav : nullptr;
    sink.terminals = Json::object();
    sink.action = Json();
    OeRequest stamped = request;  // a camera `capture_age_ms` behind: a fresh observation per request
    OeObservation observation{};
    if (out.capture_age_ms >= 0 && request.observation != nullptr) {
      observation = *request.observation;
      const auto now = std::chrono::system_clock::now().time_since_epoch();
      observation.timestamp_ms = std::chrono::duration<double, std::milli>(now).count() - out.capture_age_ms;
      stamped.observation = &observation;
    }
    error = oe_session_submit(session, &stamped, OnEvent, &sink);
    // A finished request, or a cancelled one that streamed audio, replaces the file; a failed
    // one (or a cancel before any audio) leaves what was there.
    const bool keep = error == nullptr && (!AnyCancelled(sink.terminals) || wav.samples() > 0);
    if (streams.sample_rate > 0 && keep && !sink.write_failed) wav_ok = wav.Commit();
    wav_ok = wav_ok && !sink.write_failed;
  }
  g_session = nullptr;
  const Json end = error != nullptr ? TerminalOf("error", oe_error_reason(error), oe_error_message(error))
                                    : TerminalOf("cancelled", "", "");
  EndStreams(out, streams.names, sink.terminals, end);
  if (!out.json) Summarize(sink.terminals, out.wav_path);
  if (error != nullptr) return Fail(error);
  if (!wav_ok) {
    std::fprintf(stderr, "omni-edge-run: writing %s failed\n", out.wav_path.c_str());
    return 1;
  }
  if (g_signal != 0 && (sink.terminals.empty() || AnyCancelled(sink.terminals))) return 128 + g_signal;
  return 0;
}

}  // namespace omni_edge::tools
