#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "base/platform/os.h"

namespace omni_edge::platform {
namespace {

TEST(MemoryRanges, SubtractKeepsOnlyWhatIsNew) {
  const std::vector<MemoryRange> before = {{100, 200}, {300, 400}};
  const std::vector<MemoryRange> after = {{50, 250}, {300, 450}, {500, 600}};
  const std::vector<MemoryRange> got = Subtract(after, before);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].begin, 50u);
  EXPECT_EQ(got[0].end, 100u);
  EXPECT_EQ(got[1].begin, 200u);
  EXPECT_EQ(got[1].end, 250u);
  EXPECT_EQ(got[2].begin, 400u);
  EXPECT_EQ(got[2].end, 450u);
  EXPECT_EQ(got[3].begin, 500u);
  EXPECT_EQ(got[3].end, 600u);
  EXPECT_TRUE(Subtract(before, before).empty());
  EXPECT_EQ(Subtract(after, {}).size(), after.size());
}

#if !defined(_WIN32)
TEST(MemoryRanges, ALargeAllocationIsNewAnonymousMemoryAndGoesOnHugePagesOrSaysWhyNot) {
  const std::vector<MemoryRange> before = AnonymousMemory();
  constexpr size_t kBytes = size_t(64) << 20;
  auto buffer = std::make_unique<char[]>(kBytes);
  std::fill(buffer.get(), buffer.get() + kBytes, char(1));  // resident
  const std::vector<MemoryRange> loaded = Subtract(AnonymousMemory(), before);
  const auto begin = reinterpret_cast<uintptr_t>(buffer.get());
  const bool covered = std::any_of(loaded.begin(), loaded.end(), [&](const MemoryRange& r) {
    return r.begin <= begin && begin + kBytes <= r.end;
  });
  ASSERT_TRUE(covered);
  const HugePages pages = BackWithHugePages(loaded);
  EXPECT_GE(pages.eligible_bytes, int64_t(kBytes) - (int64_t(4) << 20));  // the 2 MiB-aligned part
  // Where transparent huge pages are off (or the kernel predates MADV_COLLAPSE) the reason is given.
  EXPECT_TRUE(pages.huge_bytes == pages.eligible_bytes || !pages.detail.empty()) << pages.detail;
  EXPECT_EQ(buffer[kBytes / 2], 1);  // collapsing kept the contents
}
#endif

}  // namespace
}  // namespace omni_edge::platform
