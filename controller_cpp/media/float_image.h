// Camera frames as float planes, resized as torch's F.interpolate(mode="bilinear",
// align_corners=False) does without antialiasing, letterboxed as vLLM-Omni's InternVLA-A1
// resize_with_pad, and cut into Qwen3-VL's patches: the policy's preprocessing on the device.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "media/image_preprocess.h"

namespace omni_edge::media {

// [3, height, width] channel planes.
struct FloatImage {
  int64_t width = 0, height = 0;
  std::vector<float> planes;
};

// x / 255 per channel (float32 division, as numpy's uint8 / 255 of an image in [0, 1]).
FloatImage ToUnitFloat(const RgbImage& image);

// torch's bilinear interpolation (align_corners=False, no antialiasing): source coordinate
// (d + 0.5) x in/out - 0.5 clamped at 0, in float32.
FloatImage ResizeBilinear(const FloatImage& in, int64_t height, int64_t width);

// Scaled to fit height x width keeping the aspect ratio (each side rounded half to even, as
// Python's round), then zero-padded around it (an odd pad's extra pixel at the bottom / right).
Result<FloatImage> ResizeWithPad(const FloatImage& in, int64_t height, int64_t width);

// Qwen3-VL's patch rows of an image whose sides are multiples of patch x merge (no resampling):
// (x - mean) / std, rows in merge order, each patch channel-major and repeated `temporal` times.
Result<VisionPatches> PatchesOf(const FloatImage& image, int64_t patch, int64_t merge, int64_t temporal,
                                const float mean[3], const float std[3]);

}  // namespace omni_edge::media
