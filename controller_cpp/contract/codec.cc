#include "contract/codec.h"

namespace omni_edge::contract {
namespace {

// Decodes an optional nested object; nullopt when absent or null.
template <typename T, typename Decode>
std::optional<T> OptionalNested(FieldReader& r, const char* name, const std::string& where, Decode decode) {
  const Json* j = r.Object(name, /*required=*/false);
  if (j == nullptr) return std::nullopt;
  auto value = decode(*j, where + "." + name);
  if (!value.ok()) {
    r.Fail(value.status());
    return std::nullopt;
  }
  return std::move(value).value();
}

std::vector<BufferRef> Buffers(FieldReader& r, const char* name, const std::string& where) {
  std::vector<BufferRef> out;
  const Json* list = r.Array(name, /*required=*/false);
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size() && r.ok(); ++i) {
    auto b = BufferRefFromJson((*list)[i], where + "." + name + "[" + std::to_string(i) + "]");
    if (!b.ok()) {
      r.Fail(b.status());
    } else {
      out.push_back(std::move(b).value());
    }
  }
  return out;
}

// Validate, then refuse unknown fields: the order the Python reference raises in.
template <typename T>
Result<T> Finish(FieldReader& r, T value) {
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(Validate(value));
  OE_RETURN_IF_ERROR(r.Done());
  return value;
}

Json OptionalToJson(const std::optional<StateHandle>& s) { return s ? ToJson(*s) : Json(nullptr); }

}  // namespace

Result<BufferRef> BufferRefFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  BufferRef b;
  b.object_id = r.String("object_id");
  b.owner = r.String("owner");
  b.generation = r.String("generation");
  b.dtype = r.String("dtype");
  if (const Json* shape = r.Array("shape")) {
    for (size_t i = 0; i < shape->size() && r.ok(); ++i) {
      int64_t dim = 0;
      r.Fail(CheckInt((*shape)[i], where + ".shape[" + std::to_string(i) + "]", 0, &dim));
      b.shape.push_back(dim);
    }
  }
  b.nbytes = r.Int("nbytes", true, 0);
  b.memory_domain = r.String("memory_domain", false, true, "host-copy");
  b.layout = r.String("layout", false, true, "C");
  b.ready = r.Bool("ready", false, true);
  return Finish(r, std::move(b));
}

Result<StateHandle> StateHandleFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  StateHandle s;
  s.session_id = r.String("session_id");
  s.backend = r.String("backend");
  s.artifact_id = r.String("artifact_id");
  s.layout_version = r.Int("layout_version", true, 1);
  s.epoch = r.Int("epoch", true, 0);
  s.replayable = r.Bool("replayable", false);
  s.migratable = r.Bool("migratable", false);
  s.backend_instance_id = r.String("backend_instance_id", false, false);
  s.worker_generation = r.String("worker_generation", false, false);
  s.state_id = r.String("state_id", false, false);
  return Finish(r, std::move(s));
}

Result<StageRequest> StageRequestFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  StageRequest q;
  q.request_id = r.String("request_id");
  q.stage_id = r.Int("stage_id", true, 0);
  q.epoch = r.Int("epoch", true, 0);
  q.worker_generation = r.String("worker_generation");
  const std::string operation = r.String("operation");
  q.inputs = Buffers(r, "inputs", where);
  q.state = OptionalNested<StateHandle>(r, "state", where, StateHandleFromJson);
  q.artifact_id = r.String("artifact_id", false, false);
  q.state_layout_version = r.Int("state_layout_version", false, 0);
  q.session_id = r.String("session_id", false, false);
  if (!r.ok()) return r.status();
  if (operation == "run") {
    q.operation = Operation::kRun;
  } else if (operation == "cancel") {
    q.operation = Operation::kCancel;
  } else if (operation == "release") {
    q.operation = Operation::kRelease;
  } else {
    return Status::Error("invalid_field",
                         "request.operation: must be one of run, cancel, release, got '" + operation + "'");
  }
  return Finish(r, std::move(q));
}

Result<StageEvent> StageEventFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  StageEvent e;
  e.request_id = r.String("request_id");
  e.stage_id = r.Int("stage_id", true, 0);
  e.epoch = r.Int("epoch", true, 0);
  e.seq = r.Int("seq", true, 0);
  e.kind = r.String("kind");
  e.worker_generation = r.String("worker_generation");
  e.buffers = Buffers(r, "buffers", where);
  e.terminal = r.Bool("terminal", false);
  e.error = r.OptionalString("error");
  e.state = OptionalNested<StateHandle>(r, "state", where, StateHandleFromJson);
  e.started_monotonic_ns = r.Int("started_monotonic_ns", false, 0);
  e.emitted_monotonic_ns = r.Int("emitted_monotonic_ns", false, 0);
  e.input_watermark = r.Int("input_watermark", false, 0);
  e.payload_nbytes = r.Int("payload_nbytes", false, 0);
  e.release_token = r.String("release_token", false, false);
  return Finish(r, std::move(e));
}

