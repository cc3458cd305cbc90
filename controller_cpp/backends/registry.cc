// The backends built into this binary, by name.
#include "runtime/graph.h"

#ifdef OMNI_EDGE_WITH_ONNXRUNTIME
#include "backends/onnxruntime/ort_backend.h"
#endif
#ifdef OMNI_EDGE_WITH_EXECUTORCH
#include "backends/executorch/et_backend.h"
#endif

namespace omni_edge {

std::vector<std::string> AvailableBackends() {
  std::vector<std::string> names;
#ifdef OMNI_EDGE_WITH_ONNXRUNTIME
  names.push_back("onnxruntime");
#endif
#ifdef OMNI_EDGE_WITH_EXECUTORCH
  names.push_back("executorch");
#endif
  return names;
}

int OnnxRuntimeProcessThreads() {
#ifdef OMNI_EDGE_WITH_ONNXRUNTIME
  return ort::ProcessIntraOpThreads();
#else
  return 0;
#endif
}

Result<std::unique_ptr<Backend>> CreateBackend(const std::string& name, const std::map<std::string, std::string>& options) {
#ifdef OMNI_EDGE_WITH_ONNXRUNTIME
  if (name == "onnxruntime") return ort::CreateBackend(options);
#endif
#ifdef OMNI_EDGE_WITH_EXECUTORCH
  if (name == "executorch") return et::CreateBackend(options);
#endif
  std::string available;
  for (const auto& n : AvailableBackends()) available += (available.empty() ? "" : ", ") + n;
  return Status::Error("backend_unavailable", "backend '" + name + "' is not built into this binary (available: " +
                                                  (available.empty() ? "none" : available) + ")");
}

}  // namespace omni_edge
