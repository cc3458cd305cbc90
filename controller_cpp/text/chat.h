// Chat prompt formats: the turn markers of the chat templates the controller renders itself.
//   chatml  (Qwen, SmolLM2):  <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
//   llama3  (Llama 3.x):      <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//                             ... <|start_header_id|>assistant<|end_header_id|>\n\n
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace omni_edge::text {

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

struct ChatFormat {
  std::string name;
  std::string begin;        // once, before the first turn
  std::string role_prefix;  // before a turn's role
  std::string role_suffix;  // between the role and the content
  std::string end_of_turn;  // the token the model ends its turn with
  std::string after_turn;   // what follows end_of_turn in the rendered conversation
  bool trim = false;        // contents stripped of surrounding whitespace (Llama 3's `| trim`)
  // What the generation prompt adds after the assistant's opening (a plan's
  // chat_generation_prompt: MiniCPM-o 4.5's thinking-off "<think>\n\n</think>\n\n").
  std::string generation_prompt;

  // The whole conversation, ending with the assistant's generation prompt.
  std::string Format(const std::vector<ChatMessage>& messages) const;
  // What follows a finished assistant turn (ended with end_of_turn) to continue with `messages`:
  // exactly the suffix Format of the longer conversation would add.
  std::string Continue(const std::vector<ChatMessage>& messages) const;
  // A turn's content as the template writes it (trimmed when the format trims).
  std::string Body(const std::string& content) const;
  // One finished turn: opened, its body, closed.
  std::string Turn(const ChatMessage& m) const;
  // The assistant's opening and the generation prompt: where its reply starts.
  std::string Reply() const { return Open("assistant") + generation_prompt; }
  // A turn's opening (role included), and the close of one.
  std::string Open(const std::string& role) const { return role_prefix + role + role_suffix; }
  std::string Close() const { return end_of_turn + after_turn; }
};

// The format a plan names (chatml, llama3); none for another name.
std::optional<ChatFormat> ChatFormatNamed(const std::string& name);

}  // namespace omni_edge::text
