// Value types of the Omni stage contract, protocol v2 (CONTRACT.md, "Value types").
// Plain structs; Validate*() applies the cross-field rules in the same order as the Python
// reference (omni_edge/contracts/types.py) so both refuse the same input with the same reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace omni_edge::contract {

inline constexpr int kMaxDims = 32;
inline constexpr int64_t kMaxBufferBytes = int64_t(2) * 1024 * 1024 * 1024;

// Item size of a contract dtype, or 0 if the name is not one.
int64_t DtypeSize(const std::string& dtype);

struct BufferRef {
  std::string object_id;
  std::string owner;
  std::string generation;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t nbytes = 0;
  std::string memory_domain = "host-copy";
  std::string layout = "C";
  bool ready = true;

  bool operator==(const BufferRef& o) const;
  bool operator!=(const BufferRef& o) const { return !(*this == o); }
};

struct StateHandle {
  std::string session_id;
  std::string backend;
  std::string artifact_id;
  int64_t layout_version = 1;
  int64_t epoch = 0;
  bool replayable = false;
  bool migratable = false;
  std::string backend_instance_id;
  std::string worker_generation;
  std::string state_id;

  // Identified by the backend and issued for (worker_generation, epoch).
  bool IsBound(const std::string& generation, int64_t at_epoch) const;
  bool operator==(const StateHandle& o) const;
  bool operator!=(const StateHandle& o) const { return !(*this == o); }
};

enum class Operation { kRun, kCancel, kRelease };
const char* OperationName(Operation op);

struct StageRequest {
  std::string request_id;
  int64_t stage_id = 0;
  int64_t epoch = 0;
  std::string worker_generation;
  Operation operation = Operation::kRun;
  std::vector<BufferRef> inputs;
  std::optional<StateHandle> state;
  std::string artifact_id;
  int64_t state_layout_version = 0;
  std::string session_id;

  bool SameKey(const StageRequest& o) const {
    return request_id == o.request_id && stage_id == o.stage_id && epoch == o.epoch &&
           worker_generation == o.worker_generation;
  }
  bool operator==(const StageRequest& o) const;
};

struct StageEvent {
  std::string request_id;
  int64_t stage_id = 0;
  int64_t epoch = 0;
  int64_t seq = 0;
  std::string kind;
  std::string worker_generation;
  std::vector<BufferRef> buffers;
  bool terminal = false;
  std::optional<std::string> error;
  std::optional<StateHandle> state;
  int64_t started_monotonic_ns = 0;
  int64_t emitted_monotonic_ns = 0;
  int64_t input_watermark = 0;
  int64_t payload_nbytes = 0;
  std::string release_token;

  // Bytes held against the stream's credit: the declared payload, else the buffers.
  int64_t Charge() const;
  bool operator==(const StageEvent& o) const;
};

struct DeviceDescriptor {
  std::string device_id;
  std::string kind;  // cpu | gpu | npu
  std::string name;
  std::string memory_pool;
  int64_t memory_bytes = 0;
  std::vector<std::string> backends;
  std::map<std::string, std::string> properties;

  bool operator==(const DeviceDescriptor& o) const;
};

Status Validate(const BufferRef& b);
Status Validate(const StateHandle& s);
Status Validate(const StageRequest& r);
Status Validate(const StageEvent& e);
Status Validate(const DeviceDescriptor& d);

}  // namespace omni_edge::contract
