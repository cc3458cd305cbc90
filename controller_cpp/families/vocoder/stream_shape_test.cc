#include <gtest/gtest.h>

#include "families/vocoder/stream_shape.h"

namespace omni_edge::vocoder {
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

}  // namespace
}  // namespace omni_edge::vocoder
