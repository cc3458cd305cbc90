// Float samples to 16-bit PCM, one rule for every writer (int16 pcm events, WAV files; the
// Python WAV writer mirrors it): clamp to [-1, 1], scale by 32767, round halves away from zero.
// A NaN is silence, not full scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace omni_edge {

inline int16_t ToInt16(float x) {
  if (std::isnan(x)) return 0;
  return int16_t(std::lround(std::max(-1.0f, std::min(1.0f, x)) * 32767.0f));
}

// 16-bit little-endian PCM bytes (a client's audio, an int16 payload) as floats in [-1, 1)
// (numpy's int16 / 32768); a trailing odd byte is ignored.
inline std::vector<float> DecodePcm16(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const auto v = int16_t(uint16_t(uint8_t(bytes[2 * i])) | uint16_t(uint16_t(uint8_t(bytes[2 * i + 1])) << 8));
    out[i] = float(v) / 32768.0f;
  }
  return out;
}

// The bytes of a pcm event's payload: float32 as they are, or int16 ("int16").
inline std::string EncodePcm(const std::vector<float>& samples, const std::string& dtype) {
  if (dtype != "int16") return std::string(reinterpret_cast<const char*>(samples.data()), samples.size() * sizeof(float));
  std::vector<int16_t> out(samples.size());
  std::transform(samples.begin(), samples.end(), out.begin(), ToInt16);
  return std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(int16_t));
}

}  // namespace omni_edge
