// The executor and the stage runner with two small families of their own: "source" (an entry
// stage that emits `max_new_tokens` numbered items) and "relay" (passes its input's items on).
// Three-stage pipelines, fan-out, backpressure, refusals, and random cancel / abort / failure /
// throwing-listener points: every stream ends with exactly one terminal event (none after a
// fence), in order, no credit is left outstanding, and the session runs the next request.
#include "pipeline/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include "base/sha256.h"
#include "contract/manifest.h"

namespace omni_edge::pipeline {
namespace {
namespace fs = std::filesystem;

struct CountConfig final : StageConfig {
  int64_t fail_at = -1;    // this step fails
  int64_t delay_us = 0;    // per step
  bool resident = false;   // holds state a later request may continue
};

std::atomic<int64_t> g_emitted{0};  // items the source has emitted in this request

Result<std::shared_ptr<const StageConfig>> ParseCount(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  auto c = std::make_shared<CountConfig>();
  c->fail_at = r.Int("fail_at", false, -1, -1);
  c->delay_us = r.Int("delay_us", false, 0, 0);
  c->resident = r.Bool("resident", false, false);
  OE_RETURN_IF_ERROR(r.Done());
  return std::shared_ptr<const StageConfig>(std::move(c));
}

Output Item(int32_t value) {
  Output out;
  out.kind = "item";
  out.fields = {{"value", value}};
  out.payloads.push_back({"value", "int32", {1}, std::string(reinterpret_cast<const char*>(&value), sizeof value)});
  return out;
}

class SourceWorker final : public StageWorker {
 public:
  explicit SourceWorker(CountConfig c) : c_(c) {}
  Status Prepare(const Request& r) override {
    n_ = r.max_new_tokens;
    return Status::Ok();
  }
  Status Begin(StepContext&) override {
    i_ = 0;
    g_emitted = 0;
    return Status::Ok();
  }
  Result<StepResult> Step(StepContext& ctx) override {
    if (i_ >= n_) return StepResult::Finish("length");
    if (i_ == c_.fail_at) return Status::Error("boom", "the source failed at step " + std::to_string(i_));
    if (c_.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(c_.delay_us));
    ++g_emitted;
    OE_RETURN_IF_ERROR(ctx.Emit(Item(int32_t(i_++))).status());
    return StepResult::Continue();
  }
  Json Metrics(const StepContext&) const override { return {{"items", i_}}; }
  std::vector<Placement> placements() const override { return {}; }
  bool resident() const override { return c_.resident; }
  bool continues(const Request& r) const override { return r.continue_conversation; }

 private:
  CountConfig c_;
  int64_t n_ = 0, i_ = 0;
};

class RelayWorker final : public StageWorker {
 public:
  explicit RelayWorker(CountConfig c) : c_(c) {}
  Status Prepare(const Request&) override { return Status::Ok(); }
  Status Begin(StepContext&) override {
    i_ = 0;
    return Status::Ok();
  }
  Result<StepResult> Step(StepContext& ctx) override {
    auto in = ctx.Next(0);
    if (!in) return ctx.stopping() ? StepResult::Continue() : StepResult::Finish(ctx.ended(0).value("finish_reason", ""));
    if (i_ == c_.fail_at) return Status::Error("relay_failed", "the relay failed at item " + std::to_string(i_));
    if (c_.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(c_.delay_us));
    ++i_;
    OE_RETURN_IF_ERROR(ctx.Emit(Item(in->fields.value("value", -1))).status());
    return StepResult::Continue();
  }
  Json Metrics(const StepContext&) const override { return {{"relayed", i_}}; }
  std::vector<Placement> placements() const override { return {}; }

 private:
  CountConfig c_;
  int64_t i_ = 0;
};

template <typename Worker>
class CountFamily final : public Family {
 public:
  CountFamily(std::string name, bool entry) : name_(std::move(name)), entry_(entry) {}
  std::string section() const override { return name_; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan&, const std::string& where) const override {
    return ParseCount(j, where);
  }
  StageMemory Memory(const StagePlan&) const override { return {1 << 10, 1 << 10}; }
  std::vector<std::string> entry_reads(const StagePlan&) const override { return entry_ ? std::vector<std::string>{"text"} : std::vector<std::string>{}; }
  Result<std::unique_ptr<StageWorker>> Open(const StagePlan& stage, BackendPool&) const override {
    return std::unique_ptr<StageWorker>(std::make_unique<Worker>(*stage.config_as<CountConfig>()));
  }

