#include "text/pretokenizer.h"

#include <gtest/gtest.h>

#include "base/unicode/unicode.h"

namespace omni_edge::text {
namespace {

std::vector<std::string> Split(const std::string& text, PretokenizerKind kind) {
  const std::u32string cps = unicode::DecodeUtf8(text).value();
  std::vector<std::string> out;
  for (auto piece : Pretokenize(cps, kind)) out.push_back(unicode::EncodeUtf8(piece));
  return out;
}

using V = std::vector<std::string>;

TEST(Pretokenizer, Qwen2MatchesTokenizers) {  // expected values from tokenizers' Split(regex)
  const auto k = PretokenizerKind::kQwen2;
  EXPECT_EQ(Split("Hello world", k), (V{"Hello", " world"}));
  EXPECT_EQ(Split("I'LL go's", k), (V{"I", "'LL", " go", "'s"}));
  EXPECT_EQ(Split("x  \n\n  y", k), (V{"x", "  \n\n", " ", " y"}));
  EXPECT_EQ(Split("abc123 4", k), (V{"abc", "1", "2", "3", " ", "4"}));
  EXPECT_EQ(Split("  spaces", k), (V{" ", " spaces"}));
  EXPECT_EQ(Split("a!!b\n", k), (V{"a", "!!", "b", "\n"}));
  EXPECT_EQ(Split("\xe6\x9d\xb1\xe4\xba\xac \xe3\x81\xa7", k), (V{"\xe6\x9d\xb1\xe4\xba\xac", " \xe3\x81\xa7"}));
}

TEST(Pretokenizer, Gpt2AndLlama3) {
  EXPECT_EQ(Split("I'LL go's", PretokenizerKind::kGpt2), (V{"I", "'", "LL", " go", "'s"}));
  EXPECT_EQ(Split("abc123 4", PretokenizerKind::kGpt2), (V{"abc", "123", " 4"}));
  EXPECT_EQ(Split("x  \n\n  y", PretokenizerKind::kGpt2), (V{"x", "  \n\n ", " y"}));
  EXPECT_EQ(Split("12345", PretokenizerKind::kLlama3), (V{"123", "45"}));
}

TEST(Pretokenizer, UnknownPatternsAreRefused) {
  EXPECT_EQ(PretokenizerForPattern("\\w+").status().reason(), "unsupported_tokenizer");
}

}  // namespace
}  // namespace omni_edge::text
