#include "families/encoder/family.h"

#include "families/encoder/config.h"
#include "families/encoder/encoder_worker.h"

namespace omni_edge::encoder {
namespace {

class EncoderFamily final : public pipeline::Family {
 public:
  std::string section() const override { return "encoder"; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override {
    OE_ASSIGN_OR_RETURN(std::shared_ptr<const EncoderConfig> config, ParseEncoder(j, stage, where));
    return std::shared_ptr<const StageConfig>(std::move(config));
  }
  StageMemory Memory(const StagePlan& stage) const override {
    // Workspace: the largest graph's input and output (the preprocessing's image copies aside).
    const EncoderConfig* c = stage.config_as<EncoderConfig>();
    if (c == nullptr) return {};
    int64_t largest = 0;
    for (const auto& [key, ref] : stage.graphs.at("encoder").graphs) {
      const auto grid = ParseGrid(key);
      const int64_t patches = grid ? (*grid)[0] * (*grid)[1] * (*grid)[2] : 0;
      const int64_t in = c->input_width * (c->modality == "image" ? patches : c->chunk_frames);
      const int64_t out = c->modality == "image" ? patches * c->hidden_size : c->chunk_frames / 4 * c->hidden_size;
      largest = std::max(largest, 4 * (in + out));
    }
    return StageMemory{0, largest};
  }
  // Each modality has one reader: a plan's image encoder and its audio encoder are two entries.
  std::vector<std::string> entry_reads(const StagePlan& stage) const override {
    const EncoderConfig* c = stage.config_as<EncoderConfig>();
    return {c != nullptr && c->modality == "audio" ? "audio" : "images"};
  }
  Result<std::unique_ptr<pipeline::StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const override {
    OE_ASSIGN_OR_RETURN(std::unique_ptr<EncoderWorker> worker, EncoderWorker::Open(stage, backends));
    return std::unique_ptr<pipeline::StageWorker>(std::move(worker));
  }
};

}  // namespace

std::unique_ptr<pipeline::Family> MakeFamily() { return std::make_unique<EncoderFamily>(); }

}  // namespace omni_edge::encoder
