#include "text/pretokenizer.h"

#include "base/unicode/unicode.h"

namespace omni_edge::text {
namespace {

using unicode::IsLetter;
using unicode::IsNumber;
using unicode::IsWhiteSpace;

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool IsCrLf(char32_t c) { return c == U'\r' || c == U'\n'; }
bool IsOther(char32_t c) { return !IsWhiteSpace(c) && !IsLetter(c) && !IsNumber(c); }  // [^\s\p{L}\p{N}]

// Simple case folding for the letters of the contractions; U+017F (long s) folds to 's'.
char32_t Fold(char32_t c) {
  if (c >= U'A' && c <= U'Z') return c + 32;
  if (c == 0x17F) return U's';
  return c;
}

// 's 't 're 've 'm 'll 'd at i (optionally case-insensitive); returns the length or 0.
size_t Contraction(std::u32string_view t, size_t i, bool fold) {
  if (t[i] != U'\'' || i + 1 >= t.size()) return 0;
  auto at = [&](size_t k) { return fold ? Fold(t[k]) : t[k]; };
  const char32_t a = at(i + 1);
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if (i + 2 < t.size()) {
    const char32_t b = at(i + 2);
    if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  }
  return 0;
}

size_t Run(std::u32string_view t, size_t i, bool (*pred)(char32_t)) {
  size_t j = i;
  while (j < t.size() && pred(t[j])) ++j;
  return j;
}

// \s+(?!\S) then \s+ : a white-space run, leaving its last character for the next piece when
// a non-space follows (so " word" keeps its space).
size_t WhiteSpaceRun(std::u32string_view t, size_t i) {
  const size_t j = Run(t, i, IsWhiteSpace);
  if (j == t.size() || j - i == 1) return j;
  return j - 1;
}

size_t MatchGpt2(std::u32string_view t, size_t i) {
  if (size_t n = Contraction(t, i, false)) return i + n;
  const size_t k = (t[i] == U' ' && i + 1 < t.size()) ? i + 1 : i;  // optional leading space
  if (IsLetter(t[k])) return Run(t, k, IsLetter);
  if (IsNumber(t[k])) return Run(t, k, IsNumber);
  if (IsOther(t[k])) return Run(t, k, IsOther);
  return WhiteSpaceRun(t, i);
}

size_t MatchQwen(std::u32string_view t, size_t i, size_t max_digits) {
  const size_t n = t.size();
  if (size_t c = Contraction(t, i, true)) return i + c;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (IsLetter(t[i])) return Run(t, i, IsLetter);
  if (!IsCrLf(t[i]) && !IsNumber(t[i]) && i + 1 < n && IsLetter(t[i + 1])) return Run(t, i + 1, IsLetter);
  // \p{N}{1,max}
  if (IsNumber(t[i])) {
    size_t j = i;
    while (j < n && j - i < max_digits && IsNumber(t[j])) ++j;
    return j;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const size_t k = (t[i] == U' ' && i + 1 < n && IsOther(t[i + 1])) ? i + 1 : i;
  if (IsOther(t[k])) return Run(t, Run(t, k, IsOther), IsCrLf);
  // \s*[\r\n]+ : up to and including the last CR/LF of the white-space run
  const size_t ws_end = Run(t, i, IsWhiteSpace);
  for (size_t j = ws_end; j > i; --j) {
    if (IsCrLf(t[j - 1])) return j;
  }
  return WhiteSpaceRun(t, i);
}

}  // namespace

Result<PretokenizerKind> PretokenizerForPattern(std::string_view pattern) {
  if (pattern == kGpt2Pattern) return PretokenizerKind::kGpt2;
  if (pattern == kQwen2Pattern) return PretokenizerKind::kQwen2;
  if (pattern == kLlama3Pattern) return PretokenizerKind::kLlama3;
  return Status::Error("unsupported_tokenizer", "pre-tokenizer regex not supported: " + std::string(pattern));
}

std::vector<std::u32string_view> Pretokenize(std::u32string_view text, PretokenizerKind kind) {
  std::vector<std::u32string_view> pieces;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = kind == PretokenizerKind::kGpt2 ? MatchGpt2(text, i)
                                                  : MatchQwen(text, i, kind == PretokenizerKind::kQwen2 ? 1 : 3);
    if (end <= i) end = i + 1;  // unreachable for these patterns; guarantees progress
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
  return pieces;
}

}  // namespace omni_edge::text
