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
  // Per utterance: the encoder's and every Euler step's attention caches at their longest (the
  // prompt's frames, keep_recent and a window's), and one HiFT window.
  StageMemory Memory(const StagePlan& stage) const override {
    const Token2WavConfig* c = stage.config_as<Token2WavConfig>();
    StageMemory m;
    if (c == nullptr) return m;
    const int64_t window_frames = 2 * (c->window + c->context);
    const int64_t frames = 2 * 1000 + c->keep_recent + window_frames;  // a voice prompt of up to 20 s
    auto per_frame = [](const std::vector<int64_t>& att) { return att[0] * att[1] * att[2] * att[4]; };
    m.state = 4 * frames * (per_frame(c->encoder_att) + c->steps() * per_frame(c->estimator_att));
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
