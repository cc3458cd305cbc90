// The vocoder family: streaming vocoder stages with a "vocoder" section, run by VocoderWorker.
#pragma once

#include <memory>

#include "pipeline/family.h"

namespace omni_edge::vocoder {

std::unique_ptr<pipeline::Family> MakeFamily();

}  // namespace omni_edge::vocoder
