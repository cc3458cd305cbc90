#include "families/policy/family.h"

#include "families/policy/config.h"
#include "families/policy/policy_worker.h"

namespace omni_edge::policy {
namespace {

class PolicyFamily final : public pipeline::Family {
 public:
  std::string section() const override { return "policy"; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override {
    OE_ASSIGN_OR_RETURN(std::shared_ptr<const PolicyConfig> config, ParsePolicy(j, stage, where));
    return std::shared_ptr<const StageConfig>(std::move(config));
  }
  StageMemory Memory(const StagePlan& stage) const override {
    // State: the prefix's keys and values, held while the chunk is denoised; workspace: the
    // other buffers the worker binds. In bytes.
    const PolicyConfig* c = stage.config_as<PolicyConfig>();
    if (c == nullptr) return {};
    const int64_t P = c->prefix_length();
    const int64_t kv = 2 * c->layers * c->kv_heads * P * c->head_dim;
    const int64_t floats = 3 * c->image_size * c->image_size + (int64_t(c->cameras.size()) + 1) * c->image_tokens * c->hidden_size +
                           3 * c->chunk_size * c->action_dim + c->state_dim;
    return StageMemory{4 * kv, 4 * floats + 8 * (P + c->prompt_tokens)};
  }
  std::vector<std::string> entry_reads(const StagePlan&) const override { return {"observation"}; }
  Result<std::unique_ptr<pipeline::StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const override {
    OE_ASSIGN_OR_RETURN(std::unique_ptr<PolicyWorker> worker, PolicyWorker::Open(stage, backends));
    return std::unique_ptr<pipeline::StageWorker>(std::move(worker));
  }
};

}  // namespace

std::unique_ptr<pipeline::Family> MakeFamily() { return std::make_unique<PolicyFamily>(); }

}  // namespace omni_edge::policy
