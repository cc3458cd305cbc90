#include "families/internvla/config.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <tuple>

namespace omni_edge::internvla {
namespace {

Status ReadPair(const Json* array, const std::string& where, int64_t* a, int64_t* b) {
  if (array->size() != 2 || !(*array)[0].is_number_integer() || !(*array)[1].is_number_integer()) {
    return PlanError(where + ": [height, width]");
  }
  *a = (*array)[0].get<int64_t>();
  *b = (*array)[1].get<int64_t>();
  if (*a < 1 || *b < 1 || *a > 4096 || *b > 4096) return PlanError(where + ": sides in [1, 4096]");
  return Status::Ok();
}

// A section's arrays, read after its scalars.
struct Arrays {
  const Json *cameras, *resolution, *mean, *std_dev, *rope, *section, *time;
};

Status CheckBounds(const InternVlaConfig& cfg, const std::string& where) {
  const InternVlaConfig* c = &cfg;
  // Bounds that keep every buffer size far from overflow (the real model: 3 slots of 49 rows,
  // 48 text slots, 2 x 16 history rows per slot, 28 layers, 8 KV heads of 128, chunk 50 of 32).
  const auto bounded = [&](int64_t v, int64_t max, const char* name) {
    return v <= max ? Status::Ok() : PlanError(where + "." + name + ": at most " + std::to_string(max));
  };
  for (const auto& [v, max, name] : std::vector<std::tuple<int64_t, int64_t, const char*>>{
           {c->camera_slots, 16, "camera_slots"}, {c->history, 16, "history"}, {c->patch, 64, "patch"},
           {c->merge, 8, "merge"}, {c->temporal_patch, 8, "temporal_patch"}, {c->image_tokens, 16384, "image_tokens"},
           {c->prompt_tokens, 4096, "prompt_tokens"}, {c->cosmos_size, 2048, "cosmos_size"},
           {c->frame_rows, 4096, "frame_rows"}, {c->vlm_hidden, 65536, "vlm_hidden"},
           {c->expert_hidden, 65536, "expert_hidden"}, {c->layers, 1024, "layers"}, {c->kv_heads, 1024, "kv_heads"},
           {c->head_dim, 4096, "head_dim"}, {c->chunk_size, 4096, "chunk_size"}, {c->max_state_dim, 4096, "max_state_dim"},
           {c->max_action_dim, 4096, "max_action_dim"}, {c->num_steps, 10000, "num_steps"}}) {
    OE_RETURN_IF_ERROR(bounded(v, max, name));
  }
  if (c->state_dim > c->max_state_dim) return PlanError(where + ".state_dim: at most max_state_dim");
  if (c->action_dim > c->max_action_dim) return PlanError(where + ".action_dim: at most max_action_dim");
  if (c->head_dim % 2) return PlanError(where + ".head_dim: even (rotary halves)");
  if (c->expert_hidden % 2) return PlanError(where + ".expert_hidden: even (sine and cosine halves)");
  if (!(c->mask_value < -1000.0f && c->mask_value >= -3.0e38f)) return PlanError(where + ".mask_value: a finite value below -1000");
  if (!(c->max_observation_age_ms >= 0 && c->max_observation_age_ms <= 3.6e6)) {
    return PlanError(where + ".max_observation_age_ms: in [0, 3600000] (0: no limit)");
  }
  if (!(c->max_history_gap_ms >= 0 && c->max_history_gap_ms <= 3.6e6)) {
    return PlanError(where + ".max_history_gap_ms: in [0, 3600000] (0: no limit)");
  }
  if (c->action_mode != "delta" && c->action_mode != "absolute") return PlanError(where + ".action_mode: delta or absolute");
  return Status::Ok();
}

Status ReadArrays(const Arrays& a, const std::string& where, InternVlaConfig* c) {
  if (a.cameras == nullptr || a.cameras->empty() || int64_t(a.cameras->size()) > c->camera_slots) {
    return PlanError(where + ".cameras: 1 to camera_slots (" + std::to_string(c->camera_slots) + ") camera names");
  }
  OE_RETURN_IF_ERROR(pipeline::ReadStrings(a.cameras, where + ".cameras", a.cameras->size(), &c->cameras));
  if (std::set<std::string>(c->cameras.begin(), c->cameras.end()).size() != c->cameras.size()) {
    return PlanError(where + ".cameras: a camera is named twice");
  }
  OE_RETURN_IF_ERROR(ReadPair(a.resolution, where + ".image_resolution", &c->image_height, &c->image_width));
  const int64_t unit = c->patch * c->merge;
  if (c->image_height % unit || c->image_width % unit) {
    return PlanError(where + ".image_resolution: multiples of patch x merge (" + std::to_string(unit) + ")");
  }
  if ((c->image_height / unit) * (c->image_width / unit) != c->image_tokens) {
    return PlanError(where + ".image_tokens: " + std::to_string((c->image_height / unit) * (c->image_width / unit)) +
                     " merged rows at image_resolution, not " + std::to_string(c->image_tokens));
  }
  OE_RETURN_IF_ERROR(pipeline::ReadTriple(a.mean, where + ".image_mean", false, &c->image_mean));
  OE_RETURN_IF_ERROR(pipeline::ReadTriple(a.std_dev, where + ".image_std", true, &c->image_std));
  OE_RETURN_IF_ERROR(pipeline::ReadFloats(a.rope, where + ".rope_inv_freq", size_t(c->head_dim / 2), &c->rope_inv_freq));
  if (a.section->size() != 3) return PlanError(where + ".mrope_section: three section sizes (time, height, width)");
  for (size_t i = 0; i < 3; ++i) {
    if (!(*a.section)[i].is_number_integer() || (*a.section)[i].get<int64_t>() < 0 || (*a.section)[i].get<int64_t>() > 4096) {
      return PlanError(where + ".mrope_section[" + std::to_string(i) + "]: a whole number in [0, 4096]");
    }
    c->mrope_section[i] = (*a.section)[i].get<int64_t>();
  }
  OE_RETURN_IF_ERROR(pipeline::ReadDoubles(a.time, where + ".time_scaling", size_t(c->expert_hidden / 2), &c->time_scaling));
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<const InternVlaConfig>> ParseInternVla(const Json& j, const StagePlan& stage, const std::string& where) {
  auto c = std::make_shared<InternVlaConfig>();
  FieldReader r(j, where);
  c->tokenizer = ResolvePath(stage.artifact, r.String("tokenizer"));
  const Json* cameras = r.Array("cameras");
  c->camera_slots = r.Int("camera_slots", true, 1);
  c->history = r.Int("history", true, 1);
  const Json* resolution = r.Array("image_resolution");
  c->patch = r.Int("patch", true, 1);
  c->merge = r.Int("merge", true, 1);
  c->temporal_patch = r.Int("temporal_patch", true, 1);
  const Json* mean = r.Array("image_mean", false);
  const Json* std_dev = r.Array("image_std", false);
  c->image_tokens = r.Int("image_tokens", true, 1);
  c->prompt_tokens = r.Int("prompt_tokens", true, 1);
  c->image_token_id = r.Int("image_token_id", true, 0);
  c->vision_start_id = r.Int("vision_start_id", true, 0);
  c->vision_end_id = r.Int("vision_end_id", true, 0);
  c->pad_id = r.Int("pad_id", true, 0);
  c->cosmos_size = r.Int("cosmos_size", true, 1);
  c->frame_rows = r.Int("frame_rows", true, 1);
  c->vlm_hidden = r.Int("vlm_hidden", true, 1);
  c->expert_hidden = r.Int("expert_hidden", true, 2);
  c->layers = r.Int("layers", true, 1);
  c->kv_heads = r.Int("kv_heads", true, 1);
  c->head_dim = r.Int("head_dim", true, 2);
  c->chunk_size = r.Int("chunk_size", true, 1);
  c->max_state_dim = r.Int("max_state_dim", true, 1);
  c->max_action_dim = r.Int("max_action_dim", true, 1);
  c->state_dim = r.Int("state_dim", true, 1);
  c->action_dim = r.Int("action_dim", true, 1);
  c->num_steps = r.Int("num_steps", true, 1);
  c->mask_value = float(r.Number("mask_value"));
  const Json* rope = r.Array("rope_inv_freq");
  const Json* section = r.Array("mrope_section");
  const Json* time = r.Array("time_scaling");
  c->max_observation_age_ms = r.Number("max_observation_age_ms", false, 0.0);
  c->max_history_gap_ms = r.Number("max_history_gap_ms", false, 0.0);
  c->action_mode = r.String("action_mode");
  const Json* actions = r.Object("actions");
  const Json* identity = r.Object("identity", false);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  OE_RETURN_IF_ERROR(CheckBounds(*c, where));
  OE_RETURN_IF_ERROR(ReadArrays({cameras, resolution, mean, std_dev, rope, section, time}, where, c.get()));
  OE_ASSIGN_OR_RETURN(c->actions, pipeline::ParseActions(*actions, c->action_dim, where + ".actions"));
  if (identity != nullptr) c->identity = *identity;
  if (stage.execution_type != "llm_generation") return PlanError(where + ": a policy stage is llm_generation (one-shot)");
  if (!stage.input_sources.empty()) return PlanError(where + ": a policy stage reads the observation itself (no input sources)");
  if (!std::filesystem::is_regular_file(c->tokenizer)) return Status::Error("file_missing", where + ".tokenizer: " + c->tokenizer);
  const std::string stage_where = where.substr(0, where.rfind('.'));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "vision", {"image"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "frame", {"frame"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "context", {"context"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "expert", {"step"}));
  return std::shared_ptr<const InternVlaConfig>(std::move(c));
}

}  // namespace omni_edge::internvla
