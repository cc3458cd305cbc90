#include "text/text_stream.h"

#include <algorithm>

#include "base/unicode/unicode.h"

namespace omni_edge::text {

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : tokenizer_(tokenizer), stops_(std::move(stop_strings)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
  for (const auto& s : stops_) max_stop_ = std::max(max_stop_, s.size());
}

TextStream::Delta TextStream::Push(TokenId id) {
  bytes_ += tokenizer_.TokenBytes(id);
  const size_t complete = unicode::CompleteUtf8Prefix(bytes_);
  held_ += unicode::SanitizeUtf8(std::string_view(bytes_).substr(0, complete));
  bytes_.erase(0, complete);

  Delta delta;
  size_t first_stop = std::string::npos;
  for (const auto& s : stops_) first_stop = std::min(first_stop, held_.find(s));
  if (first_stop != std::string::npos) {
    delta.text = held_.substr(0, first_stop);
    delta.stopped = true;
    held_.clear();
    bytes_.clear();
    return delta;
  }
  // Keep the longest suffix of held_ that is a prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  // Never cut inside a character: move the cut back to a character boundary.
  size_t cut = held_.size() - keep;
  while (cut > 0 && cut < held_.size() && (uint8_t(held_[cut]) & 0xC0) == 0x80) --cut;
  delta.text = held_.substr(0, cut);
  held_.erase(0, cut);
  return delta;
}

std::string TextStream::Flush() {
  std::string out = held_ + unicode::SanitizeUtf8(bytes_);
  held_.clear();
  bytes_.clear();
  return out;
}

}  // namespace omni_edge::text
