// The execution plan: stages in the Omni pipeline vocabulary (stage_id, model_stage,
// execution_type, input_sources, final_output, ...), each with its artifact directory, its
// model section (read by the stage's model family) and, per graph role, the backend and device
// it runs on. Parsing is strict (unknown fields and wrong types are refused, naming the field)
// and the Omni topology rules are enforced: unique stage ids, sources that exist and are not
// the stage itself, at least one entry stage and at least one final-output stage.
//
// The runtime knows no model family: a plan is parsed with the families a front end was built
// with (StageSchemas), each of which reads its own section.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "contract/event_stream.h"

namespace omni_edge {

struct GraphRef {
  std::string file;    // absolute path
  std::string method;  // for multi-method programs
};

// How one graph role (embed, prefill, decode, lm_head, ...) of a stage runs.
struct GraphGroup {
  std::string backend;
  std::string device;
  std::map<std::string, std::string> options;
  std::map<std::string, GraphRef> graphs;  // key: role variant ("chunk", "step", or a cache size)
};

// A stage's model section as its family parsed it; the runtime keeps it opaque but for the
// files it names (a tokenizer), which must be hashed in the artifact like its graphs.
struct StageConfig {
  virtual ~StageConfig() = default;
  virtual std::vector<std::string> files() const { return {}; }  // absolute paths
};

// What a stage needs beside its weights: resident state per session, and working memory.
struct StageMemory {
  int64_t state = 0;
  int64_t workspace = 0;
};

struct StagePlan {
  int64_t stage_id = 0;
  std::string model_stage;
  std::string execution_type;  // llm_ar | llm_generation
  std::vector<int64_t> input_sources;
  bool final_output = false;
  std::string final_output_type;
  std::string engine_output_type;
  std::string artifact;  // absolute path of the artifact directory
  std::map<std::string, GraphGroup> graphs;
  std::string family;  // the key of its model section: llm | talker | vocoder | ...
  std::shared_ptr<const StageConfig> config;

  // The family's own config type (nullptr for another family's stage).
  template <typename T>
  const T* config_as() const {
    return dynamic_cast<const T*>(config.get());
  }
};

// A realtime session's voice activity detector (plan field `voice_activity`): its hashed
// component and the graph that scores one frame (group "vad", key "frame").
struct VoiceActivityPlan {
  std::string artifact;  // absolute path of the component directory
  GraphGroup group;
};

struct Plan {
  std::string path;
  std::string name;
  std::vector<StagePlan> stages;
  contract::StreamLimits stream_limits;
  std::optional<int64_t> memory_budget_mb;
  std::optional<VoiceActivityPlan> voice_activity;
};

// What the runtime asks of the model families it does not know.
class StageSchemas {
 public:
  virtual ~StageSchemas() = default;
  virtual bool Knows(const std::string& section) const = 0;
  virtual std::vector<std::string> sections() const = 0;
  // Parses model section `section` of `stage` (its generic fields and graphs already read).
  virtual Result<std::shared_ptr<const StageConfig>> Parse(const std::string& section, const Json& j,
                                                           const StagePlan& stage, const std::string& where) const = 0;
  virtual StageMemory Memory(const StagePlan& stage) const = 0;
};

Result<Plan> LoadPlan(const std::string& path, const StageSchemas& schemas);
// `base_dir` resolves the relative paths in the plan.
Result<Plan> ParsePlan(const Json& j, const std::string& base_dir, const StageSchemas& schemas);

// For the families' parsers.
Status PlanError(const std::string& what);
// `rel` against `base` unless it is absolute, normalized.
std::string ResolvePath(const std::string& base, const std::string& rel);
// The stage has graph role `role` with every key in `keys`.
Status RequireGraphs(const StagePlan& s, const std::string& where, const std::string& role,
                     const std::vector<std::string>& keys);

}  // namespace omni_edge
