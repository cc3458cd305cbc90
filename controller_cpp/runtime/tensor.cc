#include "runtime/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace omni_edge {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat16: case DType::kUint16: case DType::kInt16: return 2;
    case DType::kUint8: case DType::kInt8: return 1;
  }
  return 1;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kUint16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kUint8: return "uint8";
    case DType::kInt8: return "int8";
  }
  return "?";
}

bool DTypeFromName(const std::string& name, DType* out) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kInt32, DType::kUint16, DType::kInt16,
                  DType::kUint8, DType::kInt8}) {
    if (name == DTypeName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// 64-byte aligned for vector kernels; C++17 aligned new works on every target (MSVC's and
// mingw's C runtimes have no std::aligned_alloc). A tensor of a huge page or more starts on a
// huge-page boundary (2 MiB: x86-64 and arm64 with 4 KiB pages), so that state every step streams
// (a KV cache layer) can be backed by huge pages whole, not only the blocks that happen to fall inside.
constexpr size_t kAlignment = 64, kHugePage = size_t(2) << 20;

void HostTensor::Free::operator()(void* p) const { ::operator delete(p, std::align_val_t{alignment}); }

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : data_(nullptr, Free{nbytes_of(dtype, shape) >= kHugePage ? kHugePage : kAlignment}),
      dtype_(dtype),
      shape_(std::move(shape)) {
  const size_t align = data_.get_deleter().alignment;
  const size_t bytes = (std::max<size_t>(nbytes(), 1) + align - 1) / align * align;
  void* p = ::operator new(bytes, std::align_val_t{align});  // throws on failure: fatal, as for any container
  std::memset(p, 0, nbytes());  // the rounding's tail is never touched (not resident)
  data_.reset(p);
}

}  // namespace omni_edge
