#include "pipeline/wire.h"

namespace omni_edge::pipeline {
namespace {

void Add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, std::string bytes,
         const std::string& owner, const std::string& generation, contract::StageEvent* ev, contract::BufferData* data) {
  contract::BufferRef b;
  b.object_id = name;
  b.owner = owner;
  b.generation = generation;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.nbytes = int64_t(bytes.size());
  ev->buffers.push_back(std::move(b));
  data->push_back(std::move(bytes));
}

}  // namespace

const Payload* Input::Find(const std::string& name) const {
  for (const auto& p : payloads) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Status AddPayload(Payload p, const std::string& owner, const std::string& generation, contract::StageEvent* ev,
                  contract::BufferData* data) {
  int64_t items = 1;
  for (int64_t d : p.shape) items *= d;
  if (items * contract::DtypeSize(p.dtype) != int64_t(p.bytes.size())) {
    return Status::Error("internal", "payload '" + p.name + "': " + std::to_string(p.bytes.size()) +
                                         " bytes do not hold its shape of " + p.dtype);
  }
  Add(p.name, p.dtype, std::move(p.shape), std::move(p.bytes), owner, generation, ev, data);
  return Status::Ok();
}

void AddFields(const Json& fields, const std::string& owner, const std::string& generation, contract::StageEvent* ev,
               contract::BufferData* data) {
  if (fields.empty()) return;
  std::string text = fields.dump();
  const int64_t n = int64_t(text.size());
  Add(kFieldsPayload, "uint8", {n}, std::move(text), owner, generation, ev, data);
}

Input Decode(contract::Delivered&& delivered) {
  const contract::StageEvent& ev = delivered.event;
  Input in;
  in.kind = ev.kind;
  in.seq = ev.seq;
  in.emitted_monotonic_ns = ev.emitted_monotonic_ns;
  for (size_t b = 0; b < ev.buffers.size() && b < delivered.data.size(); ++b) {
    const contract::BufferRef& ref = ev.buffers[b];
    if (ref.object_id == kFieldsPayload) {
      auto fields = ParseJson(delivered.data[b], "event fields");
      if (fields.ok() && fields->is_object()) in.fields = std::move(fields).value();
      continue;
    }
    in.payloads.push_back({ref.object_id, ref.dtype, ref.shape, std::move(delivered.data[b])});
  }
  return in;
}

}  // namespace omni_edge::pipeline
