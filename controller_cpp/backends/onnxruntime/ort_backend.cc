#include "backends/onnxruntime/ort_backend.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <onnxruntime_c_api.h>

#include "base/json_fields.h"
#include "base/platform/os.h"
#include "runtime/binding.h"
#include "runtime/weights_index.h"

#ifndef OMNI_EDGE_ORT_LIBRARY
#define OMNI_EDGE_ORT_LIBRARY "libonnxruntime.so.1"
#endif
#ifndef OMNI_EDGE_QNN_EP_LIBRARY  // "builtin": the QNN EP is inside the ONNX Runtime library (Android's AAR)
#define OMNI_EDGE_QNN_EP_LIBRARY "libonnxruntime_providers_qnn.so"
#endif
#ifndef OMNI_EDGE_QNN_BACKEND
#define OMNI_EDGE_QNN_BACKEND "libQnnHtp.so"
#endif

namespace omni_edge::ort {
namespace fs = std::filesystem;
namespace {

// A non-empty option, else a non-empty environment variable, else the fallback (never "":
// dlopen("") would return the main program).
std::string Option(const std::map<std::string, std::string>& options, const std::string& key, const char* env,
                   const std::string& fallback) {
  auto it = options.find(key);
  if (it != options.end() && !it->second.empty()) return it->second;
  if (env != nullptr) {
    if (const char* v = std::getenv(env); v != nullptr && *v != '\0') return v;
  }
  return platform::ResolveOrigin(fallback);  // a bundle's defaults are relative to the binary
}

// The process-wide ONNX Runtime: one library, one API table, one environment with one
// intra-op thread pool that every session shares (a session per graph, each with its own
// spinning pool, would fight over the cores between the runs of a token). ORT allows one
// environment per process, so this is created once and kept for the life of the process.
class OrtProcess {
 public:
  static Result<OrtProcess*> Get(const std::string& library_path, int threads, bool spinning) {
    std::lock_guard<std::mutex> lock(mu_);
    if (instance_ != nullptr) return instance_;
    // ONNX Runtime's POSIX builds write a device id and an event cache under ~/.cache unless
    // this is set before the library initializes; an on-device runtime does not phone home by
    // default (a user who sets the variable decides).
    platform::SetEnvironmentDefault("ORT_DISABLE_TELEMETRY", "1");
    auto lib = platform::LoadSharedLibrary(library_path);
    if (!lib.ok()) return Status::Error("backend_unavailable", "ONNX Runtime: " + lib.status().message() + " (set OMNI_EDGE_ONNXRUNTIME_LIB)");
    using GetApiBase = const OrtApiBase* (*)();
    auto get_base = reinterpret_cast<GetApiBase>(platform::FindSymbol(*lib, "OrtGetApiBase"));
    if (get_base == nullptr) return Status::Error("backend_unavailable", library_path + " has no OrtGetApiBase");
    const OrtApiBase* base = get_base();
    const OrtApi* api = base->GetApi(ORT_API_VERSION);
    if (api == nullptr) {
      return Status::Error("backend_unavailable", std::string("ONNX Runtime ") + base->GetVersionString() +
                                                      " does not offer C API version " + std::to_string(ORT_API_VERSION));
    }
    std::unique_ptr<OrtProcess> p(new OrtProcess(api, base->GetVersionString()));
    OrtThreadingOptions* pool = nullptr;
    OrtEnv* env = nullptr;
    OrtStatus* st = api->CreateThreadingOptions(&pool);
    if (st == nullptr) st = api->SetGlobalIntraOpNumThreads(pool, threads);
    if (st == nullptr) st = api->SetGlobalInterOpNumThreads(pool, 1);
    if (st == nullptr) st = api->SetGlobalSpinControl(pool, spinning ? 1 : 0);
    if (st == nullptr) {
      st = api->CreateEnvWithCustomLoggerAndGlobalThreadPools(&OrtProcess::Log, p.get(), ORT_LOGGING_LEVEL_WARNING,
                                                              "omni-edge", pool, &env);
    }
    if (pool != nullptr) api->ReleaseThreadingOptions(pool);
    if (st != nullptr) {
      std::string msg = api->GetErrorMessage(st);
      api->ReleaseStatus(st);
      return Status::Error("backend_unavailable", "ONNX Runtime environment: " + msg);
    }
    p->env_ = env;
    if (OrtStatus* off = api->DisableTelemetryEvents(env)) api->ReleaseStatus(off);  // Windows' ETW events
    p->threads_ = threads;
    instance_ = p.release();
    return instance_;
  }

