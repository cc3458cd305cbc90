#include "backends/executorch/et_backend.h"

#include <cstring>
#include <filesystem>
#include <mutex>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>

#include "base/json_fields.h"
#include "base/platform/os.h"
#include "runtime/binding.h"

namespace omni_edge::et {
namespace fs = std::filesystem;
namespace {

using executorch::aten::ScalarType;
using executorch::extension::Module;
using executorch::extension::TensorPtr;
using executorch::runtime::Error;
using executorch::runtime::EValue;

Status FromEt(Error e, const std::string& what) {
  if (e == Error::Ok) return Status::Ok();
  return Status::Error("backend_error", what + ": ExecuTorch error " + std::to_string(unsigned(e)));
}

Result<DType> FromEtType(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return DType::kFloat32;
    case ScalarType::Half: return DType::kFloat16;
    case ScalarType::Long: return DType::kInt64;
    case ScalarType::Int: return DType::kInt32;
    case ScalarType::Short: return DType::kInt16;
    case ScalarType::Byte: return DType::kUint8;
    case ScalarType::Char: return DType::kInt8;
    default: return Status::Error("unsupported_graph", "ExecuTorch scalar type " + std::to_string(int(t)));
  }
}

ScalarType ToEtType(DType t) {
  switch (t) {
    case DType::kFloat32: return ScalarType::Float;
    case DType::kFloat16: return ScalarType::Half;
    case DType::kInt64: return ScalarType::Long;
    case DType::kInt32: return ScalarType::Int;
    case DType::kInt16: return ScalarType::Short;
    case DType::kUint16: return ScalarType::UInt16;
    case DType::kUint8: return ScalarType::Byte;
    case DType::kInt8: return ScalarType::Char;
  }
  return ScalarType::Float;
}

// A program's I/O is input_<i> and output_<i>, every dim fixed.
constexpr BindingRules kProgramBinding{"program", /*quote_names=*/false, /*symbolic_dims=*/false};

// Delegation facts the exporter measured from the program (delegate vs CPU-kernel calls per
// method), read from placement.json beside the .pte when present.
Json ReadPlacementFacts(const fs::path& pte) {
  auto text = platform::ReadWholeFile((pte.parent_path() / "placement.json").u8string());
  if (!text.ok()) return Json::object();
  auto parsed = ParseJson(*text, "placement.json");
  return parsed.ok() && parsed->is_object() ? parsed.value() : Json::object();
}

class EtGraph : public Graph {
 public:
  EtGraph(std::shared_ptr<Module> module, std::string method, Placement placement)
      : module_(std::move(module)), method_(std::move(method)), placement_(std::move(placement)) {}

  Status Init() {
    auto meta = module_->method_meta(method_);
    if (!meta.ok()) return FromEt(meta.error(), placement_.graph + ": method '" + method_ + "'");
    for (bool is_input : {true, false}) {
      const size_t n = is_input ? meta->num_inputs() : meta->num_outputs();
      for (size_t i = 0; i < n; ++i) {
        auto tm = is_input ? meta->input_tensor_meta(i) : meta->output_tensor_meta(i);
        if (!tm.ok()) return FromEt(tm.error(), placement_.graph + ": tensor meta");
        GraphIo io;
        io.name = (is_input ? "input_" : "output_") + std::to_string(i);
        OE_ASSIGN_OR_RETURN(io.dtype, FromEtType(tm->scalar_type()));
        for (auto d : tm->sizes()) io.shape.push_back(d);
        (is_input ? inputs_ : outputs_).push_back(std::move(io));
      }
    }
    return Status::Ok();
  }

  const std::vector<GraphIo>& inputs() const override { return inputs_; }
  const std::vector<GraphIo>& outputs() const override { return outputs_; }

  Status Bind(const std::vector<TensorView>& inputs, const std::vector<TensorView>& outputs) override {
    bound_inputs_.clear();  // a refused binding leaves the graph unbound: Run() says so
    values_.clear();
    bound_outputs_.clear();
    OE_RETURN_IF_ERROR(CheckBinding(placement_.graph, inputs_, outputs_, inputs, outputs, kProgramBinding));
    for (const TensorView& view : inputs) {
      std::vector<executorch::aten::SizesType> sizes(view.shape.begin(), view.shape.end());
      bound_inputs_.push_back(executorch::extension::from_blob(view.data, sizes, ToEtType(view.dtype)));
      values_.emplace_back(bound_inputs_.back());
    }
    bound_outputs_ = outputs;
    return Status::Ok();
  }

