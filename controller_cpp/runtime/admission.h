// Admission ledger: before any stage of a plan is loaded, its whole memory budget is reserved
// against the physical pools it will draw from, all stages or none. A plan that does not fit
// is refused with the numbers, so nothing is half-loaded and then killed by the OS.
//
// Pools are physical: phones and Snapdragon PCs share one DRAM between CPU, GPU and NPU
// ("device_ram"); a discrete GPU has its own "vram"; under WSL the VM's memory limit is a
// separate "wsl_quota" that replaces device_ram. The budget of a stage comes from its artifact:
//   weights       bytes of the graph/weight files its manifest lists
//   state         resident state per session, as the stage's family sizes it (a decoder: the KV
//                 cache of its largest bucket plus the one it migrates from)
//   loading_peak  the largest single file (held twice while a runtime deserializes it)
//   workspace     working memory, as the family sizes it (a decoder: activations and logits
//                 of a prefill chunk), plus the runtime's fixed arena per backend
//   margin        10% of the above
// harness/qualification/ledger.py reads these numbers through the binding: the formula exists once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "runtime/plan.h"

namespace omni_edge {

inline constexpr int64_t kRuntimeArenaBytes = 32ll << 20;  // per backend session group: allocator arenas, code
inline constexpr double kMarginFraction = 0.10;

struct StageBudget {
  int64_t stage_id = 0;
  std::string pool;
  int64_t weights = 0, state = 0, loading_peak = 0, workspace = 0, margin = 0;
  int64_t total() const { return weights + state + loading_peak + workspace + margin; }
};

struct PlanBudget {
  std::vector<StageBudget> stages;
  int sessions = 1;
  std::map<std::string, int64_t> per_pool() const;
};

// The pool a stage draws from. Plans place graphs on cpu, gpu or npu, which on phones and
// Snapdragon PCs share one DRAM (under WSL: the VM's quota); "vram" is for routes with a
// discrete GPU, which plans cannot target yet.
std::string StagePool(bool wsl);

// `schemas` size each stage's state and workspace (its family's rule).
Result<PlanBudget> EstimatePlanBudget(const Plan& plan, int sessions, bool wsl, const StageSchemas& schemas);
// The plan's own cap (memory_budget_mb) over the budget of all pools, with or without a ledger.
Status CheckMemoryBudget(const Plan& plan, const PlanBudget& budget);
Json ToJson(const PlanBudget& budget);

// Pools of this machine: device_ram = MemAvailable (what can be had without swapping), or
// wsl_quota under WSL. Zero pools when /proc/meminfo is unreadable.
std::map<std::string, int64_t> DetectPools(bool* wsl);

class AdmissionLedger {
 public:
  explicit AdmissionLedger(std::map<std::string, int64_t> capacity);

  // All-or-nothing: every pool of `demand` must have room, else nothing is charged and the
  // refusal names the pool, the demand, what is free and who holds the rest.
  Result<int64_t> Reserve(const std::string& owner, const std::map<std::string, int64_t>& demand);
  // drained = false: the owner could not confirm that its runtime let go of the memory (a
  // hung drain); the bytes stay charged, quarantined, until Forgive().
  Status Release(int64_t reservation, bool drained);
  Status Forgive(int64_t reservation);
  int64_t Free(const std::string& pool) const;
  Json Snapshot() const;

 private:
  struct Entry {
    std::string owner;
    std::map<std::string, int64_t> bytes;
    bool quarantined = false;
  };
  int64_t UsedLocked(const std::string& pool) const;

  mutable std::mutex mu_;
  std::map<std::string, int64_t> capacity_;
  std::map<int64_t, Entry> entries_;
  int64_t next_id_ = 1;
};

// Parses {"device_ram": bytes, ...}: non-negative integers, known pool names only.
Result<std::map<std::string, int64_t>> PoolsFromJson(const Json& j);

}  // namespace omni_edge
