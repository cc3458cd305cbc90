// Unicode support for tokenization: strict UTF-8 decoding, the character classes the
// pre-tokenizer regexes use (\p{L}, \p{N}, \s), and NFC normalization. Tables are generated
// from Python's unicodedata by gen_unicode_tables.py.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace omni_edge::unicode {

// Decodes UTF-8, refusing overlong forms, surrogates, truncation and bytes > U+10FFFF.
Result<std::u32string> DecodeUtf8(std::string_view text);
void AppendUtf8(char32_t cp, std::string* out);
std::string EncodeUtf8(std::u32string_view text);
// Length of the longest prefix of `bytes` that ends on a complete UTF-8 character; the rest
// (at most 3 bytes of an unfinished character) is held back by streaming detokenizers.
size_t CompleteUtf8Prefix(std::string_view bytes);
// Valid UTF-8 with every invalid or truncated sequence replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view bytes);

bool IsLetter(char32_t cp);      // general category L*
bool IsNumber(char32_t cp);      // general category N*
bool IsWhiteSpace(char32_t cp);  // White_Space property
uint8_t CombiningClass(char32_t cp);

// Canonical composition (NFC).
std::u32string Nfc(std::u32string_view text);

}  // namespace omni_edge::unicode
