#include "pipeline/request.h"

#include <gtest/gtest.h>

namespace omni_edge::pipeline {
namespace {

Result<Request> Parse(const std::string& text) { return RequestFromJson(*ParseJson(text, "test")); }

TEST(Request, ReadsAnObservationWithItsNoiseShape) {
  auto r = Parse(R"({"prompt": "pick", "deadline_ms": 40, "observation": {"timestamp_ms": 1764900000000.5,
      "images": [{"camera": "base", "path": "a.png"}, {"camera": "wrist", "path": "b.png"}],
      "state": [0.5, -1], "noise": [[1, 2, 3], [4, 5, 6]], "noise_seed": 9}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->observation.has_value());
  const Observation& o = *r->observation;
  EXPECT_EQ(o.timestamp_ms, 1764900000000.5);
  ASSERT_EQ(o.images.size(), 2u);
  EXPECT_EQ(o.images[1].camera, "wrist");
  EXPECT_EQ(o.images[1].image.kind, "image");
  EXPECT_EQ(o.state, (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(o.noise_shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(o.noise.size(), 6u);
  EXPECT_EQ(o.noise_seed, 9u);
  EXPECT_EQ(r->deadline_ms, 40);
  EXPECT_FALSE(Parse(R"({"prompt": "x"})")->observation.has_value());
  EXPECT_TRUE(ToJson(*r)["observation"]["noise_shape"] == Json::array({2, 3}));
}

TEST(Request, RefusesABadObservationNamingTheField) {
  const auto reason = [](const std::string& text) {
    auto r = Parse(text);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(reason(R"({"observation": {"noise": [[1, 2], [3]]}})").find("request.observation.noise[1]: every row has 2"),
            std::string::npos);
  EXPECT_NE(reason(R"({"observation": {"noise": [[1], 2]}})").find("rows of numbers, or numbers"), std::string::npos);
  EXPECT_NE(reason(R"({"observation": {"state": [1, "x"]}})").find("request.observation.state[1]: expected a number"),
            std::string::npos);
  EXPECT_NE(reason(R"({"observation": {"state": [1e39]}})").find("not a finite float32"), std::string::npos);
  EXPECT_NE(reason(R"({"observation": {"timestamp_ms": -5}})").find("timestamp_ms"), std::string::npos);
  EXPECT_NE(reason(R"({"observation": {"images": [{"camera": "a"}]}})").find("path"), std::string::npos);
  EXPECT_NE(reason(R"({"observation": {"color": 1}})").find("color"), std::string::npos);
  EXPECT_NE(reason(R"({"deadline_ms": -1})").find("deadline_ms"), std::string::npos);
}

TEST(Request, AConversationIsReadWholeAndStandsAlone) {
  auto r = Parse(R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": ""}, {"role": "user", "content": "Why?"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[3].role, "user");
  EXPECT_EQ(r->messages[3].content, "Why?");
  EXPECT_EQ(ToJson(*r)["messages"][0], (Json{{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_TRUE(Parse(ToJson(*r).dump()).ok());  // what ToJson writes reads back
  const auto reason = [](const std::string& text) {
    auto parsed = Parse(text);
    return parsed.ok() ? std::string("ok") : parsed.status().message();
  };
  EXPECT_NE(reason(R"({"messages": [{"role": "user", "content": 3}]})").find("request.messages[0].content"), std::string::npos);
  EXPECT_NE(reason(R"({"messages": [{"role": "user", "content": "x", "name": "n"}]})").find("messages[0].name: unknown"),
            std::string::npos);
  EXPECT_NE(reason(R"({"messages": [{"role": "tool", "content": "x"}]})").find("must be system, user or assistant"),
            std::string::npos);
  EXPECT_NE(reason(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})")
                .find("the last turn is the user's"),
            std::string::npos);
  EXPECT_NE(reason(R"({"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "y"},
      {"role": "user", "content": "z"}]})").find("messages[1].role: a system turn comes first only"),
            std::string::npos);
  EXPECT_NE(reason(R"({"prompt_ids": [1], "messages": [{"role": "user", "content": "x"}]})").find("whole conversation"),
            std::string::npos);
  EXPECT_NE(reason(R"({"continue_conversation": true, "messages": [{"role": "user", "content": "x"}]})")
                .find("whole conversation"),
            std::string::npos);
}

}  // namespace
}  // namespace omni_edge::pipeline
