#include "text/chat.h"

namespace omni_edge::text {
namespace {

// Jinja's trim on ASCII whitespace (Python's str.strip() also strips Unicode spaces).
std::string Trim(const std::string& s) {
  const char* space = " \t\n\r\v\f";
  const size_t first = s.find_first_not_of(space);
  return first == std::string::npos ? "" : s.substr(first, s.find_last_not_of(space) - first + 1);
}

std::string Turns(const ChatFormat& f, const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) out += f.Turn(m);
  return out + f.Reply();
}

}  // namespace

std::string ChatFormat::Body(const std::string& content) const { return trim ? Trim(content) : content; }

std::string ChatFormat::Turn(const ChatMessage& m) const { return Open(m.role) + Body(m.content) + Close(); }

std::string ChatFormat::Format(const std::vector<ChatMessage>& messages) const { return begin + Turns(*this, messages); }

std::string ChatFormat::Continue(const std::vector<ChatMessage>& messages) const { return after_turn + Turns(*this, messages); }

std::optional<ChatFormat> ChatFormatNamed(const std::string& name) {
  if (name == "chatml") return ChatFormat{"chatml", "", "<|im_start|>", "\n", "<|im_end|>", "\n"};
  if (name == "llama3") {
    return ChatFormat{"llama3", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", "",
                      true};
  }
  return std::nullopt;
}

}  // namespace omni_edge::text
