// Images as MiniCPM-V / MiniCPM-o 4.5 read them, computed on the device exactly as the
// reference processor (vLLM-Omni's MiniCPMVImageProcessor) does: a source slice (the whole image
// resized to about scale_resolution^2 pixels in whole patches; only shrunk when the image is
// also cut) and, for an image larger than that, a grid of cols x rows slices cut from a second
// resize; every resize Pillow's bicubic on the 8-bit image (ResizeBicubic), every slice
// normalized per channel and laid out as the vision tower reads it: its patches in a row,
// [3, patch, rows*cols*patch].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "media/image_preprocess.h"

namespace omni_edge::media {

struct SliceConfig {
  int64_t max_slices = 9, scale_resolution = 448, patch_size = 14;
  float mean[3] = {0.5f, 0.5f, 0.5f};
  float std[3] = {0.5f, 0.5f, 0.5f};
};

// max_slice_nums, scale_resolution, patch_size, norm_mean, norm_std of preprocessor_config.json.
Result<SliceConfig> SliceConfigFromJson(const Json& config, const std::string& where);

struct ImageSlice {
  int64_t rows = 0, cols = 0;  // in patches
  std::vector<float> strip;    // [3, patch, rows * cols * patch]
};

struct SlicedImage {
  int64_t grid_cols = 0, grid_rows = 0;  // 0 x 0: the source slice alone
  std::vector<ImageSlice> slices;         // the source first, then the grid row by row
};

// (cols, rows) of the grid an image of this size is cut into; {0, 0} when it is not.
std::pair<int64_t, int64_t> SliceGrid(int64_t width, int64_t height, const SliceConfig& c);

Result<SlicedImage> SliceImage(const RgbImage& image, const SliceConfig& c);

}  // namespace omni_edge::media
