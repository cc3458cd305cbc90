#include "families/codec_lm/family.h"

#include "families/codec_lm/codec_lm_worker.h"
#include "families/codec_lm/config.h"

namespace omni_edge::codec_lm {
namespace {

class CodecLmFamily final : public pipeline::Family {
 public:
  std::string section() const override { return "codec_lm"; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override {
    OE_ASSIGN_OR_RETURN(std::shared_ptr<const CodecLmConfig> config, ParseCodecLm(j, stage, where));
    return std::shared_ptr<const StageConfig>(std::move(config));
  }
  StageMemory Memory(const StagePlan& stage) const override {
    const CodecLmConfig* c = stage.config_as<CodecLmConfig>();
    if (c == nullptr) return {};
    // The cache, the decoder's activations, and the spoken span's prefill rows.
    const int64_t span = decoding::CacheSizes(c->decoder).back();
    return {decoding::StateBytes(c->decoder),
            decoding::WorkspaceBytes(c->decoder) + 4 * span * (c->decoder.hidden_size + c->thinker_hidden)};
  }
  Result<std::unique_ptr<pipeline::StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const override {
    OE_ASSIGN_OR_RETURN(std::unique_ptr<CodecLmWorker> worker, CodecLmWorker::Open(stage, backends));
    return std::unique_ptr<pipeline::StageWorker>(std::move(worker));
  }
};

}  // namespace

std::unique_ptr<pipeline::Family> MakeFamily() { return std::make_unique<CodecLmFamily>(); }

}  // namespace omni_edge::codec_lm
