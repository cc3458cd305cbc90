#include "text/chat.h"

namespace omni_edge::text {
namespace {

std::string Turns(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

}  // namespace

std::string FormatChatML(const std::vector<ChatMessage>& messages) { return Turns(messages); }

std::string ContinueChatML(const std::vector<ChatMessage>& messages) { return "\n" + Turns(messages); }

}  // namespace omni_edge::text