 private:
  std::string name_;
  bool entry_;
};

const FamilyRegistry& Families() {
  static const FamilyRegistry registry = [] {
    FamilyRegistry r;
    r.Add(std::make_unique<CountFamily<SourceWorker>>("source", true));
    r.Add(std::make_unique<CountFamily<RelayWorker>>("relay", false));
    return r;
  }();
  return registry;
}

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// An artifact with nothing but its two passing reports: enough for a stage without graphs.
fs::path Artifact(const fs::path& dir) {
  Json files = Json::object();
  for (const char* kind : {"numerical", "task"}) {
    const Json report = {{"schema_version", 1}, {"kind", kind}, {"checkpoint_id", "count"}, {"checkpoint_revision", "1"},
                         {"precision", "fp32"}, {"shape_bucket", "none"}, {"target_abi", "host"},
                         {"checks", {{{"name", std::string(kind) == "numerical" ? "sqnr_db" : "agreement"},
                                      {"observed", 1.0}, {"limit", 1.0}, {"comparison", ">="}}}}};
    Write(dir / (std::string(kind) + ".json"), report.dump());
    files[std::string(kind) + ".json"] = Sha256File((dir / (std::string(kind) + ".json")).string()).value();
  }
  const Json artifact = {{"checkpoint_id", "count"}, {"checkpoint_revision", "1"}, {"precision", "fp32"},
                         {"runtime", "none"}, {"runtime_version", "0"}, {"target_abi", "host"}, {"adapter_version", "1"},
                         {"exporter_version", "0"}, {"compiler_version", "none"}, {"shape_bucket", "none"},
                         {"state_layout_version", 1}, {"numerical_validation", {{"file", "numerical.json"}, {"passed", true}}},
                         {"task_validation", {{"file", "task.json"}, {"passed", true}}}};
  Write(dir / contract::kManifestName,
        Json{{"schema_version", 2}, {"component", "count"}, {"files", files}, {"metadata", {{"artifact", artifact}}}}.dump());
  return dir;
}

Json Stage(int64_t id, const std::string& family, std::vector<int64_t> sources, bool final_output, Json section = Json::object()) {
  Json s = {{"stage_id", id}, {"model_stage", family}, {"execution_type", "llm_generation"}, {"input_sources", sources},
            {"artifact", "art"}, {"graphs", Json::object()}, {family, section}};
  if (final_output) s["final_output"] = true, s["final_output_type"] = "items" + std::to_string(id);
  return s;
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("session_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    Artifact(dir_ / "art");
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<std::unique_ptr<Session>> Open(Json stages, int64_t max_events = 4) {
    Json plan = {{"plan_version", 1}, {"stages", stages}, {"stream_limits", {{"max_events", max_events}, {"max_bytes", 1 << 20}}}};
    auto parsed = ParsePlan(plan, dir_.string(), Families());
    if (!parsed.ok()) return parsed.status();
    parsed->path = (dir_ / "plan.json").string();
    return Session::Open(std::move(parsed).value(), SessionOptions{}, Families());
  }
  static Json Chain(Json source = Json::object(), Json relay = Json::object()) {
    return Json::array({Stage(0, "source", {}, false, source), Stage(1, "relay", {0}, false, relay),
                        Stage(2, "relay", {1}, true)});
  }

  fs::path dir_;
};

struct Seen {
  std::map<std::string, std::vector<Json>> events;  // by stream
  bool Terminated(const std::string& stream) const {
    auto it = events.find(stream);
    return it != events.end() && !it->second.empty() && it->second.back().value("kind", "") != "item";
  }
};

// Every stream's events: increasing seq, nothing after its terminal event, exactly one terminal.
void ExpectWellFormed(const Seen& seen, bool fenced) {
  for (const auto& [stream, events] : seen.events) {
    int64_t last = 0;
    int terminals = 0;
    for (const auto& e : events) {
      EXPECT_EQ(terminals, 0) << stream << ": an event after the terminal one";
      EXPECT_GT(e.value("seq", int64_t(0)), last) << stream;
      last = e.value("seq", int64_t(0));
      terminals += e.value("kind", "") != "item";
    }
    EXPECT_EQ(terminals, fenced ? 0 : 1) << stream;
  }
}

void ExpectNoCredit(const Session& s) {
  for (const auto& c : s.LastStreamCounters()) {
    EXPECT_EQ(c.outstanding_events, 0);
    EXPECT_EQ(c.outstanding_bytes, 0);
    EXPECT_EQ(c.waiting_producers, 0);
  }
}

TEST_F(SessionTest, ThreeStagesDeliverEveryItemInOrder) {
  auto session = Open(Chain());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  Request r;
  r.max_new_tokens = 50;
  std::vector<int> values;
  auto result = (*session)->Submit(r, [&](const SessionEvent& e) {
    if (!e.terminal) values.push_back(e.json["value"].get<int>());
    else EXPECT_EQ(e.json["kind"], "done");
    return true;
  });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(values.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(values[size_t(i)], i);
  EXPECT_EQ((*result)["items2"]["finish_reason"], "length");
  EXPECT_EQ((*result)["items2"]["relayed"], 50);
  ExpectNoCredit(**session);
}

TEST_F(SessionTest, AFinalStageThatFeedsAnotherGivesEachConsumerItsOwnStream) {
  Json stages = Json::array({Stage(0, "source", {}, true), Stage(1, "relay", {0}, true)});
  auto session = Open(stages, 2);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  Request r;
  r.max_new_tokens = 20;
  Seen seen;
  auto result = (*session)->Submit(r, [&](const SessionEvent& e) {
    seen.events[e.stream].push_back(e.json);
    return true;
  });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(seen.events["items0"].size(), 21u);
  EXPECT_EQ(seen.events["items1"].size(), 21u);
  ExpectWellFormed(seen, false);
  ExpectNoCredit(**session);
}

TEST_F(SessionTest, ASlowConsumerHoldsEveryProducerWithinItsCredit) {
  auto session = Open(Chain(), 2);  // three edges of two events each
  ASSERT_TRUE(session.ok());
  Request r;
  r.max_new_tokens = 40;
  int64_t consumed = 0, most_ahead = 0;
  auto result = (*session)->Submit(r, [&](const SessionEvent& e) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!e.terminal) ++consumed;
    most_ahead = std::max(most_ahead, g_emitted.load() - consumed);
    return true;
  });
  ASSERT_TRUE(result.ok());
  // Each edge holds at most 2 events, each relay one in hand and the source one waiting for
  // credit: the source is never more than 2 + 1 + 2 + 1 + 2 + 1 items ahead of the consumer,
  // however slow it is.
  EXPECT_LE(most_ahead, 9);
  EXPECT_GE(most_ahead, 3);  // and it does run ahead: the stages work concurrently
}

TEST_F(SessionTest, AFailingStageEndsEveryStreamAndNamesWhereItBegan) {
  auto session = Open(Chain({{"fail_at", 7}}));
  ASSERT_TRUE(session.ok());
  Request r;
  r.max_new_tokens = 30;
  Seen seen;
  auto result = (*session)->Submit(r, [&](const SessionEvent& e) {
    seen.events[e.stream].push_back(e.json);
    return true;
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().reason(), "boom");
  ASSERT_TRUE(seen.Terminated("items2"));
  const Json& terminal = seen.events["items2"].back();
  EXPECT_EQ(terminal["kind"], "error");
  EXPECT_NE(terminal["error"].get<std::string>().find("stage 1: stage 0: boom: the source failed at step 7"), std::string::npos)
      << terminal.dump();
  ExpectWellFormed(seen, false);
  r.max_new_tokens = 5;  // the next request, short of the failing step, is whole
  EXPECT_TRUE((*session)->Submit(r, [](const SessionEvent&) { return true; }).ok());
}

TEST_F(SessionTest, RefusesPlansTheExecutorCannotRun) {
  auto cycle = Open(Json::array({Stage(0, "source", {}, true), Stage(1, "relay", {0, 2}, true), Stage(2, "relay", {1}, false)}));
  ASSERT_FALSE(cycle.ok());
  EXPECT_NE(cycle.status().message().find("cycle"), std::string::npos);
  auto unread = Open(Json::array({Stage(0, "source", {}, false), Stage(1, "source", {}, true)}));
  ASSERT_FALSE(unread.ok());
  EXPECT_NE(unread.status().message().find("no stage reads its output"), std::string::npos) << unread.status().message();
  auto two_entries = Open(Json::array({Stage(0, "source", {}, true), Stage(1, "source", {}, true)}));
  ASSERT_FALSE(two_entries.ok());
  EXPECT_NE(two_entries.status().message().find("both read the request's text"), std::string::npos);
  auto relay_entry = Open(Json::array({Stage(0, "relay", {}, true)}));
  ASSERT_FALSE(relay_entry.ok());
  EXPECT_NE(relay_entry.status().message().find("cannot be an entry stage"), std::string::npos);
}

TEST_F(SessionTest, AnAbortWithNoRequestInFlightKeepsTheConversation) {
  auto session = Open(Json::array({Stage(0, "source", {}, true, {{"resident", true}})}));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  Request r;
  r.max_new_tokens = 3;
  auto all = [](const SessionEvent&) { return true; };
  ASSERT_TRUE((*session)->Submit(r, all).ok());
  (*session)->Abort();  // idle: nothing to fence
  r.continue_conversation = true;
  auto again = (*session)->Submit(r, all);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*session)->epoch(), 0);
  // Fenced in flight: the next request runs at the next epoch, on no conversation.
  std::thread fence([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (*session)->Abort();
  });
  r.max_new_tokens = 1 << 20;
  auto fenced = (*session)->Submit(r, all);
  fence.join();
  EXPECT_EQ(fenced.status().reason(), "aborted");
  EXPECT_EQ((*session)->epoch(), 1);
  EXPECT_EQ((*session)->Submit(r, all).status().reason(), "no_conversation");
  r.continue_conversation = false;
  r.max_new_tokens = 2;
  EXPECT_TRUE((*session)->Submit(r, all).ok());
}

TEST_F(SessionTest, AStreamThatRefusesEvenTheTerminalEventEndsTheRequest) {
  Json plan = {{"plan_version", 1}, {"stages", Chain()}, {"stream_limits", {{"max_events", 4}, {"max_bytes", 24}}}};
  auto parsed = ParsePlan(plan, dir_.string(), Families());
  ASSERT_TRUE(parsed.ok());
  auto tiny = Session::Open(std::move(parsed).value(), SessionOptions{}, Families());
  ASSERT_TRUE(tiny.ok());
  Request r;
  r.max_new_tokens = 5;
  auto result = (*tiny)->Submit(r, [](const SessionEvent&) { return true; });  // returns: no stage waits forever
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().reason(), "payload_too_large") << result.status().ToString();
  ExpectNoCredit(**tiny);
}

