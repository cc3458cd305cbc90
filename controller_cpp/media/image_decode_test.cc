#include "media/image_decode.h"

#include <gtest/gtest.h>

namespace omni_edge::media {
namespace {

// A 2x2 RGB PNG: red, green / blue, (10, 20, 30).
const std::string kPng(
    "\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x02\x00\x00\x00\x02\x08\x02\x00\x00"
    "\x00\xfd\xd4\x9a\x73\x00\x00\x00\x13\x49\x44\x41\x54\x78\x9c\x63\xf8\xcf\xc0\xc0\x00\xc2\x0c\xff\xb9\x44\xe4\x00"
    "\x1a\x58\x03\x3a\x56\x63\xa2\x3c\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82",
    76);

TEST(ImageDecode, APngDecodesToItsRgbPixels) {
  auto image = DecodeImage(kPng);
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_EQ(image->width, 2);
  EXPECT_EQ(image->height, 2);
  EXPECT_EQ(image->pixels, (std::vector<uint8_t>{255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30}));
}

TEST(ImageDecode, WhatIsNotAnImageOrTooLargeIsRefusedBeforeDecoding) {
  EXPECT_NE(DecodeImage("hello, not an image").status().message().find("not an image"), std::string::npos);
  EXPECT_FALSE(DecodeImage("GIF87a but not").ok());  // a header, then nothing
  EXPECT_FALSE(DecodeImage("").ok());
  EXPECT_NE(DecodeImage(kPng, 3).status().message().find("at most 3"), std::string::npos);  // 4 pixels
  EXPECT_FALSE(DecodeImage(kPng.substr(0, 50)).ok());  // truncated IDAT
}

}  // namespace
}  // namespace omni_edge::media
