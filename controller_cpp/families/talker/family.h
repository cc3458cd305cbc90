// The talker family: speech stages with a "talker" section, run by TalkerWorker.
#pragma once

#include <memory>

#include "pipeline/family.h"

namespace omni_edge::talker {

std::unique_ptr<pipeline::Family> MakeFamily();

}  // namespace omni_edge::talker
