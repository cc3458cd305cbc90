// Host tensors: the buffers a session owns (KV cache, masks, activations, logits) and the
// views graphs read and write. Graph inputs/outputs are bound to these once; runs do not
// allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace omni_edge {

enum class DType { kFloat32, kFloat16, kInt64, kInt32, kUint16, kInt16, kUint8, kInt8 };
size_t DTypeSize(DType t);
const char* DTypeName(DType t);
// The DType named as DTypeName names it; false for any other name.
bool DTypeFromName(const std::string& name, DType* out);

int64_t NumElements(const std::vector<int64_t>& shape);
std::string ShapeString(const std::vector<int64_t>& shape);

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;

  int64_t numel() const { return NumElements(shape); }
  size_t nbytes() const { return size_t(numel()) * DTypeSize(dtype); }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

// A 64-byte aligned, zero-initialised host buffer.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);
  TensorView view() const { return TensorView{data_.get(), dtype_, shape_}; }
  template <typename T>
  T* data() const { return reinterpret_cast<T*>(data_.get()); }
  size_t nbytes() const { return size_t(NumElements(shape_)) * DTypeSize(dtype_); }
  const std::vector<int64_t>& shape() const { return shape_; }
  bool empty() const { return !data_; }

 private:
  struct Free {
    Free() : alignment(64) {}
    explicit Free(size_t a) : alignment(a) {}
    size_t alignment;
    void operator()(void* p) const;
  };
  static size_t nbytes_of(DType dtype, const std::vector<int64_t>& shape) {
    return size_t(NumElements(shape)) * DTypeSize(dtype);
  }
  std::unique_ptr<void, Free> data_;
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
};

}  // namespace omni_edge
