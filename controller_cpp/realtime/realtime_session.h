// A spoken conversation over an omni plan, as OpenAI's Realtime API has it (the event vocabulary
// vLLM-Omni 0.30 serves on /v1/realtime): the client appends 16-bit PCM; server VAD (the plan's
// Silero component) finds each turn; a committed turn goes through the plan's audio encoder into
// the thinker, whose KV stays resident from turn to turn; the response streams the transcript
// and speech. Speech during a response (barge-in) or response.cancel stops thinker, talker and
// vocoder at their next step, and the reply is cut back to what the listener heard
// (conversation.item.truncate with audio_end_ms, or the playback acknowledgements the client
// sent: vLLM-Omni's `playback.ack`): the thinker keeps only the tokens whose audio was played,
// and the next turn continues from there.
//
// Threads: Receive() runs on the client's thread (parsing, VAD, commits, cuts); each response
// runs on a thread of its own; events go out through `emit`, one at a time, in order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/session.h"
#include "realtime/realtime_config.h"
#include "realtime/reply_ledger.h"
#include "realtime/voice_activity.h"

namespace omni_edge::realtime {

struct RealtimeOptions {
  std::string model = "omni-edge";  // the id session objects name
  bool allow_unqualified = false;    // the voice activity component's reports
  int64_t max_turn_seconds = 60;     // input audio one turn may hold
};

class RealtimeSession {
 public:
  using Emit = std::function<void(const Json& event)>;

  // Over an open session of an omni plan (borrowed: it must outlive this one); server VAD needs
  // the plan's voice_activity component (without one, turn_detection starts null). Emits
  // session.created before it returns.
  static Result<std::unique_ptr<RealtimeSession>> Open(pipeline::Session& session, const RealtimeOptions& options,
                                                       Emit emit);
  RealtimeSession(const RealtimeSession&) = delete;
  RealtimeSession& operator=(const RealtimeSession&) = delete;
  ~RealtimeSession();  // Close()

  // One client event (JSON text). A bad one is answered with an `error` event; the session goes on.
  void Receive(const std::string& text);
  // input_audio_buffer.append without the base64: 16-bit samples at the session's input rate.
  void AppendPcm16(const int16_t* samples, size_t n);
  // The client went away: a response in flight is cancelled and waited for; nothing more is emitted.
  void Close();
  // {"session", "items": [...], "context_tokens", "responses", "speaking"}: the conversation as
  // the server holds it (and the thinker's resident context length).
  Json Info() const;

 private:
  struct Item {
    std::string id, role;       // user | assistant
    std::string transcript;     // the assistant's (cut back on truncate)
    double audio_ms = 0;        // audio sent (assistant) or heard (user)
    double played_ms = -1;      // the client's last playback.ack for it (-1: none)
    bool cut = false;
    int64_t kept_tokens = -1;   // after a cut: the reply's tokens the thinker kept
    std::string alignment;      // after a cut: how audio was mapped to tokens (ReplyLedger::Cut)
    ReplyLedger ledger;         // assistant: what was sent, to map a cut back
  };
  struct PendingInput {         // the user content the next response reads
    std::vector<std::string> texts;
    std::vector<std::string> wavs;
  };
  struct Timing {               // the response's latency parts: wall clock in ms (-1: not yet)
    double end_of_turn_wait = -1;  // the silence the VAD waited for, in the stream's audio time
    double committed = -1, started = -1, first_text = -1, first_audio = -1, interrupted = -1, last_audio = -1, done = -1;
  };

  RealtimeSession(pipeline::Session& session, RealtimeOptions options, Emit emit);
  void Send(Json event);
  void Error(const std::string& code, const std::string& message, const Json& client_event_id,
             const std::string& param = "");
  void Dispatch(const std::string& type, const Json& event);
  void UpdateSession(const Json& event);
  void Append(const Json& event);
  void AppendSamples(const std::vector<float>& samples, const Json& event_id);
  void OnTurnChanges(const std::vector<TurnDetector::Change>& changes, const Json& event_id);
  void Commit(const Json& event_id, int64_t start_ms, int64_t end_ms, bool respond);
  void ClearInput();
  void CreateItem(const Json& event);
  void Truncate(const Json& event);
  void Ack(const Json& event);
  void CreateResponse(const Json& event);
  void CancelResponse(const std::string& reason, const Json& event_id);
  void RunResponse(const pipeline::Request& request, const std::string& response_id, Item* item,
                   const std::string& previous);
  bool Listen(const pipeline::SessionEvent& e, const std::string& response_id, Item* item);
  void FinishResponse(const Result<Json>& result, const std::string& response_id, Item* item, int64_t resident);
  Json TimingJson(const Json& metrics) const;
  Status CutReply(Item* item, double audio_end_ms);
  void SendTruncated(const Item& item, double audio_end_ms);
  void WaitResponse();
  Json ItemObject(const Item& item, const std::string& status) const;
  // The thinker's resident context in a session's Info(): the positions its KV cache holds (a
  // pending last token is fed with the next prompt, which counts it), and the reply's tokens kept.
  static int64_t ContextTokens(const Json& info, int64_t* reply_kept = nullptr);
  double NowMs() const;
  double StreamMs(int64_t samples) const;

  pipeline::Session& session_;
  RealtimeOptions options_;
  Emit emit_;
  std::string id_;
  bool hears_ = false;  // the plan has an audio encoder
  int64_t stream_rate_ = 24000;  // the plan's speech
  std::unique_ptr<BackendPool> vad_backends_;
  std::unique_ptr<VoiceActivity> vad_;
  RealtimeConfig config_;

  std::mutex emit_mu_;
  bool closed_ = false;  // guarded by emit_mu_

  // The client thread's state.
  std::vector<float> input_;     // the buffer's samples at the input rate
  int64_t input_start_ = 0;      // stream sample of input_[0]
  int64_t stream_samples_ = 0;   // samples appended since the session began
  int64_t turn_start_ms_ = -1;   // a turn in progress (server VAD)
  std::string speech_item_;      // the id its item will have
  PendingInput pending_;
  std::vector<std::unique_ptr<Item>> items_;
  std::atomic<bool> conversation_{false};  // the thinker holds the conversation (later turns continue it)
  Timing next_timing_;           // the next response's, as its turn ends

  // The response in flight (one at a time).
  mutable std::mutex response_mu_;
  std::thread response_thread_;
  std::atomic<bool> responding_{false};
  std::atomic<bool> cancel_{false};
  std::string cancel_reason_;    // guarded by response_mu_
  Timing timing_;                // guarded by response_mu_ while a response runs
  Json last_timing_;             // the last response's (guarded by response_mu_)
  bool response_audio_out_ = true;  // set before its thread starts
  std::unique_ptr<media::StreamResampler> output_resampler_;  // the response thread's (stream rate -> output rate)
  int64_t responses_ = 0;
  std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();
};

}  // namespace omni_edge::realtime
