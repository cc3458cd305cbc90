#include "media/image_decode.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

// One translation unit holds stb_image's implementation: the formats an image processor is
// handed, from memory only (no stdio), failures as strings.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#include <stb/stb_image.h>

namespace omni_edge::media {
namespace {

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + at;
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// A chunk's type for a message: its letters, or hex when they are not letters (messages are UTF-8).
std::string Printable(const std::string& type) {
  bool letters = true;
  for (char c : type) letters = letters && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'));
  if (letters) return type;
  std::string hex = "0x";
  for (unsigned char c : type) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
  return hex;
}

// A PNG's chunk list, read in order as stb_image reads it, up to IEND. Two things stb_image does
// badly are settled here first: a chunk claiming more bytes than the file holds is refused (stb_image
// grows its data buffer to the claimed size before it finds the bytes missing: a 100-byte file asked
// for 2 GB), and empty IDAT chunks (legal, no data) are dropped (stb_image copies one that comes
// before any data into a null buffer: memcpy(nullptr, p, 0), undefined behaviour). Gives the file
// to decode in place of the original, or nothing when it is not a PNG or needs no change.
// Not bounded here: stb_image's inflate grows its output to whatever the data expands to (up to
// 2 GB), whatever the header's size; a caller taking files from a network bounds their size.
Result<std::optional<std::string>> CheckedPngChunks(const std::string& bytes) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 8 || bytes.compare(0, 8, kSignature, 8) != 0) return std::optional<std::string>();
  std::string kept = bytes.substr(0, 8);
  bool dropped = false;
  for (size_t at = 8; at < bytes.size();) {
    const size_t left = bytes.size() - at;
    if (left < 8) break;  // stb_image reads a missing header as zeros and refuses it
    const uint64_t length = BigEndian32(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (length == 0 && type == "IDAT") {
      dropped = true;  // with its CRC, when the file has one
      at += std::min<size_t>(left, 12);
      continue;
    }
    if (length + 8 > left) {
      return Status::Error("invalid_media", "the PNG's " + Printable(type) + " chunk claims " + std::to_string(length) +
                                                " bytes and the file has " + std::to_string(left - 8) + " left");
    }
    const size_t chunk = std::min<size_t>(left, size_t(length) + 12);  // a missing CRC is stb_image's to judge
    kept.append(bytes, at, chunk);
    at += chunk;
    if (type == "IEND") break;  // the rest is not read
  }
  if (!dropped) return std::optional<std::string>();
  return std::optional<std::string>(std::move(kept));
}

}  // namespace

Result<RgbImage> DecodeImage(const std::string& file, int64_t max_pixels) {
  if (file.empty() || file.size() > size_t(std::numeric_limits<int>::max())) {
    return Status::Error("invalid_media", "an image file of " + std::to_string(file.size()) + " bytes");
  }
  auto checked = CheckedPngChunks(file);
  if (!checked.ok()) return checked.status();
  const std::string& bytes = *checked ? **checked : file;
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int size = int(bytes.size());
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(data, size, &width, &height, &channels)) {
    return Status::Error("invalid_media", std::string("not an image stb_image reads (PNG, JPEG, BMP, GIF): ") +
                                              stbi_failure_reason());
  }
  if (width < 1 || height < 1 || int64_t(width) * int64_t(height) > max_pixels) {
    return Status::Error("invalid_media", "an image of " + std::to_string(width) + "x" + std::to_string(height) +
                                              " pixels (at most " + std::to_string(max_pixels) + ")");
  }
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(stbi_load_from_memory(data, size, &width, &height, &channels, 3),
                                                   stbi_image_free);
  if (!pixels) return Status::Error("invalid_media", std::string("the image does not decode: ") + stbi_failure_reason());
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.assign(pixels.get(), pixels.get() + size_t(width) * size_t(height) * 3);
  return out;
}

}  // namespace omni_edge::media
