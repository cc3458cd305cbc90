#include "contract/manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/sha256.h"

namespace omni_edge::contract {
namespace {
namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

Json Report(const std::string& kind, double observed) {
  return Json{{"schema_version", 1},
              {"kind", kind},
              {"checkpoint_id", "ckpt"},
              {"checkpoint_revision", "rev1"},
              {"precision", "fp32"},
              {"shape_bucket", "ctx512"},
              {"target_abi", "x86_64-linux"},
              {"checks", {{{"name", kind == "numerical" ? "logit_sqnr_agreement" : "greedy_agreement"},
                           {"observed", observed}, {"limit", 0.9}, {"comparison", ">="}}}}};
}

// A complete artifact: one graph, two passing reports, a calibration file, a manifest.
class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("manifest_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    Write(dir_ / "graphs/decode.onnx", "graph-bytes");
    Write(dir_ / "calib.txt", "calibration text");
    WriteReport("numerical.json", Report("numerical", 0.99));
    WriteReport("task.json", Report("task", 0.95));
    manifest_ = Json{{"schema_version", 2},
                     {"component", "llm.decode"},
                     {"files", Json::object()},
                     {"metadata",
                      {{"artifact",
                        {{"checkpoint_id", "ckpt"},
                         {"checkpoint_revision", "rev1"},
                         {"precision", "fp32"},
                         {"runtime", "onnxruntime"},
                         {"runtime_version", "1.23"},
                         {"target_abi", "x86_64-linux"},
                         {"adapter_version", "1"},
                         {"exporter_version", "0.1.0"},
                         {"compiler_version", "none"},
                         {"shape_bucket", "ctx512"},
                         {"state_layout_version", 1},
                         {"calibration_file", "calib.txt"},
                         {"numerical_validation", {{"file", "numerical.json"}, {"passed", true}}},
                         {"task_validation", {{"file", "task.json"}, {"passed", true}}}}},
                       {"qnn", {{"htp_arch", "v79"}}}}}};
    Rehash();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteReport(const std::string& name, const Json& report) { Write(dir_ / name, report.dump(2)); }
  void Rehash() {
    manifest_["files"] = Json::object();
    for (const char* name : {"graphs/decode.onnx", "calib.txt", "numerical.json", "task.json"}) {
      manifest_["files"][name] = Sha256File((dir_ / name).string()).value();
    }
    Save();
  }
  void Save() { Write(dir_ / kManifestName, manifest_.dump(2)); }
  std::string Reason() {
    auto v = ReadManifest(dir_.string());
    return v.ok() ? "ok" : v.status().reason();
  }

  fs::path dir_;
  Json manifest_;
};

TEST_F(ManifestTest, VerifiesAndQualifies) {
  auto v = ReadManifest(dir_.string());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->qualified());
  EXPECT_EQ(v->manifest.component, "llm.decode");
  EXPECT_EQ(v->manifest.extra_metadata["qnn"]["htp_arch"], "v79");
  EXPECT_EQ(v->numerical.checks.size(), 1u);
  auto again = ArtifactManifestFromJson(ToJson(v->manifest));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ToJson(again.value()), ToJson(v->manifest));
}

