// The "policy" section of a vision-language-action stage (one-shot: llm_generation): a π0-style
// policy whose VLM prefix (camera images, then the prompt) is computed once per observation and
// whose action expert denoises an action chunk by flow matching, num_steps Euler steps from
// t = 1 to 0. Graph roles: "vision" {"image"}, "prefix" {"prefix"}, "expert" {"step"}.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "pipeline/policy_io.h"
#include "runtime/plan.h"

namespace omni_edge::policy {

using pipeline::ActionSpec;

struct PolicyConfig final : StageConfig {
  std::string tokenizer;             // absolute path of tokenizer.json
  std::vector<std::string> cameras;  // in the prefix's order
  int64_t image_size = 0;            // square side the images are resized and padded to
  int64_t image_tokens = 0;          // vision rows per camera
  int64_t hidden_size = 0;           // of the VLM prefix
  std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f}, image_std{0.5f, 0.5f, 0.5f};
  int64_t prompt_tokens = 0;         // the prefix graph's text slots (prompt ids padded, masked)
  int64_t bos_id = -1;               // prepended to the prompt's ids (-1: none)
  int64_t image_token_id = -1;       // the image placeholder: refused in a prompt
  std::string prompt_suffix;         // appended to the prompt's text before encoding
  int64_t state_dim = 0, action_dim = 0, chunk_size = 0, num_steps = 0;
  int64_t layers = 0, kv_heads = 0, head_dim = 0;  // the prefix KV the expert reads
  float mask_value = -65504.0f;                     // the expert's attention bias where a query may not attend
  // The checkpoint's own frequencies: the controller computes the rotary tables (per position)
  // and the time step's sinusoidal embedding in float32, the graphs take them as inputs.
  std::vector<float> rope_inv_freq, expert_rope_inv_freq;  // head_dim / 2 each
  std::vector<float> time_freq;                            // the expert's hidden size / 2
  double max_observation_age_ms = 0;                // 0: no limit
  ActionSpec actions;
  Json identity = Json::object();  // the model and artifact the actions come from

  int64_t prefix_length() const { return int64_t(cameras.size()) * image_tokens + prompt_tokens; }
  std::vector<std::string> files() const override { return {tokenizer}; }
};

Result<std::shared_ptr<const PolicyConfig>> ParsePolicy(const Json& j, const StagePlan& stage, const std::string& where);

}  // namespace omni_edge::policy
