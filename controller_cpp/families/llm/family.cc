#include "families/llm/family.h"

#include "families/llm/config.h"
#include "families/llm/llm_worker.h"

namespace omni_edge::llm {
namespace {

class LlmFamily final : public pipeline::Family {
 public:
  std::string section() const override { return "llm"; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override {
    OE_ASSIGN_OR_RETURN(std::shared_ptr<const LlmConfig> config, ParseLlm(j, stage, where));
    return std::shared_ptr<const StageConfig>(std::move(config));
  }
  StageMemory Memory(const StagePlan& stage) const override {
    const LlmConfig* c = stage.config_as<LlmConfig>();
    return c == nullptr ? StageMemory{} : StageMemory{decoding::StateBytes(c->decoder), decoding::WorkspaceBytes(c->decoder)};
  }
  std::vector<std::string> entry_reads(const StagePlan&) const override { return {"text"}; }
  Result<std::unique_ptr<pipeline::StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const override {
    OE_ASSIGN_OR_RETURN(std::unique_ptr<LlmWorker> worker, LlmWorker::Open(stage, backends));
    return std::unique_ptr<pipeline::StageWorker>(std::move(worker));
  }
};

}  // namespace

std::unique_ptr<pipeline::Family> MakeFamily() { return std::make_unique<LlmFamily>(); }

}  // namespace omni_edge::llm
