#include "decoding/sampler.h"

#include <gtest/gtest.h>

namespace omni_edge::decoding {
namespace {

std::vector<TokenId> Draw(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<TokenId> out;
  for (int i = 0; i < n; ++i) out.push_back(s.Sample(logits.data(), int64_t(logits.size()), {}));
  return out;
}

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(Draw({}, logits, 1)[0], 1);
}

TEST(Sampler, SeededAndDeterministic) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 7) * 0.3f;
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  EXPECT_EQ(Draw(p, logits, 64), Draw(p, logits, 64));
  SamplingParams q = p;
  q.seed = 43;
  EXPECT_NE(Draw(p, logits, 64), Draw(q, logits, 64));
}

TEST(Sampler, TopKOneTopPTinyAndMinPHighAreGreedy) {
  std::vector<float> logits = {0.5f, 3.0f, 2.9f, -2.0f};
  for (auto tweak : {+[](SamplingParams& p) { p.top_k = 1; }, +[](SamplingParams& p) { p.top_p = 0.01f; },
                     +[](SamplingParams& p) { p.min_p = 0.99f; }}) {
    SamplingParams p;
    p.temperature = 2.0f;
    p.seed = 7;
    tweak(p);
    for (TokenId t : Draw(p, logits, 32)) EXPECT_EQ(t, 1);
  }
}

TEST(Sampler, TinyTemperaturesAreGreedyNotOverflow) {
  // 1e-40 divides logits to inf (softmax NaN), which drew the last id every step.
  std::vector<float> logits = {0.5f, 3.0f, 2.9f, -2.0f, 1.0f};
  for (float t : {1e-40f, 1e-20f, 1e-6f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 3;
    for (TokenId id : Draw(p, logits, 16)) EXPECT_EQ(id, 1) << t;
  }
  SamplingParams p;
  p.temperature = 1e-4f;  // above the bound: a draw, still sharp enough to pick the maximum
  for (TokenId id : Draw(p, logits, 16)) EXPECT_EQ(id, 1);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  std::vector<float> logits = {1.0f, 1.5f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  EXPECT_EQ(s.Sample(logits.data(), 2, {1}), 0);  // 1.5 / 2 < 1.0
  EXPECT_EQ(s.Sample(logits.data(), 2, {}), 1);
}

TEST(Sampler, ValidateRefusesBadParameters) {
  SamplingParams p;
  EXPECT_TRUE(Validate(p).ok());
  p.top_p = 0;
  EXPECT_EQ(Validate(p).reason(), "invalid_sampling");
  p = {};
  p.temperature = -1;
  EXPECT_FALSE(Validate(p).ok());
  p = {};
  p.min_p = 1.0f;
  EXPECT_FALSE(Validate(p).ok());
}

}  // namespace
}  // namespace omni_edge::decoding
