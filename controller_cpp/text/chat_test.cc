#include "text/chat.h"

#include <gtest/gtest.h>

namespace omni_edge::text {
namespace {

TEST(ChatFormat, ChatMLIsQwensTemplate) {
  const ChatFormat f = *ChatFormatNamed("chatml");
  EXPECT_EQ(f.Format({{"system", "s"}, {"user", " hi "}}),
            "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\n hi <|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatFormat, Llama3HasItsHeadersBeginsOnceAndTrims) {
  const ChatFormat f = *ChatFormatNamed("llama3");
  EXPECT_EQ(f.Format({{"user", " \n hi \t"}}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(f.Format({{"user", "  "}}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// What a session holds after a finished reply (ended with its end-of-turn token), plus Continue,
// is the whole conversation's rendering with the reply as an assistant turn.
TEST(ChatFormat, ContinuingEqualsFormattingTheWholeConversation) {
  for (const char* name : {"chatml", "llama3"}) {
    const ChatFormat f = *ChatFormatNamed(name);
    const std::string held = f.Format({{"system", "s"}, {"user", "a"}}) + "reply" + f.end_of_turn;
    EXPECT_EQ(held + f.Continue({{"user", "b"}}),
              f.Format({{"system", "s"}, {"user", "a"}, {"assistant", "reply"}, {"user", "b"}}))
        << name;
  }
}

// MiniCPM-o 4.5 replies with thinking off: the plan's generation prompt follows the assistant's
// opening wherever a reply starts.
TEST(ChatFormat, TheGenerationPromptFollowsTheAssistantsOpening) {
  ChatFormat f = *ChatFormatNamed("chatml");
  f.generation_prompt = "<think>\n\n</think>\n\n";
  EXPECT_EQ(f.Format({{"user", "hi"}}), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(f.Continue({{"user", "b"}}), "\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatFormat, OtherNamesHaveNoFormat) {
  EXPECT_FALSE(ChatFormatNamed("none").has_value());
  EXPECT_FALSE(ChatFormatNamed("ChatML").has_value());
  EXPECT_FALSE(ChatFormatNamed("").has_value());
}

}  // namespace
}  // namespace omni_edge::text
