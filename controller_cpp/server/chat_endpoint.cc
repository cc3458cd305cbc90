// POST /v1/chat/completions: the conversation runs on a pooled session; the reply goes back
// whole or as server-sent events. On an omni plan with modalities ["text", "audio"] the audio
// comes as OpenAI sends it: message.audio {id, data (a WAV or pcm16, base64), expires_at,
// transcript}, or in a stream delta.audio pieces (transcript text, pcm16 data) and a last one
// with expires_at.
#include <ctime>

#include "base/base64.h"
#include "base/wav.h"
#include "server/chat_request.h"
#include "server/endpoints.h"
#include "server/openai_chat.h"
#include "server/response_events.h"

namespace omni_edge::server {
namespace {

constexpr int64_t kAudioLifetimeS = 24 * 3600;  // how long a client may refer to the audio (nothing is kept here)

struct Reply {
  tcp::socket* socket = nullptr;
  CompletionHead head;
  std::string failure, message;  // a failed request's reason and error
  bool audio = false;
  std::string audio_id;
  Collected got;
};

Json UsageOf(const Collected& got) {
  const Json& t = got.Terminal();
  Json usage = Usage(t.value("n_prompt_tokens", int64_t(0)), t.value("n_generated_tokens", int64_t(0)));
  if (!got.audio_terminal.is_null()) {
    usage["completion_tokens_details"] = {{"audio_tokens", got.audio_terminal.value("frames", int64_t(0))},
                                          {"text_tokens", usage["completion_tokens"]}};
  }
  return usage;
}

std::string FinishOf(const Collected& got) {
  const Json& t = got.Terminal();
  return t.value("kind", "") == "cancelled" ? "stop" : FinishReason(t.value("finish_reason", ""));
}

// Runs the request and gives the session back (reset after a failure); true when it failed.
bool Run(SessionLease& session, const ControllerRequest& cr, OeEventHandler on_event, void* user, Reply* reply) {
  OeError* error = oe_session_submit(session.get(), &cr.get(), on_event, user);
  const bool failed = error != nullptr || reply->got.Failed(&reply->failure, &reply->message);
  if (error != nullptr) reply->failure = oe_error_reason(error), reply->message = oe_error_message(error), oe_error_free(error);
  session.Release(failed);
  return failed;
}

// --- streamed ---

struct StreamState {
  ChunkedResponse* out = nullptr;
  Reply* reply = nullptr;
  bool first = true;

