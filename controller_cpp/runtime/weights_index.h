// `weights.json`: the index of an artifact's shared weights file (tensors at offsets in one
// `weights.bin`: float32, or the uint8 blocks and float32 scales of block-quantized weights, and which graph uses which). Parsed apart from any runtime so that the
// fuzzer reaches it: the index is untrusted input like every other artifact file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "runtime/tensor.h"

namespace omni_edge {

struct WeightsIndex {
  struct Tensor {
    std::string name;
    DType dtype = DType::kFloat32;
    std::vector<int64_t> shape;
    uint64_t offset = 0, nbytes = 0;
  };
  std::filesystem::path data_path;  // beside the index, never elsewhere
  std::vector<Tensor> tensors;
  std::map<std::string, std::vector<std::string>> graphs;  // graph file -> tensor names
};

// `index_path` names where the index was read from: its data file must lie in that directory.
// `data_size` is the data file's size (every tensor must lie inside it), or -1 to check later.
Result<WeightsIndex> ParseWeightsIndex(const Json& j, const std::filesystem::path& index_path, int64_t data_size);

}  // namespace omni_edge
