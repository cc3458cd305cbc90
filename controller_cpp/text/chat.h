// ChatML prompt formatting (Qwen chat checkpoints):
//   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
#pragma once

#include <string>
#include <vector>

namespace omni_edge::text {

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

// The whole conversation, ending with the assistant generation prompt.
std::string FormatChatML(const std::vector<ChatMessage>& messages);
// What follows a finished assistant turn (that ended with <|im_end|>) to continue with
// `messages`: exactly the suffix FormatChatML of the longer conversation would add.
std::string ContinueChatML(const std::vector<ChatMessage>& messages);

}  // namespace omni_edge::text
