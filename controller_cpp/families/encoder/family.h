// Media encoder stages (an "encoder" section, one-shot: llm_generation): images or audio of a
// request into the rows a multimodal thinker splices into its prompt. Run by EncoderWorker.
#pragma once

#include <memory>

#include "pipeline/family.h"

namespace omni_edge::encoder {

std::unique_ptr<pipeline::Family> MakeFamily();

}  // namespace omni_edge::encoder
