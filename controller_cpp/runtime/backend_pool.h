// Backends shared by the graphs of a session: one instance per (backend, options), so graphs
// of one artifact share its weights and the backend's process-wide state.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "base/platform/os.h"
#include "base/trace.h"
#include "runtime/graph.h"
#include "runtime/plan.h"
#include "runtime/tensor.h"

namespace omni_edge {

class BackendPool {
 public:
  Result<Backend*> Get(const std::string& name, const std::map<std::string, std::string>& options);
  // Files the session's manifests hash and that were re-hashed: every graph loaded through
  // the pool opens no other file (GraphSpec::verified_files). Empty: no artifact (validation).
  void AddVerified(const std::set<std::string>& files) { verified_.insert(files.begin(), files.end()); }
  const std::set<std::string>& verified() const { return verified_; }
  // The session's trace: every graph loaded through the pool records its runs there.
  trace::Recorder& trace() { return trace_; }
  const trace::Recorder& trace() const { return trace_; }

 private:
  trace::Recorder trace_;  // declared first: it outlives the backends and their graphs
  std::map<std::string, std::unique_ptr<Backend>> backends_;
  std::set<std::string> verified_;
};

// Loads graph `key` of a plan's graph group through the pool; `name` is for reports.
Result<std::unique_ptr<Graph>> LoadGraph(BackendPool& backends, const GraphGroup& group, const std::string& key,
                                         const std::string& name);

// Checks a graph's declared I/O against the buffers a caller binds, so a graph exported for
// another context length or model fails at load with both shapes named, not as garbage later.
// Puts resident state that every step streams (a KV cache) on huge pages, as LoadGraph does a
// backend's weights (unless OMNI_EDGE_HUGE_PAGES=off): a decode step at a long context reads every
// cached key and value once, and on 4 KiB pages each page is a TLB miss.
platform::HugePages StateOnHugePages(const std::vector<const HostTensor*>& tensors);

Status ExpectIo(const Graph& g, const std::string& name, const std::vector<TensorView>& inputs,
                const std::vector<TensorView>& outputs);

}  // namespace omni_edge