  // The process's environment if one was created, else nullptr.
  static const OrtProcess* Existing() {
    std::lock_guard<std::mutex> lock(mu_);
    return instance_;
  }

  const OrtApi* api() const { return api_; }
  OrtEnv* env() const { return env_; }
  const std::string& version() const { return version_; }
  int threads() const { return threads_; }

  // Collects warnings while a session is created (QNN lists the ops it cannot run this way).
  void BeginCapture() {
    std::lock_guard<std::mutex> lock(log_mu_);
    capturing_ = true;
    captured_.clear();
  }
  std::vector<std::string> EndCapture() {
    std::lock_guard<std::mutex> lock(log_mu_);
    capturing_ = false;
    return std::move(captured_);
  }

  std::mutex& create_mutex() { return create_mu_; }

  // Registers the QNN plugin EP library once and returns its EP device.
  Result<const OrtEpDevice*> QnnDevice(const std::string& ep_library) {
    std::lock_guard<std::mutex> lock(create_mu_);
    if (!qnn_registered_) {
      platform::StdoutToStderr quiet;  // the QNN HTP library prints a banner on stdout as it loads
      const fs::path library = fs::u8path(ep_library);  // ORTCHAR_T is path's char type: wchar_t on Windows
      if (OrtStatus* st = api_->RegisterExecutionProviderLibrary(env_, "QNNExecutionProvider", library.c_str())) {
        std::string msg = api_->GetErrorMessage(st);
        api_->ReleaseStatus(st);
        return Status::Error("backend_unavailable", "cannot register the QNN EP library '" + ep_library + "': " + msg);
      }
      qnn_registered_ = true;
    }
    const OrtEpDevice* const* devices = nullptr;
    size_t count = 0;
    if (OrtStatus* st = api_->GetEpDevices(env_, &devices, &count)) {
      std::string msg = api_->GetErrorMessage(st);
      api_->ReleaseStatus(st);
      return Status::Error("backend_unavailable", "GetEpDevices: " + msg);
    }
    for (size_t i = 0; i < count; ++i) {
      if (std::strcmp(api_->EpDevice_EpName(devices[i]), "QNNExecutionProvider") == 0) return devices[i];
    }
    return Status::Error("device_unavailable", "the QNN EP offers no device on this machine");
  }

 private:
  OrtProcess(const OrtApi* api, std::string version) : api_(api), version_(std::move(version)) {}

  static void ORT_API_CALL Log(void* param, OrtLoggingLevel severity, const char* category, const char* logid,
                               const char* code_location, const char* message) {
    auto* self = static_cast<OrtProcess*>(param);
    std::lock_guard<std::mutex> lock(self->log_mu_);
    if (self->capturing_) {
      self->captured_.emplace_back(message);
    } else if (severity >= ORT_LOGGING_LEVEL_ERROR) {
      std::fprintf(stderr, "[onnxruntime] %s\n", message);
    }
  }

