// Base64 (RFC 4648, the standard alphabet with padding): what JSON protocols carry bytes in
// (OpenAI's data URLs and audio, ...).
#pragma once

#include <string>

#include "base/status.h"

namespace omni_edge {

std::string Base64Encode(const std::string& bytes);
// Strict: the standard alphabet, length a multiple of 4, '=' only as the last one or two, and no
// bits set past the data (one text per byte string).
Result<std::string> Base64Decode(const std::string& text);

}  // namespace omni_edge
