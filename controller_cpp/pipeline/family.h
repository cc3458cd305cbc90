// A model family: one folder under families/ that parses its plan section, sizes its memory
// and opens the worker that runs its stages. The runtime parses plans through the registry of
// families it is handed (StageSchemas) and knows none of them; a front end hands it the
// families it was built with (families/builtin.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/stage_worker.h"
#include "runtime/backend_pool.h"
#include "runtime/plan.h"

namespace omni_edge::pipeline {

class Family {
 public:
  virtual ~Family() = default;
  // The plan section a stage of this family carries ("llm", "talker", "vocoder"); its name.
  virtual std::string section() const = 0;
  // Strict: unknown fields and wrong types refused naming the field; checks the stage's graph
  // roles and its input sources. `stage` holds the stage's generic fields, graphs resolved.
  virtual Result<std::shared_ptr<const StageConfig>> Parse(const Json& section, const StagePlan& stage,
                                                           const std::string& where) const = 0;
  virtual StageMemory Memory(const StagePlan& stage) const = 0;
  // What an entry stage of this family (one without input sources) reads of a request ("text").
  virtual std::vector<std::string> entry_reads(const StagePlan& stage) const { return {}; }
  // Loads the stage's graphs (its artifact is verified by then).
  virtual Result<std::unique_ptr<StageWorker>> Open(const StagePlan& stage, BackendPool& backends) const = 0;
};

class FamilyRegistry final : public StageSchemas {
 public:
  void Add(std::unique_ptr<Family> family);
  const Family* Find(const std::string& section) const;

  bool Knows(const std::string& section) const override { return Find(section) != nullptr; }
  std::vector<std::string> sections() const override;
  Result<std::shared_ptr<const StageConfig>> Parse(const std::string& section, const Json& j, const StagePlan& stage,
                                                   const std::string& where) const override;
  StageMemory Memory(const StagePlan& stage) const override;

 private:
  std::map<std::string, std::unique_ptr<Family>> families_;
};

}  // namespace omni_edge::pipeline
