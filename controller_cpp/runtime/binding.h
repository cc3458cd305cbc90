// What every backend's Graph::Bind checks before it binds anything: one view for each input and
// output the graph declares, in order, each of the declared dtype and shape and none null.
// Refusals are "invalid_binding", naming the graph and the tensor.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/graph.h"
#include "runtime/tensor.h"

namespace omni_edge {

// Where backends differ in how their graphs declare I/O.
struct BindingRules {
  const char* declared_in;  // what declares the I/O, as refusals name it: "graph", "program"
  bool quote_names;         // refusals name the tensor 'like_this' rather than like_this
  bool symbolic_dims;       // a negative declared dim (ONNX's symbolic ones) takes any size
};

Status CheckBinding(const std::string& graph, const std::vector<GraphIo>& declared_inputs,
                    const std::vector<GraphIo>& declared_outputs, const std::vector<TensorView>& inputs,
                    const std::vector<TensorView>& outputs, const BindingRules& rules);

}  // namespace omni_edge
