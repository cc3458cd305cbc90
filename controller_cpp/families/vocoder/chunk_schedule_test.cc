#include "families/vocoder/chunk_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "pipeline/playback.h"

namespace omni_edge::vocoder {
namespace {

constexpr int64_t kSamplesPerFrame = 1920, kRate = 24000;  // 80 ms of audio per frame

VocoderConfig Config(bool adaptive, std::vector<int64_t> windows) {
  VocoderConfig c;
  c.code_groups = 16;
  c.samples_per_frame = kSamplesPerFrame;
  c.sample_rate = kRate;
  c.tail_samples = 555;
  c.first_chunk = 1;
  c.chunk = 25;
  c.left_context = 72;
  c.windows = std::move(windows);
  c.schedule.adaptive = adaptive;
  return c;
}

const std::vector<int64_t> kFixedWindows = {2, 98}, kAdaptiveWindows = {2, 4, 8, 16, 32, 64, 98};

// A device: the talker makes a frame every `frame_ms` on its own core; a window of W frames
// takes `ms_per_window_frame` x W on the vocoder's (the schedule predicts it `estimate` x that).
struct Device {
  double frame_ms = 5, ms_per_window_frame = 0.75, estimate = 1.0;
};

struct Outcome {
  pipeline::PlaybackStats playback;
  std::vector<int64_t> chunks;
};

double WindowMs(const VocoderConfig& c, const Device& d, int64_t start, int64_t n) {
  const int64_t need = std::min(c.left_context, start) + n + 1;
  const auto w = std::find_if(c.windows.begin(), c.windows.end(), [&](int64_t v) { return v >= need; });
  return d.ms_per_window_frame * double(w == c.windows.end() ? c.windows.back() : *w);
}

// The vocoder worker's loop on a simulated clock, with the listener's playback clock.
Outcome Simulate(const VocoderConfig& c, const Device& d, int64_t frames, double prebuffer_ms = 0) {
  ChunkSchedule schedule(c, [&](int64_t start, int64_t n) { return d.estimate * WindowMs(c, d, start, n); });
  schedule.Begin();
  pipeline::PlaybackClock clock(kRate, prebuffer_ms);
  Outcome out;
  const double first_frame_ms = 30;  // the talker's prefill
  auto arrival = [&](int64_t k) { return first_frame_ms + double(k) * d.frame_ms; };
  double now = 0;
  int64_t next = 0;
  auto decode = [&](int64_t n) {
    now += WindowMs(c, d, next, n);
    clock.Arrive(n * kSamplesPerFrame, now);
    schedule.Cut(n);
    out.chunks.push_back(n);
    next += n;
  };
  for (int64_t received = 0; received < frames;) {
    now = std::max(now, arrival(received));
    ++received;
    while (true) {
      ChunkMoment m;
      m.start = next;
      m.pending = received - next;
      m.frame_queued = received < frames && arrival(received) <= now;
      m.now_ms = now;
      m.runs_out_ms = clock.runs_out_ms();
      m.frame_ms = d.frame_ms;
      if (!schedule.CutNow(m)) break;
      decode(std::min(m.pending, schedule.Limit(next)));
    }
  }
  if (frames > next) decode(frames - next);  // the flush
  clock.End(now);
  out.playback = clock.stats();
  return out;
}

TEST(ChunkSchedule, FixedStallsOnceWhereAdaptivePlaysFromTheFirstPcm) {
  // The tiny speech checkpoint on this host: 5 ms per talker frame, a 98-frame window ~75 ms.
  const Device tiny;
  const Outcome fixed = Simulate(Config(false, kFixedWindows), tiny, 300);
  EXPECT_EQ(fixed.playback.underruns, 1);  // the second chunk: 25 frames + a full window after 80 ms of audio
  EXPECT_GT(fixed.playback.underrun_ms, 100);
  const Outcome adaptive = Simulate(Config(true, kAdaptiveWindows), tiny, 300);
  EXPECT_EQ(adaptive.playback.underruns, 0);
  EXPECT_GT(adaptive.playback.lead_min_ms, 0);
  EXPECT_LT(adaptive.playback.first_pcm_ms, 35);
  EXPECT_EQ(adaptive.playback.playback_start_ms, adaptive.playback.first_pcm_ms);
}

TEST(ChunkSchedule, ChunksStartSmallGrowGeometricallyAndStopAtTheLargest) {
  const VocoderConfig c = Config(true, kAdaptiveWindows);
  const Outcome o = Simulate(c, Device(), 300);
  ASSERT_GE(o.chunks.size(), 6u);
  EXPECT_EQ(o.chunks[0], 1);
  for (size_t i = 1; i + 1 < o.chunks.size(); ++i) {  // the last one is the flush
    EXPECT_LE(o.chunks[i], 2 * o.chunks[i - 1]) << i;
    EXPECT_LE(o.chunks[i], c.chunk) << i;
  }
  EXPECT_EQ(*std::max_element(o.chunks.begin(), o.chunks.end()), c.chunk);  // a fast device reaches it
}

TEST(ChunkSchedule, ASlowDeviceCutsEarlierInsteadOfStalling) {
  // Half real time in the talker, a vocoder four times slower than the tiny host's, and
  // window costs 20% above the estimate.
  const Device slow{40, 3.0, 1.0 / 1.2};
  const VocoderConfig c = Config(true, kAdaptiveWindows);
  const Outcome o = Simulate(c, slow, 300);
  EXPECT_EQ(o.playback.underruns, 0);
  const Outcome fast = Simulate(c, Device(), 300);
  EXPECT_GT(o.chunks.size(), fast.chunks.size());  // smaller chunks where the lead is short
  EXPECT_EQ(Simulate(Config(false, kFixedWindows), slow, 300).playback.underruns, 1);
}

TEST(ChunkSchedule, SlowerThanRealTimeUnderrunsAreCountedNotHidden) {
  const Outcome o = Simulate(Config(true, kAdaptiveWindows), Device{100, 0.75, 1.0}, 100);
  EXPECT_GT(o.playback.underruns, 0);
  EXPECT_EQ(o.playback.samples, 100 * kSamplesPerFrame);  // every frame still decoded once
}

TEST(ChunkSchedule, APrebufferIsFilledAtTheGrowthRate) {
  const VocoderConfig c = Config(true, kAdaptiveWindows);
  const Outcome o = Simulate(c, Device(), 100, /*prebuffer_ms=*/200);
  EXPECT_EQ(o.playback.underruns, 0);
  EXPECT_EQ(std::vector<int64_t>(o.chunks.begin(), o.chunks.begin() + 2), (std::vector<int64_t>{1, 2}));
  EXPECT_GT(o.playback.playback_start_ms, o.playback.first_pcm_ms);
}

TEST(ChunkSchedule, FixedCutsAtTheConfiguredSizes) {
  ChunkSchedule s(Config(false, kFixedWindows), [](int64_t, int64_t) { return 0.0; });
  s.Begin();
  EXPECT_EQ(s.Limit(0), 1);
  EXPECT_EQ(s.Limit(1), 25);
  ChunkMoment m;
  m.start = 1;
  m.pending = 24;
  m.runs_out_ms = 0;  // even with the audio run out, a fixed schedule waits for its chunk
  EXPECT_FALSE(s.CutNow(m));
  m.pending = 25;
  EXPECT_TRUE(s.CutNow(m));
}

}  // namespace
}  // namespace omni_edge::vocoder
