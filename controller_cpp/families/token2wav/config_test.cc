#include "families/token2wav/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace omni_edge::token2wav {
namespace {

class Token2WavConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("token2wav_config_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "voices");
    for (const char* f : {"noise.json", "noise.bin", "voices/default.json", "voices/default.bin"}) std::ofstream(dir_ / f) << "{}";
    stage_.artifact = dir_.string();
    stage_.execution_type = "llm_generation";
    stage_.input_sources = {1};
    for (const auto& [role, key] : {std::pair{"encoder", "window"}, {"encoder", "last"}, {"estimator", "step"},
                                    {"hift", "window"}}) {
      stage_.graphs[role].graphs[key] = GraphRef{(dir_ / (std::string(role) + key + ".onnx")).string(), ""};
    }
    section_ = Json::parse(R"({"sample_rate": 24000, "samples_per_frame": 480, "window": 25, "context": 3,
        "silence": 4218, "vocab": 6561, "mel_bins": 80, "mel_cache": 8, "source_cache": 3840, "keep_recent": 100,
        "times": [0, 0.5, 1], "encoder": {"cnn": [1, 64, 6], "att": [2, 1, 4, 0, 32]},
        "estimator": {"cnn": [2, 2, 128, 2], "att": [2, 2, 4, 0, 32]}, "noise": "noise.json",
        "voices": {"default": "voices/default.json"}, "voice": "default"})");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Refusal(const Json& section) {
    auto c = ParseToken2Wav(section, stage_, "plan.stages[2].token2wav");
    return c.ok() ? "ok" : c.status().message();
  }

  std::filesystem::path dir_;
  StagePlan stage_;
  Json section_;
};

TEST_F(Token2WavConfigTest, ReadsTheSectionAndListsItsFiles) {
  auto c = ParseToken2Wav(section_, stage_, "plan.stages[2].token2wav");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->steps(), 2);
  EXPECT_EQ((*c)->files().size(), 4u);  // the noise and the voice, each index and data, hashed by the manifest
  EXPECT_EQ((*c)->voices.at("default"), (dir_ / "voices/default.json").string());
}

TEST_F(Token2WavConfigTest, RefusesWhatNoStageCouldRunNamingTheField) {
  auto with = [&](const char* key, const Json& value) {
    Json j = section_;
    j[key] = value;
    return Refusal(j);
  };
  EXPECT_NE(with("times", Json::array({0.0, 0.5, 0.4})).find(".times: ascending"), std::string::npos);
  EXPECT_NE(with("times", Json::array({0.0})).find(".times"), std::string::npos);
  EXPECT_NE(with("silence", 7000).find(".silence"), std::string::npos);
  EXPECT_NE(with("voice", "other").find(".voice"), std::string::npos);
  EXPECT_NE(with("voices", Json{{"default", "voices/missing.json"}}).find("does not exist"), std::string::npos);
  EXPECT_NE(with("encoder", Json{{"cnn", {1, 64, 6}}, {"att", {2, 1, 4, 5, 32}}}).find("frame axis"), std::string::npos);
  EXPECT_NE(with("estimator", Json{{"cnn", {1}}, {"att", {2, 2, 4}}}).find(".estimator.att"), std::string::npos);
  EXPECT_NE(with("source_cache", 5000).find(".source_cache"), std::string::npos);
  EXPECT_NE(with("pcm_dtype", "int8").find(".pcm_dtype"), std::string::npos);
  EXPECT_NE(with("keep_recent", 99).find(".keep_recent: must be even"), std::string::npos);
  EXPECT_NE(with("times", Json::array({0.0, 1e39})).find(".times"), std::string::npos);
  // Sizes whose product would overflow, or allocate gigabytes per cache, are refused by the parser.
  EXPECT_NE(with("estimator", Json{{"cnn", {2, 2, 128, 2}}, {"att", {1048576, 1, 1048576, 0, 1048576}}}).find("elements"),
            std::string::npos);
  EXPECT_NE(with("estimator", Json{{"cnn", {1024, 2, 1024, 1024}}, {"att", {2, 2, 4, 0, 32}}}).find("elements"),
            std::string::npos);
  EXPECT_NE(with("encoder", Json{{"cnn", {1, 64, 6}}, {"att", {2, 0, 4, 0, 32}}}).find(".encoder.att[1]"), std::string::npos);
  EXPECT_NE(with("window", -1).find(".window"), std::string::npos);
  Json j = section_;
  j["extra"] = 1;
  EXPECT_NE(Refusal(j), "ok");
  stage_.input_sources = {};
  EXPECT_NE(Refusal(section_).find("codes of one talker stage"), std::string::npos);
}

}  // namespace
}  // namespace omni_edge::token2wav