Result<DeviceDescriptor> DeviceDescriptorFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  DeviceDescriptor d;
  d.device_id = r.String("device_id");
  d.kind = r.String("kind");
  d.name = r.String("name");
  d.memory_pool = r.String("memory_pool");
  d.memory_bytes = r.Int("memory_bytes", true, 0);
  if (const Json* backends = r.Array("backends", false)) {
    for (size_t i = 0; i < backends->size() && r.ok(); ++i) {
      const Json& b = (*backends)[i];
      if (!b.is_string()) {
        r.Fail(Status::Error("invalid_field", where + ".backends[" + std::to_string(i) + "]: expected a string"));
      } else {
        d.backends.push_back(b.get<std::string>());
      }
    }
  }
  if (const Json* props = r.Object("properties", false)) {
    for (auto it = props->begin(); it != props->end() && r.ok(); ++it) {
      if (!it.value().is_string()) {
        r.Fail(Status::Error("invalid_field", "device.properties." + it.key() + ": expected a string"));
      } else {
        d.properties[it.key()] = it.value().get<std::string>();
      }
    }
  }
  return Finish(r, std::move(d));
}

Json ToJson(const BufferRef& b) {
  return Json{{"object_id", b.object_id}, {"owner", b.owner},   {"generation", b.generation},
              {"dtype", b.dtype},         {"shape", b.shape},   {"nbytes", b.nbytes},
              {"memory_domain", b.memory_domain}, {"layout", b.layout}, {"ready", b.ready}};
}

Json ToJson(const StateHandle& s) {
  return Json{{"session_id", s.session_id},
              {"backend", s.backend},
              {"artifact_id", s.artifact_id},
              {"layout_version", s.layout_version},
              {"epoch", s.epoch},
              {"replayable", s.replayable},
              {"migratable", s.migratable},
              {"backend_instance_id", s.backend_instance_id},
              {"worker_generation", s.worker_generation},
              {"state_id", s.state_id}};
}

Json ToJson(const StageRequest& r) {
  Json inputs = Json::array();
  for (const auto& b : r.inputs) inputs.push_back(ToJson(b));
  return Json{{"request_id", r.request_id},
              {"stage_id", r.stage_id},
              {"epoch", r.epoch},
              {"worker_generation", r.worker_generation},
              {"operation", OperationName(r.operation)},
              {"inputs", std::move(inputs)},
              {"state", OptionalToJson(r.state)},
              {"artifact_id", r.artifact_id},
              {"state_layout_version", r.state_layout_version},
              {"session_id", r.session_id}};
}

Json ToJson(const StageEvent& e) {
  Json buffers = Json::array();
  for (const auto& b : e.buffers) buffers.push_back(ToJson(b));
  return Json{{"request_id", e.request_id},
              {"stage_id", e.stage_id},
              {"epoch", e.epoch},
              {"seq", e.seq},
              {"kind", e.kind},
              {"worker_generation", e.worker_generation},
              {"buffers", std::move(buffers)},
              {"terminal", e.terminal},
              {"error", e.error ? Json(*e.error) : Json(nullptr)},
              {"state", OptionalToJson(e.state)},
              {"started_monotonic_ns", e.started_monotonic_ns},
              {"emitted_monotonic_ns", e.emitted_monotonic_ns},
              {"input_watermark", e.input_watermark},
              {"payload_nbytes", e.payload_nbytes},
              {"release_token", e.release_token}};
}

Json ToJson(const DeviceDescriptor& d) {
  return Json{{"device_id", d.device_id},     {"kind", d.kind},
              {"name", d.name},               {"memory_pool", d.memory_pool},
              {"memory_bytes", d.memory_bytes}, {"backends", d.backends},
              {"properties", d.properties}};
}

Result<std::string> CanonicalJson(const std::string& type_name, const std::string& text) {
  OE_ASSIGN_OR_RETURN(Json j, ParseJson(text, type_name));
  if (type_name == "buffer") {
    OE_ASSIGN_OR_RETURN(BufferRef v, BufferRefFromJson(j));
    return ToJson(v).dump();
  }
  if (type_name == "state") {
    OE_ASSIGN_OR_RETURN(StateHandle v, StateHandleFromJson(j));
    return ToJson(v).dump();
  }
  if (type_name == "request") {
    OE_ASSIGN_OR_RETURN(StageRequest v, StageRequestFromJson(j));
    return ToJson(v).dump();
  }
  if (type_name == "event") {
    OE_ASSIGN_OR_RETURN(StageEvent v, StageEventFromJson(j));
    return ToJson(v).dump();
  }
  if (type_name == "device") {
    OE_ASSIGN_OR_RETURN(DeviceDescriptor v, DeviceDescriptorFromJson(j));
    return ToJson(v).dump();
  }
  return Status::Error("invalid_argument", "unknown contract type '" + type_name + "'");
}

}  // namespace omni_edge::contract
