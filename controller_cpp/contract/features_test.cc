#include "contract/features.h"

#include <gtest/gtest.h>

namespace omni_edge::contract {
namespace {

TEST(Negotiate, VersionsOfferTheirFeatures) {
  auto v1 = Negotiate(1, Json::array());
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1.value(), (std::vector<std::string>{"host-copy", "request-epochs"}));
  auto v2 = Negotiate(2, Json{"credit-ack", "artifact-manifest-v2"});
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->size(), 6u);
}

TEST(Negotiate, RefusesUnknownAndNonIntegerVersions) {
  for (const Json& v : {Json(0), Json(3), Json(true), Json(2.0), Json("2"), Json(nullptr), Json(-1)}) {
    auto out = Negotiate(v, Json::array());
    ASSERT_FALSE(out.ok()) << v.dump();
    EXPECT_EQ(out.status().reason(), "unsupported_version") << v.dump();
  }
}

TEST(Negotiate, NamesMissingFeatures) {
  auto out = Negotiate(1, Json{"credit-ack", "host-copy", "ordered-events"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().reason(), "missing_features");
  EXPECT_EQ(out.status().message(), "protocol 1 does not offer: credit-ack, ordered-events");
  EXPECT_EQ(Negotiate(2, Json{"warp-drive"}).status().reason(), "missing_features");
  EXPECT_EQ(Negotiate(2, Json{1}).status().reason(), "invalid_field");
  EXPECT_EQ(Negotiate(2, Json("credit-ack")).status().reason(), "invalid_field");
}

}  // namespace
}  // namespace omni_edge::contract
