#include "base/wav.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

namespace omni_edge {
namespace {

uint32_t Read32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | uint8_t(s[at + i]);
  return v;
}

TEST(Wav, HeaderDescribesMono16BitPcm) {
  const std::string h = WavHeader(24000, 10);
  ASSERT_EQ(h.size(), 44u);
  EXPECT_EQ(h.substr(0, 4), "RIFF");
  EXPECT_EQ(Read32(h, 4), 36u + 20u);
  EXPECT_EQ(h.substr(8, 8), "WAVEfmt ");
  EXPECT_EQ(Read32(h, 24), 24000u);  // sample rate
  EXPECT_EQ(Read32(h, 28), 48000u);  // bytes per second
  EXPECT_EQ(h.substr(36, 4), "data");
  EXPECT_EQ(Read32(h, 40), 20u);
  const std::string open = WavHeader(16000, -1);  // a stream whose length is not known yet
  EXPECT_EQ(Read32(open, 4), 0xFFFFFFFFu);
  EXPECT_EQ(Read32(open, 40), 0xFFFFFFFFu);
}

TEST(Wav, SamplesBecomeLittleEndianInt16ByOneRule) {
  const float f[] = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, std::nanf("")};
  std::string out;
  ASSERT_TRUE(AppendPcm16(f, 6, "float32", &out));
  ASSERT_EQ(out.size(), 12u);
  int16_t got[6];
  std::memcpy(got, out.data(), sizeof(got));
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[1], 32767);
  EXPECT_EQ(got[2], -32767);
  EXPECT_EQ(got[3], 32767);  // clamped
  EXPECT_EQ(got[4], 16384);  // 16383.5 rounds away from zero
  EXPECT_EQ(got[5], 0);      // NaN is silence
  const int16_t i[] = {-2, 300};
  ASSERT_TRUE(AppendPcm16(i, 2, "int16", &out));
  EXPECT_EQ(out.substr(12), std::string("\xfe\xff\x2c\x01", 4));
  EXPECT_FALSE(AppendPcm16(i, 2, "float64", &out));
  EXPECT_FALSE(AppendPcm16(i, -1, "int16", &out));
  EXPECT_EQ(out.size(), 16u);  // nothing appended by a refusal
}

}  // namespace
}  // namespace omni_edge
