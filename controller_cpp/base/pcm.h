// Float samples to 16-bit PCM, one rule for every writer (int16 pcm events, WAV files; the
// Python WAV writer mirrors it): clamp to [-1, 1], scale by 32767, round halves away from zero.
// A NaN is silence, not full scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace omni_edge {

inline int16_t ToInt16(float x) {
  if (std::isnan(x)) return 0;
  return int16_t(std::lround(std::max(-1.0f, std::min(1.0f, x)) * 32767.0f));
}

}  // namespace omni_edge
