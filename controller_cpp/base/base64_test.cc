#include "base/base64.h"

#include <gtest/gtest.h>

namespace omni_edge {
namespace {

TEST(Base64, RoundTripsEveryLengthAndKnownVectors) {
  // RFC 4648's test vectors.
  const char* plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const char* coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(Base64Encode(plain[i]), coded[i]);
    EXPECT_EQ(Base64Decode(coded[i]).value(), plain[i]);
  }
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += char(i);
  EXPECT_EQ(Base64Decode(Base64Encode(bytes)).value(), bytes);
}

TEST(Base64, RefusesWhatIsNotStrictBase64) {
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zm9v!A==", "=Zm9", "Zg==Zg==", "Zm 9v", "Zm9v\n", "Zh==", "Zm9="}) {
    EXPECT_FALSE(Base64Decode(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace omni_edge
