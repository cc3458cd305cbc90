// Artifact manifest v2 and its validation reports (CONTRACT.md, "Artifact manifest v2").
// ReadManifest re-hashes every listed file and re-reads both reports before anything is
// loaded; an artifact is qualified only when both reports were verified and passed.
// Mirrors omni_edge/contracts/manifest.py.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"

namespace omni_edge::contract {

inline constexpr const char* kManifestName = "manifest.json";

struct ReportCheck {
  std::string name;
  double observed = 0;
  double limit = 0;
  std::string comparison;  // <= >= < > ==
  bool Holds() const;
};

struct ValidationReport {
  std::string kind;  // numerical | task
  std::string checkpoint_id;
  std::string checkpoint_revision;
  std::string precision;
  std::string shape_bucket;
  std::string target_abi;
  std::vector<ReportCheck> checks;
  // The check its kind requires, holding the artifact to a real limit: a numerical report an
  // SQNR check ("...sqnr..."), a task report an agreement check ("...agree..."), > or >= a
  // positive limit. A report cut down to a trivially true check is not one.
  bool Gated() const;
  // Every check holds, and the report is gated.
  bool Passed() const;
};

struct ValidationRef {
  std::string file;
  bool passed = false;
};

struct ArtifactMetadata {
  std::string checkpoint_id;
  std::string checkpoint_revision;
  std::string precision;
  std::string runtime;
  std::string runtime_version;
  std::string target_abi;
  std::string adapter_version;
  std::string exporter_version;
  std::string compiler_version;
  std::string shape_bucket;
  int64_t state_layout_version = 1;
  std::optional<std::string> calibration_file;
  ValidationRef numerical_validation;
  ValidationRef task_validation;
};

struct ArtifactManifest {
  std::string component;
  std::map<std::string, std::string> files;  // relative name -> SHA-256 hex
  ArtifactMetadata artifact;
  Json extra_metadata = Json::object();  // metadata sections other than "artifact"
};

struct VerifiedManifest {
  std::string directory;
  ArtifactManifest manifest;
  ValidationReport numerical;
  ValidationReport task;
  std::vector<std::string> extra_files;  // in the directory but not in the manifest
  // Both reports passed, and nothing unhashed sits in the directory.
  bool qualified() const { return numerical.Passed() && task.Passed() && extra_files.empty(); }
};

Result<ValidationReport> ValidationReportFromJson(const Json& j, const std::string& where = "report");
Result<ArtifactManifest> ArtifactManifestFromJson(const Json& j);
Json ToJson(const ValidationReport& r);
Json ToJson(const ArtifactManifest& m);
Json ToJson(const VerifiedManifest& v);  // {"directory", "manifest", "numerical", "task", "extra_files", "qualified"}

// Refuses absolute paths, "..", ".", backslashes and the manifest itself.
Status CheckRelativeName(const std::string& name, const std::string& where);

Result<VerifiedManifest> ReadManifest(const std::string& directory);

}  // namespace omni_edge::contract
