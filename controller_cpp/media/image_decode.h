// Image files (PNG, JPEG, BMP, GIF's first frame) into 8-bit RGB through stb_image: the size is
// read from the header first and refused above a pixel limit, before anything is allocated.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "media/image_preprocess.h"

namespace omni_edge::media {

inline constexpr int64_t kMaxDecodedPixels = int64_t(1) << 26;  // 64 M pixels (192 MB of RGB)

Result<RgbImage> DecodeImage(const std::string& bytes, int64_t max_pixels = kMaxDecodedPixels);

}  // namespace omni_edge::media
