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

}  // namespace omni_edge
