#include <gtest/gtest.h>

#include "models/speech/playback.h"
#include "models/speech/stream_shape.h"

namespace omni_edge::speech {
namespace {

VocoderConfig Config() {
  VocoderConfig c;
  c.code_groups = 16;
  c.samples_per_frame = 1920;
  c.sample_rate = 24000;
  c.tail_samples = 555;
  c.first_chunk = 1;
  c.chunk = 25;
  c.left_context = 72;
  c.windows = {2, 98};
  return c;
}

// Walks a stream of `frames` frames the way the vocoder worker does and checks that the
// emitted sample ranges tile [0, frames x 1920) exactly, in order.
void ExpectTiling(int64_t frames) {
  const StreamShape shape(Config());
  int64_t next = 0, covered = 0;
  auto emit = [&](int64_t end, bool final) {
    const Emitted e = shape.Emit(next, end, final);
    ASSERT_GE(e.context, 0);
    ASSERT_LE(e.context + end - next, 97);  // fits the window before its padding frame
    const int64_t stream_first = (next - e.context) * 1920 + e.first_sample;
    EXPECT_EQ(stream_first, covered) << "gap or overlap at frame " << next;
    covered = (next - e.context) * 1920 + e.last_sample;
    next = end;
  };
  while (frames - next >= shape.ChunkFrames(next)) emit(next + shape.ChunkFrames(next), false);
  emit(frames, true);
  EXPECT_EQ(covered, frames * 1920);
}

TEST(StreamShape, ChunksTileTheStreamExactly) {
  for (int64_t frames : {1, 2, 25, 26, 27, 73, 74, 100, 101, 250}) ExpectTiling(frames);
}

TEST(StreamShape, FirstChunkEmitsAllButTheTail) {
  const Emitted e = StreamShape(Config()).Emit(0, 1, false);
  EXPECT_EQ(e.context, 0);
  EXPECT_EQ(e.first_sample, 0);
  EXPECT_EQ(e.last_sample, 1920 - 555);
}

TEST(StreamShape, ContextIsCappedAtTheLeftContext) {
  const Emitted e = StreamShape(Config()).Emit(101, 126, false);
  EXPECT_EQ(e.context, 72);
  EXPECT_EQ(e.first_sample, 72 * 1920 - 555);
  EXPECT_EQ(e.last_sample, 97 * 1920 - 555);
}

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
}

TEST(Playback, CountsEachSilenceAndItsLength) {
  PlaybackClock clock(24000, 0);
  clock.Arrive(2400, 0);      // 100 ms, runs out at 100
  clock.Arrive(2400, 250);    // 150 ms late; plays until 350
  clock.Arrive(2400, 300);    // in time; plays until 450
  clock.Arrive(2400, 500);    // 50 ms late
  EXPECT_EQ(clock.stats().underruns, 2);
  EXPECT_NEAR(clock.stats().underrun_ms, 200, 1e-9);
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
}  // namespace omni_edge::speech
