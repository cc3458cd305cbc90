#include "contract/manifest.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "base/platform/os.h"
#include "base/sha256.h"

namespace omni_edge::contract {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxChecks = 1000;
const char* const kArtifactStrings[] = {"checkpoint_id",   "checkpoint_revision", "precision",
                                        "runtime",         "runtime_version",     "target_abi",
                                        "adapter_version", "exporter_version",    "compiler_version",
                                        "shape_bucket"};

bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<ReportCheck> CheckFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  ReportCheck c;
  c.name = r.String("name");
  c.observed = r.Number("observed");
  c.limit = r.Number("limit");
  c.comparison = r.String("comparison");
  if (!r.ok()) return r.status();
  if (c.comparison != "<=" && c.comparison != ">=" && c.comparison != "<" && c.comparison != ">" &&
      c.comparison != "==") {
    return FieldError(where + ".comparison", "must be one of <= >= < > ==, got '" + c.comparison + "'");
  }
  OE_RETURN_IF_ERROR(r.Done());
  return c;
}

Result<ValidationRef> RefFromJson(const Json* j, const std::string& where) {
  if (j == nullptr) return FieldError(where, "required field is missing");
  FieldReader r(*j, where);
  ValidationRef ref;
  ref.file = r.String("file");
  ref.passed = r.Bool("passed");
  OE_RETURN_IF_ERROR(r.Done());
  return ref;
}

Result<ArtifactMetadata> ArtifactFromJson(const Json& j) {
  const std::string where = "metadata.artifact";
  FieldReader r(j, where);
  ArtifactMetadata a;
  std::string* strings[] = {&a.checkpoint_id,   &a.checkpoint_revision, &a.precision,        &a.runtime,
                            &a.runtime_version, &a.target_abi,          &a.adapter_version,  &a.exporter_version,
                            &a.compiler_version, &a.shape_bucket};
  for (size_t i = 0; i < std::size(kArtifactStrings); ++i) *strings[i] = r.String(kArtifactStrings[i]);
  a.state_layout_version = r.Int("state_layout_version", true, 1);
  a.calibration_file = r.OptionalString("calibration_file");
  if (r.ok() && a.calibration_file && a.calibration_file->empty()) {
    r.Fail(FieldError(where + ".calibration_file", "must be a non-empty string"));
  }
  const Json* numerical = r.Object("numerical_validation");
  if (r.ok()) {
    auto ref = RefFromJson(numerical, where + ".numerical_validation");
    if (!ref.ok()) return ref.status();
    a.numerical_validation = ref.value();
  }
  const Json* task = r.Object("task_validation");
  if (r.ok()) {
    auto ref = RefFromJson(task, where + ".task_validation");
    if (!ref.ok()) return ref.status();
    a.task_validation = ref.value();
  }
  OE_RETURN_IF_ERROR(r.Done());
  return a;
}

Result<std::string> ReadFile(const fs::path& path) { return platform::ReadWholeFile(path.u8string()); }

Status CheckReportIdentity(const ArtifactMetadata& a, const ValidationReport& r, const std::string& kind,
                           const std::string& where) {
  if (r.kind != kind) {
    return Status::Error("report_mismatch", where + ": report kind is '" + r.kind + "', expected '" + kind + "'");
  }
  const std::pair<const char*, std::pair<const std::string*, const std::string*>> fields[] = {
      {"checkpoint_id", {&r.checkpoint_id, &a.checkpoint_id}},
      {"checkpoint_revision", {&r.checkpoint_revision, &a.checkpoint_revision}},
      {"precision", {&r.precision, &a.precision}},
      {"shape_bucket", {&r.shape_bucket, &a.shape_bucket}},
      {"target_abi", {&r.target_abi, &a.target_abi}}};
  for (const auto& [name, values] : fields) {
    if (*values.first != *values.second) {
      return Status::Error("report_mismatch", where + ": report " + name + " '" + *values.first +
                                                  "' differs from the artifact's '" + *values.second + "'");
    }
  }
  return Status::Ok();
}

Result<ValidationReport> ReadReport(const fs::path& dir, const ArtifactMetadata& a, const ValidationRef& ref,
                                    const std::string& kind, const std::string& where) {
  auto text = ReadFile(dir / ref.file);
  if (!text.ok()) return text.status();
  auto parsed = ParseJson(text.value(), ref.file);
  if (!parsed.ok()) return Status::Error("invalid_report", where + ": " + parsed.status().message());
  auto report = ValidationReportFromJson(parsed.value(), ref.file);
  if (!report.ok()) return Status::Error("invalid_report", where + ": " + report.status().message());
  OE_RETURN_IF_ERROR(CheckReportIdentity(a, report.value(), kind, where));
  if (report->Passed() != ref.passed) {
    return Status::Error("report_mismatch", where + ".passed is " + (ref.passed ? "true" : "false") +
                                                " but the report shows " + (report->Passed() ? "true" : "false"));
  }
  return report;
}

}  // namespace

