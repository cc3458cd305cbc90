// What one spoken reply sent its listener, kept so that a cut can be mapped back: the transcript
// token by token, and each audio chunk with the talker frames it completed. A position in the
// played audio becomes the frames fully heard, and those frames become the thinker's tokens:
// a dual-track talker's frame t reads token t (the talker reports how many text tokens each
// frame had read), so the tokens heard are those the last heard frame had read; a talker that
// reads the whole reply first (MiniCPM-o's) has no such alignment, and the tokens are taken in
// proportion to the frames heard (approximate, and said so).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"

namespace omni_edge::realtime {

class ReplyLedger {
 public:
  void Clear();
  // A transcript delta and the tokens it carries (in order).
  void Text(const std::string& text, int64_t tokens);
  // An audio chunk as the stream had it: its samples at the stream's rate and the frames final after it.
  void Audio(int64_t samples, int64_t frames_final);
  // The stream's sample rate (for milliseconds).
  void set_sample_rate(int64_t rate) { rate_ = rate; }

  struct Cut {
    int64_t frames = 0;    // talker frames fully played
    int64_t tokens = 0;    // thinker tokens to keep
    std::string transcript;
    std::string alignment;  // "frame" (the talker's own) | "proportional" | "none" (no audio)
  };
  // The reply cut at `audio_end_ms` of its audio; `tokens_at_frame` is the talker's report (may
  // be empty), `kept` the tokens the thinker holds of the reply.
  Cut CutAt(double audio_end_ms, const std::vector<int64_t>& tokens_at_frame, int64_t kept) const;

  int64_t tokens() const { return tokens_; }
  double audio_ms() const { return rate_ > 0 ? 1000.0 * double(samples_) / double(rate_) : 0.0; }
  const std::string& transcript() const { return transcript_; }

 private:
  int64_t rate_ = 0, samples_ = 0, tokens_ = 0;
  std::string transcript_;
  std::vector<std::pair<int64_t, size_t>> texts_;   // (tokens so far, transcript bytes so far) per delta
  std::vector<std::pair<int64_t, int64_t>> chunks_;  // (samples so far, frames final) per chunk
};

}  // namespace omni_edge::realtime
