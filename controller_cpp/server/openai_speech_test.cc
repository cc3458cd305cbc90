#include "server/openai_speech.h"

#include <gtest/gtest.h>

#include "base/base64.h"
#include "server/openai_common.h"

namespace omni_edge::server {
namespace {

std::string SpeechRefusal(const std::string& body) {
  auto r = ParseSpeech(body, 16);
  return r.ok() ? "ok" : r.status().reason() + " " + ErrorParam(r.status()) + " | " + r.status().message();
}

TEST(OpenAiSpeech, ReadsWhatTheOpenAiClientSends) {
  auto r = ParseSpeech(R"({"model": "tts", "input": "Hello", "voice": {"id": "default"}, "response_format": "pcm",
                           "speed": 1, "stream_format": "audio", "max_new_tokens": 9})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->input, "Hello");
  EXPECT_EQ(r->voice, "default");
  EXPECT_EQ(r->response_format, "pcm");
  EXPECT_EQ(r->stream_format, "audio");
  EXPECT_EQ(r->max_frames, 9);
  auto plain = ParseSpeech(R"({"model": "tts", "input": "Hi", "voice": "default"})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->response_format, "wav");  // vLLM-Omni's default: this server encodes no mp3
  EXPECT_EQ(plain->stream_format, "");
  auto sse = ParseSpeech(R"({"model": "tts", "input": "Hi", "stream": true})");
  ASSERT_TRUE(sse.ok());
  EXPECT_EQ(sse->stream_format, "sse");  // vLLM-Omni's stream flag without a format: events
}

TEST(OpenAiSpeech, RefusalsNameTheParam) {
  EXPECT_EQ(SpeechRefusal(R"({"model": "m", "input": "x", "response_format": "mp3"})").substr(0, 32),
            "invalid_request response_format ");
  EXPECT_EQ(SpeechRefusal(R"({"model": "m", "input": "x", "speed": 2})").substr(0, 22), "invalid_request speed ");
  EXPECT_EQ(SpeechRefusal(R"({"model": "m", "input": ""})").substr(0, 22), "invalid_request input ");
  EXPECT_EQ(SpeechRefusal(R"({"model": "m", "input": "seventeen bytes!!"})").substr(0, 22), "invalid_request input ");
  EXPECT_EQ(SpeechRefusal(R"({"model": "m", "input": "x", "instructions": "whisper"})").substr(0, 29),
            "invalid_request instructions ");
  EXPECT_EQ(SpeechRefusal(R"({"model": "m", "input": "x", "voice": 3})").substr(0, 22), "invalid_request voice ");
  EXPECT_EQ(SpeechRefusal(R"({"model": "m", "input": "x", "stream_format": "ogg"})").substr(0, 30),
            "invalid_request stream_format ");
  EXPECT_NE(SpeechRefusal(R"({"model": "m", "input": "x", "colour": "blue"})").find("colour"), std::string::npos);
  EXPECT_NE(SpeechRefusal(R"({"model": "m", "input": "a\u0000b"})").find("NUL"), std::string::npos);
  EXPECT_EQ(SpeechRefusal("[1]").substr(0, 16), "invalid_request ");
}

TEST(OpenAiSpeech, EventsCarryBase64AudioAndFrameUsage) {
  const Json delta = SpeechDelta(std::string("\x01\x00\xff\x7f", 4), "pcm");
  EXPECT_EQ(delta["type"], "speech.audio.delta");
  EXPECT_EQ(*Base64Decode(delta["audio"].get<std::string>()), std::string("\x01\x00\xff\x7f", 4));
  const Json done = SpeechDone(6, 20);
  EXPECT_EQ(done["usage"]["total_tokens"], 26);
  EXPECT_EQ(SpeechError("no", "server_error", "failed")["error"]["code"], "failed");
}

}  // namespace
}  // namespace omni_edge::server
