// A π0-style vision-language-action policy as a stage worker. Begin turns the observation into
// the prefix once: each camera's image resized with padding and normalized on the device, the
// vision graph per camera, the prompt's ids after the cameras' rows, the prefix graph writing
// the prefix's keys and values (held for the request, read by every step). Each step is one
// Euler step of the flow, x += dt * v(x, t) from t = 1 to 0, so a cancel ends the request
// between two steps with no action. The last step emits one "action" event: the chunk with its
// versioned metadata (names, units, order, per-step target times, the observation's age at
// start and at emission, the deadline and how late it was, the model's identity, timings).
//
// Time rules: an observation without a capture time, or older than the plan's
// max_observation_age_ms when the request is prepared or when it starts, is refused as stale.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "families/policy/config.h"
#include "pipeline/stage_worker.h"
#include "runtime/backend_pool.h"
#include "runtime/tensor.h"
#include "text/tokenizer.h"

namespace omni_edge::policy {

class PolicyWorker final : public pipeline::StageWorker {
 public:
  static Result<std::unique_ptr<PolicyWorker>> Open(const StagePlan& stage, BackendPool& backends);

  Status Prepare(const pipeline::Request& request) override;
  Status Begin(pipeline::StepContext& ctx) override;
  Result<pipeline::StepResult> Step(pipeline::StepContext& ctx) override;
  Json Metrics(const pipeline::StepContext& ctx) const override;
  std::vector<Placement> placements() const override;
  Json Describe() const override;
  Json Inspect() const override;  // the last request's times and ages
  const text::Tokenizer* tokenizer() const override { return tokenizer_.get(); }

 private:
  PolicyWorker() = default;
  Status Run(Graph& graph, double* ms);
  Result<pipeline::Output> ActionEvent(double produced_ms);

  PolicyConfig config_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<Graph> vision_, prefix_, expert_;
  HostTensor pixels_, image_rows_;              // vision: one camera
  HostTensor prefix_rows_, prompt_ids_, mask_;  // prefix: every camera's rows, the prompt's ids
  HostTensor keys_, values_;                    // the prefix's KV: prefix output, expert input
  HostTensor prefix_cos_, prefix_sin_;          // the prefix's rotary tables, per position
  HostTensor x_, time_emb_, state_, velocity_;  // the expert's step
  HostTensor expert_cos_, expert_sin_;          // its rotary tables (the state token and the chunk)
  HostTensor expert_bias_;                      // its attention bias, per observation

  // The request in flight.
  std::vector<std::string> images_;  // file bytes, in the plan's camera order
  std::vector<float> state_values_, noise_;
  std::vector<int64_t> prompt_;
  double timestamp_ms_ = 0, deadline_ms_ = 0;
  int64_t step_ = 0;
  // Its report.
  double age_at_start_ms_ = 0, age_at_emission_ms_ = 0, lateness_ms_ = 0;
  double preprocess_ms_ = 0, vision_ms_ = 0, prefix_ms_ = 0, begin_ms_ = 0;
  std::vector<double> step_ms_;
  bool emitted_ = false, deadline_missed_ = false;
};

}  // namespace omni_edge::policy
