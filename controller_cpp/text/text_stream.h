// Token ids to text deltas for streaming: never splits a UTF-8 character across deltas
// (bytes of an unfinished character are held back), and holds back text that may turn out to
// be the start of a stop string, so a consumer never sees part of a stop string.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace omni_edge::text {

class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  struct Delta {
    std::string text;      // safe to show now
    bool stopped = false;  // a stop string completed; `text` ends before it
  };
  Delta Push(TokenId id);
  // The rest at the end of generation (an unfinished character becomes U+FFFD).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::vector<std::string> stops_;
  size_t max_stop_ = 0;
  std::string bytes_;  // decoded bytes not yet complete UTF-8
  std::string held_;   // complete text held back as a possible stop-string prefix
};

}  // namespace omni_edge::text
