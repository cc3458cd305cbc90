// Images as a Qwen2-VL-style vision encoder reads them, computed on the device exactly as
// transformers' Qwen2VLImageProcessorPil does: the size snapped to multiples of patch x merge
// within [min_pixels, max_pixels] (smart_resize, with Python's rounding), Pillow's bicubic
// resampling of the 8-bit image when the size changes (its separable fixed-point filter, so
// the resized bytes are Pillow's), rescale to [0, 1], normalize per channel, and the patches
// in the encoder's order (merge groups together, each patch repeated over the temporal patch).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"

namespace omni_edge::media {

// 8-bit RGB, rows top to bottom, pixels interleaved.
struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // width x height x 3
};

struct VisionPreprocessing {
  int64_t patch_size = 14, merge_size = 2, temporal_patch_size = 2;
  int64_t min_pixels = 56 * 56, max_pixels = 28 * 28 * 1280;
  double rescale = 1.0 / 255.0;
  float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
  float std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
};

struct VisionPatches {
  int64_t grid_t = 1, grid_h = 0, grid_w = 0;  // in patches
  int64_t patch_dim = 0;                       // 3 x temporal x patch x patch
  std::vector<float> values;                   // grid_t x grid_h x grid_w rows of patch_dim
  int64_t tokens(int64_t merge) const { return grid_t * grid_h * grid_w / (merge * merge); }
};

// `key` of a preprocessor config as three numbers into `out` (left as is when absent); with
// `positive`, each must be above zero (a standard deviation).
Status ReadChannelTriple(const Json& config, const char* key, float out[3], const std::string& where, bool positive);

// The image fields of a checkpoint's preprocessor_config.json (other fields are ignored; a field
// of the wrong type or out of range is refused by name).
Result<VisionPreprocessing> VisionPreprocessingFromJson(const Json& config, const std::string& where);

// The (height, width) an image is resized to; refuses an aspect ratio above 200, as the reference does.
Result<std::pair<int64_t, int64_t>> SmartResize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                                int64_t max_pixels);

// Pillow's Image.resize(..., BICUBIC) of an 8-bit RGB image.
RgbImage ResizeBicubic(const RgbImage& in, int64_t width, int64_t height);

Result<VisionPatches> PreprocessImage(const RgbImage& image, const VisionPreprocessing& p);

// A π0-style policy camera image, [3, size, size]: resized keeping its aspect ratio until one
// side is `size` (transformers' max height/width rule; Pillow's bicubic), x / 255, normalized per
// channel, then zero-padded at the bottom and right (after normalization, as PI0ImageProcessor).
Result<std::vector<float>> ResizeWithPad(const RgbImage& image, int64_t size, const float mean[3], const float std[3]);

}  // namespace omni_edge::media
