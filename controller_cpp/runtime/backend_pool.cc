#include "runtime/backend_pool.h"

namespace omni_edge {

Result<Backend*> BackendPool::Get(const std::string& name, const std::map<std::string, std::string>& options) {
  std::string key = name;
  for (const auto& [k, v] : options) key += "|" + k + "=" + v;
  auto it = backends_.find(key);
  if (it != backends_.end()) return it->second.get();
  OE_ASSIGN_OR_RETURN(auto backend, CreateBackend(name, options));
  Backend* raw = backend.get();
  backends_[key] = std::move(backend);
  return raw;
}

Result<std::unique_ptr<Graph>> LoadGraph(BackendPool& backends, const GraphGroup& group, const std::string& key,
                                         const std::string& name) {
  OE_ASSIGN_OR_RETURN(Backend * backend, backends.Get(group.backend, group.options));
  const GraphRef& ref = group.graphs.at(key);
  GraphSpec spec;
  spec.name = name;
  spec.path = ref.file;
  spec.method = ref.method;
  spec.device = group.device;
  spec.options = group.options;
  spec.verified_files = backends.verified();
  return backend->Load(spec);
}

Status ExpectIo(const Graph& g, const std::string& name, const std::vector<TensorView>& in, const std::vector<TensorView>& out) {
  auto check = [&](const std::vector<GraphIo>& ios, const std::vector<TensorView>& views, const char* what) -> Status {
    if (ios.size() != views.size()) {
      return Status::Error("graph_mismatch", name + ": has " + std::to_string(ios.size()) + " " + what + ", expected " +
                                                 std::to_string(views.size()));
    }
    for (size_t i = 0; i < ios.size(); ++i) {
      bool ok = ios[i].dtype == views[i].dtype && ios[i].shape.size() == views[i].shape.size();
      for (size_t d = 0; ok && d < ios[i].shape.size(); ++d) ok = ios[i].shape[d] < 0 || ios[i].shape[d] == views[i].shape[d];
      if (!ok) {
        return Status::Error("graph_mismatch", name + ": " + what + " " + std::to_string(i) + " (" + ios[i].name + ") is " +
                                                   DTypeName(ios[i].dtype) + ShapeString(ios[i].shape) + ", the plan needs " +
                                                   DTypeName(views[i].dtype) + ShapeString(views[i].shape));
      }
    }
    return Status::Ok();
  };
  OE_RETURN_IF_ERROR(check(g.inputs(), in, "input"));
  return check(g.outputs(), out, "output");
}

}  // namespace omni_edge
