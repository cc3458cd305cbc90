// A streaming vocoder as a stage worker: it reads the codes events of its input (a talker), and
// each time its ChunkSchedule cuts a chunk decodes the frames in a window graph and emits a
// "pcm" event ({"first_sample", "n_samples", "frames_final", "dtype"} and the samples). At the
// end of speech the frames left over and the tail are flushed. It keeps the listener's
// playback clock as it would run from these emissions, which an adaptive schedule reads.
#pragma once

#include <memory>
#include <vector>

#include "families/vocoder/chunk_schedule.h"
#include "families/vocoder/vocoder.h"
#include "pipeline/playback.h"
#include "pipeline/stage_worker.h"

namespace omni_edge::vocoder {

class VocoderWorker final : public pipeline::StageWorker {
 public:
  static Result<std::unique_ptr<VocoderWorker>> Open(const StagePlan& stage, BackendPool& backends);

  Status Prepare(const pipeline::Request& request) override { return Status::Ok(); }
  Status Begin(pipeline::StepContext& ctx) override;
  Result<pipeline::StepResult> Step(pipeline::StepContext& ctx) override;
  Status Flush(pipeline::StepContext& ctx) override;
  Json Metrics(const pipeline::StepContext& ctx) const override;

  std::vector<Placement> placements() const override { return vocoder_->placements(); }
  Json Describe() const override;

 private:
  VocoderWorker() = default;
  Status Decode(pipeline::StepContext& ctx, int64_t end, bool final);
  double PrebufferMs(const pipeline::Request& request) const;

  std::unique_ptr<Vocoder> vocoder_;
  std::unique_ptr<ChunkSchedule> schedule_;
  std::unique_ptr<pipeline::PlaybackClock> clock_;  // the listener's, from this stage's emissions
  Ewma frame_ms_;                // the talker's time per frame (kept across requests)
  int64_t last_frame_ns_ = 0;    // when the last frame was emitted by the talker
  std::vector<int64_t> chunk_frames_;
  std::vector<int32_t> codes_;  // every frame so far, code_groups codes each
  int64_t next_ = 0;            // the first frame not yet decoded
  int64_t samples_ = 0;         // samples emitted
  double backend_before_ = 0;
};

}  // namespace omni_edge::vocoder
