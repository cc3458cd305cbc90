#include "realtime/reply_ledger.h"

#include <gtest/gtest.h>

namespace omni_edge::realtime {
namespace {

// 24 kHz, 1920 samples a frame; chunks of 1, 2 and 4 frames; one token per delta.
ReplyLedger Reply() {
  ReplyLedger l;
  l.set_sample_rate(24000);
  const char* words[] = {"The", " capital", " of", " France", " is", " Paris", "."};
  for (const char* w : words) l.Text(w, 1);
  l.Audio(1920, 1);
  l.Audio(2 * 1920, 3);
  l.Audio(4 * 1920, 7);
  return l;
}

TEST(ReplyLedger, FramesHeardMapToTheTokensTheTalkerHadRead) {
  const ReplyLedger l = Reply();
  const std::vector<int64_t> at_frame = {1, 2, 3, 4, 5, 6, 7};  // frame t read token t
  auto cut = l.CutAt(400, at_frame, 7);  // 400 ms = 9600 samples = 5 frames
  EXPECT_EQ(cut.frames, 5);
  EXPECT_EQ(cut.tokens, 5);
  EXPECT_EQ(cut.transcript, "The capital of France is");
  EXPECT_EQ(cut.alignment, "frame");
  cut = l.CutAt(79, at_frame, 7);  // not one whole frame
  EXPECT_EQ(cut.frames, 0);
  EXPECT_EQ(cut.tokens, 0);
  EXPECT_EQ(cut.transcript, "");
  cut = l.CutAt(1e6, at_frame, 7);
  EXPECT_EQ(cut.tokens, 7);
  EXPECT_DOUBLE_EQ(l.audio_ms(), 560.0);
}

TEST(ReplyLedger, NeverKeepsMoreThanTheThinkerHolds) {
  const ReplyLedger l = Reply();
  EXPECT_EQ(l.CutAt(1e6, {1, 2, 3, 4, 5, 6, 7}, 3).tokens, 3);  // a cancel already kept three
}

TEST(ReplyLedger, WithoutTheTalkersAlignmentTokensGoInProportion) {
  const ReplyLedger l = Reply();
  auto cut = l.CutAt(240, {}, 7);  // 3 of 7 frames
  EXPECT_EQ(cut.alignment, "proportional");
  EXPECT_EQ(cut.tokens, 3);
  ReplyLedger silent;
  silent.set_sample_rate(24000);
  silent.Text("Hi", 1);
  EXPECT_EQ(silent.CutAt(500, {}, 1).alignment, "none");
  EXPECT_EQ(silent.CutAt(500, {}, 1).tokens, 0);
}

}  // namespace
}  // namespace omni_edge::realtime
