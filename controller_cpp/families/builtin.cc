#include "families/builtin.h"

#include "families/codec_lm/family.h"
#include "families/encoder/family.h"
#include "families/internvla/family.h"
#include "families/llm/family.h"
#include "families/policy/family.h"
#include "families/talker/family.h"
#include "families/token2wav/family.h"
#include "families/vocoder/family.h"

namespace omni_edge::families {

const pipeline::FamilyRegistry& Builtin() {
  static const pipeline::FamilyRegistry registry = [] {
    pipeline::FamilyRegistry r;
    r.Add(codec_lm::MakeFamily());
    r.Add(encoder::MakeFamily());
    r.Add(internvla::MakeFamily());
    r.Add(llm::MakeFamily());
    r.Add(policy::MakeFamily());
    r.Add(talker::MakeFamily());
    r.Add(token2wav::MakeFamily());
    r.Add(vocoder::MakeFamily());
    return r;
  }();
  return registry;
}

}  // namespace omni_edge::families
