#include "runtime/admission.h"

#include <gtest/gtest.h>

namespace omni_edge {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(AdmissionLedger, ReservesAllPoolsOrNothing) {
  AdmissionLedger ledger({{"device_ram", 100 * kMiB}, {"vram", 10 * kMiB}});
  auto first = ledger.Reserve("a", {{"device_ram", 60 * kMiB}});
  ASSERT_TRUE(first.ok());
  // The RAM part would fit, the VRAM part does not: nothing may be charged.
  auto both = ledger.Reserve("b", {{"device_ram", 30 * kMiB}, {"vram", 11 * kMiB}});
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().reason(), "admission");
  EXPECT_NE(both.status().message().find("b needs 11.0 MiB of vram but only 10.0 MiB of 10.0 MiB is free"),
            std::string::npos)
      << both.status().message();
  EXPECT_EQ(ledger.Free("device_ram"), 40 * kMiB);
  EXPECT_EQ(ledger.Free("vram"), 10 * kMiB);
}

TEST(AdmissionLedger, RefusalNamesTheHolders) {
  AdmissionLedger ledger({{"device_ram", 100 * kMiB}});
  ASSERT_TRUE(ledger.Reserve("thinker", {{"device_ram", 70 * kMiB}}).ok());
  auto refused = ledger.Reserve("talker", {{"device_ram", 40 * kMiB}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("held by thinker 70.0 MiB; nothing was loaded"), std::string::npos)
      << refused.status().message();
}

TEST(AdmissionLedger, UnknownPoolIsRefused) {
  AdmissionLedger ledger({{"device_ram", kMiB}});
  auto refused = ledger.Reserve("gpu stage", {{"vram", 1}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("which this device does not have"), std::string::npos);
}

TEST(AdmissionLedger, ReleaseReturnsBytesAndQuarantineKeepsThem) {
  AdmissionLedger ledger({{"device_ram", 100 * kMiB}});
  const int64_t a = ledger.Reserve("a", {{"device_ram", 80 * kMiB}}).value();
  ASSERT_TRUE(ledger.Release(a, true).ok());
  EXPECT_EQ(ledger.Free("device_ram"), 100 * kMiB);
  EXPECT_FALSE(ledger.Release(a, true).ok());  // twice is an error, not a double credit

  const int64_t b = ledger.Reserve("b", {{"device_ram", 80 * kMiB}}).value();
  ASSERT_TRUE(ledger.Release(b, false).ok());  // drain not confirmed
  EXPECT_EQ(ledger.Free("device_ram"), 20 * kMiB);
  auto refused = ledger.Reserve("c", {{"device_ram", 50 * kMiB}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("(quarantined)"), std::string::npos);
  EXPECT_FALSE(ledger.Release(b, true).ok());
  ASSERT_TRUE(ledger.Forgive(b).ok());
  EXPECT_EQ(ledger.Free("device_ram"), 100 * kMiB);
  EXPECT_FALSE(ledger.Forgive(b).ok());
  const Json snapshot = ledger.Snapshot();
  EXPECT_EQ(snapshot["pools"]["device_ram"]["free"], 100 * kMiB);
}

TEST(AdmissionLedger, PoolsFromJsonIsStrict) {
  EXPECT_TRUE(PoolsFromJson(Json::parse(R"({"device_ram": 5, "wsl_quota": 0})")).ok());
  EXPECT_FALSE(PoolsFromJson(Json::parse(R"({"ram": 5})")).ok());
  EXPECT_FALSE(PoolsFromJson(Json::parse(R"({"device_ram": -1})")).ok());
  EXPECT_FALSE(PoolsFromJson(Json::parse(R"({"device_ram": "5"})")).ok());
  EXPECT_FALSE(PoolsFromJson(Json::parse(R"([5])")).ok());
}

TEST(AdmissionPools, StagesDrawFromSharedDramOrTheWslQuota) {
  EXPECT_EQ(StagePool(false), "device_ram");
  EXPECT_EQ(StagePool(true), "wsl_quota");
}

}  // namespace
}  // namespace omni_edge