bool ReportCheck::Holds() const {
  if (comparison == "<=") return observed <= limit;
  if (comparison == ">=") return observed >= limit;
  if (comparison == "<") return observed < limit;
  if (comparison == ">") return observed > limit;
  return observed == limit;
}

bool ValidationReport::Gated() const {
  const std::string needed = kind == "numerical" ? "sqnr" : "agree";
  for (const auto& c : checks) {
    const bool held_to_something = (c.comparison == ">=" || c.comparison == ">") && c.limit > 0;
    if (c.name.find(needed) != std::string::npos && held_to_something) return true;
  }
  return false;
}

bool ValidationReport::Passed() const {
  for (const auto& c : checks) {
    if (!c.Holds()) return false;
  }
  return Gated();
}

Status CheckRelativeName(const std::string& name, const std::string& where) {
  bool bad = name.empty() || name.front() == '/' || name.back() == '/' || name.find('\\') != std::string::npos ||
             name.find('\0') != std::string::npos || name.find("//") != std::string::npos;
  if (!bad) {
    std::stringstream parts(name);
    std::string part;
    while (std::getline(parts, part, '/')) {
      if (part == ".." || part == ".") bad = true;
    }
  }
  if (bad) return FieldError(where, "'" + name + "' is not a relative path inside the artifact");
  if (name == kManifestName) return FieldError(where, "the manifest cannot hash itself");
  return Status::Ok();
}

Result<ValidationReport> ValidationReportFromJson(const Json& j, const std::string& where) {
  FieldReader r(j, where);
  const int64_t version = r.Int("schema_version");
  if (r.ok() && version != 1) {
    return FieldError(where + ".schema_version", "must be 1, got " + std::to_string(version));
  }
  ValidationReport report;
  report.kind = r.String("kind");
  if (r.ok() && report.kind != "numerical" && report.kind != "task") {
    return FieldError(where + ".kind", "must be numerical or task, got '" + report.kind + "'");
  }
  report.checkpoint_id = r.String("checkpoint_id");
  report.checkpoint_revision = r.String("checkpoint_revision");
  report.precision = r.String("precision");
  report.shape_bucket = r.String("shape_bucket");
  report.target_abi = r.String("target_abi");
  const Json* checks = r.Array("checks");
  if (!r.ok()) return r.status();
  if (checks->empty() || checks->size() > size_t(kMaxChecks)) {
    return FieldError(where + ".checks", "must hold 1 to 1000 checks, got " + std::to_string(checks->size()));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < checks->size(); ++i) {
    OE_ASSIGN_OR_RETURN(ReportCheck c, CheckFromJson((*checks)[i], where + ".checks[" + std::to_string(i) + "]"));
    names.insert(c.name);
    report.checks.push_back(std::move(c));
  }
  if (names.size() != report.checks.size()) return FieldError(where + ".checks", "check names must be unique");
  OE_RETURN_IF_ERROR(r.Done());
  return report;
}

Result<ArtifactManifest> ArtifactManifestFromJson(const Json& j) {
  FieldReader r(j, "manifest");
  const int64_t version = r.Int("schema_version");
  if (r.ok() && version != 2) return FieldError("manifest.schema_version", "must be 2, got " + std::to_string(version));
  ArtifactManifest m;
  m.component = r.String("component");
  const Json* files = r.Object("files");
  if (!r.ok()) return r.status();
  for (auto it = files->begin(); it != files->end(); ++it) {
    if (!it.value().is_string()) return FieldError("manifest.files." + it.key(), "expected a string");
  }
  const Json* metadata = r.Object("metadata");
  if (!r.ok()) return r.status();
  auto artifact_json = metadata->find("artifact");
  if (artifact_json == metadata->end()) return FieldError("manifest.metadata.artifact", "required field is missing");
  OE_ASSIGN_OR_RETURN(m.artifact, ArtifactFromJson(*artifact_json));
  for (auto it = metadata->begin(); it != metadata->end(); ++it) {
    if (it.key() == "artifact") continue;
    if (!it.value().is_object()) return FieldError("manifest.metadata." + it.key(), "expected an object");
    m.extra_metadata[it.key()] = it.value();
  }
  OE_RETURN_IF_ERROR(r.Done());
  // The same checks, in the same order, as the Python reference's __post_init__.
  for (auto it = files->begin(); it != files->end(); ++it) {
    OE_RETURN_IF_ERROR(CheckRelativeName(it.key(), "manifest.files." + it.key()));
    const std::string digest = it.value().get<std::string>();
    if (!IsSha256Hex(digest)) return FieldError("manifest.files." + it.key(), "expected a lowercase SHA-256 hex digest");
    m.files[it.key()] = digest;
  }
  std::vector<std::pair<std::string, std::string>> refs = {
      {"metadata.artifact.numerical_validation.file", m.artifact.numerical_validation.file},
      {"metadata.artifact.task_validation.file", m.artifact.task_validation.file}};
  if (m.artifact.calibration_file) refs.emplace_back("metadata.artifact.calibration_file", *m.artifact.calibration_file);
  for (const auto& [where, name] : refs) {
    if (m.files.count(name) == 0) return FieldError(where, "'" + name + "' is not among the hashed files");
  }
  return m;
}

