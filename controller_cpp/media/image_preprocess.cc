#include "media/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "media/float_image.h"

namespace omni_edge::media {
namespace {

// Pillow's 8-bit resampling: coefficients in fixed point with this many fractional bits.
constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr double kBicubicSupport = 2.0;

double Bicubic(double x) {  // Keys' cubic with a = -0.5, as Pillow's BICUBIC
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// For each output position: the first input index, how many inputs, and their weights.
struct Taps {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;  // out_size x ksize, fixed point
};

Taps Precompute(int64_t in_size, int64_t out_size) {
  Taps t;
  const double scale = double(in_size) / double(out_size);
  const double filter_scale = std::max(scale, 1.0);  // a reduction widens the filter (antialiasing)
  const double support = kBicubicSupport * filter_scale;
  t.ksize = int64_t(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.weights.assign(size_t(out_size * t.ksize), 0);
  std::vector<double> k(size_t(t.ksize));
  for (int64_t o = 0; o < out_size; ++o) {
    const double center = (double(o) + 0.5) * scale;
    // Pillow rounds these by adding 0.5 and truncating toward zero.
    const int64_t lo = std::max<int64_t>(int64_t(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(int64_t(center + support + 0.5), in_size);
    const int64_t n = hi - lo;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += k[size_t(i)] = Bicubic((double(i + lo) - center + 0.5) * (1.0 / filter_scale));
    for (int64_t i = 0; i < n; ++i) {
      const double w = sum != 0.0 ? k[size_t(i)] / sum : k[size_t(i)];
      const double fixed = w * double(1 << kPrecisionBits);
      t.weights[size_t(o * t.ksize + i)] = int32_t(w < 0 ? fixed - 0.5 : fixed + 0.5);
    }
    t.first[size_t(o)] = lo;
    t.count[size_t(o)] = n;
  }
  return t;
}

uint8_t Clip8(int64_t acc) { return uint8_t(std::clamp<int64_t>(acc >> kPrecisionBits, 0, 255)); }

// One pass along x (`horizontal`) or y, as Pillow's ImagingResampleHorizontal/Vertical_8bpc.
RgbImage Pass(const RgbImage& in, int64_t out_size, bool horizontal) {
  const Taps t = Precompute(horizontal ? in.width : in.height, out_size);
  RgbImage out;
  out.width = horizontal ? out_size : in.width;
  out.height = horizontal ? in.height : out_size;
  out.pixels.resize(size_t(out.width * out.height * 3));
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t o = horizontal ? x : y;
      const int32_t* k = &t.weights[size_t(o * t.ksize)];
      int64_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int64_t i = 0; i < t.count[size_t(o)]; ++i) {
        const int64_t src = horizontal ? (y * in.width + t.first[size_t(o)] + i) : ((t.first[size_t(o)] + i) * in.width + x);
        for (int c = 0; c < 3; ++c) acc[c] += int64_t(in.pixels[size_t(src * 3 + c)]) * k[i];
      }
      for (int c = 0; c < 3; ++c) out.pixels[size_t((y * out.width + x) * 3 + c)] = Clip8(acc[c]);
    }
  }
  return out;
}

}  // namespace

Result<VisionPreprocessing> VisionPreprocessingFromJson(const Json& config, const std::string& where) {
  if (!config.is_object()) return Status::Error("invalid_field", where + ": must be an object");
  VisionPreprocessing p;
  OE_ASSIGN_OR_RETURN(p.patch_size, GetInt(config, "patch_size", p.patch_size, where));
  OE_ASSIGN_OR_RETURN(p.merge_size, GetInt(config, "merge_size", p.merge_size, where));
  OE_ASSIGN_OR_RETURN(p.temporal_patch_size, GetInt(config, "temporal_patch_size", p.temporal_patch_size, where));
  // transformers' rule: the pixel range from `size` (Qwen3-VL and Qwen3.5 configs give only that),
  // then min_pixels / max_pixels where present (Qwen2-VL and Qwen2.5-Omni configs).
  if (config.contains("size")) {
    const Json& size = config["size"];
    if (!size.is_object()) return Status::Error("invalid_field", where + ".size: must be an object");
    OE_ASSIGN_OR_RETURN(p.min_pixels, GetInt(size, "shortest_edge", p.min_pixels, where + ".size"));
    OE_ASSIGN_OR_RETURN(p.max_pixels, GetInt(size, "longest_edge", p.max_pixels, where + ".size"));
  }
  OE_ASSIGN_OR_RETURN(p.min_pixels, GetInt(config, "min_pixels", p.min_pixels, where));
  OE_ASSIGN_OR_RETURN(p.max_pixels, GetInt(config, "max_pixels", p.max_pixels, where));
  for (int64_t v : {p.patch_size, p.merge_size, p.temporal_patch_size}) {
    if (v < 1 || v > 64) return Status::Error("invalid_field", where + ": patch, merge and temporal sizes must be in [1, 64]");
  }
  // A release asks for at most 12.8 M pixels; a config asking for more is refused, not allocated.
  if (p.min_pixels < 0 || p.max_pixels < 1 || p.max_pixels > (int64_t(1) << 24) || p.min_pixels > p.max_pixels) {
    return Status::Error("invalid_field", where + ": min_pixels/max_pixels must satisfy 0 <= min <= max <= 2^24");
  }
  if (config.contains("rescale_factor")) {
    if (!config["rescale_factor"].is_number()) return Status::Error("invalid_field", where + ".rescale_factor: must be a number");
    p.rescale = config["rescale_factor"].get<double>();
  }
  OE_RETURN_IF_ERROR(ReadChannelTriple(config, "image_mean", p.mean, where, false));
  OE_RETURN_IF_ERROR(ReadChannelTriple(config, "image_std", p.std, where, true));
  return p;
}

Status ReadChannelTriple(const Json& config, const char* key, float out[3], const std::string& where, bool positive) {
  if (!config.contains(key)) return Status::Ok();
  const Json& v = config[key];
  if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number()) {
    return Status::Error("invalid_field", where + "." + key + ": must be three numbers");
  }
  for (int c = 0; c < 3; ++c) out[c] = v[size_t(c)].get<float>();
  for (int c = 0; c < 3; ++c) {
    if (positive && !(out[c] > 0)) return Status::Error("invalid_field", where + "." + key + ": must be positive");
  }
  return Status::Ok();
}

Result<std::pair<int64_t, int64_t>> SmartResize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                                int64_t max_pixels) {
  if (height < 1 || width < 1 || factor < 1) return Status::Error("invalid_input", "an image needs a positive size");
  if (double(std::max(height, width)) / double(std::min(height, width)) > 200) {
    return Status::Error("invalid_input", "an image's aspect ratio must be at most 200, got " + std::to_string(width) +
                                              "x" + std::to_string(height));
  }
  const double f = double(factor);
  // Python's round(): halves to even, which std::nearbyint does in the default rounding mode.
  int64_t h = int64_t(std::nearbyint(double(height) / f)) * factor;
  int64_t w = int64_t(std::nearbyint(double(width) / f)) * factor;
  if (h * w > max_pixels) {
    const double beta = std::sqrt(double(height) * double(width) / double(max_pixels));
    h = std::max(factor, int64_t(std::floor(double(height) / beta / f)) * factor);
    w = std::max(factor, int64_t(std::floor(double(width) / beta / f)) * factor);
  } else if (h * w < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / (double(height) * double(width)));
    h = int64_t(std::ceil(double(height) * beta / f)) * factor;
    w = int64_t(std::ceil(double(width) * beta / f)) * factor;
  }
  return std::make_pair(h, w);
}

