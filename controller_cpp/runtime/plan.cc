#include "runtime/plan.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/platform/os.h"

namespace omni_edge {
namespace fs = std::filesystem;

Status PlanError(const std::string& what) { return Status::Error("invalid_plan", what); }

std::string ResolvePath(const std::string& base, const std::string& rel) {
  fs::path p(rel);
  return (p.is_absolute() ? p : fs::path(base) / p).lexically_normal().string();
}

Status RequireGraphs(const StagePlan& s, const std::string& where, const std::string& role,
                     const std::vector<std::string>& keys) {
  auto it = s.graphs.find(role);
  if (it == s.graphs.end()) return PlanError(where + ".graphs." + role + ": required for a " + s.model_stage + " stage");
  for (const auto& key : keys) {
    if (it->second.graphs.count(key) == 0) return PlanError(where + ".graphs." + role + ".graphs." + key + ": missing");
  }
  return Status::Ok();
}

namespace {

Result<std::vector<int64_t>> IntList(const Json* list, const std::string& where, int64_t minimum) {
  std::vector<int64_t> out;
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    int64_t v = 0;
    OE_RETURN_IF_ERROR(CheckInt((*list)[i], where + "[" + std::to_string(i) + "]", minimum, &v));
    out.push_back(v);
  }
  return out;
}

Result<GraphRef> ParseGraphRef(const Json& j, const std::string& where, const std::string& artifact) {
  GraphRef ref;
  if (j.is_string()) {
    ref.file = j.get<std::string>();
  } else {
    FieldReader r(j, where);
    ref.file = r.String("file");
    ref.method = r.String("method", false, true);
    OE_RETURN_IF_ERROR(r.Done());
  }
  if (ref.file.empty()) return PlanError(where + ": empty graph file");
  ref.file = ResolvePath(artifact, ref.file);
  if (!fs::is_regular_file(ref.file)) return Status::Error("file_missing", where + ": " + ref.file + " does not exist");
  return ref;
}

Result<GraphGroup> ParseGroup(const Json& j, const std::string& where, const std::string& artifact) {
  FieldReader r(j, where);
  GraphGroup g;
  g.backend = r.String("backend");
  g.device = r.String("device");
  const Json* options = r.Object("options", false);
  const Json* graphs = r.Object("graphs");
  OE_RETURN_IF_ERROR(r.Done());
  if (g.device != "cpu" && g.device != "gpu" && g.device != "npu") {
    return PlanError(where + ".device: must be cpu, gpu or npu, got '" + g.device + "'");
  }
  if (options != nullptr) {
    for (auto it = options->begin(); it != options->end(); ++it) {
      if (!it.value().is_string()) return PlanError(where + ".options." + it.key() + ": expected a string");
      g.options[it.key()] = it.value().get<std::string>();
    }
  }
  if (graphs->empty()) return PlanError(where + ".graphs: at least one graph");
  for (auto it = graphs->begin(); it != graphs->end(); ++it) {
    OE_ASSIGN_OR_RETURN(g.graphs[it.key()], ParseGraphRef(it.value(), where + ".graphs." + it.key(), artifact));
  }
  return g;
}

// The stage's generic fields; its model section (`section`) is parsed once the plan's topology
// holds.
Result<StagePlan> ParseStage(const Json& j, const std::string& where, const std::string& base,
                             const StageSchemas& schemas, const Json** section) {
  FieldReader r(j, where);
  StagePlan s;
  s.stage_id = r.Int("stage_id", true, 0);
  s.model_stage = r.String("model_stage");
  s.execution_type = r.String("execution_type");
  const Json* sources = r.Array("input_sources");
  s.final_output = r.Bool("final_output", false, false);
  s.final_output_type = r.String("final_output_type", false, false);
  s.engine_output_type = r.String("engine_output_type", false, false);
  s.artifact = ResolvePath(base, r.String("artifact"));
  const Json* graphs = r.Object("graphs");
  std::vector<std::pair<std::string, const Json*>> sections;  // model sections: one per stage
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (schemas.Knows(it.key())) sections.emplace_back(it.key(), r.Object(it.key().c_str()));
    }
  }
  OE_RETURN_IF_ERROR(r.Done());
  OE_ASSIGN_OR_RETURN(s.input_sources, IntList(sources, where + ".input_sources", 0));
  if (s.execution_type != "llm_ar" && s.execution_type != "llm_generation") {
    return PlanError(where + ".execution_type: must be llm_ar or llm_generation, got '" + s.execution_type + "'");
  }
  if (s.final_output && s.final_output_type.empty()) return PlanError(where + ".final_output_type: required for a final output");
  if (!fs::is_directory(s.artifact)) return Status::Error("file_missing", where + ".artifact: " + s.artifact + " is not a directory");
  for (auto it = graphs->begin(); it != graphs->end(); ++it) {
    OE_ASSIGN_OR_RETURN(s.graphs[it.key()], ParseGroup(it.value(), where + ".graphs." + it.key(), s.artifact));
  }
  if (sections.size() != 1) {
    std::string known;
    for (const auto& name : schemas.sections()) known += (known.empty() ? "" : ", ") + name;
    return PlanError(where + ": a stage has one model section (" + known + "), got " + std::to_string(sections.size()));
  }
  s.family = sections[0].first;
  *section = sections[0].second;
  return s;
}

