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
  EXPECT_NE(DecodeImage(kPng.substr(0, 50)).status().message().find("IDAT chunk claims 19 bytes and the file has 9"),
            std::string::npos);  // truncated, refused before stb_image allocates for it
}

// Empty IDAT chunks carry no data and are legal; stb_image copied one that came before any data into
// a null buffer (UBSan: memcpy(nullptr, p, 0), found by the fuzzer). They are dropped before decoding.
TEST(ImageDecode, EmptyDataChunksAreSkippedAndAFileOfNothingElseIsRefused) {
  const std::string empty_idat("\x00\x00\x00\x00IDAT\x35\xaf\x06\x1e", 12);
  const size_t first_idat = 33;  // signature 8 + IHDR 25
  std::string with_empty = kPng;
  with_empty.insert(first_idat, empty_idat + empty_idat);
  auto image = DecodeImage(with_empty);
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_EQ(image->pixels, DecodeImage(kPng)->pixels);

  // The fuzzer's input: an empty IDAT, then a malformed chunk list (stb_image read up to it).
  const std::string fuzzed = kPng.substr(0, first_idat) + std::string("\x00\x00\x00\x00IDAT", 8) + kPng.substr(41);
  EXPECT_FALSE(DecodeImage(fuzzed).ok());
  EXPECT_FALSE(DecodeImage(kPng.substr(0, first_idat) + std::string("\x00\x00\x00\x00IDAT", 8)).ok());  // no CRC
  std::string no_data = kPng.substr(0, first_idat) + empty_idat + kPng.substr(kPng.size() - 12);
  EXPECT_FALSE(DecodeImage(no_data).ok());
}

}  // namespace
}  // namespace omni_edge::media