TEST_F(ManifestTest, AFlippedByteInAnyFileIsCaught) {
  for (const char* name : {"graphs/decode.onnx", "calib.txt", "numerical.json", "task.json"}) {
    std::string bytes;
    {
      std::ifstream in(dir_ / name, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::string flipped = bytes;
    flipped[flipped.size() / 2] ^= 0x01;
    Write(dir_ / name, flipped);
    EXPECT_EQ(Reason(), "hash_mismatch") << name;
    Write(dir_ / name, bytes);
    EXPECT_EQ(Reason(), "ok") << name;
  }
}

TEST_F(ManifestTest, MissingFilesAndManifest) {
  fs::remove(dir_ / "calib.txt");
  EXPECT_EQ(Reason(), "file_missing");
  fs::remove(dir_ / kManifestName);
  EXPECT_EQ(Reason(), "manifest_unreadable");
}

TEST_F(ManifestTest, AnUnlistedFileOrAReportWithoutItsGatingCheckDoesNotQualify) {
  Write(dir_ / "graphs/weights.bin", "unhashed");
  auto v = ReadManifest(dir_.string());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->extra_files, std::vector<std::string>{"graphs/weights.bin"});
  EXPECT_FALSE(v->qualified());
  fs::remove(dir_ / "graphs/weights.bin");
  // A task report cut down to one trivially true check: the manifest's "passed" no longer matches.
  Json trivial = Report("task", 1.0);
  trivial["checks"] = {{{"name", "greedy_agreement"}, {"observed", 1.0}, {"limit", 0.0}, {"comparison", ">="}}};
  WriteReport("task.json", trivial);
  Rehash();
  EXPECT_EQ(Reason(), "report_mismatch");
  trivial["checks"] = {{{"name", "reported_only"}, {"observed", 1.0}, {"limit", 0.5}, {"comparison", ">="}}};
  WriteReport("task.json", trivial);
  Rehash();
  EXPECT_EQ(Reason(), "report_mismatch");
}

TEST_F(ManifestTest, AFailingReportIsEvidenceButNotQualified) {
  WriteReport("task.json", Report("task", 0.5));
  manifest_["metadata"]["artifact"]["task_validation"]["passed"] = false;
  Rehash();
  auto v = ReadManifest(dir_.string());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_FALSE(v->qualified());
  EXPECT_FALSE(v->task.Passed());
}

TEST_F(ManifestTest, PassedMustEqualWhatTheReportShows) {
  WriteReport("task.json", Report("task", 0.5));
  Rehash();  // the manifest still claims passed=true
  EXPECT_EQ(Reason(), "report_mismatch");
}

TEST_F(ManifestTest, ReportIdentityMustMatchTheArtifact) {
  Json r = Report("numerical", 0.99);
  r["precision"] = "w8a16";
  WriteReport("numerical.json", r);
  Rehash();
  EXPECT_EQ(Reason(), "report_mismatch");
  WriteReport("numerical.json", Report("task", 0.99));  // wrong kind
  Rehash();
  EXPECT_EQ(Reason(), "report_mismatch");
}

TEST_F(ManifestTest, MalformedReportsAreRefused) {
  Json r = Report("numerical", 0.99);
  r["checks"] = Json::array();
  WriteReport("numerical.json", r);
  Rehash();
  EXPECT_EQ(Reason(), "invalid_report");
  r = Report("numerical", 0.99);
  r["checks"].push_back(r["checks"][0]);  // duplicate names
  WriteReport("numerical.json", r);
  Rehash();
  EXPECT_EQ(Reason(), "invalid_report");
  r = Report("numerical", 0.99);
  r["checks"][0]["comparison"] = "~";
  WriteReport("numerical.json", r);
  Rehash();
  EXPECT_EQ(Reason(), "invalid_report");
  WriteReport("numerical.json", "{not json");
  Rehash();
  EXPECT_EQ(Reason(), "invalid_report");
}

TEST_F(ManifestTest, ManifestSchemaRules) {
  const Json good = manifest_;
  auto expect = [&](const char* what, auto mutate, const char* reason) {
    manifest_ = good;
    mutate(manifest_);
    Save();
    EXPECT_EQ(Reason(), reason) << what;
  };
  expect("schema 1", [](Json& m) { m["schema_version"] = 1; }, "invalid_field");
  expect("unknown top-level", [](Json& m) { m["extra"] = 1; }, "invalid_field");
  expect("empty component", [](Json& m) { m["component"] = ""; }, "invalid_field");
  expect("uppercase hash", [](Json& m) { m["files"]["calib.txt"] = std::string(64, 'A'); }, "invalid_field");
  expect("traversal", [](Json& m) { m["files"]["../x"] = std::string(64, 'a'); }, "invalid_field");
  expect("absolute", [](Json& m) { m["files"]["/etc/passwd"] = std::string(64, 'a'); }, "invalid_field");
  expect("self", [](Json& m) { m["files"]["manifest.json"] = std::string(64, 'a'); }, "invalid_field");
  expect("layout 0", [](Json& m) { m["metadata"]["artifact"]["state_layout_version"] = 0; }, "invalid_field");
  expect("unhashed report",
         [](Json& m) { m["metadata"]["artifact"]["task_validation"]["file"] = "other.json"; }, "invalid_field");
  expect("unhashed calibration", [](Json& m) { m["metadata"]["artifact"]["calibration_file"] = "x"; }, "invalid_field");
  expect("extra ref field",
         [](Json& m) { m["metadata"]["artifact"]["task_validation"]["note"] = "x"; }, "invalid_field");
  expect("missing runtime", [](Json& m) { m["metadata"]["artifact"].erase("runtime"); }, "invalid_field");
  expect("non-object metadata section", [](Json& m) { m["metadata"]["qnn"] = 3; }, "invalid_field");
  manifest_ = good;
  Write(dir_ / kManifestName, "[1,2");
  EXPECT_EQ(Reason(), "invalid_json");
}

TEST_F(ManifestTest, SymlinkOutsideTheArtifactIsRefused) {
  const fs::path outside = dir_.parent_path() / ("outside_" + std::to_string(::getpid()));
  Write(outside, "secret");
  fs::create_symlink(outside, dir_ / "link.bin");
  manifest_["files"]["link.bin"] = Sha256File(outside.string()).value();
  Save();
  EXPECT_EQ(Reason(), "invalid_field");
  fs::remove(outside);
}

}  // namespace
}  // namespace omni_edge::contract
