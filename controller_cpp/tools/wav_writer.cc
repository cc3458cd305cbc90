#include "tools/wav_writer.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/pcm.h"
#include "base/platform/os.h"

namespace omni_edge::tools {
namespace {

void Put16(unsigned char* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}

void Put32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

}  // namespace

WavWriter::~WavWriter() { Discard(); }

bool WavWriter::Open(const std::string& path, int64_t sample_rate) {
  Discard();
  path_ = path;
  rate_ = sample_rate;
  samples_ = 0;
  ok_ = true;
  // Beside the target, so the rename stays on one file system; unique per process.
  file_ = platform::CreateFileBeside(path, &temp_);
  if (file_ == nullptr) return ok_ = false;
  return ok_ = WriteHeader() && std::fflush(file_) == 0;
}

bool WavWriter::WriteHeader() {
  // RIFF header, "fmt " chunk (format 1: integer PCM), "data" chunk.
  unsigned char h[44];
  const uint32_t data = uint32_t(samples_ * 2);
  std::memcpy(h, "RIFF", 4);
  Put32(h + 4, 36 + data);
  std::memcpy(h + 8, "WAVEfmt ", 8);
  Put32(h + 16, 16);
  Put16(h + 20, 1);
  Put16(h + 22, 1);
  Put32(h + 24, uint32_t(rate_));
  Put32(h + 28, uint32_t(rate_ * 2));
  Put16(h + 32, 2);
  Put16(h + 34, 16);
  std::memcpy(h + 36, "data", 4);
  Put32(h + 40, data);
  return std::fseek(file_, 0, SEEK_SET) == 0 && std::fwrite(h, 1, sizeof h, file_) == sizeof h;
}

bool WavWriter::Append(const void* samples, int64_t n, const std::string& dtype) {
  if (file_ == nullptr || !ok_ || n < 0 || (dtype != "int16" && dtype != "float32")) return false;
  std::vector<int16_t> pcm(static_cast<size_t>(n));
  if (dtype == "int16") {
    std::memcpy(pcm.data(), samples, pcm.size() * sizeof(int16_t));
  } else {
    const auto* f = static_cast<const float*>(samples);
    for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = omni_edge::ToInt16(f[i]);
  }
  // Samples first, then the sizes that cover them: at every moment the header describes data
  // the file holds.
  ok_ = std::fseek(file_, 0, SEEK_END) == 0 && std::fwrite(pcm.data(), sizeof(int16_t), pcm.size(), file_) == pcm.size() &&
        std::fflush(file_) == 0;
  if (ok_) samples_ += n;
  ok_ = ok_ && WriteHeader() && std::fflush(file_) == 0;
  return ok_;
}

bool WavWriter::Commit() {
  if (file_ == nullptr) return false;
  ok_ = ok_ && WriteHeader() && platform::SyncFile(file_);
  ok_ = std::fclose(file_) == 0 && ok_;
  file_ = nullptr;
  ok_ = ok_ && platform::MoveIntoPlace(temp_, path_);
  if (!ok_) platform::RemoveFile(temp_);
  temp_.clear();
  return ok_;
}

void WavWriter::Discard() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (!temp_.empty()) platform::RemoveFile(temp_);
  temp_.clear();
}

}  // namespace omni_edge::tools