  const OrtApi* api_;
  OrtEnv* env_ = nullptr;
  std::string version_;
  std::mutex log_mu_;
  bool capturing_ = false;
  std::vector<std::string> captured_;
  std::mutex create_mu_;
  bool qnn_registered_ = false;
  int threads_ = 1;
  static inline std::mutex mu_;
  static inline OrtProcess* instance_ = nullptr;  // created once, kept for the life of the process
};

Status FromOrt(const OrtApi* api, OrtStatus* st, const std::string& what) {
  if (st == nullptr) return Status::Ok();
  std::string msg = what + ": " + api->GetErrorMessage(st);
  api->ReleaseStatus(st);
  return Status::Error("backend_error", msg);
}

Result<DType> FromOrtType(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return DType::kFloat32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return DType::kFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return DType::kInt64;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return DType::kInt32;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return DType::kUint16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return DType::kInt16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return DType::kUint8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return DType::kInt8;
    default: return Status::Error("unsupported_graph", "graph I/O element type " + std::to_string(int(t)));
  }
}

ONNXTensorElementDataType ToOrtType(DType t) {
  switch (t) {
    case DType::kFloat32: return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    case DType::kFloat16: return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case DType::kInt64: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    case DType::kInt32: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
    case DType::kUint16: return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16;
    case DType::kInt16: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16;
    case DType::kUint8: return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
    case DType::kInt8: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
  }
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
}

// An ONNX graph names its own I/O, and a dim it leaves symbolic (negative) takes any size.
constexpr BindingRules kOnnxBinding{"graph", /*quote_names=*/true, /*symbolic_dims=*/true};

// Weights shared by every graph of one artifact: `weights.bin` mapped once, one OrtValue per
// tensor over the mapping (never copied), and one prepacked-weights container.
class WeightStore {
 public:
  static Result<std::shared_ptr<WeightStore>> Open(OrtProcess* ort, const fs::path& index_path,
                                                   const std::function<Status(const fs::path&)>& check_data) {
    OE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(index_path.u8string()));
    OE_ASSIGN_OR_RETURN(Json j, ParseJson(text, index_path.string()));
    OE_ASSIGN_OR_RETURN(WeightsIndex index, ParseWeightsIndex(j, index_path, /*data_size=*/-1));
    auto store = std::shared_ptr<WeightStore>(new WeightStore(ort));
    const fs::path data_path = index.data_path;
    OE_RETURN_IF_ERROR(check_data(data_path));
    OE_ASSIGN_OR_RETURN(store->mapping_, platform::ReadOnlyMapping::Open(data_path.string()));
    // Bounds against the file as mapped (it was hashed just before): an index cannot reach past it.
    OE_ASSIGN_OR_RETURN(index, ParseWeightsIndex(j, index_path, int64_t(store->mapping_->size())));
    const OrtApi* api = ort->api();
    OE_RETURN_IF_ERROR(FromOrt(api, api->CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &store->cpu_), "memory info"));
    for (WeightsIndex::Tensor& t : index.tensors) {
      OrtValue* value = nullptr;
      OE_RETURN_IF_ERROR(FromOrt(api, api->CreateTensorWithDataAsOrtValue(
                                           store->cpu_, const_cast<char*>(store->mapping_->data()) + t.offset, size_t(t.nbytes),
                                           t.shape.data(), t.shape.size(), ToOrtType(t.dtype), &value),
                                 "weight " + t.name));
      store->values_[t.name] = value;
    }
    store->graph_weights_ = std::move(index.graphs);
    OE_RETURN_IF_ERROR(FromOrt(api, api->CreatePrepackedWeightsContainer(&store->prepacked_), "prepacked container"));
    return store;
  }

  ~WeightStore() {
    const OrtApi* api = ort_->api();
    for (auto& [name, v] : values_) api->ReleaseValue(v);
    if (prepacked_ != nullptr) api->ReleasePrepackedWeightsContainer(prepacked_);
    if (cpu_ != nullptr) api->ReleaseMemoryInfo(cpu_);
  }

  // Adds the graph's shared weights to its session options.
  Status AddTo(OrtSessionOptions* so, const std::string& graph_file) const {
    auto it = graph_weights_.find(graph_file);
    if (it == graph_weights_.end()) return Status::Ok();
    for (const auto& name : it->second) {
      auto v = values_.find(name);
      if (v == values_.end()) return Status::Error("invalid_artifact", "weights.json: unknown weight '" + name + "'");
      OE_RETURN_IF_ERROR(FromOrt(ort_->api(), ort_->api()->AddInitializer(so, name.c_str(), v->second), "AddInitializer"));
    }
    return Status::Ok();
  }
  OrtPrepackedWeightsContainer* prepacked() const { return prepacked_; }
  // After a session has prepacked its weights, the mapped originals are only read by the few
  // ops that use them raw (an embedding gathers rows): drop the resident pages; they fault
  // back in from the file when touched.
  void ReleaseResidentPages() const {
    mapping_->DropResidentPages();
  }

 private:
  explicit WeightStore(OrtProcess* ort) : ort_(ort) {}
  OrtProcess* ort_;
  std::unique_ptr<platform::ReadOnlyMapping> mapping_;  // never copied; registered for fault reports
  OrtMemoryInfo* cpu_ = nullptr;
  OrtPrepackedWeightsContainer* prepacked_ = nullptr;
  std::map<std::string, OrtValue*> values_;
  std::map<std::string, std::vector<std::string>> graph_weights_;
};

