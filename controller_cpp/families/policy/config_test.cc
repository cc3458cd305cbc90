#include "families/policy/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace omni_edge::policy {
namespace {

class PolicyConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("policy_config_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "tokenizer.json") << "{}";
    stage_.artifact = dir_.string();
    stage_.execution_type = "llm_generation";
    for (const auto& [role, key] : {std::pair{"vision", "image"}, {"prefix", "prefix"}, {"expert", "step"}}) {
      stage_.graphs[role].graphs[key] = GraphRef{(dir_ / (std::string(role) + ".onnx")).string(), ""};
    }
    section_ = Json::parse(R"({"tokenizer": "tokenizer.json", "cameras": ["base", "wrist"], "image_size": 224,
        "image_tokens": 256, "hidden_size": 64, "prompt_tokens": 48, "bos_id": 2, "image_token_id": 1023,
        "prompt_suffix": "\n", "state_dim": 8, "action_dim": 2, "chunk_size": 10, "num_steps": 10, "layers": 2,
        "kv_heads": 1, "head_dim": 4, "mask_value": -65504, "rope_inv_freq": [1, 0.01], "expert_rope_inv_freq": [1, 0.01],
        "time_freq": [1570.8, 3.2, 1.57], "max_observation_age_ms": 500,
        "actions": {"schema_version": 1, "names": ["x", "grip"], "units": ["m", "normalized"], "dt_ms": 20}})");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Refusal(const Json& section) {
    auto c = ParsePolicy(section, stage_, "plan.stages[0].policy");
    return c.ok() ? "ok" : c.status().message();
  }

  std::filesystem::path dir_;
  StagePlan stage_;
  Json section_;
};

TEST_F(PolicyConfigTest, ReadsTheSectionAndSizesThePrefix) {
  auto c = ParsePolicy(section_, stage_, "plan.stages[0].policy");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->prefix_length(), 2 * 256 + 48);
  EXPECT_EQ((*c)->actions.names[1], "grip");
  EXPECT_EQ((*c)->max_observation_age_ms, 500);
  EXPECT_EQ((*c)->tokenizer, (dir_ / "tokenizer.json").string());
  EXPECT_EQ((*c)->time_freq.size(), 3u);
}

TEST_F(PolicyConfigTest, RefusesWhatNoPolicyCouldRunNamingTheField) {
  const auto with = [&](const char* key, Json value) {
    Json s = section_;
    s[key] = std::move(value);
    return Refusal(s);
  };
  EXPECT_NE(with("cameras", Json::array()).find(".cameras: 1 to 16"), std::string::npos);
  EXPECT_NE(with("cameras", {"a", "a"}).find("named twice"), std::string::npos);
  EXPECT_NE(with("image_std", {0.5, 0, 0.5}).find(".image_std[1]: a positive number"), std::string::npos);
  EXPECT_NE(with("chunk_size", 0).find("chunk_size"), std::string::npos);
  EXPECT_NE(with("hidden_size", int64_t(1) << 40).find("hidden_size: at most"), std::string::npos);
  EXPECT_NE(with("max_observation_age_ms", -1).find("max_observation_age_ms"), std::string::npos);
  EXPECT_NE(with("colour", 1).find("colour"), std::string::npos);
  EXPECT_NE(with("mask_value", 0).find(".mask_value: a finite value below -1000"), std::string::npos);
  EXPECT_NE(with("rope_inv_freq", {1, 2, 3}).find(".rope_inv_freq: 2 numbers expected, got 3"), std::string::npos);
  EXPECT_NE(with("time_freq", Json::array()).find(".time_freq: 1 to 65536 numbers"), std::string::npos);
  Json actions = section_["actions"];
  actions["names"] = {"x"};
  EXPECT_NE(with("actions", actions).find(".actions.names: 2 entries expected, got 1"), std::string::npos);
  actions = section_["actions"];
  actions["dt_ms"] = 0;
  EXPECT_NE(with("actions", actions).find("dt_ms"), std::string::npos);
  stage_.graphs.erase("expert");
  EXPECT_NE(Refusal(section_).find("expert"), std::string::npos);
  stage_.execution_type = "llm_ar";
  EXPECT_NE(Refusal(section_).find("one-shot"), std::string::npos);
}

}  // namespace
}  // namespace omni_edge::policy
