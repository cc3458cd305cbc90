#include "base/base64.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace omni_edge {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::array<int8_t, 256> DecodeTable() {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = int8_t(i);
  return t;
}

}  // namespace

std::string Base64Encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

Result<std::string> Base64Decode(const std::string& text) {
  static const std::array<int8_t, 256> table = DecodeTable();
  if (text.size() % 4 != 0) return Status::Error("invalid_base64", "base64 text of " + std::to_string(text.size()) + " characters (a multiple of 4 is needed)");
  const size_t padding = text.empty() ? 0 : (text.back() == '=') + (text.size() > 1 && text[text.size() - 2] == '=');
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const size_t at = i + k;
      const bool pad = at >= text.size() - padding;
      const int8_t d = pad ? (text[at] == '=' ? 0 : -1) : table[static_cast<unsigned char>(text[at])];
      if (d < 0) return Status::Error("invalid_base64", "not base64 at character " + std::to_string(at));
      v = v << 6 | uint32_t(d);
    }
    const size_t keep = i + 4 == text.size() ? 3 - padding : 3;
    if (keep < 3 && (v & ((1u << (8 * (3 - keep))) - 1)) != 0) {  // bits past the last byte must be zero
      return Status::Error("invalid_base64", "not base64: the last character has bits past the data");
    }
    for (size_t k = 0; k < keep; ++k) out += char((v >> (16 - 8 * k)) & 0xff);
  }
  return out;
}

}  // namespace omni_edge