class OrtGraph : public Graph {
 public:
  OrtGraph(OrtProcess* ort, OrtSession* session, std::shared_ptr<WeightStore> weights, Placement placement)
      : ort_(ort), session_(session), weights_(std::move(weights)), placement_(std::move(placement)) {}

  ~OrtGraph() override {
    ReleaseBound();
    if (cpu_ != nullptr) ort_->api()->ReleaseMemoryInfo(cpu_);
    ort_->api()->ReleaseSession(session_);
  }

  Status Init() {
    const OrtApi* api = ort_->api();
    OE_RETURN_IF_ERROR(FromOrt(api, api->CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &cpu_), "memory info"));
    OrtAllocator* allocator = nullptr;
    OE_RETURN_IF_ERROR(FromOrt(api, api->GetAllocatorWithDefaultOptions(&allocator), "allocator"));
    for (bool is_input : {true, false}) {
      size_t count = 0;
      OE_RETURN_IF_ERROR(FromOrt(api, is_input ? api->SessionGetInputCount(session_, &count)
                                               : api->SessionGetOutputCount(session_, &count), "I/O count"));
      for (size_t i = 0; i < count; ++i) {
        char* name = nullptr;
        OrtTypeInfo* type_info = nullptr;
        OE_RETURN_IF_ERROR(FromOrt(api, is_input ? api->SessionGetInputName(session_, i, allocator, &name)
                                                 : api->SessionGetOutputName(session_, i, allocator, &name), "I/O name"));
        GraphIo io;
        io.name = name;
        allocator->Free(allocator, name);
        OE_RETURN_IF_ERROR(FromOrt(api, is_input ? api->SessionGetInputTypeInfo(session_, i, &type_info)
                                                 : api->SessionGetOutputTypeInfo(session_, i, &type_info), "I/O type"));
        const OrtTensorTypeAndShapeInfo* tensor_info = nullptr;
        Status st = FromOrt(api, api->CastTypeInfoToTensorInfo(type_info, &tensor_info), "I/O tensor info");
        ONNXTensorElementDataType elem = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
        size_t dims = 0;
        if (st.ok() && tensor_info == nullptr) st = Status::Error("unsupported_graph", io.name + " is not a tensor");
        if (st.ok()) st = FromOrt(api, api->GetTensorElementType(tensor_info, &elem), "element type");
        if (st.ok()) st = FromOrt(api, api->GetDimensionsCount(tensor_info, &dims), "rank");
        if (st.ok()) {
          io.shape.resize(dims);
          st = FromOrt(api, api->GetDimensions(tensor_info, io.shape.data(), dims), "dims");
        }
        api->ReleaseTypeInfo(type_info);
        OE_RETURN_IF_ERROR(st);
        OE_ASSIGN_OR_RETURN(io.dtype, FromOrtType(elem));
        (is_input ? inputs_ : outputs_).push_back(std::move(io));
      }
    }
    for (const auto& io : inputs_) input_names_.push_back(io.name.c_str());
    for (const auto& io : outputs_) output_names_.push_back(io.name.c_str());
    return Status::Ok();
  }

  const std::vector<GraphIo>& inputs() const override { return inputs_; }
  const std::vector<GraphIo>& outputs() const override { return outputs_; }

  Status Bind(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs) override {
    ReleaseBound();  // a refused binding leaves the graph unbound: Run() says so
    OE_RETURN_IF_ERROR(CheckBinding(placement_.graph, inputs_, outputs_, inputs, outputs, kOnnxBinding));
    for (bool is_input : {true, false}) {
      const auto& views = is_input ? inputs : outputs;
      const auto& ios = is_input ? inputs_ : outputs_;
      auto& bound = is_input ? bound_inputs_ : bound_outputs_;
      for (size_t i = 0; i < views.size(); ++i) {
        OrtValue* value = nullptr;
        OE_RETURN_IF_ERROR(FromOrt(ort_->api(), ort_->api()->CreateTensorWithDataAsOrtValue(
                                                    cpu_, views[i].data, views[i].nbytes(), views[i].shape.data(),
                                                    views[i].shape.size(), ToOrtType(views[i].dtype), &value),
                                   placement_.graph + ": bind " + ios[i].name));
        bound.push_back(value);
        (is_input ? bound_in_bytes_ : bound_out_bytes_) += int64_t(views[i].nbytes());
      }
    }
    return Status::Ok();
  }

  Status Run() override {
    if (bound_inputs_.size() != inputs_.size()) return Status::Error("invalid_binding", placement_.graph + ": not bound");
    return FromOrt(ort_->api(),
                   ort_->api()->Run(session_, nullptr, input_names_.data(), bound_inputs_.data(), bound_inputs_.size(),
                                    output_names_.data(), output_names_.size(), bound_outputs_.data()),
                   placement_.graph);
  }

  Placement placement() const override {
    Placement p = placement_;
    if (placement_.engine == "QNNExecutionProvider") {
      // Host buffers reach the HTP as QNN client buffers, which the backend copies every run;
      // the HTP shared-memory (rpcmem) allocator that would avoid it exists only on a device.
      p.bytes_in_per_run = bound_in_bytes_;
      p.bytes_out_per_run = bound_out_bytes_;
      p.buffers = "host memory as QNN client buffers, copied in and out every run (HTP shared memory needs a "
                  "Snapdragon device's rpcmem: not used)";
    } else {
      p.buffers = "host memory bound once, read and written in place";
    }
    return p;
  }

 private:
  void ReleaseBound() {
    for (OrtValue* v : bound_inputs_) ort_->api()->ReleaseValue(v);
    for (OrtValue* v : bound_outputs_) ort_->api()->ReleaseValue(v);
    bound_inputs_.clear();
    bound_outputs_.clear();
    bound_in_bytes_ = bound_out_bytes_ = 0;
  }

  OrtProcess* ort_;
  OrtSession* session_;
  std::shared_ptr<WeightStore> weights_;  // keeps the mapped weights alive while the session lives
  Placement placement_;
  OrtMemoryInfo* cpu_ = nullptr;
  std::vector<GraphIo> inputs_, outputs_;
  std::vector<const char*> input_names_, output_names_;
  std::vector<OrtValue*> bound_inputs_, bound_outputs_;
  int64_t bound_in_bytes_ = 0, bound_out_bytes_ = 0;
};

