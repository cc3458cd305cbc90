#include "contract/event_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "contract/contract_testing.h"

namespace omni_edge::contract {
namespace {

using testing::MakeEvent;
using testing::MakeRequest;
using testing::MakeState;

std::string Submit(EventStream& s, const StageEvent& e) {
  auto r = s.TrySubmit(e);
  if (!r.ok()) return r.status().reason();
  return r.value() == SubmitResult::kAccepted ? "accepted" : "backpressure";
}

void WaitForProducer(const EventStream& s) {
  for (int i = 0; i < 2000 && s.Counters().waiting_producers == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(s.Counters().waiting_producers, 1);
}

TEST(EventStream, DeliversInSeqOrderAndReturnsCreditOnAck) {
  const StageRequest req = MakeRequest();
  EventStream s(req, {4, 100});
  EXPECT_EQ(Submit(s, MakeEvent(req, 1, 10)), "accepted");
  EXPECT_EQ(Submit(s, MakeEvent(req, 2, 20)), "accepted");
  EXPECT_EQ(Submit(s, MakeEvent(req, 3, 5, true)), "accepted");
  EXPECT_EQ(s.Counters().outstanding_bytes, 35);
  for (int64_t seq = 1; seq <= 3; ++seq) {
    auto e = s.TryReceive();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event.seq, seq);
    EXPECT_TRUE(s.Acknowledge(e->event.release_token));
    EXPECT_FALSE(s.Acknowledge(e->event.release_token)) << "a token is acknowledged once";
  }
  EXPECT_FALSE(s.TryReceive().has_value());
  const auto c = s.Counters();
  EXPECT_EQ(c.outstanding_events, 0);
  EXPECT_EQ(c.outstanding_bytes, 0);
  EXPECT_EQ(c.high_water_bytes, 35);
  EXPECT_TRUE(c.ended);
}

TEST(EventStream, RefusesWhatTheContractRefuses) {
  const StageRequest req = MakeRequest("req", 2);
  EventStream s(req, {8, 100});
  StageEvent e = MakeEvent(req, 1);
  e.epoch = 1;
  EXPECT_EQ(Submit(s, e), "epoch_mismatch");
  e = MakeEvent(req, 1);
  e.request_id = "other";
  EXPECT_EQ(Submit(s, e), "request_id_mismatch");
  e = MakeEvent(req, 1);
  e.stage_id = 3;
  EXPECT_EQ(Submit(s, e), "stage_id_mismatch");
  e = MakeEvent(req, 1);
  e.worker_generation = "wg-2";
  EXPECT_EQ(Submit(s, e), "worker_generation_mismatch");
  EXPECT_EQ(Submit(s, MakeEvent(req, 2)), "seq_out_of_order") << "the first seq is 1";
  e = MakeEvent(req, 1);
  e.release_token = "";
  EXPECT_EQ(Submit(s, e), "release_token_empty");
  e = MakeEvent(req, 1, 101);
  EXPECT_EQ(Submit(s, e), "payload_too_large");
  EXPECT_EQ(Submit(s, MakeEvent(req, 1)), "accepted");
  e = MakeEvent(req, 2);
  e.release_token = MakeEvent(req, 1).release_token;
  EXPECT_EQ(Submit(s, e), "release_token_reused");
  e = MakeEvent(req, 2);
  e.input_watermark = 0;
  EXPECT_EQ(Submit(s, e), "watermark_regressed");
  EXPECT_EQ(Submit(s, MakeEvent(req, 2, 1, true)), "accepted");
  EXPECT_EQ(Submit(s, MakeEvent(req, 3)), "terminal_sent");
  EXPECT_EQ(s.Counters().outstanding_events, 2) << "refusals change nothing";
}

TEST(EventStream, BackpressureOnEventsAndBytes) {
  const StageRequest req = MakeRequest();
  EventStream s(req, {2, 30});
  EXPECT_EQ(Submit(s, MakeEvent(req, 1, 10)), "accepted");
  EXPECT_EQ(Submit(s, MakeEvent(req, 2, 25)), "backpressure") << "bytes would exceed 30";
  EXPECT_EQ(Submit(s, MakeEvent(req, 2, 20)), "accepted");
  EXPECT_EQ(Submit(s, MakeEvent(req, 3, 0)), "backpressure") << "events would exceed 2";
  auto first = s.TryReceive();
  EXPECT_EQ(Submit(s, MakeEvent(req, 3, 0)), "backpressure") << "receiving does not return credit";
  ASSERT_TRUE(s.Acknowledge(first->event.release_token));
  EXPECT_EQ(Submit(s, MakeEvent(req, 3, 0)), "accepted");
  EXPECT_LE(s.Counters().high_water_bytes, 30);
}

TEST(EventStream, BlockedProducerIsWokenByAck) {
  const StageRequest req = MakeRequest();
  EventStream s(req, {1, 100});
  ASSERT_TRUE(s.Submit(MakeEvent(req, 1)).ok());
  Status blocked_result = Status::Error("pending", "");
  std::thread producer([&] { blocked_result = s.Submit(MakeEvent(req, 2)); });
  WaitForProducer(s);
  auto e = s.TryReceive();
  ASSERT_TRUE(s.Acknowledge(e->event.release_token));
  producer.join();
  EXPECT_TRUE(blocked_result.ok()) << blocked_result.ToString();
  EXPECT_EQ(s.TryReceive()->event.seq, 2);
}

TEST(EventStream, CancelDropsQueuedAsStaleAndWakesTheProducer) {
  const StageRequest req = MakeRequest("req", 4);
  EventStream s(req, {2, 100});
  ASSERT_TRUE(s.Submit(MakeEvent(req, 1, 30)).ok());
  ASSERT_TRUE(s.Submit(MakeEvent(req, 2, 40)).ok());
  auto delivered = s.TryReceive();  // seq 1 delivered, not acknowledged
  Status blocked_result;
  std::thread producer([&] { blocked_result = s.Submit(MakeEvent(req, 3)); });
  WaitForProducer(s);
  EXPECT_EQ(s.Cancel(), 5);
  producer.join();
  EXPECT_EQ(blocked_result.reason(), "stream_closed");
  auto c = s.Counters();
  EXPECT_EQ(c.stale_events_dropped, 1);
  EXPECT_EQ(c.outstanding_events, 1) << "delivered-but-unacknowledged stays charged";
  EXPECT_EQ(c.outstanding_bytes, 30);
  EXPECT_FALSE(s.TryReceive().has_value());
  EXPECT_EQ(Submit(s, MakeEvent(req, 3)), "stream_closed");
  EXPECT_EQ(s.Cancel(), 5) << "cancel is idempotent";
  EXPECT_EQ(s.Counters().stale_events_dropped, 1);
  EXPECT_TRUE(s.Acknowledge(delivered->event.release_token));
  EXPECT_EQ(s.Counters().outstanding_bytes, 0);
}

TEST(EventStream, CloseDrainsThenEnds) {
  const StageRequest req = MakeRequest();
  EventStream s(req, {4, 100});
  ASSERT_EQ(Submit(s, MakeEvent(req, 1)), "accepted");
  s.Close();
  EXPECT_EQ(Submit(s, MakeEvent(req, 2)), "stream_closed");
  EXPECT_FALSE(s.Counters().ended);
  EXPECT_EQ(s.Receive()->event.seq, 1);
  EXPECT_FALSE(s.Receive().has_value()) << "closed and drained: Receive returns without blocking";
}

TEST(EventStream, ReceiveWaitsForTheProducer) {
  const StageRequest req = MakeRequest();
  EventStream s(req, {4, 100});
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(s.Submit(MakeEvent(req, 1, 1, true)).ok());
  });
  auto e = s.Receive();
  producer.join();
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->event.terminal);
  EXPECT_FALSE(s.Receive().has_value()) << "nothing after the terminal event";
}

