#include "runtime/weights_index.h"

namespace omni_edge {
namespace {

Status Invalid(const std::string& message) { return Status::Error("invalid_artifact", "weights.json: " + message); }

Result<WeightsIndex::Tensor> ParseTensor(const Json& j, size_t i, int64_t data_size) {
  FieldReader t(j, "weights.json.tensors[" + std::to_string(i) + "]");
  WeightsIndex::Tensor tensor;
  tensor.name = t.String("name");
  const std::string dtype = t.String("dtype");
  const Json* shape = t.Array("shape");
  const int64_t offset = t.Int("offset", true, 0);
  const int64_t nbytes = t.Int("nbytes", true, 0);
  OE_RETURN_IF_ERROR(t.Done());
  // Weights are float32, or the uint8 blocks / float16 scales of block-quantized weights; int32
  // holds ids (a voice prompt's codes).
  if (!DTypeFromName(dtype, &tensor.dtype) || (tensor.dtype != DType::kFloat32 && tensor.dtype != DType::kUint8 &&
                                               tensor.dtype != DType::kFloat16 && tensor.dtype != DType::kInt32)) {
    return Status::Error("unsupported_graph", "weights.json: tensor '" + tensor.name + "' is " + dtype +
                                                  " (shared weights are float32, float16, uint8 or int32)");
  }
  uint64_t elements = 1;
  for (const auto& d : *shape) {
    int64_t v = 0;
    OE_RETURN_IF_ERROR(CheckInt(d, "weights.json shape", 0, &v));
    // Bounded before multiplying: no tensor holds more elements than 2^40.
    if (v > (int64_t(1) << 40) || (v > 0 && elements > (uint64_t(1) << 40) / uint64_t(v))) {
      return Invalid("tensor '" + tensor.name + "' is too large");
    }
    elements *= uint64_t(v);
    tensor.shape.push_back(v);
  }
  tensor.offset = uint64_t(offset);
  tensor.nbytes = uint64_t(nbytes);
  if (elements * DTypeSize(tensor.dtype) != tensor.nbytes) return Invalid("tensor '" + tensor.name + "': nbytes does not match its shape");
  if (data_size >= 0 && (tensor.offset > uint64_t(data_size) || tensor.nbytes > uint64_t(data_size) - tensor.offset)) {
    return Invalid("tensor '" + tensor.name + "' lies outside weights.bin");
  }
  return tensor;
}

}  // namespace

Result<WeightsIndex> ParseWeightsIndex(const Json& j, const std::filesystem::path& index_path, int64_t data_size) {
  FieldReader r(j, "weights.json");
  const std::string file = r.String("file");
  const Json* tensors = r.Array("tensors");
  const Json* graphs = r.Object("graphs");
  r.Raw("alignment");
  OE_RETURN_IF_ERROR(r.Done());
  WeightsIndex index;
  const std::filesystem::path dir = index_path.parent_path().lexically_normal();
  index.data_path = (index_path.parent_path() / file).lexically_normal();
  const std::filesystem::path name = index.data_path.filename();
  if (file.empty() || index.data_path.parent_path() != dir || name.empty() || name == "." || name == "..") {
    return Invalid("file '" + file + "' is not beside the index");
  }
  for (size_t i = 0; i < tensors->size(); ++i) {
    OE_ASSIGN_OR_RETURN(WeightsIndex::Tensor tensor, ParseTensor((*tensors)[i], i, data_size));
    index.tensors.push_back(std::move(tensor));
  }
  for (auto it = graphs->begin(); it != graphs->end(); ++it) {
    if (!it.value().is_array()) return Invalid("graphs." + it.key() + " is not a list");
    for (const auto& n : it.value()) {
      if (!n.is_string()) return Invalid("graphs." + it.key() + " lists a non-name");
      index.graphs[it.key()].push_back(n.get<std::string>());
    }
  }
  return index;
}

}  // namespace omni_edge
