// InternVLA-A1 policies (an "internvla" section, one-shot: llm_generation): an observation
// (camera frames, state, task text, capture time) and the session's frame history into one
// action chunk with its metadata. Run by InternVlaWorker.
#pragma once

#include <memory>

#include "pipeline/family.h"

namespace omni_edge::internvla {

std::unique_ptr<pipeline::Family> MakeFamily();

}  // namespace omni_edge::internvla
