// ONNX Runtime backend through its C API. The library is loaded at run time (dlopen +
// OrtGetApiBase), so the controller links against nothing and uses whatever ONNX Runtime the
// platform ships (the pip wheel here, the APK's copy on a phone). Weights in a shared
// `weights.bin` (indexed by `weights.json`) are mapped once and handed to every session with
// AddInitializer plus one prepacked-weights container, so prefill and decode graphs of all
// context buckets share one copy. Device "npu" selects the QNN plugin EP (HTP backend) with
// CPU fallback disabled: a graph the HTP cannot run entirely fails to load, naming the ops.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "runtime/graph.h"

namespace omni_edge::ort {

// Options: "library" (path of libonnxruntime), "threads" (the shared intra-op pool, default all
// cores; the first backend of a process sizes it), "spinning" (0/1), "qnn_ep_library",
// "qnn_backend" (libQnnHtp.so), and any "qnn.<key>" passed through as a QNN provider option
// (e.g. qnn.htp_arch). Graph-group options "ort.<key>" become session config entries (e.g.
// "ort.session.disable_prepacking").
Result<std::unique_ptr<Backend>> CreateBackend(const std::map<std::string, std::string>& options);

// The shared intra-op pool's size, 0 before the process's first backend (a reference that must
// sum as the sessions do runs with this many threads).
int ProcessIntraOpThreads();

}  // namespace omni_edge::ort
