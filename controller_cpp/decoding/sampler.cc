#include "decoding/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace omni_edge::decoding {
namespace {

uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Status Validate(const SamplingParams& p) {
  auto bad = [](const std::string& m) { return Status::Error("invalid_sampling", m); };
  if (!std::isfinite(p.temperature) || p.temperature < 0) return bad("temperature must be >= 0");
  if (p.top_k < 0) return bad("top_k must be >= 0");
  if (!(p.top_p > 0 && p.top_p <= 1)) return bad("top_p must be in (0, 1]");
  if (!(p.min_p >= 0 && p.min_p < 1)) return bad("min_p must be in [0, 1)");
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty)) return bad("repetition_penalty must be > 0");
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  uint64_t seed = params.seed;
  for (auto& s : state_) s = SplitMix64(&seed);
}

uint64_t Sampler::NextU64() {
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return result;
}

double Sampler::NextUnit() { return double(NextU64() >> 11) * (1.0 / 9007199254740992.0); }

TokenId Sampler::Sample(const float* logits, int64_t vocab, const std::vector<TokenId>& history) {
  const float* scores = logits;
  if (params_.repetition_penalty != 1.0f && !history.empty()) {
    scratch_.assign(logits, logits + vocab);
    std::unordered_set<TokenId> seen(history.begin(), history.end());
    for (TokenId id : seen) {
      if (id < 0 || id >= vocab) continue;
      float& s = scratch_[size_t(id)];
      s = s < 0 ? s * params_.repetition_penalty : s / params_.repetition_penalty;
    }
    scores = scratch_.data();
  }
  if (params_.temperature < kGreedyBelow) {
    return TokenId(std::max_element(scores, scores + vocab) - scores);  // first maximum, as torch.argmax
  }
  candidates_.clear();
  candidates_.reserve(size_t(vocab));
  const float inv_t = 1.0f / params_.temperature;
  for (int64_t i = 0; i < vocab; ++i) candidates_.emplace_back(scores[i] * inv_t, TokenId(i));
  auto by_score = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && size_t(params_.top_k) < keep) {
    keep = size_t(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + long(keep), candidates_.end(), by_score);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_score);
  }
  candidates_.resize(keep);
  // Softmax over the kept candidates (sorted, so the first is the maximum).
  const float max_score = candidates_.front().first;
  double total = 0;
  std::vector<double> probs(keep);
  for (size_t i = 0; i < keep; ++i) total += probs[i] = std::exp(double(candidates_[i].first - max_score));
  for (auto& p : probs) p /= total;
  size_t n = keep;
  if (params_.top_p < 1.0f) {
    double cumulative = 0;
    for (size_t i = 0; i < keep; ++i) {
      cumulative += probs[i];
      if (cumulative >= params_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {
    const double floor = params_.min_p * probs[0];
    size_t m = 1;
    while (m < n && probs[m] >= floor) ++m;
    n = m;
  }
  double mass = 0;
  for (size_t i = 0; i < n; ++i) mass += probs[i];
  double u = NextUnit() * mass;
  for (size_t i = 0; i < n; ++i) {
    u -= probs[i];
    if (u < 0) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace omni_edge::decoding
