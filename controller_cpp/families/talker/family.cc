#include "families/talker/family.h"

#include "families/talker/config.h"
#include "families/talker/talker_worker.h"

namespace omni_edge::talker {
namespace {

class TalkerFamily final : public pipeline::Family {
 public:
  std::string section() const override { return "talker"; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override {
    OE_ASSIGN_OR_RETURN(std::shared_ptr<const TalkerConfig> config, ParseTalker(j, stage, where));
    return std::shared_ptr<const StageConfig>(std::move(config));
  }
  // Both decoders' KV caches and prefill activations.
  StageMemory Memory(const StagePlan& stage) const override {
    const TalkerConfig* c = stage.config_as<TalkerConfig>();
    if (c == nullptr) return {};
    return {decoding::StateBytes(c->decoder) + decoding::StateBytes(c->predictor),
            decoding::WorkspaceBytes(c->decoder) + decoding::WorkspaceBytes(c->predictor)};
  }
  std::vector<std::string> entry_reads(const StagePlan&) const override { return {"text"}; }
  Result<std::unique_ptr<pipeline::StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const override {
    OE_ASSIGN_OR_RETURN(std::unique_ptr<TalkerWorker> worker, TalkerWorker::Open(stage, backends));
    return std::unique_ptr<pipeline::StageWorker>(std::move(worker));
  }
};

}  // namespace

std::unique_ptr<pipeline::Family> MakeFamily() { return std::make_unique<TalkerFamily>(); }

}  // namespace omni_edge::talker