class OrtBackend : public Backend {
 public:
  OrtBackend(OrtProcess* ort, std::map<std::string, std::string> options) : ort_(ort), options_(std::move(options)) {}

  std::string name() const override { return "onnxruntime"; }
  std::string version() const override { return ort_->version(); }

  Result<std::unique_ptr<Graph>> Load(const GraphSpec& spec) override {
    const OrtApi* api = ort_->api();
    OrtSessionOptions* so = nullptr;
    OE_RETURN_IF_ERROR(FromOrt(api, api->CreateSessionOptions(&so), "session options"));
    std::unique_ptr<OrtSessionOptions, std::function<void(OrtSessionOptions*)>> so_guard(
        so, [api](OrtSessionOptions* p) { api->ReleaseSessionOptions(p); });

    OE_RETURN_IF_ERROR(FromOrt(api, api->DisablePerSessionThreads(so), "shared thread pool"));
    OE_RETURN_IF_ERROR(FromOrt(api, api->SetSessionGraphOptimizationLevel(so, ORT_ENABLE_ALL), "optimization level"));
    for (const auto& [key, value] : spec.options) {
      if (key.rfind("ort.", 0) == 0) {  // "ort.session.disable_prepacking" -> a session config entry
        OE_RETURN_IF_ERROR(FromOrt(api, api->AddSessionConfigEntry(so, key.substr(4).c_str(), value.c_str()), key));
      }
    }

    Placement placement;
    placement.graph = spec.name;
    placement.backend = name();
    placement.device = spec.device;
    if (spec.device == "npu") {
      OE_RETURN_IF_ERROR(AppendQnn(so));
      placement.engine = "QNNExecutionProvider";
    } else if (spec.device == "cpu") {
      placement.engine = "CPUExecutionProvider";
    } else {
      return Status::Error("device_unavailable", "onnxruntime backend: device '" + spec.device + "' is not supported");
    }

    const fs::path graph_path(spec.path);
    std::shared_ptr<WeightStore> weights;
    const fs::path index = graph_path.parent_path() / "weights.json";
    if (fs::exists(index)) {
      OE_RETURN_IF_ERROR(CheckVerified(spec, index));
      OE_ASSIGN_OR_RETURN(weights, Weights(index, spec));
      OE_RETURN_IF_ERROR(weights->AddTo(so, graph_path.filename().string()));
    }

    OrtSession* session = nullptr;
    std::vector<std::string> log;
    {
      std::lock_guard<std::mutex> lock(ort_->create_mutex());
      ort_->BeginCapture();
      std::optional<platform::StdoutToStderr> quiet;
      if (spec.device == "npu") quiet.emplace();
      const fs::path model = fs::u8path(spec.path);  // ORTCHAR_T is path's char type: wchar_t on Windows
      OrtStatus* st = weights ? api->CreateSessionWithPrepackedWeightsContainer(ort_->env(), model.c_str(), so,
                                                                               weights->prepacked(), &session)
                              : api->CreateSession(ort_->env(), model.c_str(), so, &session);
      log = ort_->EndCapture();
      if (st != nullptr) {
        std::string msg = api->GetErrorMessage(st);
        api->ReleaseStatus(st);
        for (const auto& line : log) {
          if (line.find("nsupported") != std::string::npos) msg += " | " + line;
        }
        const bool refused = spec.device == "npu" && msg.find("fallback") != std::string::npos;
        return Status::Error(refused ? "placement_refused" : "backend_error",
                             spec.name + " (" + spec.path + ") on " + placement.engine + ": " + msg);
      }
    }
    platform::ReturnFreedMemory();  // return the temporary buffers of weight prepacking to the system
    if (weights) weights->ReleaseResidentPages();
    placement.nodes_on_engine = -1;  // every node: CPU is the only EP, or CPU fallback is disabled
    placement.detail = spec.device == "npu" ? "CPU fallback disabled" : "all nodes";
    auto graph = std::make_unique<OrtGraph>(ort_, session, weights, placement);
    OE_RETURN_IF_ERROR(graph->Init());
    return std::unique_ptr<Graph>(std::move(graph));
  }

