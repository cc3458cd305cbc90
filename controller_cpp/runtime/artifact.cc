#include "runtime/artifact.h"

#include <filesystem>

namespace omni_edge {
namespace fs = std::filesystem;

Result<contract::VerifiedManifest> VerifyStageArtifact(const StagePlan& stage, bool require_qualified) {
  auto verified = contract::ReadManifest(stage.artifact);
  if (!verified.ok()) {
    return Status::Error(verified.status().reason(),
                         "stage " + std::to_string(stage.stage_id) + " artifact " + stage.artifact + ": " +
                             verified.status().message());
  }
  OE_RETURN_IF_ERROR(CheckStageArtifact(stage, verified.value(), require_qualified));
  return verified;
}

Status CheckStageArtifact(const StagePlan& stage, const contract::VerifiedManifest& verified, bool require_qualified) {
  std::vector<std::string> used;
  for (const auto& [role, group] : stage.graphs) {
    for (const auto& [key, ref] : group.graphs) used.push_back(ref.file);
  }
  if (stage.config) {
    for (const auto& file : stage.config->files()) used.push_back(file);
  }
  const fs::path root = fs::path(stage.artifact).lexically_normal();
  for (const auto& file : used) {
    const std::string rel = fs::path(file).lexically_normal().lexically_relative(root).generic_string();
    if (rel.empty() || rel.rfind("..", 0) == 0 || verified.manifest.files.count(rel) == 0) {
      return Status::Error("invalid_artifact", file + " is used by the plan but not hashed in " + stage.artifact +
                                                   "/manifest.json");
    }
  }
  if (require_qualified && !verified.extra_files.empty()) {
    std::string names;
    for (const auto& name : verified.extra_files) names += (names.empty() ? "" : ", ") + name;
    return Status::Error("not_qualified", stage.artifact + ": files not in its manifest (" + names +
                                              "): only hashed files are loaded; pass --allow-unqualified to run it anyway");
  }
  if (require_qualified && !verified.qualified()) {
    return Status::Error("not_qualified", stage.artifact + ": its validation reports did not pass (numerical: " +
                                              (verified.numerical.Passed() ? "pass" : "FAIL") + ", task: " +
                                              (verified.task.Passed() ? "pass" : "FAIL") +
                                              "); pass --allow-unqualified to run it anyway");
  }
  return Status::Ok();
}

}  // namespace omni_edge
