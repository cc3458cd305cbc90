#include "tools/wav_writer.h"

#include <cstring>
#include <vector>

#include "base/pcm.h"

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

WavWriter::~WavWriter() { Close(); }

bool WavWriter::Open(const std::string& path, int64_t sample_rate) {
  rate_ = sample_rate;
  file_ = std::fopen(path.c_str(), "wb");
  return file_ != nullptr && WriteHeader();
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
  if (file_ == nullptr || n < 0 || (dtype != "int16" && dtype != "float32")) return false;
  std::vector<int16_t> pcm(static_cast<size_t>(n));
  if (dtype == "int16") {
    std::memcpy(pcm.data(), samples, pcm.size() * sizeof(int16_t));
  } else {
    const auto* f = static_cast<const float*>(samples);
    for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = omni_edge::ToInt16(f[i]);
  }
  if (std::fseek(file_, 0, SEEK_END) != 0 || std::fwrite(pcm.data(), sizeof(int16_t), pcm.size(), file_) != pcm.size()) {
    ok_ = false;
    return false;
  }
  samples_ += n;
  return true;
}

bool WavWriter::Close() {
  if (file_ == nullptr) return ok_;
  ok_ = WriteHeader() && ok_;
  ok_ = std::fclose(file_) == 0 && ok_;
  file_ = nullptr;
  return ok_;
}

}  // namespace omni_edge::tools
