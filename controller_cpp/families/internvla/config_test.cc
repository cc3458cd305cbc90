#include "families/internvla/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace omni_edge::internvla {
namespace {

class InternVlaConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("internvla_config_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "tokenizer.json") << "{}";
    stage_.artifact = dir_.string();
    stage_.execution_type = "llm_generation";
    for (const auto& [role, key] : {std::pair{"vision", "image"}, {"frame", "frame"}, {"context", "context"}, {"expert", "step"}}) {
      stage_.graphs[role].graphs[key] = GraphRef{(dir_ / (std::string(role) + ".onnx")).string(), ""};
    }
    // The tiny preset's exported section (shortened frequencies).
    section_ = Json::parse(R"({"tokenizer": "tokenizer.json", "cameras": ["front", "wrist"], "camera_slots": 3,
        "history": 2, "image_resolution": [224, 224], "patch": 16, "merge": 2, "temporal_patch": 2,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "image_tokens": 49, "prompt_tokens": 48,
        "image_token_id": 151655, "vision_start_id": 151652, "vision_end_id": 151653, "pad_id": 151643,
        "cosmos_size": 256, "frame_rows": 16, "vlm_hidden": 64, "expert_hidden": 4, "layers": 2, "kv_heads": 2,
        "head_dim": 4, "chunk_size": 10, "max_state_dim": 8, "max_action_dim": 8, "state_dim": 7, "action_dim": 2,
        "num_steps": 10, "mask_value": -65504.0, "rope_inv_freq": [1.0, 0.145], "mrope_section": [24, 20, 20],
        "time_scaling": [1570.7963267948965, 1.5707963267948966], "max_observation_age_ms": 1000.0,
        "max_history_gap_ms": 2000.0, "action_mode": "delta",
        "actions": {"schema_version": 1, "names": ["x", "grip"], "units": ["m", "normalized"], "dt_ms": 20}})");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Refusal(const Json& section) {
    auto c = ParseInternVla(section, stage_, "plan.stages[0].internvla");
    return c.ok() ? "ok" : c.status().message();
  }
  std::string With(const char* key, const Json& value) {
    Json s = section_;
    s[key] = value;
    return Refusal(s);
  }

  std::filesystem::path dir_;
  StagePlan stage_;
  Json section_;
};

TEST_F(InternVlaConfigTest, ReadsTheSectionAndSizesTheContext) {
  auto c = ParseInternVla(section_, stage_, "plan.stages[0].internvla");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->prefix_length(), 3 * (49 + 2) + 48);
  EXPECT_EQ((*c)->history_length(), 3 * 2 * 16);
  EXPECT_EQ((*c)->context_length(), 201 + 96);
  EXPECT_DOUBLE_EQ((*c)->time_scaling[0], 1570.7963267948965);  // read as float64
  EXPECT_EQ((*c)->actions.names[1], "grip");
  EXPECT_EQ((*c)->tokenizer, (dir_ / "tokenizer.json").string());
}

TEST_F(InternVlaConfigTest, RefusesWhatItCannotRunByName) {
  EXPECT_NE(With("cameras", Json::array({"a", "b", "c", "d"})).find("1 to camera_slots"), std::string::npos);
  EXPECT_NE(With("cameras", Json::array({"a", "a"})).find("named twice"), std::string::npos);
  EXPECT_NE(With("image_resolution", Json::array({224, 200})).find("multiples of patch x merge"), std::string::npos);
  EXPECT_NE(With("image_tokens", 50).find("49 merged rows"), std::string::npos);
  EXPECT_NE(With("state_dim", 9).find("max_state_dim"), std::string::npos);
  EXPECT_NE(With("rope_inv_freq", Json::array({1.0})).find("2 numbers expected"), std::string::npos);
  EXPECT_NE(With("time_scaling", Json::array({1.0, "x"})).find("a finite number"), std::string::npos);
  EXPECT_NE(With("mrope_section", Json::array({24, 20})).find("three section sizes"), std::string::npos);
  EXPECT_NE(With("action_mode", "relative").find("delta or absolute"), std::string::npos);
  EXPECT_NE(With("max_history_gap_ms", -1).find("max_history_gap_ms"), std::string::npos);
  EXPECT_NE(With("layers", 5000).find("at most 1024"), std::string::npos);
  EXPECT_NE(With("mask_value", 0).find("below -1000"), std::string::npos);
  EXPECT_NE(With("extra", 1).find("extra"), std::string::npos);  // unknown fields are refused
  Json s = section_;
  s.erase("history");
  EXPECT_NE(Refusal(s).find("history"), std::string::npos);
  stage_.graphs.erase("frame");
  EXPECT_NE(Refusal(section_).find("frame"), std::string::npos);
}

}  // namespace
}  // namespace omni_edge::internvla
