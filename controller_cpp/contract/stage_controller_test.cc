#include "contract/stage_controller.h"

#include <gtest/gtest.h>

#include "contract/contract_testing.h"

namespace omni_edge::contract {
namespace {

using testing::MakeEvent;
using testing::MakeRequest;
using testing::MakeState;

class StageControllerTest : public ::testing::Test {
 protected:
  StageController controller_{{{0, BackendIdentity{"ort-cpu", "inst-1", "wg-1"}}}};
  const StreamLimits limits_{8, 1000};

  // Runs one request to a terminal event carrying `state`, consumes and acknowledges it.
  void RunToTerminal(const StageRequest& req, const StateHandle& state) {
    ASSERT_TRUE(controller_.Begin(req, limits_).ok());
    StageEvent e = MakeEvent(req, 1, 10, true);
    e.state = state;
    ASSERT_EQ(controller_.Emit(req, e).value(), EmitResult::kAccepted);
    ASSERT_TRUE(controller_.Finish(req).ok());
    auto stream = controller_.active_stream();
    auto got = stream->TryReceive();
    ASSERT_TRUE(stream->Acknowledge(got->event.release_token));
  }
};

TEST_F(StageControllerTest, BeginRefusesMissingIdentityUnknownStageAndForeignGeneration) {
  StageRequest r = MakeRequest();
  r.artifact_id = "";
  EXPECT_EQ(controller_.Begin(r, limits_).status().reason(), "missing_identity");
  r = MakeRequest();
  r.session_id = "";
  EXPECT_EQ(controller_.Begin(r, limits_).status().reason(), "missing_identity");
  r = MakeRequest();
  r.state_layout_version = 0;
  EXPECT_EQ(controller_.Begin(r, limits_).status().reason(), "missing_identity");
  r = MakeRequest();
  r.stage_id = 9;
  EXPECT_EQ(controller_.Begin(r, limits_).status().reason(), "unknown_stage");
  r = MakeRequest();
  r.worker_generation = "wg-0";
  EXPECT_EQ(controller_.Begin(r, limits_).status().reason(), "worker_generation_mismatch");
  EXPECT_EQ(controller_.Begin(MakeRequest(), StreamLimits{0, 1}).status().reason(), "invalid_field");
}

TEST_F(StageControllerTest, OneActiveRequestAndNoReuseOfAKey) {
  const StageRequest a = MakeRequest("a");
  ASSERT_TRUE(controller_.Begin(a, limits_).ok());
  EXPECT_EQ(controller_.Begin(MakeRequest("b"), limits_).status().reason(), "busy");
  ASSERT_EQ(controller_.Emit(a, MakeEvent(a, 1, 10, true)).value(), EmitResult::kAccepted);
  ASSERT_TRUE(controller_.Finish(a).ok());
  EXPECT_EQ(controller_.Begin(MakeRequest("b"), limits_).status().reason(), "busy") << "payload not yet acknowledged";
  auto stream = controller_.active_stream();
  ASSERT_TRUE(stream->Acknowledge(stream->TryReceive()->event.release_token));
  EXPECT_EQ(controller_.Begin(a, limits_).status().reason(), "duplicate_request");
  EXPECT_TRUE(controller_.Begin(MakeRequest("b"), limits_).ok());
}

TEST_F(StageControllerTest, EmitIsRetiredAfterTerminalCancelOrFinish) {
  const StageRequest a = MakeRequest("a");
  EXPECT_EQ(controller_.Emit(a, MakeEvent(a, 1)).value(), EmitResult::kRetired) << "no active request";
  ASSERT_TRUE(controller_.Begin(a, limits_).ok());
  EXPECT_EQ(controller_.Emit(MakeRequest("zz"), MakeEvent(a, 1)).value(), EmitResult::kRetired);
  ASSERT_EQ(controller_.Emit(a, MakeEvent(a, 1, 10, true)).value(), EmitResult::kAccepted);
  EXPECT_EQ(controller_.Emit(a, MakeEvent(a, 2)).value(), EmitResult::kRetired) << "terminal already sent";
}

TEST_F(StageControllerTest, EmitReportsBackpressure) {
  const StageRequest a = MakeRequest("a");
  ASSERT_TRUE(controller_.Begin(a, StreamLimits{1, 1000}).ok());
  ASSERT_EQ(controller_.Emit(a, MakeEvent(a, 1)).value(), EmitResult::kAccepted);
  EXPECT_EQ(controller_.Emit(a, MakeEvent(a, 2)).value(), EmitResult::kBackpressure);
  EXPECT_EQ(controller_.Emit(a, MakeEvent(a, 3)).status().reason(), "seq_out_of_order") << "stream rules apply";
}

TEST_F(StageControllerTest, FinishWithoutTerminalIsAnErrorAndRetiresTheState) {
  const StageRequest a = MakeRequest("a");
  ASSERT_TRUE(controller_.Begin(a, limits_).ok());
  StageEvent e = MakeEvent(a, 1);
  e.state = MakeState();
  ASSERT_EQ(controller_.Emit(a, e).value(), EmitResult::kAccepted);
  EXPECT_TRUE(controller_.IsLive(0, MakeState()));
  EXPECT_EQ(controller_.Finish(a).reason(), "no_terminal");
  EXPECT_FALSE(controller_.IsLive(0, MakeState()));
  EXPECT_EQ(controller_.Emit(a, MakeEvent(a, 2)).value(), EmitResult::kRetired) << "producer done";
  EXPECT_EQ(controller_.Finish(MakeRequest("zz")).reason(), "not_active");
}

TEST_F(StageControllerTest, ContinuationNeedsALiveIdenticalState) {
  RunToTerminal(MakeRequest("t1"), MakeState());
  StageRequest next = MakeRequest("t2");
  next.state = MakeState();
  EXPECT_TRUE(controller_.Begin(next, limits_).ok()) << "continuation on the live state";
  ASSERT_EQ(controller_.Emit(next, MakeEvent(next, 1, 1, true)).value(), EmitResult::kAccepted);
  ASSERT_TRUE(controller_.Finish(next).ok());
  auto s = controller_.active_stream();
  ASSERT_TRUE(s->Acknowledge(s->TryReceive()->event.release_token));

  StageRequest unknown = MakeRequest("t3");
  unknown.state = MakeState("kv-unknown");
  EXPECT_EQ(controller_.Begin(unknown, limits_).status().reason(), "state_not_live");
  StageRequest different = MakeRequest("t4");
  different.state = MakeState();
  different.state->replayable = true;
  EXPECT_EQ(controller_.Begin(different, limits_).status().reason(), "state_not_live");
}

TEST_F(StageControllerTest, CancelRetiresTheStateAndFencesTheEpoch) {
  const StageRequest a = MakeRequest("a");
  ASSERT_TRUE(controller_.Begin(a, limits_).ok());
  StageEvent e = MakeEvent(a, 1);
  e.state = MakeState();
  ASSERT_EQ(controller_.Emit(a, e).value(), EmitResult::kAccepted);
  EXPECT_EQ(controller_.Cancel(a).value(), 1);
  EXPECT_EQ(controller_.Emit(a, MakeEvent(a, 2)).value(), EmitResult::kRetired);
  EXPECT_FALSE(controller_.IsLive(0, MakeState()));
  EXPECT_EQ(controller_.Begin(MakeRequest("b", 1), limits_).status().reason(), "busy")
      << "the backend has not confirmed with finish";
  ASSERT_TRUE(controller_.Finish(a).ok()) << "a cancelled request may stop without a terminal event";
  const StageRequest b = MakeRequest("b", 1);
  EXPECT_TRUE(controller_.Begin(b, limits_).ok()) << "the stale event was dropped";
  StageEvent next = MakeEvent(b, 1);
  next.state = MakeState("kv-1", 1);
  EXPECT_EQ(controller_.Emit(b, next).value(), EmitResult::kAccepted)
      << "the same backend state, bound to the next epoch by a new handle";
  EXPECT_TRUE(controller_.IsLive(0, MakeState("kv-1", 1)));
}

TEST_F(StageControllerTest, EmitRefusesForeignAndRetiredStates) {
  const StageRequest a = MakeRequest("a");
  ASSERT_TRUE(controller_.Begin(a, limits_).ok());
  StageEvent e = MakeEvent(a, 1);
  e.state = MakeState();
  e.state->backend = "executorch";
  EXPECT_EQ(controller_.Emit(a, e).status().reason(), "state_foreign");
  e.state = MakeState();
  e.state->backend_instance_id = "inst-2";
  EXPECT_EQ(controller_.Emit(a, e).status().reason(), "state_foreign");
  ASSERT_TRUE(controller_.Cancel(a).ok());
  ASSERT_TRUE(controller_.Finish(a).ok());
  const StageRequest b = MakeRequest("b");
  ASSERT_TRUE(controller_.Begin(b, limits_).ok());
  StageEvent fresh = MakeEvent(b, 1);
  fresh.state = MakeState("kv-9");
  ASSERT_EQ(controller_.Emit(b, fresh).value(), EmitResult::kAccepted);
  ASSERT_TRUE(controller_.Cancel(b).ok());  // retires kv-9
  ASSERT_TRUE(controller_.Finish(b).ok());
  const StageRequest c = MakeRequest("c");
  ASSERT_TRUE(controller_.Begin(c, limits_).ok());
  StageEvent reuse = MakeEvent(c, 1);
  reuse.state = MakeState("kv-9");
  EXPECT_EQ(controller_.Emit(c, reuse).status().reason(), "state_retired");
}

TEST_F(StageControllerTest, ReleaseIsTwoStepAndBlocksBegin) {
  const StateHandle kv = MakeState();
  RunToTerminal(MakeRequest("t1"), kv);
  EXPECT_EQ(controller_.RequestRelease(0, MakeState("nope")).status().reason(), "state_not_live");
  EXPECT_EQ(controller_.RequestRelease(7, kv).status().reason(), "unknown_stage");
  auto op = controller_.RequestRelease(0, kv);
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(controller_.RequestRelease(0, kv).value(), op.value()) << "same id when asked again";
  EXPECT_EQ(controller_.Begin(MakeRequest("t2"), limits_).status().reason(), "release_pending");
  EXPECT_EQ(controller_.ConfirmRelease(0, kv, "wrong").reason(), "release_mismatch");
  StateHandle other = kv;
  other.migratable = true;
  EXPECT_EQ(controller_.ConfirmRelease(0, other, op.value()).reason(), "release_mismatch");
  EXPECT_TRUE(controller_.ConfirmRelease(0, kv, op.value()).ok());
  EXPECT_FALSE(controller_.IsLive(0, kv));
  EXPECT_EQ(controller_.ConfirmRelease(0, kv, op.value()).reason(), "release_mismatch");
  EXPECT_TRUE(controller_.Begin(MakeRequest("t2"), limits_).ok());
}

TEST_F(StageControllerTest, ReleaseWaitsForOutstandingWork) {
  const StageRequest a = MakeRequest("a");
  ASSERT_TRUE(controller_.Begin(a, limits_).ok());
  StageEvent e = MakeEvent(a, 1, 10, true);
  e.state = MakeState();
  ASSERT_EQ(controller_.Emit(a, e).value(), EmitResult::kAccepted);
  EXPECT_EQ(controller_.RequestRelease(0, MakeState()).status().reason(), "busy");
  ASSERT_TRUE(controller_.Finish(a).ok());
  EXPECT_EQ(controller_.RequestRelease(0, MakeState()).status().reason(), "busy") << "payload unacknowledged";
  auto s = controller_.active_stream();
  ASSERT_TRUE(s->Acknowledge(s->TryReceive()->event.release_token));
  EXPECT_TRUE(controller_.RequestRelease(0, MakeState()).ok());
}

}  // namespace
}  // namespace omni_edge::contract
