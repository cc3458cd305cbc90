#include "families/policy/config.h"

#include <filesystem>
#include <set>

namespace omni_edge::policy {

using pipeline::ParseActions;
using pipeline::ReadFloats;
using pipeline::ReadStrings;
using pipeline::ReadTriple;

Result<std::shared_ptr<const PolicyConfig>> ParsePolicy(const Json& j, const StagePlan& stage, const std::string& where) {
  auto c = std::make_shared<PolicyConfig>();
  FieldReader r(j, where);
  c->tokenizer = ResolvePath(stage.artifact, r.String("tokenizer"));
  const Json* cameras = r.Array("cameras");
  c->image_size = r.Int("image_size", true, 1);
  c->image_tokens = r.Int("image_tokens", true, 1);
  c->hidden_size = r.Int("hidden_size", true, 1);
  const Json* mean = r.Array("image_mean", false);
  const Json* std_dev = r.Array("image_std", false);
  c->prompt_tokens = r.Int("prompt_tokens", true, 1);
  c->bos_id = r.Int("bos_id", false, -1, -1);
  c->image_token_id = r.Int("image_token_id", false, -1, -1);
  c->prompt_suffix = r.String("prompt_suffix", false, false);
  c->state_dim = r.Int("state_dim", true, 1);
  c->action_dim = r.Int("action_dim", true, 1);
  c->chunk_size = r.Int("chunk_size", true, 1);
  c->num_steps = r.Int("num_steps", true, 1);
  c->layers = r.Int("layers", true, 1);
  c->kv_heads = r.Int("kv_heads", true, 1);
  c->head_dim = r.Int("head_dim", true, 1);
  c->mask_value = float(r.Number("mask_value"));
  const Json* rope = r.Array("rope_inv_freq");
  const Json* expert_rope = r.Array("expert_rope_inv_freq");
  const Json* time = r.Array("time_freq");
  c->max_observation_age_ms = r.Number("max_observation_age_ms", false, 0.0);
  const Json* actions = r.Object("actions");
  const Json* identity = r.Object("identity", false);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  if (cameras == nullptr || cameras->empty() || cameras->size() > 16) return PlanError(where + ".cameras: 1 to 16 camera names");
  OE_RETURN_IF_ERROR(ReadStrings(cameras, where + ".cameras", cameras->size(), &c->cameras));
  if (std::set<std::string>(c->cameras.begin(), c->cameras.end()).size() != c->cameras.size()) {
    return PlanError(where + ".cameras: a camera is named twice");
  }
  OE_RETURN_IF_ERROR(ReadTriple(mean, where + ".image_mean", false, &c->image_mean));
  OE_RETURN_IF_ERROR(ReadTriple(std_dev, where + ".image_std", true, &c->image_std));
  // Bounds that keep every buffer size far from overflow (a real π0: 224, 256, 2048, 48, 32, 50, 10, 18).
  const auto bounded = [&](int64_t v, int64_t max, const char* name) {
    return v <= max ? Status::Ok() : PlanError(where + "." + name + ": at most " + std::to_string(max));
  };
  OE_RETURN_IF_ERROR(bounded(c->image_size, 4096, "image_size"));
  OE_RETURN_IF_ERROR(bounded(c->image_tokens, 65536, "image_tokens"));
  OE_RETURN_IF_ERROR(bounded(c->hidden_size, 65536, "hidden_size"));
  OE_RETURN_IF_ERROR(bounded(c->prompt_tokens, 65536, "prompt_tokens"));
  OE_RETURN_IF_ERROR(bounded(c->state_dim, 4096, "state_dim"));
  OE_RETURN_IF_ERROR(bounded(c->action_dim, 4096, "action_dim"));
  OE_RETURN_IF_ERROR(bounded(c->chunk_size, 65536, "chunk_size"));
  OE_RETURN_IF_ERROR(bounded(c->num_steps, 10000, "num_steps"));
  OE_RETURN_IF_ERROR(bounded(c->layers, 1024, "layers"));
  OE_RETURN_IF_ERROR(bounded(c->kv_heads, 1024, "kv_heads"));
  OE_RETURN_IF_ERROR(bounded(c->head_dim, 4096, "head_dim"));
  if (!(c->max_observation_age_ms >= 0 && c->max_observation_age_ms <= 3.6e6)) {
    return PlanError(where + ".max_observation_age_ms: in [0, 3600000] (0: no limit)");
  }
  if (c->head_dim % 2) return PlanError(where + ".head_dim: even (rotary halves)");
  if (!(c->mask_value < -1000.0f && c->mask_value >= -3.0e38f)) return PlanError(where + ".mask_value: a finite value below -1000");
  OE_RETURN_IF_ERROR(ReadFloats(rope, where + ".rope_inv_freq", size_t(c->head_dim / 2), &c->rope_inv_freq));
  OE_RETURN_IF_ERROR(ReadFloats(expert_rope, where + ".expert_rope_inv_freq", size_t(c->head_dim / 2), &c->expert_rope_inv_freq));
  OE_RETURN_IF_ERROR(ReadFloats(time, where + ".time_freq", 0, &c->time_freq));
  OE_ASSIGN_OR_RETURN(c->actions, ParseActions(*actions, c->action_dim, where + ".actions"));
  if (identity != nullptr) c->identity = *identity;
  if (stage.execution_type != "llm_generation") return PlanError(where + ": a policy stage is llm_generation (one-shot)");
  if (!stage.input_sources.empty()) return PlanError(where + ": a policy stage reads the observation itself (no input sources)");
  if (!std::filesystem::is_regular_file(c->tokenizer)) return Status::Error("file_missing", where + ".tokenizer: " + c->tokenizer);
  const std::string stage_where = where.substr(0, where.rfind('.'));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "vision", {"image"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "prefix", {"prefix"}));
  OE_RETURN_IF_ERROR(RequireGraphs(stage, stage_where, "expert", {"step"}));
  return std::shared_ptr<const PolicyConfig>(std::move(c));
}

}  // namespace omni_edge::policy
