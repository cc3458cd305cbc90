#include "media/image_preprocess.h"

#include <gtest/gtest.h>

namespace omni_edge::media {
namespace {

RgbImage Solid(int64_t w, int64_t h, uint8_t r, uint8_t g, uint8_t b) {
  RgbImage im{w, h, {}};
  for (int64_t i = 0; i < w * h; ++i) im.pixels.insert(im.pixels.end(), {r, g, b});
  return im;
}

TEST(ImagePreprocess, SmartResizeSnapsToTheFactorWithPythonsRounding) {
  EXPECT_EQ(*SmartResize(448, 448, 28, 3136, 1003520), std::make_pair(int64_t(448), int64_t(448)));
  EXPECT_EQ(*SmartResize(200, 300, 28, 3136, 1003520), std::make_pair(int64_t(196), int64_t(308)));
  // 42 / 28 = 1.5 and 70 / 28 = 2.5: Python's round() takes the even neighbour, 2 both times.
  EXPECT_EQ(SmartResize(42, 70, 28, 0, 1 << 30)->first, 56);
  EXPECT_EQ(SmartResize(42, 70, 28, 0, 1 << 30)->second, 56);
  // Above max_pixels: scaled down keeping the aspect ratio; below min_pixels: scaled up.
  const auto big = *SmartResize(1200, 1600, 28, 3136, 1003520);
  EXPECT_LE(big.first * big.second, 1003520);
  EXPECT_EQ(big.first % 28, 0);
  EXPECT_GE(SmartResize(10, 10, 28, 3136, 1003520)->first, 56);
  EXPECT_FALSE(SmartResize(1, 201, 28, 3136, 1003520).ok());  // aspect ratio above 200
  EXPECT_FALSE(SmartResize(0, 10, 28, 3136, 1003520).ok());
}

TEST(ImagePreprocess, BicubicKeepsASolidColourAndTheSize) {
  const RgbImage out = ResizeBicubic(Solid(37, 23, 200, 10, 0), 61, 9);
  ASSERT_EQ(out.width, 61);
  ASSERT_EQ(out.height, 9);
  for (size_t i = 0; i < out.pixels.size(); i += 3) {
    ASSERT_EQ(out.pixels[i], 200);
    ASSERT_EQ(out.pixels[i + 1], 10);
    ASSERT_EQ(out.pixels[i + 2], 0);
  }
}

TEST(ImagePreprocess, PatchesAreNormalizedAndCountedInMergeGroups) {
  const auto got = PreprocessImage(Solid(56, 84, 255, 0, 0), VisionPreprocessing());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->grid_h, 6);
  EXPECT_EQ(got->grid_w, 4);
  EXPECT_EQ(got->tokens(2), 6);
  EXPECT_EQ(got->patch_dim, 3 * 2 * 14 * 14);
  ASSERT_EQ(got->values.size(), size_t(24 * 1176));
  const VisionPreprocessing p;
  EXPECT_FLOAT_EQ(got->values[0], (1.0f - p.mean[0]) / p.std[0]);          // red, first channel
  EXPECT_FLOAT_EQ(got->values[2 * 196], (0.0f - p.mean[1]) / p.std[1]);    // green after red's two frames
  EXPECT_FALSE(PreprocessImage(RgbImage{2, 2, {1, 2, 3}}, p).ok());        // too few bytes
}

}  // namespace
TEST(ImagePreprocess, ResizeWithPadKeepsTheAspectRatioAndPadsWithZerosAfterNormalizing) {
  const float mean[3] = {0.5f, 0.5f, 0.5f}, std_dev[3] = {0.5f, 0.5f, 0.5f};
  // 40x20 into 16: resized to 16x8 (one side reaches 16), the bottom 8 rows padded.
  const std::vector<float> out = *ResizeWithPad(Solid(40, 20, 255, 0, 51), 16, mean, std_dev);
  ASSERT_EQ(out.size(), size_t(3 * 16 * 16));
  const auto at = [&](int c, int y, int x) { return out[size_t((c * 16 + y) * 16 + x)]; };
  EXPECT_FLOAT_EQ(at(0, 0, 0), 1.0f);    // 255 -> 1
  EXPECT_FLOAT_EQ(at(1, 7, 15), -1.0f);  // 0 -> -1
  EXPECT_NEAR(at(2, 3, 3), -0.6f, 1e-6);  // 51 / 255 = 0.2 -> -0.6
  EXPECT_EQ(at(0, 8, 0), 0.0f);           // padding: zero after normalization, not -1
  EXPECT_EQ(at(1, 15, 15), 0.0f);
  // A tall image pads on the right; an exact fit is not resized.
  const std::vector<float> tall = *ResizeWithPad(Solid(5, 10, 0, 0, 0), 16, mean, std_dev);
  EXPECT_FLOAT_EQ(tall[size_t(15 * 16 + 7)], -1.0f);
  EXPECT_EQ(tall[size_t(15 * 16 + 8)], 0.0f);
  EXPECT_FLOAT_EQ(ResizeWithPad(Solid(16, 16, 0, 0, 0), 16, mean, std_dev)->back(), -1.0f);
  // Too thin to keep a pixel, or bytes that do not match the size: refused.
  EXPECT_FALSE(ResizeWithPad(Solid(1000, 1, 0, 0, 0), 16, mean, std_dev).ok());
  RgbImage broken = Solid(4, 4, 0, 0, 0);
  broken.pixels.pop_back();
  EXPECT_FALSE(ResizeWithPad(broken, 16, mean, std_dev).ok());
}

TEST(ImagePreprocess, ThePixelRangeComesFromSizeThenFromMinAndMaxPixels) {
  const auto read = [](const char* text) { return VisionPreprocessingFromJson(Json::parse(text), "pre"); };
  auto qwen3vl = read(R"({"size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16})");
  ASSERT_TRUE(qwen3vl.ok()) << qwen3vl.status().message();
  EXPECT_EQ(qwen3vl->min_pixels, 65536);
  EXPECT_EQ(qwen3vl->max_pixels, 16777216);
  EXPECT_EQ(qwen3vl->patch_size, 16);
  auto both = read(R"({"size": {"shortest_edge": 65536, "longest_edge": 16777216}, "min_pixels": 3136, "max_pixels": 1000000})");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->min_pixels, 3136);
  EXPECT_EQ(both->max_pixels, 1000000);
  EXPECT_EQ(read(R"({"size": 224})").status().message(), "pre.size: must be an object");
  EXPECT_FALSE(read(R"({"size": {"longest_edge": "big"}})").ok());
  EXPECT_FALSE(read(R"({"size": {"shortest_edge": 4096, "longest_edge": 1024}})").ok());  // min above max
}

}  // namespace omni_edge::media
