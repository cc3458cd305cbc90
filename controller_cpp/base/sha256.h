// SHA-256 (FIPS 180-4), self-contained so the controller hashes artifacts the same way on
// Android, Windows-on-ARM and Linux without a crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace omni_edge {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  std::array<uint8_t, 32> Finish();
  std::string HexDigest();  // lowercase hex of Finish()

 private:
  void Compress(const uint8_t block[64]);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string Sha256Hex(const void* data, size_t size);
Result<std::string> Sha256File(const std::string& path);

}  // namespace omni_edge
