// The playback side of a speech stream, on a real-time clock: a player that starts once
// `prebuffer_ms` of audio is queued (or the stream ends) and then plays at the sample rate.
// Every chunk that arrives after the queued audio ran out is an underrun, counted with the
// time the speaker was silent. It also keeps the latencies a listener feels: first PCM, the
// start of playback, the gaps between chunk arrivals, and the lead: the audio still queued
// when a chunk arrives (its minimum is how close the stream came to an underrun).
#pragma once

#include <cstdint>
#include <vector>

namespace omni_edge::pipeline {

struct PlaybackStats {
  double first_pcm_ms = -1;       // request start -> first PCM at the consumer
  double playback_start_ms = -1;  // request start -> the player starts
  int64_t underruns = 0;          // after playback started
  double underrun_ms = 0;
  double max_gap_ms = 0;          // longest wait between two chunk arrivals
  double lead_min_ms = -1;        // least audio queued at an arrival while playing (-1: none yet)
  int64_t chunks = 0;
  int64_t samples = 0;
};

class PlaybackClock {
 public:
  PlaybackClock(int64_t sample_rate, double prebuffer_ms) : rate_(double(sample_rate)), prebuffer_ms_(prebuffer_ms) {}

  // `n` samples arrived `now_ms` after the request started.
  void Arrive(int64_t n, double now_ms);
  // The stream ended at `now_ms`: a player still prebuffering starts with what it has.
  void End(double now_ms);
  const PlaybackStats& stats() const { return stats_; }
  double prebuffer_ms() const { return prebuffer_ms_; }
  // When the audio received so far will have played out; infinity before playback starts.
  double runs_out_ms() const;

 private:
  void Start(double now_ms);

  double rate_;
  double prebuffer_ms_;
  bool playing_ = false;
  double queued_ms_ = 0;       // audio received before playback started
  double played_until_ = 0;    // when the audio queued so far will have played out
  double last_arrival_ = -1;
  PlaybackStats stats_;
};

}  // namespace omni_edge::pipeline
