#include "server/chat_request.h"

#include <gtest/gtest.h>

#include <string>

namespace omni_edge::server {
namespace {

ChatCompletionRequest Parsed(const std::string& body) { return ParseChatCompletion(body).value(); }

TEST(ControllerRequest, CarriesTheConversationMediaAndLimits) {
  ChatCompletionRequest chat = Parsed(R"({"model": "m", "max_tokens": 9, "stop": ["x", "yz"], "messages": [
      {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "input_audio",
      "input_audio": {"data": "UklGRg==", "format": "wav"}}, {"type": "text", "text": "u"}]}]})");
  const ControllerRequest request(std::move(chat));
  const OeRequest& r = request.get();
  ASSERT_EQ(r.n_messages, 2);
  EXPECT_STREQ(r.messages[0].role, "system");
  EXPECT_STREQ(r.messages[1].content, "u");
  ASSERT_EQ(r.n_media, 1);
  EXPECT_STREQ(r.media[0].kind, "audio");
  EXPECT_EQ(std::string(static_cast<const char*>(r.media[0].data), r.media[0].size), "RIFF");
  ASSERT_EQ(r.n_stop_strings, 2);
  EXPECT_STREQ(r.stop_strings[1], "yz");
  EXPECT_EQ(r.max_new_tokens, 9);
  EXPECT_EQ(r.prompt, nullptr);
  EXPECT_EQ(r.sampling.use_plan_sampling, 1);  // nothing asked: the plan's
}

TEST(ControllerRequest, AnySamplingFieldTakesOpenAisDefaultsForTheRest) {
  const ControllerRequest seeded(Parsed(R"({"model": "m", "seed": 5, "messages": [{"role": "user", "content": "u"}]})"));
  const OeSampling& s = seeded.get().sampling;
  EXPECT_EQ(s.use_plan_sampling, 0);
  EXPECT_EQ(s.temperature, 1.0f);
  EXPECT_EQ(s.top_p, 1.0f);
  EXPECT_EQ(s.top_k, 0);
  EXPECT_EQ(s.seed, 5u);
  const ControllerRequest greedy(Parsed(R"({"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "u"}]})"));
  EXPECT_EQ(greedy.get().sampling.use_plan_sampling, 0);
  EXPECT_EQ(greedy.get().sampling.temperature, 0.0f);
}

}  // namespace
}  // namespace omni_edge::server
