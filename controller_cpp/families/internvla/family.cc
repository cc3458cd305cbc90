#include "families/internvla/family.h"

#include "families/internvla/config.h"
#include "families/internvla/internvla_worker.h"

namespace omni_edge::internvla {
namespace {

class InternVlaFamily final : public pipeline::Family {
 public:
  std::string section() const override { return "internvla"; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override {
    OE_ASSIGN_OR_RETURN(std::shared_ptr<const InternVlaConfig> config, ParseInternVla(j, stage, where));
    return std::shared_ptr<const StageConfig>(std::move(config));
  }
  StageMemory Memory(const StagePlan& stage) const override {
    // State: the context's keys and values (held while the chunk is denoised) and the frame
    // history; workspace: the other buffers the worker binds. In bytes.
    const InternVlaConfig* c = stage.config_as<InternVlaConfig>();
    if (c == nullptr) return {};
    const int64_t C = c->context_length(), A = c->chunk_size;
    const int64_t kv = 2 * c->layers * c->kv_heads * C * c->head_dim;
    const int64_t history = int64_t(c->cameras.size()) * c->history * c->frame_rows * c->expert_hidden;
    const int64_t patches = (c->image_height / c->patch) * (c->image_width / c->patch) * 3 * c->temporal_patch * c->patch * c->patch;
    const int64_t floats = patches + 3 * c->cosmos_size * c->cosmos_size + (c->camera_slots + 2) * c->image_tokens * c->vlm_hidden +
                           c->history_length() * c->expert_hidden + C * C + 2 * C * c->head_dim +
                           (A + 1) * (C + A + 1) + 3 * A * c->max_action_dim + c->expert_hidden + c->max_state_dim;
    return StageMemory{4 * (kv + history), 4 * floats + 8 * c->prefix_length()};
  }
  std::vector<std::string> entry_reads(const StagePlan&) const override { return {"observation"}; }
  Result<std::unique_ptr<pipeline::StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const override {
    OE_ASSIGN_OR_RETURN(std::unique_ptr<InternVlaWorker> worker, InternVlaWorker::Open(stage, backends));
    return std::unique_ptr<pipeline::StageWorker>(std::move(worker));
  }
};

}  // namespace

std::unique_ptr<pipeline::Family> MakeFamily() { return std::make_unique<InternVlaFamily>(); }

}  // namespace omni_edge::internvla
