#include "server/openai_chat.h"

#include <gtest/gtest.h>

#include "base/base64.h"

namespace omni_edge::server {
namespace {

std::string Refusal(const std::string& body, ChatLimits limits = {}) {
  auto r = ParseChatCompletion(body, limits);
  return r.ok() ? "ok" : r.status().message();
}

TEST(OpenAiChat, ReadsWhatTheOpenAiClientSends) {
  auto r = ParseChatCompletion(R"({"model": "tiny", "messages": [
      {"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi", "name": "ann"},
      {"role": "assistant", "content": null}, {"role": "user", "content": [{"type": "text", "text": "Why"},
      {"type": "text", "text": "?"}]}], "max_completion_tokens": 12, "max_tokens": 99, "temperature": 0,
      "top_p": 0.5, "seed": 7, "stop": ["\n\n"], "stream": true, "stream_options": {"include_usage": true},
      "n": 1, "user": "u", "frequency_penalty": 0})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model, "tiny");
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[0].role, "system");  // a developer message is the system turn
  EXPECT_EQ(r->messages[2].text, "");
  EXPECT_EQ(r->messages[3].text, "Why\n?");  // text parts joined by newlines
  EXPECT_EQ(r->max_tokens, 12);  // max_completion_tokens wins over the legacy max_tokens
  EXPECT_EQ(*r->temperature, 0.0);
  EXPECT_EQ(*r->top_p, 0.5);
  EXPECT_EQ(*r->seed, 7u);
  EXPECT_EQ(r->stop, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r->stream && r->include_usage && !r->audio_out);
}

// openai's model_dump of a returned message keeps every key: sent back, it is read.
TEST(OpenAiChat, AReturnedAssistantMessageSentBackIsRead) {
  auto r = ParseChatCompletion(R"({"model": "m", "top_k": -1, "ignore_eos": true, "messages": [
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello", "refusal": null,
      "annotations": [], "audio": null, "tool_calls": null, "function_call": null}, {"role": "user", "content": "Why?"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->messages[1].text, "Hello");
  EXPECT_EQ(*r->top_k, 0);  // vLLM's -1: no top-k
  EXPECT_TRUE(r->ignore_eos);
}

TEST(OpenAiChat, MediaPartsOfTheLastUserMessageAreDecoded) {
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + "rest";
  auto r = ParseChatCompletion(R"({"model": "m", "modalities": ["text", "audio"], "audio": {"format": "pcm16",
      "voice": {"id": "default"}}, "messages": [{"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,)" + Base64Encode(png) + R"(", "detail": "low"}},
      {"type": "input_audio", "input_audio": {"data": ")" + Base64Encode("RIFF") + R"(", "format": "wav"}},
      {"type": "text", "text": "What is this?"}]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->media.size(), 2u);
  EXPECT_EQ(r->media[0].kind, "image");
  EXPECT_EQ(r->media[0].bytes, png);
  EXPECT_EQ(r->media[1].kind, "audio");
  EXPECT_EQ(r->media[1].bytes, "RIFF");
  EXPECT_EQ(r->messages[0].text, "What is this?");
  EXPECT_TRUE(r->audio_out);
  EXPECT_EQ(r->audio_format, "pcm16");
  EXPECT_EQ(r->voice, "default");
}

TEST(OpenAiChat, RefusalsNameTheParam) {
  const std::string user = R"({"role": "user", "content": "x"})";
  const auto with = [&](const std::string& fields) { return R"({"model": "m", "messages": [)" + user + "]" + fields + "}"; };
  EXPECT_NE(Refusal("not json").find("not JSON"), std::string::npos);
  EXPECT_NE(Refusal("[1]").find("the body is not a JSON object"), std::string::npos);
  EXPECT_EQ(ParseChatCompletion("{}").status().reason(), "invalid_request");  // the field readers' refusals too
  EXPECT_NE(Refusal(R"({"messages": [)" + user + "]}").find("request.model"), std::string::npos);
  EXPECT_NE(Refusal(with(R"(, "tools": [])")).find("request.tools: unknown field"), std::string::npos);
  EXPECT_NE(Refusal(with(R"(, "temperature": 3)")).find("temperature: must be a number in [0"), std::string::npos);
  EXPECT_NE(Refusal(with(R"(, "top_p": 0)")).find("top_p: must be a number in (0, 1]"), std::string::npos);
  EXPECT_NE(Refusal(with(R"(, "stop": "a\u0000b")")).find("stop: a NUL character"), std::string::npos);
  EXPECT_NE(Refusal(R"({"model": "m", "messages": [{"role": "user", "content": "x\u0000"}]})").find("messages[0].content: a NUL"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"model": "m", "messages": [{"role": "assistant", "content": "a", "tool_calls": [{"id": "c"}]},
      )" + user + "]}").find("messages[0].tool_calls: tools are not served"),
            std::string::npos);
  EXPECT_NE(Refusal(with(R"(, "n": 2)")).find("n: only 1"), std::string::npos);
  EXPECT_NE(Refusal(with(R"(, "max_tokens": 0)")).find("request.max_tokens"), std::string::npos);
  EXPECT_NE(Refusal(with(R"(, "stop": ["a", "b", "c", "d", "e"])")).find("stop: expected"), std::string::npos);
  EXPECT_NE(Refusal(with(R"(, "audio": {"format": "mp3", "voice": "v"})")).find("audio.format: must be wav or pcm16"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"model": "m", "messages": []})").find("messages: from 1 to 256"), std::string::npos);
  EXPECT_NE(Refusal(R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})").find("messages[0].role"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "file"}]}]})")
                .find("messages[0].content[0].type: must be text, image_url or input_audio"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url",
      "image_url": {"url": "https://example.com/a.png"}}]}]})").find("messages[0].content[0].image_url.url: a data URL"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url",
      "image_url": {"url": "data:image/png;base64,Zg="}}]}, )" + user + "]}").find("in the last message"),
            std::string::npos);
  ChatLimits tiny;
  tiny.max_media_bytes = 2;
  EXPECT_NE(Refusal(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "input_audio",
      "input_audio": {"data": "Zm9v", "format": "wav"}}]}]})", tiny).find("3 bytes (at most 2)"),
            std::string::npos);
  EXPECT_EQ(ErrorParam(ParseChatCompletion(with(R"(, "temperature": 3)")).status()), "temperature");
  EXPECT_EQ(ErrorParam(ParseChatCompletion(R"({"messages": [)" + user + "]}").status()), "model");
}

TEST(OpenAiChat, ResponseObjectsHaveTheFieldsTheClientReads) {
  const CompletionHead head{"chatcmpl-1", 1765000000, "tiny"};
  const Json chunk = Chunk(head, {{"content", "Hi"}});
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(Chunk(head, Json::object(), FinishReason("stop_string"))["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(FinishReason("length"), "length");
  EXPECT_EQ(UsageChunk(head, Usage(5, 3))["usage"]["total_tokens"], 8);
  EXPECT_TRUE(UsageChunk(head, Usage(5, 3))["choices"].empty());
  const Json done = Completion(head, "Paris", "stop", Usage(5, 1));
  EXPECT_EQ(done["object"], "chat.completion");
  EXPECT_EQ(done["choices"][0]["message"]["content"], "Paris");
  EXPECT_EQ(done["choices"][0]["message"]["role"], "assistant");
  const Json error = ErrorBody("temperature: must be a number", "invalid_request_error", "temperature", "");
  EXPECT_EQ(error["error"]["param"], "temperature");
  EXPECT_TRUE(error["error"]["code"].is_null());
}

}  // namespace
}  // namespace omni_edge::server
