// The request keys a stage controller has begun, kept so a reused one is refused (CONTRACT.md:
// begin refuses a (request_id, stage_id, epoch, worker_generation) used before).
//
// A worker serves requests for as long as it lives, so a plain set of every key grows without
// bound (about 160 bytes a request). Request ids that end in a decimal counter ("s1-req-42", as
// the session makes them) are kept as intervals of counters per (prefix, stage, epoch,
// generation): consecutive ids cost one interval, whatever their number. Any other id is kept
// as it is. Exact either way: "req-7" and "req-007" stay different ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace omni_edge::contract {

class UsedRequests {
 public:
  // Records the key; false if it was recorded before.
  bool Insert(const std::string& request_id, int64_t stage_id, int64_t epoch, const std::string& worker_generation);
  bool Contains(const std::string& request_id, int64_t stage_id, int64_t epoch,
                const std::string& worker_generation) const;
  // Intervals plus ids kept whole: what the memory grows with.
  size_t entries() const;

 private:
  using Key = std::tuple<std::string, int64_t, int64_t, std::string>;  // id or id prefix, stage, epoch, generation
  using Intervals = std::map<uint64_t, uint64_t>;                       // first -> last, disjoint, not touching
  std::map<Key, Intervals> counted_;
  std::set<Key> whole_;
  size_t intervals_ = 0;
};

}  // namespace omni_edge::contract
