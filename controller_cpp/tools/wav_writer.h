// A mono 16-bit PCM RIFF/WAVE file (what every player and Python's `wave` read), written as
// samples arrive (float32 ones are clamped and rounded); the sizes in the header are patched on
// Close(). A failed write is reported, never ignored.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace omni_edge::tools {

class WavWriter {
 public:
  WavWriter() = default;
  WavWriter(const WavWriter&) = delete;
  WavWriter& operator=(const WavWriter&) = delete;
  ~WavWriter();

  bool Open(const std::string& path, int64_t sample_rate);
  // `n` samples of `dtype` ("int16" or "float32").
  bool Append(const void* samples, int64_t n, const std::string& dtype);
  bool Close();
  int64_t samples() const { return samples_; }

 private:
  bool WriteHeader();

  std::FILE* file_ = nullptr;
  int64_t rate_ = 0, samples_ = 0;
  bool ok_ = true;
};

}  // namespace omni_edge::tools
