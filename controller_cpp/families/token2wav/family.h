// The token2wav family: code2wav stages with a "token2wav" section, run by Token2WavWorker.
#pragma once

#include <memory>

#include "pipeline/family.h"

namespace omni_edge::token2wav {

std::unique_ptr<pipeline::Family> MakeFamily();

}  // namespace omni_edge::token2wav
