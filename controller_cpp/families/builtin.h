// The model families this build runs. Adding a family: its folder under families/, its export
// module, and one line in builtin.cc.
#pragma once

#include "pipeline/family.h"

namespace omni_edge::families {

const pipeline::FamilyRegistry& Builtin();

}  // namespace omni_edge::families
