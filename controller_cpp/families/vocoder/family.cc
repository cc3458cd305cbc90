#include "families/vocoder/family.h"

#include "families/vocoder/config.h"
#include "families/vocoder/vocoder_worker.h"

namespace omni_edge::vocoder {
namespace {

class VocoderFamily final : public pipeline::Family {
 public:
  std::string section() const override { return "vocoder"; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override {
    OE_ASSIGN_OR_RETURN(std::shared_ptr<const VocoderConfig> config, ParseVocoder(j, stage, where));
    return std::shared_ptr<const StageConfig>(std::move(config));
  }
  // No resident state; each window's codes in and samples out.
  StageMemory Memory(const StagePlan& stage) const override {
    const VocoderConfig* c = stage.config_as<VocoderConfig>();
    StageMemory m;
    if (c == nullptr) return m;
    for (int64_t w : c->windows) m.workspace += w * (c->code_groups * 8 + c->samples_per_frame * 4);
    return m;
  }
  Result<std::unique_ptr<pipeline::StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const override {
    OE_ASSIGN_OR_RETURN(std::unique_ptr<VocoderWorker> worker, VocoderWorker::Open(stage, backends));
    return std::unique_ptr<pipeline::StageWorker>(std::move(worker));
  }
};

}  // namespace

std::unique_ptr<pipeline::Family> MakeFamily() { return std::make_unique<VocoderFamily>(); }

}  // namespace omni_edge::vocoder