// The Omni pipeline rules.
Status CheckTopology(const Plan& plan) {
  std::set<int64_t> ids;
  for (const auto& s : plan.stages) {
    if (!ids.insert(s.stage_id).second) return PlanError("stage_id " + std::to_string(s.stage_id) + " is used twice");
  }
  bool entry = false, final_output = false;
  for (const auto& s : plan.stages) {
    for (int64_t src : s.input_sources) {
      if (src == s.stage_id) return PlanError("stage " + std::to_string(s.stage_id) + " lists itself as an input source");
      if (ids.count(src) == 0) {
        return PlanError("stage " + std::to_string(s.stage_id) + " reads from stage " + std::to_string(src) +
                         ", which does not exist");
      }
    }
    entry |= s.input_sources.empty();
    final_output |= s.final_output;
  }
  if (!entry) return PlanError("no entry stage (a stage without input sources)");
  if (!final_output) return PlanError("no final-output stage: every request would hang");
  return Status::Ok();
}

Result<VoiceActivityPlan> ParseVoiceActivity(const Json& j, const std::string& base) {
  FieldReader r(j, "plan.voice_activity");
  VoiceActivityPlan v;
  v.artifact = ResolvePath(base, r.String("artifact"));
  const Json* graphs = r.Object("graphs");
  OE_RETURN_IF_ERROR(r.Done());
  if (!fs::is_directory(v.artifact)) {
    return Status::Error("file_missing", "plan.voice_activity.artifact: " + v.artifact + " is not a directory");
  }
  FieldReader g(*graphs, "plan.voice_activity.graphs");
  const Json* group = g.Object("vad");
  OE_RETURN_IF_ERROR(g.Done());
  OE_ASSIGN_OR_RETURN(v.group, ParseGroup(*group, "plan.voice_activity.graphs.vad", v.artifact));
  if (v.group.graphs.size() != 1 || v.group.graphs.count("frame") == 0) {
    return PlanError("plan.voice_activity.graphs.vad.graphs: exactly one graph, \"frame\"");
  }
  return v;
}

}  // namespace

Result<Plan> ParsePlan(const Json& j, const std::string& base_dir, const StageSchemas& schemas) {
  FieldReader r(j, "plan");
  const int64_t version = r.Int("plan_version");
  Plan plan;
  plan.name = r.String("name", false, true, "");
  const Json* stages = r.Array("stages");
  const Json* limits = r.Object("stream_limits", false);
  const Json* budget = r.Raw("memory_budget_mb");
  const Json* vad = r.Object("voice_activity", false);
  if (!r.ok()) return r.status();
  OE_RETURN_IF_ERROR(r.Done());
  if (version != 1) return PlanError("plan.plan_version: must be 1, got " + std::to_string(version));
  if (stages->empty()) return PlanError("plan.stages: at least one stage");
  std::vector<const Json*> sections(stages->size(), nullptr);
  for (size_t i = 0; i < stages->size(); ++i) {
    OE_ASSIGN_OR_RETURN(StagePlan s, ParseStage((*stages)[i], "plan.stages[" + std::to_string(i) + "]", base_dir,
                                                schemas, &sections[i]));
    plan.stages.push_back(std::move(s));
  }
  if (limits != nullptr) {
    FieldReader l(*limits, "plan.stream_limits");
    plan.stream_limits.max_events = l.Int("max_events", true, 1);
    plan.stream_limits.max_bytes = l.Int("max_bytes", true, 1);
    OE_RETURN_IF_ERROR(l.Done());
  }
  if (budget != nullptr && !budget->is_null()) {
    int64_t mb = 0;
    OE_RETURN_IF_ERROR(CheckInt(*budget, "plan.memory_budget_mb", 1, &mb));
    plan.memory_budget_mb = mb;
  }
  if (vad != nullptr) {
    OE_ASSIGN_OR_RETURN(plan.voice_activity, ParseVoiceActivity(*vad, base_dir));
  }
  OE_RETURN_IF_ERROR(CheckTopology(plan));
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    StagePlan& s = plan.stages[i];
    const std::string where = "plan.stages[" + std::to_string(i) + "]." + s.family;
    OE_ASSIGN_OR_RETURN(s.config, schemas.Parse(s.family, *sections[i], s, where));
  }
  return plan;
}

Result<Plan> LoadPlan(const std::string& path, const StageSchemas& schemas) {
  auto text = platform::ReadWholeFile(path);
  if (!text.ok()) return Status::Error(text.status().reason(), path + ": cannot open plan");
  OE_ASSIGN_OR_RETURN(Json j, ParseJson(*text, path));
  OE_ASSIGN_OR_RETURN(Plan plan, ParsePlan(j, fs::absolute(path).parent_path().string(), schemas));
  plan.path = fs::absolute(path).string();
  return plan;
}

}  // namespace omni_edge
