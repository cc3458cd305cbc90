// A speech session: text -> codes -> PCM as two contract stages, each with its own stage
// controller and bounded credited stream. The talker (with its code predictor) runs on one
// worker thread and streams a "codes" event per frame; the vocoder runs on another, cuts the
// frames into windows as the plan's stream shape says and streams "pcm" events; the caller's
// thread is the consumer, with a playback clock that counts underruns. Credits make the chain
// backpressured end to end: a slow consumer stalls the vocoder, which stalls the talker.
//
// The code predictor is not a stage of its own: the talker's next position needs all the codes
// of the current frame, so a stream between them would only add a round trip per frame.
//
// Cancel() (thread-safe) ends the utterance at the next frame: both stages stop, the PCM still
// queued is withheld from the consumer, a terminal "cancelled" event arrives, and the next
// request starts clean (every utterance starts from an empty KV cache).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "contract/stage_controller.h"
#include "models/llm/llm_session.h"
#include "models/llm/tokenizer.h"
#include "models/speech/hidden_feed.h"
#include "models/speech/talker.h"
#include "models/speech/vocoder.h"
#include "runtime/plan.h"

namespace omni_edge::speech {

inline constexpr double kDefaultPrebufferMs = 200;

struct SpeakRequest {
  std::string text;
  std::vector<int32_t> text_ids;  // exact token ids instead of `text`
  int64_t max_frames = 0;         // 0: the plan's default
  std::optional<llm::SamplingParams> sampling;
  // Audio the player queues before it starts (a jitter buffer): with a one-frame first chunk,
  // the first full chunk comes a window's compute later than the first 57 ms of audio ran out.
  double prebuffer_ms = kDefaultPrebufferMs;
  // The omni pipeline: the talker runs dual-track on a thinker's hidden states from this feed
  // (one per text token, as they come) instead of `text`. Not owned; outlives Speak().
  HiddenFeed* text_hidden = nullptr;
};

struct SpeechMetrics {
  std::string finish_reason;  // eos | length | cancelled | error
  int64_t text_tokens = 0, frames = 0, samples = 0, sample_rate = 0, chunks = 0;
  double audio_ms = 0, total_ms = 0, rtf = 0;
  double first_pcm_ms = -1, playback_start_ms = -1, max_gap_ms = 0, tail_ms = 0;
  int64_t underruns = 0;
  double underrun_ms = 0;
  double talker_ms_per_frame = 0, vocoder_ms = 0, peak_rss_mb = 0;
  Json ToJson() const;
};

struct SpeechEvent {
  std::string kind;  // pcm | done | cancelled | error
  int64_t seq = 0;
  std::string pcm_dtype;      // pcm: float32 | int16
  std::string pcm;            // pcm: the samples' bytes
  int64_t n_samples = 0;
  int64_t first_sample = 0;   // pcm: where these samples start in the utterance
  int64_t frames_final = 0;   // pcm: frames whose audio is complete after this event
  std::string error;
  SpeechMetrics metrics;      // terminal
  // {"kind", "seq", ...}: pcm events give first_sample, n_samples, frames_final (not samples).
  Json ToJson() const;
  std::vector<float> Samples() const;  // pcm as float in [-1, 1]
};

class SpeechSession {
 public:
  static Result<std::unique_ptr<SpeechSession>> Open(const std::string& plan_path, const llm::SessionOptions& options = {});
  static Result<std::unique_ptr<SpeechSession>> Open(Plan plan, const llm::SessionOptions& options = {});
  ~SpeechSession();

  // Runs one utterance to its terminal event; `on_event` runs on the calling thread and may
  // return false to cancel.
  Result<SpeechMetrics> Speak(const SpeakRequest& request, const std::function<bool(const SpeechEvent&)>& on_event);
  // Thread-safe; also wakes a dual-track talker waiting for its next text hidden state.
  void Cancel();

  // Codes of the last utterance, code_groups per frame, in order; and split into frames.
  const std::vector<int32_t>& codes() const { return codes_; }
  std::vector<Frame> frames() const;
  int64_t code_groups() const { return talker_->config().code_groups; }
  int64_t sample_rate() const { return vocoder_->config().sample_rate; }
  const std::string& pcm_dtype() const { return vocoder_->config().pcm_dtype; }
  const Plan& plan() const { return plan_; }
  std::vector<Placement> placements() const;
  Result<std::vector<int32_t>> Tokenize(const std::string& text) const;

 private:
  struct Run;
  SpeechSession() = default;
  void ProduceCodes(Run& run);
  void ProducePcm(Run& run);

  Plan plan_;
  const StagePlan* talker_stage_ = nullptr;
  const StagePlan* vocoder_stage_ = nullptr;
  BackendPool backends_;
  std::unique_ptr<llm::Tokenizer> tokenizer_;
  std::unique_ptr<Talker> talker_;
  std::unique_ptr<Vocoder> vocoder_;
  std::unique_ptr<contract::StageController> talker_controller_, vocoder_controller_;
  std::string session_id_;
  std::string talker_artifact_, vocoder_artifact_;  // artifact ids the requests name
  int64_t request_counter_ = 0;
  std::atomic<bool> cancel_{false};
  std::mutex feed_mu_;
  HiddenFeed* feed_ = nullptr;  // of the utterance in flight, for Cancel()
  std::vector<int32_t> codes_;
};

}  // namespace omni_edge::speech