  bool Event(const Json& payload) { return out->Write("data: " + payload.dump() + "\n\n"); }
};

int OnStreamEvent(const OeEvent* ev, void* user) {
  auto* s = static_cast<StreamState*>(user);
  std::string piece, pcm;
  s->reply->got.Take(*ev, &piece, &pcm);
  if (piece.empty() && (pcm.empty() || !s->reply->audio)) return s->out->gone() ? 1 : 0;
  Json delta = Json::object();
  if (s->reply->audio) {
    Json audio = {{"id", s->reply->audio_id}};
    if (!piece.empty()) audio["transcript"] = piece;
    if (!pcm.empty()) audio["data"] = Base64Encode(pcm);
    delta["audio"] = std::move(audio);
  } else {
    delta["content"] = piece;
  }
  if (s->first) delta["role"] = "assistant";
  s->first = false;
  return s->Event(Chunk(s->reply->head, delta)) ? 0 : 1;  // a client that went away cancels the request
}

bool StreamChat(Serving& s, tcp::socket& socket, const HttpRequest& req, SessionLease& session,
                const ControllerRequest& cr, Reply* reply) {
  ChunkedResponse out(socket, req, "text/event-stream");
  StreamState st{&out, reply};
  const bool failed = Run(session, cr, OnStreamEvent, &st, reply);
  const std::string& reason = reply->failure;
  const std::string& message = reply->message;
  if (failed && !out.started()) return SendFailure(socket, req, reason, message);  // nothing sent yet: a real status
  if (failed) {
    st.Event(ErrorBody(message, ErrorType(reason), "", reason));  // after the header: the error as an event
  } else {
    if (reply->audio) st.Event(Chunk(reply->head, {{"audio", {{"id", reply->audio_id}, {"expires_at", reply->head.created + kAudioLifetimeS}}}}));
    st.Event(Chunk(reply->head, Json::object(), FinishOf(reply->got)));
    if (cr.chat().include_usage) st.Event(UsageChunk(reply->head, UsageOf(reply->got)));
  }
  out.Write(": metrics " + reply->got.Metrics().dump(-1, ' ', true) + "\n\n");  // a comment: clients skip it
  out.Write("data: [DONE]\n\n");
  return out.End();
}

// --- whole ---

int OnPlainEvent(const OeEvent* ev, void* user) {
  auto* reply = static_cast<Reply*>(user);
  std::string piece, pcm;
  reply->got.Take(*ev, &piece, &pcm);
  return PeerClosed(*reply->socket) ? 1 : 0;  // a client that went away cancels the request
}

bool PlainChat(Serving& s, tcp::socket& socket, const HttpRequest& req, SessionLease& session,
               const ControllerRequest& cr, Reply* reply) {
  if (Run(session, cr, OnPlainEvent, reply, reply)) return SendFailure(socket, req, reply->failure, reply->message);
  Json audio = nullptr;
  if (reply->audio) {
    const Collected& got = reply->got;
    const std::string bytes = cr.chat().audio_format == "wav" ? WavHeader(s.pool.facts().sample_rate, got.samples) + got.pcm16
                                                              : got.pcm16;
    audio = {{"id", reply->audio_id}, {"data", Base64Encode(bytes)},
             {"expires_at", reply->head.created + kAudioLifetimeS}, {"transcript", got.text}};
  }
  const Json body = Completion(reply->head, reply->got.text, FinishOf(reply->got), UsageOf(reply->got), audio);
  return Send(socket, req, http::status::ok, body.dump(), "application/json",
              {{kMetricsHeader, reply->got.Metrics().dump(-1, ' ', true)}});
}

// A request this plan cannot answer, refused before it runs (else an empty status).
Status Unservable(const Serving& s, const ChatCompletionRequest& chat) {
  const PlanFacts& plan = s.pool.facts();
  OE_RETURN_IF_ERROR(CheckModel(s, chat.model));
  if (!plan.text) return Status::Error("invalid_request", "model: this plan speaks the text it is given: use /v1/audio/speech");
  if (chat.audio_out && !plan.audio) return Status::Error("invalid_request", "modalities: this plan makes text only");
  return CheckVoice(chat.voice, "audio.voice");
}

}  // namespace

bool ServeChat(Serving& s, tcp::socket& socket, const HttpRequest& req) {
  auto parsed = ParseChatCompletion(req.body());
  if (!parsed.ok()) {
    s.metrics.Record("chat", 400, Json::object());
    return SendRefusal(socket, req, parsed.status());
  }
  if (Status no = Unservable(s, *parsed); !no.ok()) return SendUnservable(s, "chat", socket, req, no);
  if (s.stopping) return SendBusy(s, "chat", socket, req);
  SessionLease session(s.pool);
  if (session.get() == nullptr) return SendBusy(s, "chat", socket, req);
  const ControllerRequest cr(std::move(*parsed));
  Reply reply;
  reply.socket = &socket;
  reply.head = {NewId("chatcmpl"), int64_t(std::time(nullptr)), s.options.model};
  reply.audio = cr.chat().audio_out;
  reply.audio_id = NewId("audio");
  const bool ok = cr.chat().stream ? StreamChat(s, socket, req, session, cr, &reply)
                                   : PlainChat(s, socket, req, session, cr, &reply);
  s.metrics.Record("chat", reply.failure.empty() ? 200 : int(StatusOf(reply.failure)), reply.got.Metrics());
  return ok;
}

}  // namespace omni_edge::server