TEST(EventStream, SubmitDeadline) {
  const StageRequest req = MakeRequest();
  EventStream s(req, {1, 100});
  ASSERT_TRUE(s.Submit(MakeEvent(req, 1)).ok());
  auto st = s.Submit(MakeEvent(req, 2), {}, EventStream::Clock::now() + std::chrono::milliseconds(10));
  EXPECT_EQ(st.reason(), "submit_timeout");
  EXPECT_EQ(s.Counters().waiting_producers, 0);
}

TEST(EventStream, StateBinding) {
  StageRequest req = MakeRequest();
  EventStream s(req, {8, 100});
  StageEvent e = MakeEvent(req, 1);
  e.state = MakeState();
  e.state->layout_version = 2;
  EXPECT_EQ(Submit(s, e), "state_mismatch") << "first bound state must match the request's layout";
  e.state = MakeState();
  EXPECT_EQ(Submit(s, e), "accepted");
  StageEvent e2 = MakeEvent(req, 2);
  e2.state = MakeState("kv-other");
  EXPECT_EQ(Submit(s, e2), "state_mismatch");
  e2.state = MakeState();
  EXPECT_EQ(Submit(s, e2), "accepted");

  StageRequest unbound = MakeRequest("req-2");
  unbound.session_id = "";
  EventStream s2(unbound, {8, 100});
  StageEvent e3 = MakeEvent(unbound, 1);
  e3.state = MakeState();
  EXPECT_EQ(Submit(s2, e3), "state_unbound_request");
}

TEST(EventStream, LimitsMustBePositive) {
  EXPECT_FALSE(Validate(StreamLimits{0, 1}).ok());
  EXPECT_FALSE(Validate(StreamLimits{1, 0}).ok());
  EXPECT_TRUE(Validate(StreamLimits{1, 1}).ok());
}

}  // namespace
}  // namespace omni_edge::contract
