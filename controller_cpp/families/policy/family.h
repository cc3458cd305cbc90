// Vision-language-action policies (a "policy" section, one-shot: llm_generation): an
// observation (camera images, state, task text, capture time) into one action chunk with its
// metadata. Run by PolicyWorker.
#pragma once

#include <memory>

#include "pipeline/family.h"

namespace omni_edge::policy {

std::unique_ptr<pipeline::Family> MakeFamily();

}  // namespace omni_edge::policy
