// A token2wav stage worker: it reads its talker's codes events (one code each) and cuts them as
// vLLM-Omni's tts2code2wav bridge does: once `window` codes wait, a window of the `context`
// codes carried from the last one (the silence code at first) and those; at the end of speech
// one last window of the carried codes and the rest. Each window's samples go out as a "pcm"
// event ({"first_sample", "n_samples", "frames_final", "dtype"}), as the vocoder's do.
#pragma once

#include <memory>
#include <vector>

#include "families/token2wav/token2wav.h"
#include "pipeline/stage_worker.h"

namespace omni_edge::token2wav {

class Token2WavWorker final : public pipeline::StageWorker {
 public:
  static Result<std::unique_ptr<Token2WavWorker>> Open(const StagePlan& stage, BackendPool& backends);

  Status Prepare(const pipeline::Request& request) override { return Status::Ok(); }
  Status Begin(pipeline::StepContext& ctx) override;
  Result<pipeline::StepResult> Step(pipeline::StepContext& ctx) override;
  Status Flush(pipeline::StepContext& ctx) override;
  Json Metrics(const pipeline::StepContext& ctx) const override;

  std::vector<Placement> placements() const override { return engine_->placements(); }
  Json Describe() const override;

 private:
  Token2WavWorker() = default;
  Status Window(pipeline::StepContext& ctx, std::vector<int32_t> codes, bool last);

  std::unique_ptr<Token2Wav> engine_;
  std::vector<int32_t> carried_, pending_;
  int64_t codes_ = 0, windows_ = 0, samples_ = 0;
  double backend_before_ = 0, start_ms_ = 0;
};

}  // namespace omni_edge::token2wav
