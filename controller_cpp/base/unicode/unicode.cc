#include "base/unicode/unicode.h"

#include <algorithm>
#include <cstdint>

namespace omni_edge::unicode {
namespace {

struct CodeRange {
  char32_t lo, hi;
};

#include "base/unicode/unicode_tables.inc"

template <size_t N>
bool InRanges(const CodeRange (&ranges)[N], char32_t cp) {
  const CodeRange* end = ranges + N;
  const CodeRange* it = std::upper_bound(ranges, end, cp, [](char32_t v, const CodeRange& r) { return v < r.lo; });
  return it != ranges && cp <= (it - 1)->hi;
}

constexpr char32_t kHangulBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void DecomposeInto(char32_t cp, std::u32string* out) {
  if (cp >= kHangulBase && cp < kHangulBase + kSCount) {
    const int s = int(cp - kHangulBase);
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = kDecompositions + std::size(kDecompositions);
  const auto* it = std::lower_bound(kDecompositions, end, cp, [](const Decomposition& d, char32_t v) { return d.cp < v; });
  if (it == end || it->cp != cp) {
    out->push_back(cp);
    return;
  }
  DecomposeInto(it->first, out);
  if (it->second != 0) DecomposeInto(it->second, out);
}

char32_t Compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kHangulBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kHangulBase && a < kHangulBase + kSCount && (a - kHangulBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const auto* end = kCompositions + std::size(kCompositions);
  const auto* it = std::lower_bound(kCompositions, end, std::make_pair(a, b), [](const Composition& c, const auto& v) {
    return c.first < v.first || (c.first == v.first && c.second < v.second);
  });
  return (it != end && it->first == a && it->second == b) ? it->composite : 0;
}

}  // namespace

Result<std::u32string> DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b0 = uint8_t(text[i]);
    int len = 0;
    char32_t cp = 0;
    if (b0 < 0x80) {
      len = 1, cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07;
    } else {
      return Status::Error("invalid_utf8", "invalid UTF-8 lead byte at offset " + std::to_string(i));
    }
    if (i + len > text.size()) return Status::Error("invalid_utf8", "truncated UTF-8 at offset " + std::to_string(i));
    for (int k = 1; k < len; ++k) {
      const auto b = uint8_t(text[i + k]);
      if ((b & 0xC0) != 0x80) return Status::Error("invalid_utf8", "invalid UTF-8 at offset " + std::to_string(i + k));
      cp = (cp << 6) | (b & 0x3F);
    }
    static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Status::Error("invalid_utf8", "invalid code point at offset " + std::to_string(i));
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(char(cp));
  } else if (cp < 0x800) {
    out->push_back(char(0xC0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(char(0xE0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (cp >> 18)));
    out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) AppendUtf8(cp, &out);
  return out;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  // Look back at most 3 bytes for the lead byte of an unfinished character.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = uint8_t(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    int need = 1;
    if ((b & 0xE0) == 0xC0) need = 2;
    else if ((b & 0xF0) == 0xE0) need = 3;
    else if ((b & 0xF8) == 0xF0) need = 4;
    return size_t(need) > back ? n - back : n;
  }
  return n;
}

namespace {

// How many bytes from `i` form a well-formed character or, failing that, the longest prefix of
// one (Unicode's "maximal subpart"; at least 1). Sets *complete when they are a character.
size_t MaximalSubpart(std::string_view bytes, size_t i, bool* complete) {
  const auto lead = uint8_t(bytes[i]);
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range; later ones are 80..BF
  if (lead < 0x80) need = 1;
  else if (lead >= 0xC2 && lead <= 0xDF) need = 2;
  else if (lead >= 0xE0 && lead <= 0xEF) need = 3, lo = lead == 0xE0 ? 0xA0 : 0x80, hi = lead == 0xED ? 0x9F : 0xBF;
  else if (lead >= 0xF0 && lead <= 0xF4) need = 4, lo = lead == 0xF0 ? 0x90 : 0x80, hi = lead == 0xF4 ? 0x8F : 0xBF;
  *complete = need == 1;
  if (need <= 1) return 1;
  size_t len = 1;
  for (; len < need && i + len < bytes.size(); ++len) {
    const auto b = uint8_t(bytes[i + len]);
    if (len == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
  }
  *complete = len == need;
  return len;
}

}  // namespace

std::string SanitizeUtf8(std::string_view bytes) {
  // One U+FFFD per maximal subpart of an ill-formed sequence, as Unicode recommends and as
  // Hugging Face `tokenizers` decodes (Rust's from_utf8_lossy): E7 90 10 is U+FFFD U+0010.
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    bool complete = false;
    const size_t len = MaximalSubpart(bytes, i, &complete);
    if (complete) out.append(bytes.substr(i, len));
    else out += "\xEF\xBF\xBD";
    i += len;
  }
  return out;
}

bool IsLetter(char32_t cp) { return InRanges(kLetterRanges, cp); }
bool IsNumber(char32_t cp) { return InRanges(kNumberRanges, cp); }
bool IsWhiteSpace(char32_t cp) { return InRanges(kWhiteSpaceRanges, cp); }

uint8_t CombiningClass(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto* end = kCombiningClasses + std::size(kCombiningClasses);
  const auto* it = std::lower_bound(kCombiningClasses, end, cp, [](const CombiningClassEntry& c, char32_t v) { return c.cp < v; });
  return (it != end && it->cp == cp) ? it->ccc : 0;
}

std::u32string Nfc(std::u32string_view text) {
  // Fast path: nothing below U+0300 decomposes, combines or composes.
  if (std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x300; })) return std::u32string(text);
  std::u32string d;
  d.reserve(text.size() + 8);
  for (char32_t cp : text) DecomposeInto(cp, &d);
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (CombiningClass(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && CombiningClass(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j,
                     [](char32_t a, char32_t b) { return CombiningClass(a) < CombiningClass(b); });
    i = j;
  }
  // Canonical composition: a character combines with the last starter unless something
  // between them is a starter or has a combining class >= its own (it is "blocked").
  std::u32string out;
  out.reserve(d.size());
  size_t starter = std::u32string::npos;
  for (char32_t cp : d) {
    const uint8_t ccc = CombiningClass(cp);
    if (starter != std::u32string::npos) {
      const bool adjacent = out.size() == starter + 1;
      const bool blocked = !adjacent && CombiningClass(out.back()) >= ccc;
      if (!blocked) {
        if (char32_t composite = Compose(out[starter], cp)) {
          out[starter] = composite;
          continue;
        }
      }
    }
    if (ccc == 0) starter = out.size();
    out.push_back(cp);
  }
  return out;
}

}  // namespace omni_edge::unicode
