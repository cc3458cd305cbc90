#include "tools/wav_writer.h"

#include "base/platform/os.h"
#include "base/wav.h"

namespace omni_edge::tools {

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
  const std::string h = WavHeader(rate_, samples_);
  return std::fseek(file_, 0, SEEK_SET) == 0 && std::fwrite(h.data(), 1, h.size(), file_) == h.size();
}

bool WavWriter::Append(const void* samples, int64_t n, const std::string& dtype) {
  std::string pcm;
  if (file_ == nullptr || !ok_ || !AppendPcm16(samples, n, dtype, &pcm)) return false;
  // Samples first, then the sizes that cover them: at every moment the header describes data
  // the file holds.
  ok_ = std::fseek(file_, 0, SEEK_END) == 0 && std::fwrite(pcm.data(), 1, pcm.size(), file_) == pcm.size() &&
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
