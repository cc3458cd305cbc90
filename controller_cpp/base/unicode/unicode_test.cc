#include "base/unicode/unicode.h"

#include <gtest/gtest.h>

namespace omni_edge::unicode {
namespace {

std::u32string N(std::u32string s) { return Nfc(s); }

TEST(Utf8, DecodeRefusesMalformedInput) {
  EXPECT_EQ(DecodeUtf8("h\xc3\xa9").value(), U"h\u00e9");
  for (const char* bad : {"\xff", "\xc3", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\x80"}) {
    EXPECT_EQ(DecodeUtf8(bad).status().reason(), "invalid_utf8") << bad;
  }
}

TEST(Utf8, CompletePrefixHoldsBackAnUnfinishedCharacter) {
  EXPECT_EQ(CompleteUtf8Prefix("ab"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xe6\x9d"), 1u);       // 2 of 3 bytes of 東
  EXPECT_EQ(CompleteUtf8Prefix("a\xe6\x9d\xb1"), 4u);
  EXPECT_EQ(CompleteUtf8Prefix("\xf0\x9f\x9a"), 0u);     // 3 of 4 bytes of 🚀
  // One U+FFFD per maximal subpart (an unfinished character is one), as from_utf8_lossy.
  EXPECT_EQ(SanitizeUtf8("a\xff" "b\xe6\x9d"), "a\xef\xbf\xbd" "b\xef\xbf\xbd");
  EXPECT_EQ(SanitizeUtf8("\xe7\x90\x10"), "\xef\xbf\xbd\x10");
  // E0 needs A0..BF next, ED 80..9F (no surrogates), F4 80..8F: each byte then stands alone.
  EXPECT_EQ(SanitizeUtf8("\xe0\x80\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(SanitizeUtf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(SanitizeUtf8("\xf4\x90\x80\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(SanitizeUtf8("\xf0\x9f\x98"), "\xef\xbf\xbd");
  EXPECT_EQ(SanitizeUtf8("\xf0\x9f\x98\x80!"), "\xf0\x9f\x98\x80!");
  EXPECT_EQ(SanitizeUtf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(Unicode, Classes) {
  EXPECT_TRUE(IsLetter(U'a') && IsLetter(U'\u6771') && IsLetter(U'\u00e9'));
  EXPECT_FALSE(IsLetter(U'1') || IsLetter(U' ') || IsLetter(U'!'));
  EXPECT_TRUE(IsNumber(U'7') && IsNumber(U'\u0663') && IsNumber(U'\u00bd'));
  EXPECT_TRUE(IsWhiteSpace(U' ') && IsWhiteSpace(U'\n') && IsWhiteSpace(U'\u3000') && IsWhiteSpace(U'\u0085'));
  EXPECT_FALSE(IsWhiteSpace(U'\u200b') || IsWhiteSpace(U'\x1c'));
}

TEST(Unicode, NfcMatchesPython) {  // expected values from unicodedata.normalize("NFC", ...)
  EXPECT_EQ(N(U"e\u0301"), U"\u00e9");
  EXPECT_EQ(N(U"\u1100\u1161\u11a8"), U"\uac01");           // Hangul LV + T
  EXPECT_EQ(N(U"a\u0323\u0302"), U"\u1ead");                // canonical ordering, then composition
  EXPECT_EQ(N(U"\u212b"), U"\u00c5");                       // singleton decomposition
  EXPECT_EQ(N(U"\u0958"), U"\u0915\u093c");                 // composition exclusion stays decomposed
  EXPECT_EQ(N(U"q\u0307\u0323"), U"q\u0323\u0307");         // reordered, nothing to compose
  EXPECT_EQ(N(U"\u00c5\u0301x"), U"\u01fax");
  EXPECT_EQ(N(U"plain ascii"), U"plain ascii");
}

}  // namespace
}  // namespace omni_edge::unicode