 private:
  // A file beside the graph may be opened only if the manifest hashes it (and it was re-hashed).
  static Status CheckVerified(const GraphSpec& spec, const fs::path& file) {
    if (spec.verified_files.empty() || spec.verified_files.count(file.lexically_normal().string()) != 0) return Status::Ok();
    return Status::Error("invalid_artifact", file.string() + " is read by " + spec.name +
                                                 " but not hashed in its artifact's manifest: only hashed files are loaded");
  }

  Result<std::shared_ptr<WeightStore>> Weights(const fs::path& index, const GraphSpec& spec) {
    std::lock_guard<std::mutex> lock(weights_mu_);
    auto it = weights_.find(index.string());
    if (it != weights_.end()) return it->second;
    OE_ASSIGN_OR_RETURN(auto store, WeightStore::Open(ort_, index, [&](const fs::path& data) { return CheckVerified(spec, data); }));
    weights_[index.string()] = store;
    return store;
  }

  Status AppendQnn(OrtSessionOptions* so) {
    const OrtApi* api = ort_->api();
    const std::string ep_library = Option(options_, "qnn_ep_library", "OMNI_EDGE_QNN_EP_LIB", OMNI_EDGE_QNN_EP_LIBRARY);
    std::vector<std::string> keys = {"backend_path"};
    std::vector<std::string> values = {Option(options_, "qnn_backend", "OMNI_EDGE_QNN_BACKEND", OMNI_EDGE_QNN_BACKEND)};
    for (const auto& [k, v] : options_) {
      if (k.rfind("qnn.", 0) == 0) {
        keys.push_back(k.substr(4));
        values.push_back(v);
      }
    }
    std::vector<const char*> k, v;
    for (size_t i = 0; i < keys.size(); ++i) k.push_back(keys[i].c_str()), v.push_back(values[i].c_str());
    if (ep_library == "builtin") {  // compiled into ONNX Runtime (onnxruntime-android-qnn): appended by name
      OE_RETURN_IF_ERROR(FromOrt(api, api->SessionOptionsAppendExecutionProvider(so, "QNN", k.data(), v.data(), k.size()),
                                 "QNN EP (built into ONNX Runtime)"));
    } else {  // a plugin EP library (the onnxruntime-qnn wheels)
      OE_ASSIGN_OR_RETURN(const OrtEpDevice* device, ort_->QnnDevice(ep_library));
      OE_RETURN_IF_ERROR(FromOrt(api, api->SessionOptionsAppendExecutionProvider_V2(so, ort_->env(), &device, 1, k.data(),
                                                                                    v.data(), k.size()), "QNN EP"));
    }
    return FromOrt(api, api->AddSessionConfigEntry(so, "session.disable_cpu_ep_fallback", "1"), "disable fallback");
  }