Json ToJson(const ValidationReport& r) {
  Json checks = Json::array();
  for (const auto& c : r.checks) {
    checks.push_back({{"name", c.name}, {"observed", c.observed}, {"limit", c.limit}, {"comparison", c.comparison}});
  }
  return Json{{"schema_version", 1},
              {"kind", r.kind},
              {"checkpoint_id", r.checkpoint_id},
              {"checkpoint_revision", r.checkpoint_revision},
              {"precision", r.precision},
              {"shape_bucket", r.shape_bucket},
              {"target_abi", r.target_abi},
              {"checks", std::move(checks)}};
}

Json ToJson(const ArtifactManifest& m) {
  const ArtifactMetadata& a = m.artifact;
  Json artifact = {{"checkpoint_id", a.checkpoint_id},
                   {"checkpoint_revision", a.checkpoint_revision},
                   {"precision", a.precision},
                   {"runtime", a.runtime},
                   {"runtime_version", a.runtime_version},
                   {"target_abi", a.target_abi},
                   {"adapter_version", a.adapter_version},
                   {"exporter_version", a.exporter_version},
                   {"compiler_version", a.compiler_version},
                   {"shape_bucket", a.shape_bucket},
                   {"state_layout_version", a.state_layout_version},
                   {"numerical_validation", {{"file", a.numerical_validation.file}, {"passed", a.numerical_validation.passed}}},
                   {"task_validation", {{"file", a.task_validation.file}, {"passed", a.task_validation.passed}}}};
  if (a.calibration_file) artifact["calibration_file"] = *a.calibration_file;
  Json metadata = m.extra_metadata;
  metadata["artifact"] = std::move(artifact);
  return Json{{"schema_version", 2}, {"component", m.component}, {"files", m.files}, {"metadata", std::move(metadata)}};
}

Json ToJson(const VerifiedManifest& v) {
  return Json{{"directory", v.directory},
              {"manifest", ToJson(v.manifest)},
              {"numerical", ToJson(v.numerical)},
              {"task", ToJson(v.task)},
              {"extra_files", v.extra_files},
              {"qualified", v.qualified()}};
}

Result<VerifiedManifest> ReadManifest(const std::string& directory) {
  const fs::path dir(directory);
  const fs::path path = dir / kManifestName;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return Status::Error("manifest_unreadable", path.string() + ": no such manifest");
  }
  auto text = ReadFile(path);
  if (!text.ok()) return Status::Error("manifest_unreadable", text.status().message());
  OE_ASSIGN_OR_RETURN(Json j, ParseJson(text.value(), path.string()));
  OE_ASSIGN_OR_RETURN(ArtifactManifest manifest, ArtifactManifestFromJson(j));

  const fs::path root = fs::weakly_canonical(dir, ec);
  for (const auto& [name, expected] : manifest.files) {
    const fs::path file = dir / name;
    const fs::path resolved = fs::weakly_canonical(file, ec);
    const auto rel = resolved.lexically_relative(root);
    if (ec || rel.empty() || *rel.begin() == "..") {
      return FieldError("manifest.files." + name, "resolves outside the artifact");
    }
    if (!fs::is_regular_file(file, ec)) return Status::Error("file_missing", name + ": listed in the manifest but missing");
    OE_ASSIGN_OR_RETURN(std::string actual, Sha256File(file.string()));
    if (actual != expected) {
      return Status::Error("hash_mismatch", name + ": SHA-256 " + actual + " != manifest " + expected);
    }
  }
  const ArtifactMetadata& a = manifest.artifact;
  OE_ASSIGN_OR_RETURN(ValidationReport numerical, ReadReport(dir, a, a.numerical_validation, "numerical",
                                                             "metadata.artifact.numerical_validation"));
  OE_ASSIGN_OR_RETURN(ValidationReport task,
                      ReadReport(dir, a, a.task_validation, "task", "metadata.artifact.task_validation"));
  // What sits in the directory but is not hashed: a graph could reach it, so it is reported
  // and the artifact does not qualify.
  std::vector<std::string> extra;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) continue;
    const std::string rel = it->path().lexically_relative(dir).generic_string();
    if (rel != kManifestName && manifest.files.count(rel) == 0) extra.push_back(rel);
  }
  std::sort(extra.begin(), extra.end());
  return VerifiedManifest{directory, std::move(manifest), std::move(numerical), std::move(task), std::move(extra)};
}

}  // namespace omni_edge::contract
