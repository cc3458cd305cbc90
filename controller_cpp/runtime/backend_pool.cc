#include "runtime/backend_pool.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "base/platform/os.h"

namespace omni_edge {
namespace {

// A graph whose runs show in the session's trace as spans named after it, on the thread that ran
// them, with where it ran and the bytes each run copies. Untraced runs cost one atomic load.
class TracedGraph final : public Graph {
 public:
  TracedGraph(std::unique_ptr<Graph> inner, trace::Recorder* trace, int64_t load_bytes, platform::HugePages pages)
      : inner_(std::move(inner)), trace_(trace), load_bytes_(load_bytes), pages_(std::move(pages)) {}
  const std::vector<GraphIo>& inputs() const override { return inner_->inputs(); }
  const std::vector<GraphIo>& outputs() const override { return inner_->outputs(); }
  Status Bind(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs) override {
    OE_RETURN_IF_ERROR(inner_->Bind(inputs, outputs));
    placement_ = placement();  // bytes per run follow the binding
    return Status::Ok();
  }
  Status Run() override {
    if (!trace_->enabled()) return inner_->Run();
    trace::Span span(trace_, placement_.graph, "graph",
                     Json{{"device", placement_.device}, {"engine", placement_.engine}, {"backend", placement_.backend},
                          {"bytes_in", placement_.bytes_in_per_run}, {"bytes_out", placement_.bytes_out_per_run}});
    return inner_->Run();
  }
  Placement placement() const override {
    Placement p = inner_->placement();
    p.load_bytes = load_bytes_;
    p.huge_page_bytes = pages_.huge_bytes;
    p.pages = pages_.detail;
    return p;
  }

 private:
  std::unique_ptr<Graph> inner_;
  trace::Recorder* trace_;
  int64_t load_bytes_;
  platform::HugePages pages_;
  Placement placement_;
};

// OMNI_EDGE_HUGE_PAGES=off keeps a backend's memory on the OS's default pages (to compare).
bool HugePagesWanted() {
  const char* v = std::getenv("OMNI_EDGE_HUGE_PAGES");
  return v == nullptr || std::strcmp(v, "off") != 0;
}

}  // namespace

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

platform::HugePages StateOnHugePages(const std::vector<const HostTensor*>& tensors) {
  if (!HugePagesWanted()) return platform::HugePages{0, 0, "off (OMNI_EDGE_HUGE_PAGES=off)"};
  std::vector<platform::MemoryRange> ranges;
  for (const HostTensor* t : tensors) {
    const auto begin = reinterpret_cast<uintptr_t>(t->data<char>());
    ranges.push_back({begin, begin + t->nbytes()});
  }
  return platform::BackWithHugePages(ranges);
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
  // One load at a time in the process, so that what appeared in the window is this load's
  // (stages and sessions load on their own threads).
  static std::mutex load_window;
  std::lock_guard<std::mutex> one_load(load_window);
  const std::vector<platform::MemoryRange> before = platform::AnonymousMemory();
  OE_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, backend->Load(spec));
  // What the load allocated is, for CPU backends, the weights in the layout their kernels read:
  // streamed once per decode step, they go on huge pages (one TLB entry per 2 MiB, not per 4 KiB).
  // Other threads' allocations in the window (a request running beside the load) may be counted.
  const std::vector<platform::MemoryRange> loaded = platform::Subtract(platform::AnonymousMemory(), before);
  platform::HugePages pages;
  if (HugePagesWanted()) {
    pages = platform::BackWithHugePages(loaded);
  } else {
    pages.detail = "off (OMNI_EDGE_HUGE_PAGES=off)";
  }
  int64_t load_bytes = 0;
  for (const auto& r : loaded) load_bytes += int64_t(r.end - r.begin);
  auto traced = std::make_unique<TracedGraph>(std::move(graph), &backends.trace(), load_bytes, std::move(pages));
  return std::unique_ptr<Graph>(std::move(traced));
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
