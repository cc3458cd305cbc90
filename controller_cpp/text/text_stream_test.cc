#include "text/text_stream.h"

#include <gtest/gtest.h>

#include "base/unicode/unicode.h"

namespace omni_edge::text {
namespace {

// A byte-level tokenizer with only the 256 byte tokens: id = byte.
std::unique_ptr<Tokenizer> ByteTokenizer() {
  Json vocab = Json::object();
  // GPT-2 byte mapping, built the same way as the tokenizer does.
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string utf8;
    unicode::AppendUtf8(direct ? char32_t(b) : char32_t(256 + next++), &utf8);
    vocab[utf8] = b;
  }
  Json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array()}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}};
  return Tokenizer::FromJson(j).value();
}

std::vector<TokenId> Bytes(const std::string& s) {
  std::vector<TokenId> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(TextStream, NeverSplitsACharacter) {
  auto tok = ByteTokenizer();
  TextStream stream(*tok, {});
  std::string all;
  for (TokenId id : Bytes("a\xe6\x9d\xb1\xf0\x9f\x9a\x80z")) {
    const auto d = stream.Push(id);
    EXPECT_TRUE(unicode::DecodeUtf8(d.text).ok()) << d.text;
    all += d.text;
  }
  all += stream.Flush();
  EXPECT_EQ(all, "a\xe6\x9d\xb1\xf0\x9f\x9a\x80z");
}

TEST(TextStream, HoldsBackAPossibleStopStringAndCutsBeforeIt) {
  auto tok = ByteTokenizer();
  TextStream stream(*tok, {"END"});
  std::string shown;
  bool stopped = false;
  for (TokenId id : Bytes("abcENxEND tail")) {
    auto d = stream.Push(id);
    shown += d.text;
    if (d.stopped) {
      stopped = true;
      break;
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(shown, "abcENx");
}

TEST(TextStream, FlushReplacesAnUnfinishedCharacter) {
  auto tok = ByteTokenizer();
  TextStream stream(*tok, {});
  EXPECT_EQ(stream.Push(0xe6).text, "");
  EXPECT_EQ(stream.Flush(), "\xef\xbf\xbd");
}

}  // namespace
}  // namespace omni_edge::text
