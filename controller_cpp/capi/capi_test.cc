#include "capi/omni_edge.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(CApi, VersionAndProtocol) {
  EXPECT_STREQ(oe_version(), OMNI_EDGE_VERSION);
  EXPECT_EQ(oe_protocol_version(), 2);
}

TEST(CApi, TheRequestDefaultsArePinned) {
  OeRequest r;
  oe_request_default(&r);
  EXPECT_EQ(r.prompt, nullptr);
  EXPECT_EQ(r.chat, 0);
  EXPECT_EQ(r.system_prompt, nullptr);
  EXPECT_EQ(r.prompt_ids, nullptr);
  EXPECT_EQ(r.n_prompt_ids, 0);
  EXPECT_EQ(r.continue_conversation, 0);
  EXPECT_EQ(r.max_new_tokens, 0);
  EXPECT_EQ(r.stop_strings, nullptr);
  EXPECT_EQ(r.n_stop_strings, 0);
  EXPECT_EQ(r.ignore_stop_tokens, 0);
  EXPECT_EQ(r.max_frames, 0);
  EXPECT_EQ(r.prebuffer_ms, -1.0);  // the plan's: 0 with an adaptive chunk schedule, 200 with a fixed one
  EXPECT_EQ(r.media, nullptr);
  EXPECT_EQ(r.n_media, 0);
  EXPECT_EQ(r.observation, nullptr);
  EXPECT_EQ(r.deadline_ms, 0.0);
  EXPECT_EQ(r.messages, nullptr);
  EXPECT_EQ(r.n_messages, 0);
  for (const OeSampling& s : {r.sampling, r.speech_sampling}) {
    EXPECT_EQ(s.use_plan_sampling, 1);
    EXPECT_EQ(s.temperature, 0.0f);
    EXPECT_EQ(s.top_k, 0);
    EXPECT_EQ(s.top_p, 1.0f);
    EXPECT_EQ(s.min_p, 0.0f);
    EXPECT_EQ(s.repetition_penalty, 1.0f);
    EXPECT_EQ(s.seed, 0u);
  }
  OeSessionConfig config;
  oe_session_config_default(&config);
  EXPECT_EQ(config.plan_path, nullptr);
  EXPECT_EQ(config.allow_unqualified, 0);
  EXPECT_EQ(config.threads, 0);
  EXPECT_EQ(config.ledger, nullptr);
  oe_request_default(nullptr);  // tolerated
  oe_session_config_default(nullptr);
}

TEST(CApi, SessionCallsRefuseMissingArguments) {
  OeSession* session = nullptr;
  OeError* error = oe_session_open(nullptr, &session);
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(oe_error_reason(error), "invalid_argument");
  oe_error_free(error);
  OeSessionConfig config;
  oe_session_config_default(&config);
  config.plan_path = "/nonexistent/plan.json";
  error = oe_session_open(&config, &session);
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(oe_error_reason(error), "file_missing");
  EXPECT_EQ(session, nullptr);
  oe_error_free(error);
  OeRequest r;
  oe_request_default(&r);
  error = oe_session_submit(nullptr, &r, nullptr, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(oe_error_reason(error), "invalid_argument");
  oe_error_free(error);
  error = oe_session_post(nullptr, &r, nullptr, nullptr, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(oe_error_reason(error), "invalid_argument");
  oe_error_free(error);
  oe_session_cancel(nullptr);
  oe_session_abort(nullptr);
  oe_session_close(nullptr);
}

TEST(CApi, DeprecatedRequestDefaultsUseThePlansSampling) {
  OeGenerateParams generate;
  oe_generate_params_default(&generate);
  OeSpeakParams speak;
  oe_speak_params_default(&speak);
  for (const OeSampling& s : {generate.sampling, speak.sampling}) {
    EXPECT_EQ(s.use_plan_sampling, 1);
    EXPECT_EQ(s.temperature, 0.0f);
    EXPECT_EQ(s.top_k, 0);
    EXPECT_EQ(s.top_p, 1.0f);
    EXPECT_EQ(s.min_p, 0.0f);
    EXPECT_EQ(s.repetition_penalty, 1.0f);
    EXPECT_EQ(s.seed, 0u);
  }
  EXPECT_EQ(speak.prebuffer_ms, -1.0);
  oe_generate_params_default(nullptr);  // tolerated
  oe_speak_params_default(nullptr);
}

TEST(CApi, AnEmbeddersOwnMemoryIsReservedInTheLedger) {
  OeLedger* ledger = nullptr;
  ASSERT_EQ(oe_ledger_create("{\"device_ram\": 1000}", &ledger), nullptr);
  int64_t first = 0, second = 0;
  ASSERT_EQ(oe_ledger_reserve(ledger, "connection", 600, &first), nullptr);
  EXPECT_NE(first, 0);
  OeError* refused = oe_ledger_reserve(ledger, "request body", 600, &second);
  ASSERT_NE(refused, nullptr);  // all or nothing: 400 are free
  EXPECT_STREQ(oe_error_reason(refused), "admission");
  EXPECT_NE(std::string(oe_error_message(refused)).find("connection"), std::string::npos);  // who holds the rest
  oe_error_free(refused);
  EXPECT_EQ(second, 0);
  oe_ledger_release(ledger, first);
  ASSERT_EQ(oe_ledger_reserve(ledger, "request body", 600, &second), nullptr);
  oe_ledger_release(ledger, second);
  oe_ledger_release(ledger, 0);  // nothing held: a no-op
  OeError* missing = oe_ledger_reserve(nullptr, "x", 1, &first);
  ASSERT_NE(missing, nullptr);
  EXPECT_STREQ(oe_error_reason(missing), "invalid_argument");
  oe_error_free(missing);
  oe_ledger_free(ledger);
}

TEST(CApi, ErrorsAreValuesNotExceptions) {
  char* json = nullptr;
  OeError* error = oe_manifest_verify("/nonexistent/artifact", &json, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(oe_error_reason(error), "manifest_unreadable");
  EXPECT_EQ(json, nullptr);
  oe_error_free(error);

  error = oe_manifest_verify(nullptr, &json, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(oe_error_reason(error), "invalid_argument");
  oe_error_free(error);
  oe_error_free(nullptr);
  oe_string_free(nullptr);
}

TEST(CApi, CanonicalJson) {
  char* out = nullptr;
  OeError* error = oe_contract_canonical_json(
      "buffer", R"({"object_id":"o","owner":"w","generation":"g","dtype":"int8","shape":[3],"nbytes":3})", &out);
  ASSERT_EQ(error, nullptr);
  EXPECT_NE(std::string(out).find("\"memory_domain\":\"host-copy\""), std::string::npos);
  oe_string_free(out);
  error = oe_contract_canonical_json("buffer", "{\"object_id\": 1}", &out);
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(oe_error_reason(error), "invalid_field");
  EXPECT_STREQ(oe_error_message(error), "buffer.object_id: expected a string, got integer");
  oe_error_free(error);
}

}  // namespace
