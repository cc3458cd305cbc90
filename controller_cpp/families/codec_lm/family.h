// The codec_lm family: talker stages with a "codec_lm" section (a thinker's whole reply in,
// one code a step out), run by CodecLmWorker.
#pragma once

#include <memory>

#include "pipeline/family.h"

namespace omni_edge::codec_lm {

std::unique_ptr<pipeline::Family> MakeFamily();

}  // namespace omni_edge::codec_lm
