#include "base/wav.h"

#include <algorithm>
#include <cstring>

#include "base/little_endian.h"
#include "base/pcm.h"

namespace omni_edge {
namespace {

constexpr uint16_t kFormatPcm = 1, kFormatFloat = 3, kFormatExtensible = 0xFFFE;
constexpr uint32_t kMaxWavRate = 384000;

uint32_t Le32(const std::string& b, size_t at) {
  return uint32_t(uint8_t(b[at])) | uint32_t(uint8_t(b[at + 1])) << 8 | uint32_t(uint8_t(b[at + 2])) << 16 |
         uint32_t(uint8_t(b[at + 3])) << 24;
}
uint16_t Le16(const std::string& b, size_t at) { return uint16_t(uint8_t(b[at]) | uint8_t(b[at + 1]) << 8); }

// One sample of `width` bytes at `p` as a float in [-1, 1], as numpy reads them (8-bit unsigned
// around 128, the others signed over 2^(bits - 1)).
double Sample(const char* p, uint16_t format, int width) {
  if (format == kFormatFloat) {
    if (width == 4) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  if (width == 1) return (double(uint8_t(p[0])) - 128.0) / 128.0;
  int64_t v = 0;
  for (int i = 0; i < width; ++i) v |= int64_t(uint8_t(p[i])) << (8 * i);
  const int bits = 8 * width;
  if (v & (int64_t(1) << (bits - 1))) v -= int64_t(1) << bits;  // sign-extend
  return double(v) / double(int64_t(1) << (bits - 1));
}

}  // namespace

Result<Pcm> DecodeWav(const std::string& b) {
  if (b.size() < 12 || b.compare(0, 4, "RIFF") != 0 || b.compare(8, 4, "WAVE") != 0) {
    return Status::Error("invalid_media", "not a WAV file (no RIFF/WAVE header)");
  }
  uint16_t format = 0, channels = 0;
  uint32_t rate = 0, bits = 0;
  const char* data = nullptr;
  size_t data_size = 0;
  for (size_t at = 12; at + 8 <= b.size();) {
    const uint32_t size = Le32(b, at + 4);
    const size_t body = at + 8, available = b.size() - body;
    if (b.compare(at, 4, "fmt ") == 0) {
      if (size < 16 || size > available) return Status::Error("invalid_media", "WAV: a truncated fmt chunk");
      format = Le16(b, body);
      channels = Le16(b, body + 2);
      rate = Le32(b, body + 4);
      bits = Le16(b, body + 14);
      if (format == kFormatExtensible) {
        if (size < 40) return Status::Error("invalid_media", "WAV: an extensible fmt chunk without its sub-format");
        format = Le16(b, body + 24);  // the sub-format GUID's first two bytes
      }
    } else if (b.compare(at, 4, "data") == 0) {
      data = b.data() + body;
      data_size = std::min<size_t>(size, available);  // streamed files may leave the size at its maximum
      break;
    }
    if (size > available) break;
    at = body + size + (size & 1);  // chunks are padded to even sizes
  }
  if (format == 0) return Status::Error("invalid_media", "WAV: no fmt chunk before the data");
  if (data == nullptr) return Status::Error("invalid_media", "WAV: no data chunk");
  const bool pcm = format == kFormatPcm && (bits == 8 || bits == 16 || bits == 24 || bits == 32);
  const bool flt = format == kFormatFloat && (bits == 32 || bits == 64);
  if (!pcm && !flt) {
    return Status::Error("invalid_media", "WAV: format " + std::to_string(format) + " with " + std::to_string(bits) +
                                              "-bit samples is not supported (PCM 8/16/24/32 or float 32/64)");
  }
  if (channels < 1 || channels > 64) return Status::Error("invalid_media", "WAV: " + std::to_string(channels) + " channels");
  if (rate < 1000 || rate > kMaxWavRate) return Status::Error("invalid_media", "WAV: a sample rate of " + std::to_string(rate));
  const int width = int(bits / 8);
  const size_t frame = size_t(width) * channels, frames = data_size / frame;
  Pcm out;
  out.rate = rate;
  out.samples.resize(frames);
  for (size_t i = 0; i < frames; ++i) {
    double sum = 0;
    for (size_t c = 0; c < channels; ++c) sum += Sample(data + i * frame + c * size_t(width), format, width);
    out.samples[i] = float(sum / channels);
  }
  return out;
}

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
