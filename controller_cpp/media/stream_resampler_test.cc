#include "media/stream_resampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "media/audio_features.h"

namespace omni_edge::media {
namespace {

std::vector<float> Signal(size_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.f, 0.1f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.5f * std::sin(0.013f * float(i)) + noise(rng);
  return x;
}

// Pieces of any size give the whole signal's outputs bit for bit (a realtime client's appends).
TEST(StreamResampler, PiecesEqualTheWholeSignal) {
  const std::vector<float> x = Signal(24000 + 37);
  for (auto [rate, target] : {std::pair<int64_t, int64_t>{24000, 16000}, {16000, 24000}, {44100, 16000}}) {
    auto whole = Resample(x, rate, target);
    ASSERT_TRUE(whole.ok());
    auto stream = StreamResampler::Create(rate, target);
    ASSERT_TRUE(stream.ok());
    std::mt19937 rng(uint32_t(rate + target));
    std::vector<float> got;
    for (size_t at = 0; at < x.size();) {
      const size_t n = std::min<size_t>(x.size() - at, 1 + rng() % 700);
      const auto out = stream->Push(x.data() + at, n);
      got.insert(got.end(), out.begin(), out.end());
      at += n;
    }
    const auto rest = stream->Finish();
    got.insert(got.end(), rest.begin(), rest.end());
    ASSERT_EQ(got.size(), whole->size()) << rate << "->" << target;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], (*whole)[i]) << i;
  }
}

TEST(StreamResampler, OutputsComeAsSoonAsTheirInputsHaveArrived) {
  auto stream = StreamResampler::Create(24000, 16000);
  ASSERT_TRUE(stream.ok());
  const std::vector<float> x = Signal(2400);  // 100 ms
  const auto out = stream->Push(x.data(), x.size());
  // 1600 outputs in all; the filter's half-length of input (10 taps of 3 x 2) still missing holds back a few.
  EXPECT_GT(out.size(), 1580u);
  EXPECT_LT(out.size(), 1600u);
  EXPECT_EQ(out.size() + stream->Finish().size(), 1600u);
}

TEST(StreamResampler, RefusesRatesOutOfRange) {
  EXPECT_FALSE(StreamResampler::Create(0, 16000).ok());
  EXPECT_FALSE(StreamResampler::Create(16000, kMaxSampleRate + 1).ok());
}

}  // namespace
}  // namespace omni_edge::media
