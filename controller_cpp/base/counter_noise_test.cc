#include "base/counter_noise.h"

#include <gtest/gtest.h>

namespace omni_edge::counter_noise {
namespace {

// The values omni_edge.runtime.counter_noise computes in numpy: a reference fed the noise a
// stage drew depends on both agreeing to the bit.
TEST(CounterNoise, EqualsThePythonStream) {
  EXPECT_EQ(Uniform(7, 0), 0.3898297483912715);
  EXPECT_EQ(Uniform(7, 1), 0.01678829452815611);
  EXPECT_EQ(Uniform(7, 2), 0.9007606806068834);
  EXPECT_EQ(Uniform((uint64_t(1) << 63) + 5, 1000), 0.48031752071436284);
  EXPECT_FLOAT_EQ(Normal(7, 9), 0.8214837312698364f);
  EXPECT_FLOAT_EQ(Normal(7, 11), 2.2069687843322754f);
}

}  // namespace
}  // namespace omni_edge::counter_noise
