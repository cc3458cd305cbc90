// An InternVLA-A1 policy as a stage worker. Begin turns the observation into the context once:
// each camera's frames resized with padding on the device; Qwen3-VL's patches of each camera
// slot's current frame through the vision graph; each new frame through Cosmos (the frame
// graph); the prefix's ids, M-RoPE tables and biases; the context graph writing the keys and
// values every step reads. Each step is one Euler step of the flow (float32 t from 1 by
// -1/num_steps), so a cancel ends the request between two steps with no action; the last emits
// one "action" event (the chunk's first action_dim values per step, the action mode).
//
// The frame history is the session's: the worker keeps each camera's last Cosmos rows and their
// capture time. An observation gives each camera either its current frame (the history supplies
// the earlier ones; at the start of an episode, or after `reset_history`, the current frame
// stands in for them, as LeRobot pads a history at an episode's start) or its whole history,
// oldest first. An earlier frame more than max_history_gap_ms older than the observation is
// refused as stale; so is a capture time that goes backwards.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "families/internvla/config.h"
#include "media/float_image.h"
#include "pipeline/stage_worker.h"
#include "runtime/backend_pool.h"
#include "runtime/tensor.h"
#include "text/tokenizer.h"

namespace omni_edge::internvla {

class InternVlaWorker final : public pipeline::StageWorker {
 public:
  static Result<std::unique_ptr<InternVlaWorker>> Open(const StagePlan& stage, BackendPool& backends);

  Status Prepare(const pipeline::Request& request) override;
  Status Begin(pipeline::StepContext& ctx) override;
  Result<pipeline::StepResult> Step(pipeline::StepContext& ctx) override;
  Json Metrics(const pipeline::StepContext& ctx) const override;
  std::vector<Placement> placements() const override;
  Json Describe() const override;
  Json Inspect() const override;
  const text::Tokenizer* tokenizer() const override { return tokenizer_.get(); }

 private:
  struct Frame {
    std::vector<float> rows;  // frame_rows x expert_hidden
    double timestamp_ms = 0;
  };

  InternVlaWorker() = default;
  Status Run(Graph& graph, double* ms);
  Result<std::vector<float>> VisionRows(const media::FloatImage* frame);
  Result<std::vector<float>> FrameRows(const media::FloatImage& frame);
  Status History(size_t camera, std::vector<media::FloatImage>& frames, std::deque<Frame>* out);
  void ContextTables();

  InternVlaConfig config_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<Graph> vision_, frame_, context_, expert_;
  HostTensor patches_, image_rows_;                 // vision: one camera slot
  HostTensor frame_in_, frame_rows_;                // frame: one frame
  HostTensor ids_, all_image_rows_, history_rows_;  // context inputs
  HostTensor context_bias_, context_cos_, context_sin_;
  HostTensor keys_, values_;                        // context outputs, expert inputs
  HostTensor step_bias_, x_, time_emb_, state_, step_cos_, step_sin_, velocity_;
  std::vector<float> empty_slot_rows_;              // the vision rows of an empty slot's black frame

  // The session's frame history per camera (oldest first, at most `history` frames).
  std::vector<std::deque<Frame>> history_;

  // The request in flight.
  std::vector<std::vector<std::string>> images_;  // file bytes per camera, oldest first
  std::vector<float> state_values_, noise_;
  std::vector<int64_t> prompt_;
  std::vector<float> times_;  // the flow's t per step
  double timestamp_ms_ = 0, deadline_ms_ = 0;
  bool reset_history_ = false;
  int64_t step_ = 0;
  // Its report.
  double age_at_start_ms_ = 0;
  double preprocess_ms_ = 0, vision_ms_ = 0, frame_ms_ = 0, context_ms_ = 0;
  int64_t frames_encoded_ = 0;
  std::vector<double> step_ms_;
  bool emitted_ = false;
};

}  // namespace omni_edge::internvla
