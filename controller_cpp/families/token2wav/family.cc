#include "families/token2wav/family.h"

#include "families/token2wav/config.h"
#include "families/token2wav/token2wav_worker.h"

namespace omni_edge::token2wav {
namespace {

class Token2WavFamily final : public pipeline::Family {
 public:
  std::string section() const override { return "token2wav"; }
  Result<std::shared_ptr<const StageConfig>> Parse(const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override {
    OE_ASSIGN_OR_RETURN(std::shared_ptr<const Token2WavConfig> config, ParseToken2Wav(j, stage, where));
    return std::shared_ptr<const StageConfig>(std::move(config));
  }
  // Per session: the encoder's and every Euler step's caches at their longest (a voice prompt of up
  // to 40 s: 2000 mel frames, keep_recent and a window's), twice (the voice prompt's are kept), and
  // one HiFT window. Every product is bounded by the parser (kMaxElements per cache and frame).
  StageMemory Memory(const StagePlan& stage) const override {
    const Token2WavConfig* c = stage.config_as<Token2WavConfig>();
    StageMemory m;
    if (c == nullptr) return m;
    const int64_t window_frames = 2 * (c->window + c->context);
    const int64_t frames = 2000 + c->keep_recent + window_frames;
    auto per_frame = [](const std::vector<int64_t>& att) { return att[0] * att[1] * att[2] * att[4]; };
    auto elements = [](const std::vector<int64_t>& shape) { return NumElements(shape); };
    const int64_t one = frames * per_frame(c->encoder_att) + elements(c->encoder_cnn) +
                        c->steps() * (frames * per_frame(c->estimator_att) + elements(c->estimator_cnn));
    m.state = 2 * 4 * one;
    m.workspace = 4 * (c->mel_cache + window_frames) * c->samples_per_frame * 12;
    return m;
  }
  Result<std::unique_ptr<pipeline::StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const override {
    OE_ASSIGN_OR_RETURN(std::unique_ptr<Token2WavWorker> worker, Token2WavWorker::Open(stage, backends));
    return std::unique_ptr<pipeline::StageWorker>(std::move(worker));
  }
};

}  // namespace

std::unique_ptr<pipeline::Family> MakeFamily() { return std::make_unique<Token2WavFamily>(); }

}  // namespace omni_edge::token2wav
