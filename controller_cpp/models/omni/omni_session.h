// The three-stage omni pipeline: thinker (text LLM) -> talker -> vocoder. One request yields a
// text stream and an audio stream. The thinker streams tokens as a text session does; each
// token's hidden state (the thinker's last hidden state at the position that produced it) goes
// to the talker as it is made, and the talker runs dual-track: its frame t reads text hidden
// state t (the text pad once the text has ended) plus the codes of frame t-1, so speech starts
// after the first token instead of after the whole reply.
//
// The text events and the audio events reach the caller on two threads, never at the same
// time. Cancel() stops all three stages; each stream still ends with its terminal event.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "models/llm/llm_session.h"
#include "models/speech/hidden_feed.h"
#include "models/speech/speech_session.h"

namespace omni_edge::omni {

struct OmniRequest {
  llm::GenerateRequest text;      // the thinker's request (prompt, chat, max_new_tokens, sampling, ...)
  speech::SpeakRequest speech;    // max_frames, talker sampling, prebuffer (its text fields are unused)
};

struct OmniMetrics {
  llm::Metrics text;
  speech::SpeechMetrics audio;
  Json ToJson() const;  // {"text": {...}, "audio": {...}}
};

class OmniSession {
 public:
  static Result<std::unique_ptr<OmniSession>> Open(const std::string& plan_path, const llm::SessionOptions& options = {});
  static Result<std::unique_ptr<OmniSession>> Open(Plan plan, const llm::SessionOptions& options = {});

  Result<OmniMetrics> Run(const OmniRequest& request, const std::function<bool(const llm::OutputEvent&)>& on_text,
                          const std::function<bool(const speech::SpeechEvent&)>& on_audio);
  // Thread-safe: the thinker stops at its next token, the talker at its next frame.
  void Cancel();

  llm::LlmSession& thinker() { return *thinker_; }
  speech::SpeechSession& speech() { return *speech_; }

 private:
  OmniSession() = default;

  std::unique_ptr<llm::LlmSession> thinker_;
  std::unique_ptr<speech::SpeechSession> speech_;
  std::atomic<bool> stop_{false};  // set by Cancel() or a failed stage; the thinker stops at its next token
  std::mutex feed_mu_;
  speech::HiddenFeed* feed_ = nullptr;  // of the request in flight, for Cancel()
};

}  // namespace omni_edge::omni
