#include "media/float_image.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace omni_edge::media {
namespace {

// Per output index: the two source indices and their weights (torch's linear interpolation).
struct TwoTaps {
  std::vector<int64_t> lo, hi;
  std::vector<float> w_lo, w_hi;
};

TwoTaps TwoTapsOf(int64_t in, int64_t out) {
  TwoTaps t;
  const float scale = float(in) / float(out);
  for (int64_t d = 0; d < out; ++d) {
    const float src = std::max(scale * (float(d) + 0.5f) - 0.5f, 0.0f);
    const auto i0 = int64_t(src);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    const float l1 = std::min(src - float(i0), 1.0f);
    t.lo.push_back(i0);
    t.hi.push_back(i1);
    t.w_lo.push_back(1.0f - l1);
    t.w_hi.push_back(l1);
  }
  return t;
}

int64_t NearestEven(double v) { return int64_t(std::nearbyint(v)); }

}  // namespace

FloatImage ToUnitFloat(const RgbImage& image) {
  FloatImage out{image.width, image.height, std::vector<float>(size_t(3 * image.width * image.height))};
  const int64_t n = image.width * image.height;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < 3; ++c) out.planes[size_t(c * n + i)] = float(image.pixels[size_t(i * 3 + c)]) / 255.0f;
  }
  return out;
}

FloatImage ResizeBilinear(const FloatImage& in, int64_t height, int64_t width) {
  FloatImage out{width, height, std::vector<float>(size_t(3 * width * height))};
  const TwoTaps ty = TwoTapsOf(in.height, height), tx = TwoTapsOf(in.width, width);
  for (int64_t c = 0; c < 3; ++c) {
    const float* src = in.planes.data() + c * in.height * in.width;
    float* dst = out.planes.data() + c * height * width;
    for (int64_t y = 0; y < height; ++y) {
      const float* r0 = src + ty.lo[size_t(y)] * in.width;
      const float* r1 = src + ty.hi[size_t(y)] * in.width;
      const float wy0 = ty.w_lo[size_t(y)], wy1 = ty.w_hi[size_t(y)];
      for (int64_t x = 0; x < width; ++x) {
        const int64_t x0 = tx.lo[size_t(x)], x1 = tx.hi[size_t(x)];
        const float wx0 = tx.w_lo[size_t(x)], wx1 = tx.w_hi[size_t(x)];
        dst[y * width + x] = wy0 * (wx0 * r0[x0] + wx1 * r0[x1]) + wy1 * (wx0 * r1[x0] + wx1 * r1[x1]);
      }
    }
  }
  return out;
}

Result<FloatImage> ResizeWithPad(const FloatImage& in, int64_t height, int64_t width) {
  if (in.width < 1 || in.height < 1 || int64_t(in.planes.size()) != 3 * in.width * in.height) {
    return Status::Error("invalid_input", "an image of " + std::to_string(in.width) + "x" + std::to_string(in.height) +
                                              " needs that many pixels per channel");
  }
  const double scale = std::min(double(height) / double(in.height), double(width) / double(in.width));
  const int64_t rh = std::max<int64_t>(1, NearestEven(double(in.height) * scale));
  const int64_t rw = std::max<int64_t>(1, NearestEven(double(in.width) * scale));
  const FloatImage resized = ResizeBilinear(in, rh, rw);
  FloatImage out{width, height, std::vector<float>(size_t(3 * width * height), 0.0f)};
  const int64_t top = (height - rh) / 2, left = (width - rw) / 2;
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < rh; ++y) {
      std::copy_n(resized.planes.data() + (c * rh + y) * rw, rw, out.planes.data() + (c * height + top + y) * width + left);
    }
  }
  return out;
}

Result<VisionPatches> PatchesOf(const FloatImage& image, int64_t patch, int64_t merge, int64_t temporal,
                                const float mean[3], const float std[3]) {
  const int64_t unit = patch * merge;
  if (image.height % unit != 0 || image.width % unit != 0) {
    return Status::Error("invalid_input", "a " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                                              " image is not a multiple of " + std::to_string(unit) + " on each side");
  }
  VisionPatches out;
  out.grid_h = image.height / patch;
  out.grid_w = image.width / patch;
  out.patch_dim = 3 * temporal * patch * patch;
  out.values.resize(size_t(out.grid_h * out.grid_w * out.patch_dim));
  const int64_t W = image.width, plane = image.height * image.width;
  size_t at = 0;
  for (int64_t bh = 0; bh < out.grid_h / merge; ++bh) {
    for (int64_t bw = 0; bw < out.grid_w / merge; ++bw) {
      for (int64_t mh = 0; mh < merge; ++mh) {
        for (int64_t mw = 0; mw < merge; ++mw) {
          const int64_t y0 = (bh * merge + mh) * patch, x0 = (bw * merge + mw) * patch;
          for (int64_t c = 0; c < 3; ++c) {
            for (int64_t t = 0; t < temporal; ++t) {
              for (int64_t py = 0; py < patch; ++py) {
                for (int64_t px = 0; px < patch; ++px) {
                  const float v = image.planes[size_t(c * plane + (y0 + py) * W + x0 + px)];
                  out.values[at++] = (v - mean[c]) / std[c];
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace omni_edge::media
