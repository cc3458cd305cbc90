// Counter-based noise: value i of a stream is SplitMix64's mix of seed + (i + 1) * the golden
// gamma, so any slice is computed on its own and equals, on every machine, what
// omni_edge.runtime.counter_noise computes in numpy (a reference fed the noise a stage drew).
// Uniforms take the top 53 bits; a normal takes two consecutive values (Box-Muller, cosine).
#pragma once

#include <cmath>
#include <cstdint>

namespace omni_edge::counter_noise {

inline uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline double Uniform(uint64_t seed, uint64_t i) {
  return double(Mix(seed + (i + 1) * 0x9E3779B97F4A7C15ULL) >> 11) * (1.0 / 9007199254740992.0);
}

// The normal made of values i and i + 1.
inline float Normal(uint64_t seed, uint64_t i) {
  constexpr double kTwoPi = 6.283185307179586;
  return float(std::sqrt(-2.0 * std::log(1.0 - Uniform(seed, i))) * std::cos(kTwoPi * Uniform(seed, i + 1)));
}

}  // namespace omni_edge::counter_noise
