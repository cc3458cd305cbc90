#include "contract/used_requests.h"

#include <string>

#include <gtest/gtest.h>

namespace omni_edge::contract {
namespace {

TEST(UsedRequests, ARequestKeyIsRefusedTheSecondTimeInAnyOrder) {
  UsedRequests used;
  for (int n : {5, 3, 4, 9, 1, 2, 8, 6, 7}) EXPECT_TRUE(used.Insert("s-req-" + std::to_string(n), 0, 0, "g"));
  for (int n = 1; n <= 9; ++n) {
    EXPECT_TRUE(used.Contains("s-req-" + std::to_string(n), 0, 0, "g"));
    EXPECT_FALSE(used.Insert("s-req-" + std::to_string(n), 0, 0, "g")) << n;
  }
  EXPECT_FALSE(used.Contains("s-req-0", 0, 0, "g"));
  EXPECT_FALSE(used.Contains("s-req-10", 0, 0, "g"));
  EXPECT_EQ(used.entries(), 1u);  // 1..9 merged into one interval
}

TEST(UsedRequests, EveryPartOfTheKeyCounts) {
  UsedRequests used;
  ASSERT_TRUE(used.Insert("r-1", 0, 0, "g"));
  EXPECT_TRUE(used.Insert("r-1", 1, 0, "g"));   // another stage
  EXPECT_TRUE(used.Insert("r-1", 0, 1, "g"));   // another epoch
  EXPECT_TRUE(used.Insert("r-1", 0, 0, "g2"));  // another worker generation
  EXPECT_TRUE(used.Insert("q-1", 0, 0, "g"));   // another prefix
  EXPECT_FALSE(used.Insert("r-1", 0, 1, "g"));
}

TEST(UsedRequests, IdsWithoutACanonicalCounterAreKeptWhole) {
  UsedRequests used;
  EXPECT_TRUE(used.Insert("r-7", 0, 0, "g"));
  EXPECT_TRUE(used.Insert("r-07", 0, 0, "g"));  // not the same id as r-7
  EXPECT_TRUE(used.Insert("r-0", 0, 0, "g"));
  EXPECT_TRUE(used.Insert("uuid-a1b2", 0, 0, "g"));
  EXPECT_TRUE(used.Insert("", 0, 0, "g"));
  EXPECT_TRUE(used.Insert("1234567890123456789", 0, 0, "g"));  // 19 digits: kept whole
  EXPECT_TRUE(used.Insert("123456789012345678", 0, 0, "g"));   // 18 digits: counted
  EXPECT_FALSE(used.Insert("r-07", 0, 0, "g"));
  EXPECT_FALSE(used.Insert("uuid-a1b2", 0, 0, "g"));
  EXPECT_FALSE(used.Insert("", 0, 0, "g"));
  EXPECT_FALSE(used.Insert("1234567890123456789", 0, 0, "g"));
  EXPECT_FALSE(used.Insert("123456789012345678", 0, 0, "g"));
  EXPECT_TRUE(used.Contains("r-7", 0, 0, "g") && used.Contains("r-0", 0, 0, "g"));
}

TEST(UsedRequests, AMillionConsecutiveRequestsCostOneEntry) {
  UsedRequests used;
  for (int n = 1; n <= 1000000; ++n) ASSERT_TRUE(used.Insert("sess-req-" + std::to_string(n), 0, 0, "g"));
  EXPECT_EQ(used.entries(), 1u);
  EXPECT_FALSE(used.Insert("sess-req-500000", 0, 0, "g"));
  // Gaps are intervals of their own until filled.
  UsedRequests gaps;
  for (int n = 0; n < 100; n += 2) ASSERT_TRUE(gaps.Insert("x" + std::to_string(n), 0, 0, "g"));
  EXPECT_EQ(gaps.entries(), 50u);
  for (int n = 1; n < 100; n += 2) ASSERT_TRUE(gaps.Insert("x" + std::to_string(n), 0, 0, "g"));
  EXPECT_EQ(gaps.entries(), 1u);
}

}  // namespace
}  // namespace omni_edge::contract
