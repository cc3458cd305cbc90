#include "realtime/turn_detector.h"

#include <gtest/gtest.h>

#include <vector>

namespace omni_edge::realtime {
namespace {

// 512-sample frames at 16 kHz: 32 ms each.
std::vector<TurnDetector::Change> Changes(TurnDetector& d, const std::vector<double>& probs) {
  std::vector<TurnDetector::Change> out;
  for (double p : probs) {
    auto c = d.Push(p);
    if (c.started || c.stopped) out.push_back(c);
  }
  return out;
}

std::vector<double> Frames(std::initializer_list<std::pair<double, int>> runs) {
  std::vector<double> p;
  for (auto [v, n] : runs) p.insert(p.end(), size_t(n), v);
  return p;
}

TEST(TurnDetector, StartsAfterMinimumSpeechWithPrefixPaddingAndEndsAfterTheSilence) {
  TurnDetector d(TurnDetectionConfig{}, 512, 16000);
  // 20 silent frames (640 ms), 30 of speech, 20 silent: 500 ms of silence is 16 frames (15.6).
  auto c = Changes(d, Frames({{0.05, 20}, {0.9, 30}, {0.05, 20}}));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_TRUE(c[0].started);
  EXPECT_EQ(c[0].audio_start_ms, 640 - 300);  // the speech's first frame, less the prefix padding
  EXPECT_TRUE(c[1].stopped);
  EXPECT_EQ(c[1].audio_end_ms, (50 + 16) * 32);  // the frame where 500 ms of silence was reached
  EXPECT_EQ(c[1].speech_end_ms, 50 * 32);
}

TEST(TurnDetector, BlipsShorterThanTheMinimumAndSilenceStartNothing) {
  TurnDetector d(TurnDetectionConfig{}, 512, 16000);
  EXPECT_TRUE(Changes(d, Frames({{0.0, 100}, {0.9, 2}, {0.1, 10}, {0.9, 2}, {0.0, 50}})).empty());  // 64 ms < 96 ms
  EXPECT_FALSE(d.active());
}

TEST(TurnDetector, ScoresBetweenTheThresholdsKeepTheTurnOpen) {
  TurnDetector d(TurnDetectionConfig{}, 512, 16000);
  // 0.4 is below the start threshold (0.5) but above the end threshold (0.35): it cannot end the
  // turn however long it lasts; speech again cancels a silence that had begun.
  auto c = Changes(d, Frames({{0.9, 5}, {0.4, 40}, {0.1, 10}, {0.9, 1}, {0.1, 15}}));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].started);
  EXPECT_TRUE(d.active());
  c = Changes(d, Frames({{0.1, 1}}));
  ASSERT_EQ(c.size(), 1u);  // the 16th silent frame after the last speech
  EXPECT_TRUE(c[0].stopped);
}

TEST(TurnDetector, PaddingNeverReachesBeforeAReset) {
  TurnDetector d(TurnDetectionConfig{}, 512, 16000);
  Changes(d, Frames({{0.0, 50}}));
  d.Reset();  // at 1600 ms
  auto c = Changes(d, Frames({{0.9, 3}}));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].audio_start_ms, 1600);  // not 1600 - 300
}

TEST(TurnDetector, ConfigIsReadStrictly) {
  EXPECT_TRUE(TurnDetectionFromJson(Json{{"type", "server_vad"}, {"threshold", 0.6}}, "td").ok());
  EXPECT_FALSE(TurnDetectionFromJson(Json{{"type", "semantic_vad"}}, "td").ok());
  EXPECT_FALSE(TurnDetectionFromJson(Json{{"threshhold", 0.6}}, "td").ok());  // misspelled: refused by name
  EXPECT_FALSE(TurnDetectionFromJson(Json{{"threshold", 0.1}}, "td").ok());
  EXPECT_FALSE(TurnDetectionFromJson(Json{{"silence_duration_ms", -1}}, "td").ok());
  EXPECT_FALSE(TurnDetectionFromJson(Json{{"prefix_padding_ms", "300"}}, "td").ok());
  auto c = TurnDetectionFromJson(ToJson(TurnDetectionConfig{0.7, 100, 200, 64, false, true}), "td");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->silence_duration_ms, 200);
  EXPECT_FALSE(c->create_response);
}

}  // namespace
}  // namespace omni_edge::realtime
