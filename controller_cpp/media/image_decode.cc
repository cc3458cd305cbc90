#include "media/image_decode.h"

#include <cstring>
#include <limits>
#include <memory>

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

Result<RgbImage> DecodeImage(const std::string& bytes, int64_t max_pixels) {
  if (bytes.empty() || bytes.size() > size_t(std::numeric_limits<int>::max())) {
    return Status::Error("invalid_media", "an image file of " + std::to_string(bytes.size()) + " bytes");
  }
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
