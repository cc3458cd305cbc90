#include "runtime/binding.h"

namespace omni_edge {
namespace {

bool Matches(const GraphIo& io, const TensorView& view, bool symbolic_dims) {
  if (io.dtype != view.dtype || io.shape.size() != view.shape.size() || view.data == nullptr) return false;
  for (size_t d = 0; d < io.shape.size(); ++d) {
    if (io.shape[d] != view.shape[d] && !(symbolic_dims && io.shape[d] < 0)) return false;
  }
  return true;
}

}  // namespace

Status CheckBinding(const std::string& graph, const std::vector<GraphIo>& declared_inputs,
                    const std::vector<GraphIo>& declared_outputs, const std::vector<TensorView>& inputs,
                    const std::vector<TensorView>& outputs, const BindingRules& rules) {
  if (inputs.size() != declared_inputs.size() || outputs.size() != declared_outputs.size()) {
    return Status::Error("invalid_binding", graph + ": expected " + std::to_string(declared_inputs.size()) +
                                                " inputs and " + std::to_string(declared_outputs.size()) + " outputs");
  }
  for (bool is_input : {true, false}) {
    const auto& ios = is_input ? declared_inputs : declared_outputs;
    const auto& views = is_input ? inputs : outputs;
    for (size_t i = 0; i < ios.size(); ++i) {
      if (Matches(ios[i], views[i], rules.symbolic_dims)) continue;
      const std::string name = rules.quote_names ? "'" + ios[i].name + "'" : ios[i].name;
      return Status::Error("invalid_binding", graph + ": " + name + " is " + DTypeName(ios[i].dtype) +
                                                  ShapeString(ios[i].shape) + " in the " + rules.declared_in +
                                                  " but bound as " + DTypeName(views[i].dtype) +
                                                  ShapeString(views[i].shape));
    }
  }
  return Status::Ok();
}

}  // namespace omni_edge