  OrtProcess* ort_;
  std::map<std::string, std::string> options_;
  std::mutex weights_mu_;
  std::map<std::string, std::shared_ptr<WeightStore>> weights_;
};

}  // namespace

int ProcessIntraOpThreads() {
  const OrtProcess* ort = OrtProcess::Existing();
  return ort == nullptr ? 0 : ort->threads();
}

Result<std::unique_ptr<Backend>> CreateBackend(const std::map<std::string, std::string>& options) {
  std::string library = Option(options, "library", "OMNI_EDGE_ONNXRUNTIME_LIB", OMNI_EDGE_ORT_LIBRARY);
  if (library.empty()) library = "libonnxruntime.so.1";  // no wheel was found at build time: the system's
  int threads = std::atoi(Option(options, "threads", "OMNI_EDGE_THREADS", "0").c_str());
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 0) threads = cores;
  if (threads > cores) {  // more spinning threads than cores only contend (1024 ran 170x slower)
    std::fprintf(stderr, "omni-edge: %d threads asked for, this device has %d cores: using %d\n", threads, cores, cores);
    threads = cores;
  }
  const bool spinning = Option(options, "spinning", nullptr, "1") != "0";
  // The first backend of the process sizes the shared pool.
  OE_ASSIGN_OR_RETURN(OrtProcess * ort, OrtProcess::Get(library, threads, spinning));
  return std::unique_ptr<Backend>(new OrtBackend(ort, options));
}

}  // namespace omni_edge::ort
