#include "base/wav.h"

#include <cstring>

#include "base/little_endian.h"
#include "base/pcm.h"

namespace omni_edge {
std::string WavHeader(int64_t sample_rate, int64_t n_samples) {
  // RIFF header, "fmt " chunk (format 1: integer PCM, mono, 16 bits), "data" chunk.
  const bool open_ended = n_samples < 0;
  const uint32_t data = open_ended ? 0xFFFFFFFFu : uint32_t(n_samples * 2);
  std::string h;
  h.reserve(44);
  h += "RIFF";
  PutLe32(&h, open_ended ? 0xFFFFFFFFu : 36 + data);
  h += "WAVEfmt ";
  PutLe32(&h, 16);
  PutLe16(&h, 1);
  PutLe16(&h, 1);
  PutLe32(&h, uint32_t(sample_rate));
  PutLe32(&h, uint32_t(sample_rate * 2));
  PutLe16(&h, 2);
  PutLe16(&h, 16);
  h += "data";
  PutLe32(&h, data);
  return h;
}

bool AppendPcm16(const void* samples, int64_t n, const std::string& dtype, std::string* out) {
  if (n < 0 || (dtype != "int16" && dtype != "float32")) return false;
  const size_t start = out->size();
  out->resize(start + size_t(n) * 2);
  char* p = &(*out)[start];
  for (int64_t i = 0; i < n; ++i) {
    int16_t v;
    if (dtype == "int16") {
      std::memcpy(&v, static_cast<const char*>(samples) + i * 2, 2);
    } else {
      float f;
      std::memcpy(&f, static_cast<const char*>(samples) + i * 4, 4);
      v = ToInt16(f);
    }
    const auto u = uint16_t(v);
    p[2 * i] = char(u & 0xff);
    p[2 * i + 1] = char(u >> 8);
  }
  return true;
}

}  // namespace omni_edge