  Status Run() override {
    if (values_.size() != inputs_.size()) return Status::Error("invalid_binding", placement_.graph + ": not bound");
    auto result = module_->execute(method_, values_);
    if (!result.ok()) return FromEt(result.error(), placement_.graph);
    if (result->size() != bound_outputs_.size()) {
      return Status::Error("backend_error", placement_.graph + ": unexpected number of outputs");
    }
    for (size_t i = 0; i < bound_outputs_.size(); ++i) {
      const auto& t = (*result)[i].toTensor();
      if (size_t(t.nbytes()) != bound_outputs_[i].nbytes()) {
        return Status::Error("backend_error", placement_.graph + ": output " + std::to_string(i) + " size changed");
      }
      std::memcpy(bound_outputs_[i].data, t.const_data_ptr(), t.nbytes());
    }
    return Status::Ok();
  }

  Placement placement() const override {
    Placement p = placement_;
    // The programs leave their inputs unplanned (export/targets/executorch_target.py), so the runtime
    // reads the bound buffers in place; outputs live in the program's planned memory and are
    // copied out into the bound buffers after every run.
    for (const auto& v : bound_outputs_) p.bytes_out_per_run += int64_t(v.nbytes());
    p.buffers = "inputs read in place (unplanned); outputs copied out of the program's planned memory every run";
    return p;
  }

 private:
  std::shared_ptr<Module> module_;
  std::string method_;
  Placement placement_;
  std::vector<GraphIo> inputs_, outputs_;
  std::vector<TensorPtr> bound_inputs_;
  std::vector<EValue> values_;
  std::vector<TensorView> bound_outputs_;
};

class EtBackend : public Backend {
 public:
  std::string name() const override { return "executorch"; }
  std::string version() const override { return OMNI_EDGE_EXECUTORCH_VERSION; }

  Result<std::unique_ptr<Graph>> Load(const GraphSpec& spec) override {
    if (spec.device != "cpu") {
      return Status::Error("device_unavailable", "executorch backend: device '" + spec.device +
                                                     "' has no delegate in this build (XNNPACK runs on the CPU)");
    }
    if (spec.method.empty()) return Status::Error("invalid_plan", spec.name + ": an ExecuTorch graph needs a method");
    OE_ASSIGN_OR_RETURN(auto module, ModuleFor(spec.path));
    if (Error e = module->load_method(spec.method); e != Error::Ok) {
      return FromEt(e, spec.name + ": load method '" + spec.method + "' of " + spec.path);
    }
    Placement placement;
    placement.graph = spec.name;
    placement.backend = name();
    placement.device = spec.device;
    auto meta = module->method_meta(spec.method);
    if (meta.ok()) {
      for (size_t i = 0; i < meta->num_backends(); ++i) {
        auto backend = meta->get_backend_name(i);
        if (backend.ok()) placement.engine += (placement.engine.empty() ? "" : "+") + std::string(backend.get());
      }
    }
    if (placement.engine.empty()) placement.engine = "portable CPU kernels";
    const Json facts = ReadPlacementFacts(spec.path);
    auto delegated = facts.contains(spec.method) ? GetInt(facts[spec.method], "delegate_calls", -1, "placement.json")
                                                 : Result<int64_t>(int64_t(-1));
    auto on_cpu = facts.contains(spec.method) ? GetInt(facts[spec.method], "cpu_kernel_calls", 0, "placement.json")
                                              : Result<int64_t>(int64_t(0));
    if (delegated.ok() && on_cpu.ok() && delegated.value() >= 0) {
      placement.nodes_on_engine = delegated.value();
      placement.nodes_elsewhere = on_cpu.value();
      placement.detail = "delegated calls vs ExecuTorch CPU kernel calls, counted in the program";
    } else {
      placement.nodes_on_engine = -1;
    }
    auto graph = std::make_unique<EtGraph>(module, spec.method, placement);
    OE_RETURN_IF_ERROR(graph->Init());
    return std::unique_ptr<Graph>(std::move(graph));
  }

 private:
  Result<std::shared_ptr<Module>> ModuleFor(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = modules_.find(path);
    if (it != modules_.end()) return it->second;
    if (!fs::is_regular_file(path)) return Status::Error("file_missing", path + ": no such program");
    auto module = std::make_shared<Module>(path, Module::LoadMode::Mmap);
    if (Error e = module->load(); e != Error::Ok) return FromEt(e, "load " + path);
    modules_[path] = module;
    return module;
  }

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Module>> modules_;
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateBackend(const std::map<std::string, std::string>& options) {
  static std::once_flag once;
  std::call_once(once, [] {
    // Packed weights shared across methods (prefill / decode / buckets) of one program.
    executorch::runtime::BackendOptions<1> xnnpack;
    (void)xnnpack.set_option("weight_cache_enabled", true);
    (void)executorch::runtime::set_option("XnnpackBackend", xnnpack.view());
  });
  return std::unique_ptr<Backend>(new EtBackend());
}

}  // namespace omni_edge::et
