#include "realtime/realtime_config.h"

#include <gtest/gtest.h>

namespace omni_edge::realtime {
namespace {

Status Apply(const char* text, RealtimeConfig* c) { return ApplySession(Json::parse(text), c); }

TEST(RealtimeConfig, ReadsTheGaNestingAndTheBetaKeys) {
  RealtimeConfig c;
  ASSERT_TRUE(Apply(R"({"type": "realtime", "instructions": "Be brief.", "output_modalities": ["text"],
                        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}, "turn_detection": null},
                                  "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "default"}},
                        "max_output_tokens": 40})", &c).ok());
  EXPECT_EQ(c.instructions, "Be brief.");
  EXPECT_FALSE(c.audio_out);
  EXPECT_EQ(c.input_rate, 16000);
  EXPECT_FALSE(c.turn_detection.has_value());
  EXPECT_EQ(c.max_output_tokens, 40);
  ASSERT_TRUE(Apply(R"({"modalities": ["text", "audio"], "input_audio_format": "pcm16",
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 300}, "max_output_tokens": "inf"})",
                    &c).ok());
  EXPECT_TRUE(c.audio_out);
  ASSERT_TRUE(c.turn_detection.has_value());
  EXPECT_EQ(c.turn_detection->silence_duration_ms, 300);
  EXPECT_EQ(c.max_output_tokens, 0);
  const Json object = SessionObject(c, "sess_1", "m");
  EXPECT_EQ(object["audio"]["input"]["turn_detection"]["silence_duration_ms"], 300);
  RealtimeConfig round;
  EXPECT_TRUE(ApplySession(object, &round).ok());  // what clients echo back is taken
}

TEST(RealtimeConfig, RefusesWhatIsNotServedWholeAndNamed) {
  RealtimeConfig c;
  const RealtimeConfig before = c;
  for (const char* bad : {R"({"audio": {"output": {"voice": "alloy"}}})", R"({"input_audio_format": "g711_ulaw"})",
                          R"({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 4000}}}})",
                          R"({"tools": [{"type": "function"}]})", R"({"temperature": 0.7})",
                          R"({"max_output_tokens": 0})", R"({"type": "transcription"})",
                          R"({"instructions": "x", "output_modalities": ["video"]})"}) {
    const Status st = Apply(bad, &c);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_EQ(c.instructions, before.instructions) << bad;  // nothing of a refused update applies
  }
  EXPECT_NE(Apply(R"({"temperature": 0.7})", &c).message().find("session.temperature"), std::string::npos);
}

}  // namespace
}  // namespace omni_edge::realtime
