// Pre-tokenization: splitting text into the pieces BPE runs on, exactly as the regexes of
// byte-level BPE tokenizers do. The regexes are matched by hand-written scanners (no regex
// engine), one per pattern family; an unknown pattern is refused, never approximated.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace omni_edge::text {

enum class PretokenizerKind {
  kGpt2,   // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kQwen2,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3  // as kQwen2 with \p{N}{1,3}
};

// The kind a tokenizer.json Split regex denotes, or "unsupported_tokenizer".
Result<PretokenizerKind> PretokenizerForPattern(std::string_view pattern);

// Splits `text` (code points) into pieces; their concatenation is `text`.
std::vector<std::u32string_view> Pretokenize(std::u32string_view text, PretokenizerKind kind);

}  // namespace omni_edge::text
