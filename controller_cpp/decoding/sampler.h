// Next-token selection: repetition penalty, then greedy, or temperature -> top-k -> top-p ->
// min-p -> a draw from a seeded, platform-independent generator (xoshiro256**), so the same
// seed gives the same tokens on a phone and on a PC.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "text/tokenizer.h"

namespace omni_edge::decoding {

using text::TokenId;

// Below this temperature a draw is greedy: dividing logits by a tinier one overflows to inf
// (and softmax to NaN). The Python samplers use the same bound (omni_edge.runtime.request.GREEDY_BELOW).
constexpr float kGreedyBelow = 1e-5f;

struct SamplingParams {
  float temperature = 0.0f;  // below kGreedyBelow: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
};
Status Validate(const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // `history` is every token the model has seen or produced (for the repetition penalty).
  TokenId Sample(const float* logits, int64_t vocab, const std::vector<TokenId>& history);
  const SamplingParams& params() const { return params_; }

 private:
  uint64_t NextU64();
  double NextUnit();  // [0, 1)

  SamplingParams params_;
  uint64_t state_[4];
  std::vector<float> scratch_;
  std::vector<std::pair<float, TokenId>> candidates_;
};

}  // namespace omni_edge::decoding
