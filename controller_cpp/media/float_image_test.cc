#include "media/float_image.h"

#include <gtest/gtest.h>

namespace omni_edge::media {
namespace {

// One plane of 1.5 x (0..h*w-1), repeated over the three channels.
FloatImage Ramp(int64_t w, int64_t h) {
  FloatImage im{w, h, {}};
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t i = 0; i < w * h; ++i) im.planes.push_back(1.5f * float(i));
  }
  return im;
}

TEST(FloatImage, BilinearIsTorchsWithoutAntialiasing) {
  // torch.nn.functional.interpolate(1.5 * arange(12).reshape(1, 1, 3, 4), size=..., mode="bilinear",
  // align_corners=False), down and up.
  const FloatImage down = ResizeBilinear(Ramp(4, 3), 2, 3);
  const std::vector<float> want_down = {1.75f, 3.75f, 5.75f, 10.75f, 12.75f, 14.75f};
  for (size_t i = 0; i < want_down.size(); ++i) EXPECT_FLOAT_EQ(down.planes[i], want_down[i]) << i;
  const FloatImage up = ResizeBilinear(Ramp(4, 3), 5, 7);
  const std::vector<float> want_up = {0.0f, 0.535714328f, 1.39285719f, 2.25000024f, 3.10714316f, 3.96428609f, 4.5f, 2.4000001f};
  for (size_t i = 0; i < want_up.size(); ++i) EXPECT_NEAR(up.planes[i], want_up[i], 1e-6f) << i;
  EXPECT_EQ(up.planes.size(), size_t(3 * 5 * 7));
}

TEST(FloatImage, ResizeWithPadLetterboxesWithPythonsRounding) {
  // 300 x 200 into 160 x 160: scaled by 0.533 to 160 x 107 (106.67 rounded), padded 26 above, 27 below.
  FloatImage wide{300, 200, std::vector<float>(size_t(3 * 300 * 200), 1.0f)};
  auto out = ResizeWithPad(wide, 160, 160);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto at = [&](int64_t y, int64_t x) { return out->planes[size_t(y * 160 + x)]; };
  EXPECT_EQ(at(25, 80), 0.0f);
  EXPECT_EQ(at(26, 80), 1.0f);
  EXPECT_EQ(at(132, 80), 1.0f);
  EXPECT_EQ(at(133, 80), 0.0f);
  // 10 x 5 into 5 x 5: 2.5 rows round to the even 2 (Python's round), one padded row above, two below.
  FloatImage tiny{10, 5, std::vector<float>(size_t(3 * 10 * 5), 1.0f)};
  auto small = ResizeWithPad(tiny, 5, 5);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->planes[0], 0.0f);
  EXPECT_EQ(small->planes[5], 1.0f);
  EXPECT_EQ(small->planes[15], 0.0f);
  EXPECT_FALSE(ResizeWithPad(FloatImage{0, 4, {}}, 8, 8).ok());
  EXPECT_FALSE(ResizeWithPad(FloatImage{4, 4, std::vector<float>(5)}, 8, 8).ok());
}

TEST(FloatImage, PatchesAreTheQwenLayoutOfTheOtherPreprocessing) {
  // A 64 x 32 8-bit image at a size smart resize keeps: the float patches of its x / 255 planes
  // equal PreprocessImage's (which rescales in double), to the last bit or one.
  RgbImage im{64, 32, {}};
  for (int64_t i = 0; i < 64 * 32 * 3; ++i) im.pixels.push_back(uint8_t((i * 37) % 251));
  VisionPreprocessing p;
  p.patch_size = 16;
  p.min_pixels = 1;
  for (float& m : p.mean) m = 0.5f;
  for (float& s : p.std) s = 0.5f;
  auto want = PreprocessImage(im, p);
  ASSERT_TRUE(want.ok());
  auto got = PatchesOf(ToUnitFloat(im), 16, 2, 2, p.mean, p.std);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->grid_h, 2);
  EXPECT_EQ(got->grid_w, 4);
  ASSERT_EQ(got->values.size(), want->values.size());
  for (size_t i = 0; i < got->values.size(); ++i) ASSERT_NEAR(got->values[i], want->values[i], 1e-6f) << i;
  EXPECT_FALSE(PatchesOf(FloatImage{48, 32, std::vector<float>(3 * 48 * 32)}, 16, 2, 2, p.mean, p.std).ok());
}

}  // namespace
}  // namespace omni_edge::media