TEST_F(SessionTest, RefusesAJoinOfOneStagesOutput) {
  auto diamond = Open(Json::array({Stage(0, "source", {}, false), Stage(1, "relay", {0}, false), Stage(2, "relay", {0}, false),
                                   Stage(3, "relay", {1, 2}, true)}));
  ASSERT_FALSE(diamond.ok());
  EXPECT_NE(diamond.status().message().find("joins of one stage's output are not supported"), std::string::npos)
      << diamond.status().message();
}

// Random cancel, abort, failure and throwing-listener points, 200 requests on one session.
TEST_F(SessionTest, RandomCancelAbortFailureAndListenerPointsLeaveNothingBehind) {
  Json stages = Json::array({Stage(0, "source", {}, true, {{"delay_us", 50}}), Stage(1, "relay", {0}, false),
                             Stage(2, "relay", {1}, true)});
  auto opened = Open(stages, 3);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Session& session = **opened;
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const int mode = int(rng() % 4);  // 0 listener cancels, 1 cancel from a thread, 2 abort, 3 listener throws
    const int at = int(rng() % 30);
    Request r;
    r.max_new_tokens = 25;
    Seen seen;
    int delivered = 0;
    std::thread other;
    if (mode == 1 || mode == 2) {
      other = std::thread([&, mode, at] {
        std::this_thread::sleep_for(std::chrono::microseconds(at * 60));
        mode == 1 ? session.Cancel() : session.Abort();
      });
    }
    auto result = session.Submit(r, [&](const SessionEvent& e) {
      seen.events[e.stream].push_back(e.json);
      if (++delivered == at && mode == 3) throw std::runtime_error("listener broke");
      return !(mode == 0 && delivered == at);
    });
    if (other.joinable()) other.join();
    const bool fenced = !result.ok() && result.status().reason() == "aborted";
    ExpectWellFormed(seen, fenced);
    if (mode == 3 && delivered >= at) EXPECT_EQ(result.status().reason(), "listener_failed");
    ExpectNoCredit(session);
    // The session is whole: a plain request runs to the end.
    Request plain;
    plain.max_new_tokens = 3;
    int items = 0;
    auto again = session.Submit(plain, [&](const SessionEvent& e) {
      items += !e.terminal;
      return true;
    });
    ASSERT_TRUE(again.ok()) << "round " << round << ": " << again.status().ToString();
    EXPECT_EQ(items, 6);  // three items on each of the two streams
    if (HasFailure()) FAIL() << "round " << round << " mode " << mode << " at " << at;
  }
}

}  // namespace
}  // namespace omni_edge::pipeline
