#include "base/sha256.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace omni_edge {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256Hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(Sha256Hex(two_blocks.data(), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, IncrementalEqualsOneShotAcrossBlockBoundaries) {
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 31 + 7);
  for (size_t split : {0, 1, 55, 56, 63, 64, 65, 127, 999}) {
    Sha256 h;
    h.Update(data.data(), split);
    h.Update(data.data() + split, data.size() - split);
    EXPECT_EQ(h.HexDigest(), Sha256Hex(data.data(), data.size())) << "split " << split;
  }
}

TEST(Sha256, MillionA) {
  const std::string a(1000000, 'a');
  EXPECT_EQ(Sha256Hex(a.data(), a.size()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, FileAndMissingFile) {
  const std::string path = ::testing::TempDir() + "/sha256_test.bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("abc", f);
  std::fclose(f);
  auto digest = Sha256File(path);
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(digest.value(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto missing = Sha256File(path + ".absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().reason(), "file_missing");
}

}  // namespace
}  // namespace omni_edge
