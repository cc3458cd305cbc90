#include "pipeline/playback.h"

#include <algorithm>

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
  if (now_ms > played_until_) {  // the speaker went silent until this chunk came
    ++stats_.underruns;
    stats_.underrun_ms += now_ms - played_until_;
    played_until_ = now_ms;
  }
  played_until_ += duration;
}

void PlaybackClock::End(double now_ms) {
  if (!playing_ && queued_ms_ > 0) Start(now_ms);
}

}  // namespace omni_edge::pipeline
