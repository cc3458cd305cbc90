// POST /v1/audio/speech: the input text spoken by a speech plan, as a whole WAV or raw pcm file
// (the default), as those bytes while they are made (stream_format "audio": a WAV then starts
// with a header whose sizes read "until the data ends"), or as vLLM-Omni's speech.audio.* events
// (stream_format "sse"). A streamed response's header goes out with the first samples: a
// request that fails before any audio still gets its error status.
#include "base/wav.h"
#include "server/endpoints.h"
#include "server/openai_speech.h"
#include "server/response_events.h"

namespace omni_edge::server {
namespace {

struct Speaking {
  tcp::socket* socket = nullptr;
  const SpeechRequest* request = nullptr;
  int64_t sample_rate = 0;
  ChunkedResponse* out = nullptr;  // null: the whole file at the end
  Collected got;

  // What goes out for `pcm` (little-endian int16) as the stream format asks.
  bool Send(const std::string& pcm) {
    if (request->stream_format == "sse") {
      const std::string bytes = Header() + pcm;
      return out->Write("event: speech.audio.delta\ndata: " + SpeechDelta(bytes, request->response_format).dump() + "\n\n");
    }
    return out->Write(Header() + pcm);
  }
  // A streamed WAV's header, once, before its first samples.
  std::string Header() {
    if (request->response_format != "wav" || sent_header_) return "";
    sent_header_ = true;
    return WavHeader(sample_rate, -1);
  }

 private:
  bool sent_header_ = false;
};

int OnSpeechEvent(const OeEvent* ev, void* user) {
  auto* s = static_cast<Speaking*>(user);
  std::string piece, pcm;
  s->got.Take(*ev, &piece, &pcm);
  if (s->out == nullptr) return PeerClosed(*s->socket) ? 1 : 0;  // a client that went away cancels the request
  if (pcm.empty()) return s->out->gone() ? 1 : 0;
  return s->Send(pcm) ? 0 : 1;  // a client that went away cancels the request
}

Status Unservable(const Serving& s, const SpeechRequest& r) {
  const PlanFacts& plan = s.pool.facts();
  OE_RETURN_IF_ERROR(CheckModel(s, r.model));
  if (!plan.audio) return Status::Error("invalid_request", "model: this plan makes no audio");
  if (plan.text) {
    return Status::Error("invalid_request", "model: an omni plan speaks its own replies: ask chat completions for "
                         "modalities [\"text\", \"audio\"]");
  }
  return CheckVoice(r.voice, "voice");
}

// Runs the request; the response when nothing was streamed (else the stream's end).
bool Speak(tcp::socket& socket, const HttpRequest& req, SessionLease& session, Speaking* sp, bool* failed) {
  const SpeechRequest& r = *sp->request;
  OeRequest request;
  oe_request_default(&request);
  request.prompt = r.input.c_str();
  request.max_frames = int(r.max_frames);
  OeError* error = oe_session_submit(session.get(), &request, OnSpeechEvent, sp);
  std::string reason, message;
  *failed = error != nullptr || sp->got.Failed(&reason, &message);
  if (error != nullptr) reason = oe_error_reason(error), message = oe_error_message(error), oe_error_free(error);
  session.Release(*failed);  // before the last bytes: the client's next request finds it free
  const Json& t = sp->got.audio_terminal;
  if (sp->out == nullptr || !sp->out->started()) {
    if (*failed) return SendFailure(socket, req, reason, message);
    if (sp->out == nullptr) {
      const std::string head = r.response_format == "wav" ? WavHeader(sp->sample_rate, sp->got.samples) : "";
      return Send(socket, req, http::status::ok, head + sp->got.pcm16, SpeechMediaType(r.response_format),
                  {{kMetricsHeader, sp->got.Metrics().dump(-1, ' ', true)}});
    }
  }
  if (r.stream_format != "sse") return !*failed && sp->out->End();  // a failed byte stream ends cut short
  const Json last = *failed ? SpeechError(message, ErrorType(reason), reason)
                            : SpeechDone(t.value("text_tokens", int64_t(0)), t.value("frames", int64_t(0)));
  sp->out->Write("event: " + last["type"].get<std::string>() + "\ndata: " + last.dump() + "\n\n");
  sp->out->Write(": metrics " + sp->got.Metrics().dump(-1, ' ', true) + "\n\n");
  return sp->out->End();
}

}  // namespace

bool ServeSpeech(Serving& s, tcp::socket& socket, const HttpRequest& req) {
  auto parsed = ParseSpeech(req.body());
  if (!parsed.ok()) {
    s.metrics.Record("speech", 400, Json::object());
    return SendRefusal(socket, req, parsed.status());
  }
  if (Status no = Unservable(s, *parsed); !no.ok()) return SendUnservable(s, "speech", socket, req, no);
  if (s.stopping) return SendBusy(s, "speech", socket, req);
  SessionLease session(s.pool);
  if (session.get() == nullptr) return SendBusy(s, "speech", socket, req);
  const char* type = parsed->stream_format == "sse" ? "text/event-stream" : SpeechMediaType(parsed->response_format);
  ChunkedResponse out(socket, req, type);
  Speaking sp;
  sp.socket = &socket;
  sp.request = &*parsed;
  sp.sample_rate = s.pool.facts().sample_rate;
  sp.out = parsed->stream_format.empty() ? nullptr : &out;
  bool failed = false;
  const bool ok = Speak(socket, req, session, &sp, &failed);
  s.metrics.Record("speech", failed ? 500 : 200, sp.got.Metrics());
  return ok;
}

}  // namespace omni_edge::server
