// The backend interface: a Backend loads Graphs (one compiled graph / method each) from
// artifact files; a Graph is bound once to caller-owned buffers and then run; its placement says
// what each run copies between those buffers and the backend. Backends
// report where each graph actually executes; a graph declared on the NPU that cannot run
// there entirely is a load error, never a silent CPU run.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/tensor.h"

namespace omni_edge {

struct GraphIo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
};

struct Placement {
  std::string graph;    // e.g. "decode_s512"
  std::string backend;  // onnxruntime | executorch
  std::string device;   // cpu | npu | gpu, as declared
  std::string engine;   // what actually ran it, e.g. CPUExecutionProvider, QNNExecutionProvider, XnnpackBackend
  int64_t nodes_on_engine = 0;
  int64_t nodes_elsewhere = 0;  // nodes on a fallback engine (CPU kernels); 0 for an NPU graph
  std::string detail;
  // What one run moves between the bound buffers and the backend's own memory, as bound now:
  // 0 when the backend reads and writes the bound buffers in place.
  int64_t bytes_in_per_run = 0, bytes_out_per_run = 0;
  std::string buffers;  // how the I/O is held, and why it is copied if it is
  // Memory the load allocated (the backend's packed copy of the weights) and how much of it is
  // on huge pages (platform::BackWithHugePages); `pages` says why not, where not all is.
  int64_t load_bytes = 0, huge_page_bytes = 0;
  std::string pages;
};

struct GraphSpec {
  std::string name;    // logical name for reports
  std::string path;    // graph file
  std::string method;  // method inside a multi-method program (ExecuTorch), else empty
  std::string device = "cpu";
  std::map<std::string, std::string> options;  // backend options (threads, qnn backend path, ...)
  // The files of the graph's artifact that its manifest hashes and that were re-hashed before
  // the load (absolute, normalized). Not empty: the backend opens no other file beside the
  // graph (a weights index and what it names must be among them).
  std::set<std::string> verified_files;
};

class Graph {
 public:
  virtual ~Graph() = default;
  virtual const std::vector<GraphIo>& inputs() const = 0;
  virtual const std::vector<GraphIo>& outputs() const = 0;
  // Buffers in the order of inputs() / outputs(); they must outlive the binding.
  virtual Status Bind(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs) = 0;
  virtual Status Run() = 0;
  virtual Placement placement() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  virtual Result<std::unique_ptr<Graph>> Load(const GraphSpec& spec) = 0;
};

// Creates the backend registered under `name` ("onnxruntime", "executorch"); `options`
// configure it (e.g. threads, library paths). Refuses names not built into this binary.
Result<std::unique_ptr<Backend>> CreateBackend(const std::string& name, const std::map<std::string, std::string>& options);
std::vector<std::string> AvailableBackends();
// ONNX Runtime's shared intra-op pool in this process (its first backend sizes it): 0 before
// that, or without ONNX Runtime. A reference that must sum as the sessions do uses as many threads.
int OnnxRuntimeProcessThreads();

}  // namespace omni_edge
