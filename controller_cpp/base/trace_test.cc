#include "base/trace.h"

#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace omni_edge::trace {
namespace {

size_t Spans(const Json& trace) {
  size_t n = 0;
  for (const Json& e : trace["traceEvents"]) n += e["ph"] == "X";
  return n;
}

TEST(Trace, NothingIsRecordedUntilEnabledAndClearStartsOver) {
  Recorder r;
  { Span s(&r, "off", "test"); }
  { Span s(nullptr, "no recorder", "test"); }
  EXPECT_EQ(Spans(r.ToJson()), 0u);
  r.Enable(true);
  { Span s(&r, "on", "test", Json{{"bytes", 4}}); }
  const Json t = r.ToJson();
  ASSERT_EQ(Spans(t), 1u);
  const Json& e = t["traceEvents"].back();
  EXPECT_EQ(e["name"], "on");
  EXPECT_EQ(e["ph"], "X");
  EXPECT_EQ(e["args"]["bytes"], 4);
  EXPECT_GE(e["ts"].get<double>(), 0.0);
  EXPECT_GE(e["dur"].get<double>(), 0.0);
  r.Clear();
  EXPECT_EQ(Spans(r.ToJson()), 0u);
}

TEST(Trace, ThreadsGetTheirOwnRowsAndNames) {
  Recorder r;
  r.Enable(true);
  r.NameThread("caller");
  { Span outer(&r, "outer", "test"); Span inner(&r, "inner", "test"); }
  std::thread worker([&] {
    r.NameThread("worker");
    Span s(&r, "work", "test");
  });
  worker.join();
  const Json t = r.ToJson();
  std::map<std::string, int64_t> tid_of_name, tid_of_span;
  for (const Json& e : t["traceEvents"]) {
    if (e["name"] == "thread_name") tid_of_name[e["args"]["name"]] = e["tid"];
    if (e["ph"] == "X") tid_of_span[e["name"]] = e["tid"];
  }
  EXPECT_EQ(tid_of_span["outer"], tid_of_name["caller"]);
  EXPECT_EQ(tid_of_span["inner"], tid_of_name["caller"]);
  EXPECT_EQ(tid_of_span["work"], tid_of_name["worker"]);
  EXPECT_NE(tid_of_name["caller"], tid_of_name["worker"]);
  // The inner span closes first and lies inside the outer one.
  double outer_end = 0, inner_end = 0, outer_ts = 0, inner_ts = 0;
  for (const Json& e : t["traceEvents"]) {
    if (e["name"] == "outer") outer_ts = e["ts"], outer_end = outer_ts + e["dur"].get<double>();
    if (e["name"] == "inner") inner_ts = e["ts"], inner_end = inner_ts + e["dur"].get<double>();
  }
  EXPECT_LE(outer_ts, inner_ts);
  EXPECT_LE(inner_end, outer_end);
}

}  // namespace
}  // namespace omni_edge::trace
