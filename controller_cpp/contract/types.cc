#include "contract/types.h"

#include <tuple>

#include "base/json_fields.h"

namespace omni_edge::contract {
namespace {

Status NonEmpty(const std::string& value, const std::string& path) {
  return value.empty() ? FieldError(path, "must be a non-empty string") : Status::Ok();
}

Status AtLeast(int64_t value, int64_t minimum, const std::string& path) {
  if (value >= minimum) return Status::Ok();
  return FieldError(path, "must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
}

// product(shape) x item size, saturating at INT64_MAX (Python's big ints never overflow).
int64_t ExpectedBytes(const std::vector<int64_t>& shape, int64_t item) {
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t total = item;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(total, d, &total)) return INT64_MAX;
  }
  return total;
}

}  // namespace

int64_t DtypeSize(const std::string& dtype) {
  static const std::map<std::string, int64_t> kSizes = {
      {"bool", 1},  {"uint8", 1},  {"int8", 1},  {"int16", 2},   {"uint16", 2},  {"int32", 4},
      {"uint32", 4}, {"int64", 8}, {"uint64", 8}, {"float16", 2}, {"float32", 4}, {"float64", 8}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

const char* OperationName(Operation op) {
  switch (op) {
    case Operation::kRun: return "run";
    case Operation::kCancel: return "cancel";
    case Operation::kRelease: return "release";
  }
  return "run";
}

bool BufferRef::operator==(const BufferRef& o) const {
  return std::tie(object_id, owner, generation, dtype, shape, nbytes, memory_domain, layout, ready) ==
         std::tie(o.object_id, o.owner, o.generation, o.dtype, o.shape, o.nbytes, o.memory_domain, o.layout, o.ready);
}

bool StateHandle::IsBound(const std::string& generation, int64_t at_epoch) const {
  return !state_id.empty() && !backend_instance_id.empty() && !worker_generation.empty() &&
         worker_generation == generation && epoch == at_epoch;
}

bool StateHandle::operator==(const StateHandle& o) const {
  return std::tie(session_id, backend, artifact_id, layout_version, epoch, replayable, migratable,
                  backend_instance_id, worker_generation, state_id) ==
         std::tie(o.session_id, o.backend, o.artifact_id, o.layout_version, o.epoch, o.replayable, o.migratable,
                  o.backend_instance_id, o.worker_generation, o.state_id);
}

bool StageRequest::operator==(const StageRequest& o) const {
  return std::tie(request_id, stage_id, epoch, worker_generation, operation, inputs, state, artifact_id,
                  state_layout_version, session_id) ==
         std::tie(o.request_id, o.stage_id, o.epoch, o.worker_generation, o.operation, o.inputs, o.state,
                  o.artifact_id, o.state_layout_version, o.session_id);
}

int64_t StageEvent::Charge() const {
  if (payload_nbytes > 0) return payload_nbytes;
  int64_t total = 0;
  for (const auto& b : buffers) total += b.nbytes;  // each <= 2 GiB, count bounded by input size
  return total;
}

bool StageEvent::operator==(const StageEvent& o) const {
  return std::tie(request_id, stage_id, epoch, seq, kind, worker_generation, buffers, terminal, error, state,
                  started_monotonic_ns, emitted_monotonic_ns, input_watermark, payload_nbytes, release_token) ==
         std::tie(o.request_id, o.stage_id, o.epoch, o.seq, o.kind, o.worker_generation, o.buffers, o.terminal,
                  o.error, o.state, o.started_monotonic_ns, o.emitted_monotonic_ns, o.input_watermark,
                  o.payload_nbytes, o.release_token);
}

bool DeviceDescriptor::operator==(const DeviceDescriptor& o) const {
  return std::tie(device_id, kind, name, memory_pool, memory_bytes, backends, properties) ==
         std::tie(o.device_id, o.kind, o.name, o.memory_pool, o.memory_bytes, o.backends, o.properties);
}

Status Validate(const BufferRef& b) {
  OE_RETURN_IF_ERROR(NonEmpty(b.object_id, "buffer.object_id"));
  OE_RETURN_IF_ERROR(NonEmpty(b.owner, "buffer.owner"));
  OE_RETURN_IF_ERROR(NonEmpty(b.generation, "buffer.generation"));
  const int64_t item = DtypeSize(b.dtype);
  if (item == 0) return FieldError("buffer.dtype", "unknown dtype '" + b.dtype + "'");
  if (b.shape.size() > size_t(kMaxDims)) {
    return FieldError("buffer.shape", "at most 32 dims, got " + std::to_string(b.shape.size()));
  }
  for (size_t i = 0; i < b.shape.size(); ++i) {
    OE_RETURN_IF_ERROR(AtLeast(b.shape[i], 0, "buffer.shape[" + std::to_string(i) + "]"));
  }
  OE_RETURN_IF_ERROR(AtLeast(b.nbytes, 0, "buffer.nbytes"));
  const int64_t expected = ExpectedBytes(b.shape, item);
  if (b.nbytes != expected) {
    return Status::Error("invalid_buffer", "buffer.nbytes: " + std::to_string(b.nbytes) +
                                               " != product(shape) x item size");
  }
  if (b.nbytes > kMaxBufferBytes) {
    return Status::Error("invalid_buffer", "buffer.nbytes: " + std::to_string(b.nbytes) + " exceeds 2 GiB");
  }
  if (b.memory_domain != "host-copy") {
    return Status::Error("invalid_buffer", "buffer.memory_domain: must be 'host-copy', got '" + b.memory_domain + "'");
  }
  if (b.layout != "C") return Status::Error("invalid_buffer", "buffer.layout: must be 'C', got '" + b.layout + "'");
  if (!b.ready) return Status::Error("invalid_buffer", "buffer.ready: must be true");
  return Status::Ok();
}

Status Validate(const StateHandle& s) {
  OE_RETURN_IF_ERROR(NonEmpty(s.session_id, "state.session_id"));
  OE_RETURN_IF_ERROR(NonEmpty(s.backend, "state.backend"));
  OE_RETURN_IF_ERROR(NonEmpty(s.artifact_id, "state.artifact_id"));
  OE_RETURN_IF_ERROR(AtLeast(s.layout_version, 1, "state.layout_version"));
  return AtLeast(s.epoch, 0, "state.epoch");
}

Status Validate(const StageRequest& r) {
  OE_RETURN_IF_ERROR(NonEmpty(r.request_id, "request.request_id"));
  OE_RETURN_IF_ERROR(AtLeast(r.stage_id, 0, "request.stage_id"));
  OE_RETURN_IF_ERROR(AtLeast(r.epoch, 0, "request.epoch"));
  OE_RETURN_IF_ERROR(NonEmpty(r.worker_generation, "request.worker_generation"));
  OE_RETURN_IF_ERROR(AtLeast(r.state_layout_version, 0, "request.state_layout_version"));
  for (const auto& b : r.inputs) OE_RETURN_IF_ERROR(Validate(b));
  if (r.state) {
    OE_RETURN_IF_ERROR(Validate(*r.state));
    if (!r.state->IsBound(r.worker_generation, r.epoch)) {
      return Status::Error("invalid_request", "request.state: not bound to the request's worker generation and epoch");
    }
    if (r.session_id.empty() || r.state->session_id != r.session_id) {
      return Status::Error("invalid_request", "request.state: session_id differs from the request's session_id");
    }
    if (r.state->artifact_id != r.artifact_id) {
      return Status::Error("invalid_request", "request.state: artifact_id differs from the request's artifact_id");
    }
    if (r.state->layout_version != r.state_layout_version) {
      return Status::Error("invalid_request",
                           "request.state: layout_version differs from the request's state_layout_version");
    }
  }
  if (r.operation == Operation::kRelease && (!r.state || !r.inputs.empty())) {
    return Status::Error("invalid_request", "request.operation: release requires a state and no inputs");
  }
  return Status::Ok();
}

Status Validate(const StageEvent& e) {
  OE_RETURN_IF_ERROR(NonEmpty(e.request_id, "event.request_id"));
  OE_RETURN_IF_ERROR(AtLeast(e.stage_id, 0, "event.stage_id"));
  OE_RETURN_IF_ERROR(AtLeast(e.epoch, 0, "event.epoch"));
  OE_RETURN_IF_ERROR(AtLeast(e.seq, 0, "event.seq"));
  OE_RETURN_IF_ERROR(NonEmpty(e.kind, "event.kind"));
  OE_RETURN_IF_ERROR(NonEmpty(e.worker_generation, "event.worker_generation"));
  for (const auto& b : e.buffers) OE_RETURN_IF_ERROR(Validate(b));
  OE_RETURN_IF_ERROR(AtLeast(e.started_monotonic_ns, 0, "event.started_monotonic_ns"));
  OE_RETURN_IF_ERROR(AtLeast(e.emitted_monotonic_ns, 0, "event.emitted_monotonic_ns"));
  if ((e.started_monotonic_ns == 0) != (e.emitted_monotonic_ns == 0)) {
    return Status::Error("invalid_event",
                         "event.emitted_monotonic_ns: started and emitted timestamps must be both zero or both set");
  }
  if (e.emitted_monotonic_ns < e.started_monotonic_ns) {
    return Status::Error("invalid_event", "event.emitted_monotonic_ns: emitted before started");
  }
  OE_RETURN_IF_ERROR(AtLeast(e.input_watermark, 0, "event.input_watermark"));
  OE_RETURN_IF_ERROR(AtLeast(e.payload_nbytes, 0, "event.payload_nbytes"));
  int64_t buffer_bytes = 0;
  for (const auto& b : e.buffers) buffer_bytes += b.nbytes;
  if (e.payload_nbytes != 0 && e.payload_nbytes < buffer_bytes) {
    return Status::Error("invalid_event", "event.payload_nbytes: " + std::to_string(e.payload_nbytes) +
                                              " is less than the buffers' " + std::to_string(buffer_bytes) + " bytes");
  }
  if (e.state) {
    OE_RETURN_IF_ERROR(Validate(*e.state));
    if (!e.state->IsBound(e.worker_generation, e.epoch)) {
      return Status::Error("invalid_event", "event.state: not bound to the event's worker generation and epoch");
    }
  }
  return Status::Ok();
}

Status Validate(const DeviceDescriptor& d) {
  OE_RETURN_IF_ERROR(NonEmpty(d.device_id, "device.device_id"));
  OE_RETURN_IF_ERROR(NonEmpty(d.name, "device.name"));
  OE_RETURN_IF_ERROR(NonEmpty(d.memory_pool, "device.memory_pool"));
  if (d.kind != "cpu" && d.kind != "gpu" && d.kind != "npu") {
    return FieldError("device.kind", "must be one of cpu, gpu, npu, got '" + d.kind + "'");
  }
  OE_RETURN_IF_ERROR(AtLeast(d.memory_bytes, 0, "device.memory_bytes"));
  for (size_t i = 0; i < d.backends.size(); ++i) {
    OE_RETURN_IF_ERROR(NonEmpty(d.backends[i], "device.backends[" + std::to_string(i) + "]"));
  }
  for (const auto& [key, value] : d.properties) OE_RETURN_IF_ERROR(NonEmpty(key, "device.properties"));
  return Status::Ok();
}

}  // namespace omni_edge::contract
