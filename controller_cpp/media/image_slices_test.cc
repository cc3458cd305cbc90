#include "media/image_slices.h"

#include <gtest/gtest.h>

namespace omni_edge::media {
namespace {

RgbImage Gradient(int64_t w, int64_t h) {
  RgbImage im{w, h, {}};
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) im.pixels.insert(im.pixels.end(), {uint8_t(x % 256), uint8_t(y % 256), 128});
  }
  return im;
}

// The grids vLLM-Omni's MiniCPMVImageProcessor picks for these sizes (scale 448, at most 9).
TEST(ImageSlices, TheGridIsTheReferencesChoice) {
  const SliceConfig c;
  EXPECT_EQ(SliceGrid(448, 448, c), std::make_pair(int64_t(0), int64_t(0)));  // one slice: not cut
  EXPECT_EQ(SliceGrid(512, 600, c), std::make_pair(int64_t(1), int64_t(2)));
  EXPECT_EQ(SliceGrid(1000, 400, c), std::make_pair(int64_t(3), int64_t(1)));
  EXPECT_EQ(SliceGrid(300, 2000, c), std::make_pair(int64_t(1), int64_t(4)));
  EXPECT_EQ(SliceGrid(4000, 4000, c), std::make_pair(int64_t(3), int64_t(3)));  // capped at max_slice_nums
}

TEST(ImageSlices, SlicesAreWholePatchesSourceFirstThenRowByRow) {
  const SliceConfig c;
  const SlicedImage small = *SliceImage(Gradient(448, 448), c);
  ASSERT_EQ(small.slices.size(), 1u);
  EXPECT_EQ(small.slices[0].rows, 32);
  EXPECT_EQ(small.slices[0].strip.size(), size_t(3 * 14 * 32 * 32 * 14));
  const SlicedImage wide = *SliceImage(Gradient(1000, 400), c);
  ASSERT_EQ(wide.slices.size(), 4u);  // the source, then 3 x 1
  EXPECT_EQ(wide.slices[0].rows * 14, 280);
  EXPECT_EQ(wide.slices[0].cols * 14, 700);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(wide.slices[i].cols, wide.slices[1].cols);
  // Normalized to [-1, 1]: the first pixel of a gradient's first slice is black in red.
  EXPECT_FLOAT_EQ(wide.slices[1].strip[0], -1.0f);
}

TEST(ImageSlices, BadConfigsAndImagesAreRefusedByName) {
  EXPECT_NE(SliceConfigFromJson(Json{{"max_slice_nums", 0}}, "p").status().message().find("max_slice_nums"), std::string::npos);
  EXPECT_NE(SliceConfigFromJson(Json{{"patch_size", 99}}, "p").status().message().find("patch_size"), std::string::npos);
  EXPECT_NE(SliceConfigFromJson(Json{{"scale_resolution", 5}}, "p").status().message().find("scale_resolution"), std::string::npos);
  EXPECT_NE(SliceConfigFromJson(Json{{"norm_std", {1, 0, 1}}}, "p").status().message().find("norm_std"), std::string::npos);
  EXPECT_FALSE(SliceConfigFromJson(Json::array(), "p").ok());
  EXPECT_FALSE(SliceImage(RgbImage{4, 4, {}}, SliceConfig()).ok());
}

}  // namespace
}  // namespace omni_edge::media