RgbImage ResizeBicubic(const RgbImage& in, int64_t width, int64_t height) {
  // Pillow 13 runs the vertical pass first when the height shrinks by more than twice what the
  // width does (ImagingResampleInner); each pass rounds to 8 bits, so the order shows in the
  // result (Pillow 12 and earlier ran the horizontal pass first always: a few levels apart).
  const bool vertical_first = in.height - height > 0 && in.height - height > (in.width - width) * 2;
  RgbImage out = in;
  if (vertical_first) {
    out = Pass(out, height, /*horizontal=*/false);
    if (width != in.width) out = Pass(out, width, /*horizontal=*/true);
    return out;
  }
  if (width != in.width) out = Pass(out, width, /*horizontal=*/true);
  if (height != in.height) out = Pass(out, height, /*horizontal=*/false);
  return out;
}

Result<VisionPatches> PreprocessImage(const RgbImage& image, const VisionPreprocessing& p) {
  if (image.width < 1 || image.height < 1 || int64_t(image.pixels.size()) != image.width * image.height * 3) {
    return Status::Error("invalid_input", "an RGB image of " + std::to_string(image.width) + "x" +
                                              std::to_string(image.height) + " needs that many 3-byte pixels");
  }
  const int64_t P = p.patch_size, M = p.merge_size;
  OE_ASSIGN_OR_RETURN(auto size, SmartResize(image.height, image.width, P * M, p.min_pixels, p.max_pixels));
  const auto [H, W] = size;
  const RgbImage resized = (H == image.height && W == image.width) ? image : ResizeBicubic(image, W, H);
  // As the reference: rescale in double, then float32; PatchesOf normalizes in float32 and lays
  // the patches out in the encoder's order.
  FloatImage planes{W, H, std::vector<float>(size_t(3 * H * W))};
  for (int64_t i = 0; i < H * W; ++i) {
    for (int64_t c = 0; c < 3; ++c) planes.planes[size_t(c * H * W + i)] = float(double(resized.pixels[size_t(i * 3 + c)]) * p.rescale);
  }
  return PatchesOf(planes, P, M, p.temporal_patch_size, p.mean, p.std);
}

}  // namespace omni_edge::media

namespace omni_edge::media {

Result<std::vector<float>> ResizeWithPad(const RgbImage& image, int64_t size, const float mean[3], const float std[3]) {
  if (image.width < 1 || image.height < 1 || int64_t(image.pixels.size()) != image.width * image.height * 3) {
    return Status::Error("invalid_media", "an image of " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                                              " needs that many 3-byte pixels");
  }
  // transformers' get_image_size_for_max_height_width, in Python's double arithmetic.
  const double scale = std::min(double(size) / double(image.height), double(size) / double(image.width));
  const auto H = int64_t(double(image.height) * scale), W = int64_t(double(image.width) * scale);
  if (H < 1 || W < 1) return Status::Error("invalid_media", "an image of " + std::to_string(image.width) + "x" +
                                                               std::to_string(image.height) + " is too thin to resize to " +
                                                               std::to_string(size));
  const RgbImage resized = (H == image.height && W == image.width) ? image : ResizeBicubic(image, W, H);
  std::vector<float> out(size_t(3 * size * size), 0.0f);  // padded after normalization: zeros
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t x = 0; x < W; ++x) {
        const float v = float(resized.pixels[size_t((y * W + x) * 3 + c)]) / 255.0f;
        out[size_t((c * size + y) * size + x)] = (v - mean[c]) / std[c];
      }
    }
  }
  return out;
}

}  // namespace omni_edge::media
