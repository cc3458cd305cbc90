#include "pipeline/playback.h"

#include <algorithm>
#include <limits>

namespace omni_edge::pipeline {

void PlaybackClock::Start(double now_ms) {
  playing_ = true;
  stats_.playback_start_ms = now_ms;
  played_until_ = now_ms + queued_ms_;
}

void PlaybackClock::Arrive(int64_t n, double now_ms) {
  if (n <= 0) return;
  const double duration = 1000.0 * double(n) / rate_;
  if (stats_.chunks == 0) stats_.first_pcm_ms = now_ms;
  if (last_arrival_ >= 0) stats_.max_gap_ms = std::max(stats_.max_gap_ms, now_ms - last_arrival_);
  last_arrival_ = now_ms;
  ++stats_.chunks;
  stats_.samples += n;
  if (!playing_) {
    queued_ms_ += duration;
    if (queued_ms_ >= prebuffer_ms_) Start(now_ms);
    return;
  }
  const double lead = std::max(0.0, played_until_ - now_ms);
  stats_.lead_min_ms = stats_.lead_min_ms < 0 ? lead : std::min(stats_.lead_min_ms, lead);
  if (now_ms > played_until_) {  // the speaker went silent until this chunk came
    ++stats_.underruns;
    stats_.underrun_ms += now_ms - played_until_;
    played_until_ = now_ms;
  }
  played_until_ += duration;
}

double PlaybackClock::runs_out_ms() const {
  return playing_ ? played_until_ : std::numeric_limits<double>::infinity();
}

void PlaybackClock::End(double now_ms) {
  if (!playing_ && queued_ms_ > 0) Start(now_ms);
}

}  // namespace omni_edge::pipeline
