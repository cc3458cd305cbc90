#include "media/image_slices.h"

#include <cmath>
#include <limits>

namespace omni_edge::media {
namespace {

// Python's round(): halves to even (the default rounding mode).
double RoundHalfEven(double x) { return std::nearbyint(x); }

double Divisible(double length, int64_t unit) {
  return std::max(RoundHalfEven(length / double(unit)) * double(unit), double(unit));
}

// The reference's find_best_resize: about scale^2 pixels with the aspect ratio, in whole patches.
std::pair<int64_t, int64_t> BestResize(double width, double height, const SliceConfig& c, bool upscale) {
  const double s = double(c.scale_resolution);
  if (width * height > s * s || upscale) {
    const double ratio = width / height;
    height = double(int64_t(s / std::sqrt(ratio)));  // int(): toward zero
    width = double(int64_t(height * ratio));
  }
  return {int64_t(Divisible(width, c.patch_size)), int64_t(Divisible(height, c.patch_size))};
}

RgbImage Crop(const RgbImage& in, int64_t x0, int64_t y0, int64_t width, int64_t height) {
  RgbImage out{width, height, std::vector<uint8_t>(size_t(width * height * 3))};
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* from = in.pixels.data() + ((y0 + y) * in.width + x0) * 3;
    std::copy(from, from + width * 3, out.pixels.data() + y * width * 3);
  }
  return out;
}

ImageSlice Strip(const RgbImage& img, const SliceConfig& c) {
  const int64_t P = c.patch_size, rows = img.height / P, cols = img.width / P, L = rows * cols;
  ImageSlice s{rows, cols, std::vector<float>(size_t(3 * P * L * P))};
  for (int64_t ch = 0; ch < 3; ++ch) {
    for (int64_t y = 0; y < img.height; ++y) {
      for (int64_t x = 0; x < img.width; ++x) {
        // float32 as numpy computes it: x / 255, then (x - mean) / std.
        const float v = (float(img.pixels[size_t((y * img.width + x) * 3 + ch)]) / 255.0f - c.mean[ch]) / c.std[ch];
        const int64_t l = (y / P) * cols + x / P;  // the patch's place in the row
        s.strip[size_t((ch * P + y % P) * L * P + l * P + x % P)] = v;
      }
    }
  }
  return s;
}

}  // namespace

Result<SliceConfig> SliceConfigFromJson(const Json& config, const std::string& where) {
  if (!config.is_object()) return Status::Error("invalid_field", where + ": must be an object");
  SliceConfig c;
  OE_ASSIGN_OR_RETURN(c.max_slices, GetInt(config, "max_slice_nums", c.max_slices, where));
  OE_ASSIGN_OR_RETURN(c.scale_resolution, GetInt(config, "scale_resolution", c.scale_resolution, where));
  OE_ASSIGN_OR_RETURN(c.patch_size, GetInt(config, "patch_size", c.patch_size, where));
  if (c.max_slices < 1 || c.max_slices > 64) return Status::Error("invalid_field", where + ".max_slice_nums: must be in [1, 64]");
  if (c.patch_size < 1 || c.patch_size > 64) return Status::Error("invalid_field", where + ".patch_size: must be in [1, 64]");
  if (c.scale_resolution < c.patch_size || c.scale_resolution > 4096) {
    return Status::Error("invalid_field", where + ".scale_resolution: must be in [patch_size, 4096]");
  }
  OE_RETURN_IF_ERROR(ReadChannelTriple(config, "norm_mean", c.mean, where, false));
  OE_RETURN_IF_ERROR(ReadChannelTriple(config, "norm_std", c.std, where, true));
  return c;
}

std::pair<int64_t, int64_t> SliceGrid(int64_t width, int64_t height, const SliceConfig& c) {
  const double s = double(c.scale_resolution);
  const int64_t multiple = std::min(int64_t(std::ceil(double(width) * double(height) / (s * s))), c.max_slices);
  if (multiple <= 1) return {0, 0};
  const double log_ratio = std::log(double(width) / double(height));
  std::pair<int64_t, int64_t> best{1, 1};
  double error = std::numeric_limits<double>::infinity();
  for (int64_t n : {multiple - 1, multiple, multiple + 1}) {
    if (n == 1 || n > c.max_slices) continue;
    for (int64_t m = 1; m <= n; ++m) {
      if (n % m) continue;
      const double e = std::fabs(log_ratio - std::log(double(m) / double(n / m)));
      if (e < error) best = {m, n / m}, error = e;  // the first grid wins a tie
    }
  }
  return best;
}

Result<SlicedImage> SliceImage(const RgbImage& image, const SliceConfig& c) {
  if (image.width < 1 || image.height < 1 || int64_t(image.pixels.size()) != image.width * image.height * 3) {
    return Status::Error("invalid_input", "an RGB image of " + std::to_string(image.width) + "x" +
                                              std::to_string(image.height) + " needs that many 3-byte pixels");
  }
  SlicedImage out;
  std::tie(out.grid_cols, out.grid_rows) = SliceGrid(image.width, image.height, c);
  const bool cut = out.grid_cols > 0;
  const auto [w, h] = BestResize(double(image.width), double(image.height), c, /*upscale=*/!cut);
  out.slices.push_back(Strip(ResizeBicubic(image, w, h), c));
  if (!cut) return out;
  const int64_t cols = out.grid_cols, rows = out.grid_rows;
  const double cell_w = Divisible(double(image.width), cols) / double(cols);
  const double cell_h = Divisible(double(image.height), rows) / double(rows);
  const auto [cw, ch] = BestResize(cell_w, cell_h, c, /*upscale=*/true);
  const RgbImage refined = ResizeBicubic(image, cw * cols, ch * rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) out.slices.push_back(Strip(Crop(refined, k * cw, r * ch, cw, ch), c));
  }
  return out;
}

}  // namespace omni_edge::media
