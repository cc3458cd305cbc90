#include "runtime/binding.h"

#include <gtest/gtest.h>

namespace omni_edge {
namespace {

constexpr BindingRules kOnnx{"graph", /*quote_names=*/true, /*symbolic_dims=*/true};
constexpr BindingRules kProgram{"program", /*quote_names=*/false, /*symbolic_dims=*/false};

class Binding : public ::testing::Test {
 protected:
  HostTensor ids_{DType::kInt64, {1, 4}}, logits_{DType::kFloat32, {1, 4, 8}};
  std::vector<GraphIo> inputs_{{"input_ids", DType::kInt64, {1, 4}}};
  std::vector<GraphIo> outputs_{{"logits", DType::kFloat32, {1, 4, 8}}};
};

TEST(HostTensorMemory, AHugePageOrMoreStartsOnAHugePageAndReadsZero) {
  const HostTensor small(DType::kFloat32, {1, 4, 8}), cache(DType::kFloat32, {1, 3, 4096, 64});  // 3 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data<char>()) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.data<char>()) % (uintptr_t(2) << 20), 0u);
  EXPECT_EQ(cache.data<float>()[3 * 4096 * 64 - 1], 0.0f);
  HostTensor moved = HostTensor(DType::kFloat32, {1, 3, 4096, 64});  // freed with the alignment it was made with
  moved = HostTensor(DType::kFloat32, {2});
  EXPECT_EQ(moved.nbytes(), 8u);
}

TEST_F(Binding, AcceptsTheDeclaredViews) {
  for (const BindingRules& rules : {kOnnx, kProgram}) {
    EXPECT_TRUE(CheckBinding("g", inputs_, outputs_, {ids_.view()}, {logits_.view()}, rules).ok());
  }
}

TEST_F(Binding, RefusesAnotherCount) {
  const Status st = CheckBinding("g", inputs_, outputs_, {ids_.view(), ids_.view()}, {logits_.view()}, kProgram);
  EXPECT_EQ(st.reason(), "invalid_binding");
  EXPECT_EQ(st.message(), "g: expected 1 inputs and 1 outputs");
}

TEST_F(Binding, NamesTheTensorAsEachBackendDoes) {
  const HostTensor wrong(DType::kFloat32, {1, 4});
  Status st = CheckBinding("g", inputs_, outputs_, {wrong.view()}, {logits_.view()}, kOnnx);
  EXPECT_EQ(st.reason(), "invalid_binding");
  EXPECT_EQ(st.message(), "g: 'input_ids' is int64[1, 4] in the graph but bound as float32[1, 4]");
  st = CheckBinding("g", inputs_, outputs_, {ids_.view()}, {ids_.view()}, kProgram);
  EXPECT_EQ(st.message(), "g: logits is float32[1, 4, 8] in the program but bound as int64[1, 4]");
}

TEST_F(Binding, SymbolicDimsTakeAnySizeWhereTheRulesSay) {
  inputs_[0].shape = {1, -1};
  const HostTensor longer(DType::kInt64, {1, 9});
  EXPECT_TRUE(CheckBinding("g", inputs_, outputs_, {longer.view()}, {logits_.view()}, kOnnx).ok());
  EXPECT_FALSE(CheckBinding("g", inputs_, outputs_, {longer.view()}, {logits_.view()}, kProgram).ok());
  const HostTensor other_rank(DType::kInt64, {9});
  EXPECT_FALSE(CheckBinding("g", inputs_, outputs_, {other_rank.view()}, {logits_.view()}, kOnnx).ok());
}

TEST_F(Binding, RefusesANullBuffer) {
  TensorView null = ids_.view();
  null.data = nullptr;
  EXPECT_FALSE(CheckBinding("g", inputs_, outputs_, {null}, {logits_.view()}, kOnnx).ok());
}

}  // namespace
}  // namespace omni_edge
