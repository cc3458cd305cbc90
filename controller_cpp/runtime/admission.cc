#include "runtime/admission.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "base/platform/os.h"
#include "base/platform/process_stats.h"
#include "contract/manifest.h"

namespace omni_edge {
namespace fs = std::filesystem;

namespace {

const std::set<std::string> kPools = {"device_ram", "vram", "wsl_quota"};
// Files a runtime maps or copies into memory; configs, tokenizers and reports are noise.
const std::set<std::string> kWeightExtensions = {".onnx", ".data", ".bin", ".pte", ".so"};

std::string Mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(1 << 20));
  return text;
}

Status AdmissionError(const std::string& message) { return Status::Error("admission", message); }

}  // namespace

std::map<std::string, int64_t> PlanBudget::per_pool() const {
  std::map<std::string, int64_t> out;
  for (const auto& s : stages) out[s.pool] += s.total();
  return out;
}

std::string StagePool(bool wsl) { return wsl ? "wsl_quota" : "device_ram"; }

Status CheckMemoryBudget(const Plan& plan, const PlanBudget& budget) {
  if (!plan.memory_budget_mb) return Status::Ok();
  int64_t total = 0;
  for (const auto& [pool, bytes] : budget.per_pool()) total += bytes;
  const int64_t cap = *plan.memory_budget_mb * (1ll << 20);
  if (total <= cap) return Status::Ok();
  return AdmissionError(plan.path + " needs " + std::to_string(total >> 20) + " MiB but its memory_budget_mb is " +
                        std::to_string(*plan.memory_budget_mb) + "; nothing was loaded");
}

Result<PlanBudget> EstimatePlanBudget(const Plan& plan, int sessions, bool wsl, const StageSchemas& schemas) {
  if (sessions < 1) return Status::Error("invalid_argument", "sessions: at least 1, got " + std::to_string(sessions));
  PlanBudget budget;
  budget.sessions = sessions;
  std::set<std::string> loaded;  // artifacts whose weights an earlier stage already holds (one pool shares them)
  for (const auto& stage : plan.stages) {
    StageBudget b;
    b.stage_id = stage.stage_id;
    std::set<std::string> backends;
    for (const auto& [role, group] : stage.graphs) backends.insert(group.backend);
    b.pool = StagePool(wsl);

    const std::string manifest_path = (fs::path(stage.artifact) / contract::kManifestName).string();
    auto text = platform::ReadWholeFile(manifest_path);
    if (!text.ok()) return Status::Error(text.status().reason(), manifest_path + ": cannot open the manifest to size the stage");
    OE_ASSIGN_OR_RETURN(Json j, ParseJson(*text, manifest_path));
    OE_ASSIGN_OR_RETURN(contract::ArtifactManifest manifest, contract::ArtifactManifestFromJson(j));
    const bool shared = !loaded.insert(fs::path(stage.artifact).lexically_normal().string()).second;
    for (const auto& [name, hash] : manifest.files) {
      if (shared || kWeightExtensions.count(fs::path(name).extension().string()) == 0) continue;
      std::error_code ec;
      const auto size = fs::file_size(fs::path(stage.artifact) / name, ec);
      if (ec) return Status::Error("file_missing", stage.artifact + "/" + name + ": listed in the manifest but " + ec.message());
      b.weights += int64_t(size);
      b.loading_peak = std::max(b.loading_peak, int64_t(size));
    }
    const StageMemory memory = schemas.Memory(stage);
    b.state += memory.state * sessions;
    b.workspace += memory.workspace;
    b.workspace += kRuntimeArenaBytes * int64_t(backends.size());
    b.margin = int64_t(kMarginFraction * double(b.weights + b.state + b.loading_peak + b.workspace));
    budget.stages.push_back(b);
  }
  return budget;
}

Json ToJson(const PlanBudget& budget) {
  Json stages = Json::array();
  for (const auto& s : budget.stages) {
    stages.push_back({{"stage_id", s.stage_id}, {"pool", s.pool}, {"weights", s.weights}, {"state", s.state},
                      {"loading_peak", s.loading_peak}, {"workspace", s.workspace}, {"margin", s.margin},
                      {"total", s.total()}});
  }
  Json pools = Json::object();
  for (const auto& [pool, bytes] : budget.per_pool()) pools[pool] = bytes;
  return {{"sessions", budget.sessions}, {"stages", stages}, {"pools", pools}};
}

