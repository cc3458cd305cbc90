// The "internvla" section of an InternVLA-A1 policy stage (one-shot: llm_generation): three
// experts sharing attention. Per observation the controller preprocesses each camera's frames,
// runs Qwen3-VL's vision tower on each camera slot's current frame ("vision" {"image"}) and
// Cosmos on each new frame of the history ("frame" {"frame"}), then the context graph once
// ("context" {"context"}: the understanding expert over the prefix, the generation expert over
// the frame history) and the action expert once per Euler step ("expert" {"step"}).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "pipeline/policy_io.h"
#include "runtime/plan.h"

namespace omni_edge::internvla {

struct InternVlaConfig final : StageConfig {
  std::string tokenizer;             // absolute path of the processor's tokenizer.json
  std::vector<std::string> cameras;  // names of the first camera slots, in slot order
  int64_t camera_slots = 3;          // the model's image slots; those without a camera are empty (masked)
  int64_t history = 2;               // frames per camera the generation expert reads (oldest first)
  int64_t image_height = 0, image_width = 0;  // every frame is resized with padding to this
  int64_t patch = 16, merge = 2, temporal_patch = 2;
  std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f}, image_std{0.5f, 0.5f, 0.5f};
  int64_t image_tokens = 0;          // vision rows per camera slot
  int64_t prompt_tokens = 0;         // the task's slots (padded, masked)
  int64_t image_token_id = 0, vision_start_id = 0, vision_end_id = 0, pad_id = 0;
  int64_t cosmos_size = 256;         // Cosmos reads cosmos_size^2 frames in [-1, 1]
  int64_t frame_rows = 0;            // history rows per frame
  int64_t vlm_hidden = 0, expert_hidden = 0;
  int64_t layers = 0, kv_heads = 0, head_dim = 0;
  int64_t chunk_size = 0, max_state_dim = 0, max_action_dim = 0, state_dim = 0, action_dim = 0, num_steps = 0;
  float mask_value = -65504.0f;
  std::vector<float> rope_inv_freq;         // head_dim / 2
  std::array<int64_t, 3> mrope_section{24, 20, 20};
  std::vector<double> time_scaling;         // expert_hidden / 2: 2 pi / period, float64
  double max_observation_age_ms = 0;        // 0: no limit
  double max_history_gap_ms = 0;            // the previous frame at most this much older (0: no limit)
  std::string action_mode = "delta";        // "delta" | "absolute", from train_config.json
  pipeline::ActionSpec actions;
  Json identity = Json::object();

  int64_t prefix_length() const { return camera_slots * (image_tokens + 2) + prompt_tokens; }
  int64_t history_length() const { return camera_slots * history * frame_rows; }
  int64_t context_length() const { return prefix_length() + history_length(); }
  std::vector<std::string> files() const override { return {tokenizer}; }
};

Result<std::shared_ptr<const InternVlaConfig>> ParseInternVla(const Json& j, const StagePlan& stage, const std::string& where);

}  // namespace omni_edge::internvla
