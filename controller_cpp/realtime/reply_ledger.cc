#include "realtime/reply_ledger.h"

#include <algorithm>
#include <cmath>

namespace omni_edge::realtime {

void ReplyLedger::Clear() {
  samples_ = tokens_ = 0;
  transcript_.clear();
  texts_.clear();
  chunks_.clear();
}

void ReplyLedger::Text(const std::string& text, int64_t tokens) {
  tokens_ += tokens;
  transcript_ += text;
  texts_.emplace_back(tokens_, transcript_.size());
}

void ReplyLedger::Audio(int64_t samples, int64_t frames_final) {
  samples_ += samples;
  chunks_.emplace_back(samples_, frames_final);
}

ReplyLedger::Cut ReplyLedger::CutAt(double audio_end_ms, const std::vector<int64_t>& tokens_at_frame, int64_t kept) const {
  Cut cut;
  const int64_t heard = rate_ > 0 ? int64_t(std::floor(std::max(0.0, audio_end_ms) * double(rate_) / 1000.0)) : 0;
  // Frames fully heard: each chunk's samples spread evenly over the frames it completed.
  int64_t prev_samples = 0, prev_frames = 0;
  for (const auto& [samples, frames] : chunks_) {
    if (heard >= samples) {
      cut.frames = frames;
    } else if (samples > prev_samples && frames > prev_frames) {
      const double share = double(heard - prev_samples) / double(samples - prev_samples);
      cut.frames = prev_frames + int64_t(std::floor(share * double(frames - prev_frames)));
      break;
    } else {
      break;
    }
    prev_samples = samples;
    prev_frames = frames;
  }
  const int64_t total_frames = chunks_.empty() ? 0 : chunks_.back().second;
  if (chunks_.empty()) {
    cut.alignment = "none";
    cut.tokens = 0;
  } else if (!tokens_at_frame.empty()) {
    cut.alignment = "frame";
    cut.tokens = cut.frames == 0 ? 0 : tokens_at_frame[size_t(std::min<int64_t>(cut.frames, int64_t(tokens_at_frame.size())) - 1)];
  } else {
    cut.alignment = "proportional";
    cut.tokens = total_frames > 0 ? int64_t(std::floor(double(tokens_) * double(cut.frames) / double(total_frames))) : 0;
  }
  cut.tokens = std::clamp<int64_t>(cut.tokens, 0, std::min(kept, tokens_));
  // The transcript of the deltas whose tokens are all kept.
  size_t bytes = 0;
  for (const auto& [tokens, length] : texts_) {
    if (tokens > cut.tokens) break;
    bytes = length;
  }
  cut.transcript = transcript_.substr(0, bytes);
  return cut;
}

}  // namespace omni_edge::realtime
