// The text LLM family: stages with an "llm" section (llm_ar), run by LlmWorker.
#pragma once

#include <memory>

#include "pipeline/family.h"

namespace omni_edge::llm {

std::unique_ptr<pipeline::Family> MakeFamily();

}  // namespace omni_edge::llm
