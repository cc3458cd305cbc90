// Backends shared by the graphs of a session: one instance per (backend, options), so graphs
// of one artifact share its weights and the backend's process-wide state.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "runtime/graph.h"

namespace omni_edge {

class BackendPool {
 public:
  Result<Backend*> Get(const std::string& name, const std::map<std::string, std::string>& options);

 private:
  std::map<std::string, std::unique_ptr<Backend>> backends_;
};

}  // namespace omni_edge
