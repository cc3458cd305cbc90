#include "families/codec_lm/config.h"

#include <gtest/gtest.h>

namespace omni_edge::codec_lm {
namespace {

class CodecLmConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stage_.artifact = "/nonexistent-artifact";
    stage_.execution_type = "llm_ar";
    stage_.input_sources = {2};
    for (const auto& [role, key] : {std::pair{"embed", "step"}, {"embed", "chunk"}, {"prefill", "512"}, {"decode", "512"},
                                    {"lm_head", "step"}, {"condition", "step"}, {"text_embed", "step"}}) {
      stage_.graphs[role].graphs[key] = GraphRef{std::string("/g/") + role + key + ".onnx", ""};
    }
    section_ = Json::parse(R"({"decoder": {"hidden_size": 64, "num_layers": 2, "num_kv_heads": 2, "head_dim": 16,
        "vocab_size": 6562, "prefill_chunk": 32, "mask_value": -10000, "kv": {"mode": "full", "buckets": [512],
        "overflow": "refuse"}}, "end_code": 6561, "min_codes": 50, "max_codes": 4096, "text_eos": 5, "audio_bos": 6, "text_vocab": 4096,
        "thinker_hidden": 128, "sampling": {"temperature": 0.8, "top_p": 0.85, "top_k": 25, "repetition_penalty": 1.05,
        "seed": 42}, "repetition_window": 16})");
  }
  std::string Refusal(const Json& section) {
    auto c = ParseCodecLm(section, stage_, "plan.stages[3].codec_lm");
    return c.ok() ? "ok" : c.status().message();
  }

  StagePlan stage_;
  Json section_;
};

TEST_F(CodecLmConfigTest, ReadsTheSection) {
  auto c = ParseCodecLm(section_, stage_, "plan.stages[3].codec_lm");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->end_code, 6561);
  EXPECT_EQ((*c)->span_start, -1);
  EXPECT_FLOAT_EQ((*c)->sampling.repetition_penalty, 1.05f);
}

TEST_F(CodecLmConfigTest, RefusesWhatNoTalkerCouldRunNamingTheField) {
  auto with = [&](const char* key, const Json& value) {
    Json j = section_;
    j[key] = value;
    return Refusal(j);
  };
  EXPECT_NE(with("end_code", 6562).find(".end_code"), std::string::npos);
  EXPECT_NE(with("min_codes", 5000).find(".min_codes"), std::string::npos);
  EXPECT_NE(with("thinker_hidden", 0).find("thinker_hidden"), std::string::npos);
  EXPECT_NE(with("audio_bos", 4096).find("below text_vocab"), std::string::npos);
  EXPECT_NE(with("repetition_window", -1).find("repetition_window"), std::string::npos);
  EXPECT_NE(with("sampling", Json::parse(R"({"temperature": -1})")).find("sampling"), std::string::npos);
  Json j = section_;
  j.erase("audio_bos");
  EXPECT_NE(Refusal(j).find("audio_bos"), std::string::npos);
  stage_.graphs.erase("condition");
  EXPECT_NE(Refusal(section_).find("graphs.condition"), std::string::npos);
  stage_.input_sources = {};
  EXPECT_NE(Refusal(section_).find("one thinker stage"), std::string::npos);
}

}  // namespace
}  // namespace omni_edge::codec_lm
