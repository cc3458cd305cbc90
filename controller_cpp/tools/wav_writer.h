// A mono 16-bit PCM RIFF/WAVE file (what every player and Python's `wave` read), written as
// samples arrive (float32 ones are clamped and rounded). Crash-safe: the samples go into a
// temporary file beside the target whose header is kept consistent after every chunk (a killed
// process leaves a playable partial file, never a wrong one), and Commit() renames it into
// place; until then an existing file at the target is untouched, and Discard() (or destruction
// without Commit) leaves it so. A failed write is reported, never ignored.
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
  // The file, complete, under its name (atomically replacing what was there).
  bool Commit();
  // Removes the temporary file; the target keeps what it had.
  void Discard();
  int64_t samples() const { return samples_; }
  const std::string& temporary_path() const { return temp_; }

 private:
  bool WriteHeader();

  std::FILE* file_ = nullptr;
  std::string path_, temp_;
  int64_t rate_ = 0, samples_ = 0;
  bool ok_ = true;
};

}  // namespace omni_edge::tools
