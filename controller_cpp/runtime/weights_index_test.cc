#include "runtime/weights_index.h"

#include <gtest/gtest.h>

namespace omni_edge {
namespace {

Json Index(const std::string& file, Json shape, int64_t offset, int64_t nbytes, const std::string& dtype = "float32") {
  return Json{{"file", file},
              {"alignment", 64},
              {"tensors", Json::array({{{"name", "w"}, {"dtype", dtype}, {"shape", shape}, {"offset", offset}, {"nbytes", nbytes}}})},
              {"graphs", {{"decode.onnx", {"w"}}}}};
}

TEST(WeightsIndex, ReadsTensorsBesideTheIndex) {
  auto index = ParseWeightsIndex(Index("weights.bin", {4, 8}, 64, 128), "/a/c/weights.json", 192);
  ASSERT_TRUE(index.ok()) << index.status().message();
  EXPECT_EQ(index->data_path, "/a/c/weights.bin");
  EXPECT_EQ(index->tensors[0].offset, 64u);
  EXPECT_EQ(index->graphs.at("decode.onnx"), std::vector<std::string>{"w"});
}

TEST(WeightsIndex, RefusesFilesElsewhere) {
  for (const char* file : {"../thinker-pte/model.pte", "/etc/passwd", "", ".", "..", "sub/weights.bin", "x/../../w"}) {
    auto index = ParseWeightsIndex(Index(file, {1}, 0, 4), "/a/c/weights.json", 4);
    ASSERT_FALSE(index.ok()) << file;
  }
}

TEST(WeightsIndex, RefusesTensorsOutsideTheDataOrOverflowingShapes) {
  EXPECT_FALSE(ParseWeightsIndex(Index("w.bin", {4}, 8, 16), "/c/weights.json", 16).ok());  // past the end
  EXPECT_FALSE(ParseWeightsIndex(Index("w.bin", {4}, 0, 12), "/c/weights.json", 16).ok());  // nbytes != shape
  EXPECT_FALSE(ParseWeightsIndex(Index("w.bin", {int64_t(1) << 40, int64_t(1) << 40}, 0, 0), "/c/weights.json", -1).ok());
  EXPECT_FALSE(ParseWeightsIndex(Index("w.bin", {1}, INT64_MAX, 4), "/c/weights.json", 16).ok());
  EXPECT_TRUE(ParseWeightsIndex(Index("w.bin", {4}, 0, 16), "/c/weights.json", 16).ok());
}

TEST(WeightsIndex, SizesBlockQuantizedTensorsByTheirType) {
  auto packed = ParseWeightsIndex(Index("w.bin", {8, 2, 16}, 0, 256, "uint8"), "/c/weights.json", 256);
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  EXPECT_EQ(packed->tensors[0].dtype, DType::kUint8);
  EXPECT_TRUE(ParseWeightsIndex(Index("w.bin", {8}, 0, 16, "float16"), "/c/weights.json", 16).ok());
  EXPECT_FALSE(ParseWeightsIndex(Index("w.bin", {8}, 0, 32, "float16"), "/c/weights.json", 32).ok());  // nbytes != 2 * 8
  for (const char* dtype : {"int64", "bfloat16", "", "float"}) {
    EXPECT_FALSE(ParseWeightsIndex(Index("w.bin", {4}, 0, 16, dtype), "/c/weights.json", 16).ok()) << dtype;
  }
}

}  // namespace
}  // namespace omni_edge
