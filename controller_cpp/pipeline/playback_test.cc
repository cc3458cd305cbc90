#include <gtest/gtest.h>

#include <cmath>

#include "pipeline/playback.h"

namespace omni_edge::pipeline {
namespace {

TEST(Playback, NoUnderrunWhenChunksArriveBeforeTheAudioRunsOut) {
  PlaybackClock clock(24000, 0);
  clock.Arrive(24000, 100);   // 1 s of audio at 100 ms: plays until 1100 ms
  clock.Arrive(24000, 900);   // before it ran out: plays on until 2100 ms
  clock.Arrive(12000, 2000);
  clock.End(2100);
  EXPECT_EQ(clock.stats().underruns, 0);
  EXPECT_DOUBLE_EQ(clock.stats().first_pcm_ms, 100);
  EXPECT_DOUBLE_EQ(clock.stats().playback_start_ms, 100);
  EXPECT_DOUBLE_EQ(clock.stats().max_gap_ms, 1100);
  EXPECT_EQ(clock.stats().samples, 60000);
  EXPECT_DOUBLE_EQ(clock.stats().lead_min_ms, 100);  // at 2000 ms, 100 ms were still queued
  EXPECT_DOUBLE_EQ(clock.runs_out_ms(), 2600);
}

TEST(Playback, NoLeadIsKnownBeforePlaybackStarts) {
  PlaybackClock clock(24000, 500);
  clock.Arrive(2400, 10);
  EXPECT_DOUBLE_EQ(clock.stats().lead_min_ms, -1);
  EXPECT_TRUE(std::isinf(clock.runs_out_ms()));
}

TEST(Playback, CountsEachSilenceAndItsLength) {
  PlaybackClock clock(24000, 0);
  clock.Arrive(2400, 0);      // 100 ms, runs out at 100
  clock.Arrive(2400, 250);    // 150 ms late; plays until 350
  clock.Arrive(2400, 300);    // in time; plays until 450
  clock.Arrive(2400, 500);    // 50 ms late
  EXPECT_EQ(clock.stats().underruns, 2);
  EXPECT_NEAR(clock.stats().underrun_ms, 200, 1e-9);
  EXPECT_DOUBLE_EQ(clock.stats().lead_min_ms, 0);  // an underrun is a lead of nothing
}

TEST(Playback, PrebufferDelaysTheStartAndAvoidsTheStall) {
  PlaybackClock clock(24000, 300);
  clock.Arrive(2400, 50);     // 100 ms queued: still buffering
  clock.Arrive(7200, 400);    // 400 ms queued: starts at 400, plays until 800
  clock.Arrive(24000, 700);
  EXPECT_EQ(clock.stats().underruns, 0);
  EXPECT_DOUBLE_EQ(clock.stats().first_pcm_ms, 50);
  EXPECT_DOUBLE_EQ(clock.stats().playback_start_ms, 400);
}

TEST(Playback, AShortUtteranceStartsWhenTheStreamEnds) {
  PlaybackClock clock(24000, 1000);
  clock.Arrive(2400, 50);
  clock.End(80);
  EXPECT_DOUBLE_EQ(clock.stats().playback_start_ms, 80);
}

}  // namespace
}  // namespace omni_edge::pipeline
