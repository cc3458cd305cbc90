// ExecuTorch backend through extension::Module. One multi-method `.pte` holds every graph of
// a component (prefill and decode of each bucket share their weights inside the program);
// a graph is one method. Inputs are exported unplanned, so bound caller buffers are read in
// place; outputs are copied out of the method's planned memory after each run. XNNPACK's
// packed-weight cache is enabled so methods also share packed weights at run time.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "runtime/graph.h"

namespace omni_edge::et {

Result<std::unique_ptr<Backend>> CreateBackend(const std::map<std::string, std::string>& options);

}  // namespace omni_edge::et