std::map<std::string, int64_t> DetectPools(bool* wsl) {
  bool is_wsl = false;
  const int64_t available = AvailableMemoryBytes(&is_wsl);
  if (wsl != nullptr) *wsl = is_wsl;
  std::map<std::string, int64_t> pools;
  if (available >= 0) pools[is_wsl ? "wsl_quota" : "device_ram"] = available;
  return pools;
}

Result<std::map<std::string, int64_t>> PoolsFromJson(const Json& j) {
  if (!j.is_object()) return Status::Error("invalid_argument", std::string("pools: expected an object, got ") + JsonTypeName(j));
  std::map<std::string, int64_t> pools;
  for (const auto& [name, value] : j.items()) {
    if (kPools.count(name) == 0) {
      return Status::Error("invalid_argument", "pools." + name + ": unknown pool (device_ram, vram, wsl_quota)");
    }
    int64_t bytes = 0;
    OE_RETURN_IF_ERROR(CheckInt(value, "pools." + name, 0, &bytes));
    pools[name] = bytes;
  }
  return pools;
}

AdmissionLedger::AdmissionLedger(std::map<std::string, int64_t> capacity) : capacity_(std::move(capacity)) {}

int64_t AdmissionLedger::UsedLocked(const std::string& pool) const {
  int64_t used = 0;
  for (const auto& [id, e] : entries_) {
    auto it = e.bytes.find(pool);
    if (it != e.bytes.end()) used += it->second;
  }
  return used;
}

int64_t AdmissionLedger::Free(const std::string& pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = capacity_.find(pool);
  return it == capacity_.end() ? 0 : it->second - UsedLocked(pool);
}

Result<int64_t> AdmissionLedger::Reserve(const std::string& owner, const std::map<std::string, int64_t>& demand) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [pool, bytes] : demand) {
    if (bytes < 0) return AdmissionError(owner + ": negative demand on " + pool);
    auto cap = capacity_.find(pool);
    if (cap == capacity_.end()) {
      return AdmissionError(owner + " needs " + Mib(bytes) + " of " + pool + ", which this device does not have");
    }
    const int64_t used = UsedLocked(pool);
    if (used + bytes > cap->second) {
      std::string holders;
      for (const auto& [id, e] : entries_) {
        auto it = e.bytes.find(pool);
        if (it == e.bytes.end()) continue;
        holders += (holders.empty() ? "" : ", ") + e.owner + " " + Mib(it->second) + (e.quarantined ? " (quarantined)" : "");
      }
      return AdmissionError(owner + " needs " + Mib(bytes) + " of " + pool + " but only " + Mib(cap->second - used) +
                            " of " + Mib(cap->second) + " is free" + (holders.empty() ? "" : "; held by " + holders) +
                            "; nothing was loaded");
    }
  }
  const int64_t id = next_id_++;
  entries_[id] = Entry{owner, demand, false};
  return id;
}

Status AdmissionLedger::Release(int64_t reservation, bool drained) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(reservation);
  if (it == entries_.end() || it->second.quarantined) {
    return Status::Error("invalid_argument", "reservation " + std::to_string(reservation) + " is not held");
  }
  if (drained) entries_.erase(it);
  else it->second.quarantined = true;
  return Status::Ok();
}

Status AdmissionLedger::Forgive(int64_t reservation) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(reservation);
  if (it == entries_.end() || !it->second.quarantined) {
    return Status::Error("invalid_argument", "reservation " + std::to_string(reservation) + " is not quarantined");
  }
  entries_.erase(it);
  return Status::Ok();
}

Json AdmissionLedger::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json pools = Json::object();
  for (const auto& [pool, cap] : capacity_) {
    int64_t quarantined = 0;
    for (const auto& [id, e] : entries_) {
      auto it = e.bytes.find(pool);
      if (e.quarantined && it != e.bytes.end()) quarantined += it->second;
    }
    const int64_t used = UsedLocked(pool);
    pools[pool] = {{"capacity", cap}, {"reserved", used}, {"quarantined", quarantined}, {"free", cap - used}};
  }
  Json reservations = Json::array();
  for (const auto& [id, e] : entries_) {
    reservations.push_back({{"id", id}, {"owner", e.owner}, {"bytes", e.bytes}, {"quarantined", e.quarantined}});
  }
  return {{"pools", pools}, {"reservations", reservations}};
}

}  // namespace omni_edge
