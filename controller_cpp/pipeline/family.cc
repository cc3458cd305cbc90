#include "pipeline/family.h"

namespace omni_edge::pipeline {

void FamilyRegistry::Add(std::unique_ptr<Family> family) {
  const std::string name = family->section();
  families_[name] = std::move(family);
}

const Family* FamilyRegistry::Find(const std::string& section) const {
  auto it = families_.find(section);
  return it == families_.end() ? nullptr : it->second.get();
}

std::vector<std::string> FamilyRegistry::sections() const {
  std::vector<std::string> out;
  for (const auto& [name, family] : families_) out.push_back(name);
  return out;
}

Result<std::shared_ptr<const StageConfig>> FamilyRegistry::Parse(const std::string& section, const Json& j,
                                                                 const StagePlan& stage, const std::string& where) const {
  const Family* family = Find(section);
  if (family == nullptr) return Status::Error("invalid_plan", where + ": no model family reads a '" + section + "' section");
  return family->Parse(j, stage, where);
}

StageMemory FamilyRegistry::Memory(const StagePlan& stage) const {
  const Family* family = Find(stage.family);
  return family == nullptr ? StageMemory{} : family->Memory(stage);
}

}  // namespace omni_edge::pipeline
