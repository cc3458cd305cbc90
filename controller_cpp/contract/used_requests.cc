#include "contract/used_requests.h"

#include <iterator>
#include <optional>
#include <utility>

namespace omni_edge::contract {
namespace {

struct Split {
  std::string prefix;
  uint64_t counter = 0;
};

// "abc-42" -> ("abc-", 42). Only a canonical decimal tail counts (no leading zero, at most 18
// digits, so it fits): any other id is kept whole, which keeps "x-07" and "x-7" apart.
std::optional<Split> SplitCounter(const std::string& id) {
  size_t start = id.size();
  while (start > 0 && id[start - 1] >= '0' && id[start - 1] <= '9') --start;
  const size_t digits = id.size() - start;
  if (digits == 0 || digits > 18 || (digits > 1 && id[start] == '0')) return std::nullopt;
  Split s{id.substr(0, start), 0};
  for (size_t i = start; i < id.size(); ++i) s.counter = s.counter * 10 + uint64_t(id[i] - '0');
  return s;
}

// The interval holding n, or end().
std::map<uint64_t, uint64_t>::const_iterator Find(const std::map<uint64_t, uint64_t>& intervals, uint64_t n) {
  auto after = intervals.upper_bound(n);  // first interval starting beyond n
  if (after == intervals.begin()) return intervals.end();
  auto holder = std::prev(after);
  return holder->second >= n ? holder : intervals.end();
}

}  // namespace

bool UsedRequests::Contains(const std::string& request_id, int64_t stage_id, int64_t epoch,
                            const std::string& worker_generation) const {
  const auto split = SplitCounter(request_id);
  if (!split) return whole_.count(Key{request_id, stage_id, epoch, worker_generation}) != 0;
  auto it = counted_.find(Key{split->prefix, stage_id, epoch, worker_generation});
  return it != counted_.end() && Find(it->second, split->counter) != it->second.end();
}

bool UsedRequests::Insert(const std::string& request_id, int64_t stage_id, int64_t epoch,
                          const std::string& worker_generation) {
  const auto split = SplitCounter(request_id);
  if (!split) return whole_.insert(Key{request_id, stage_id, epoch, worker_generation}).second;
  Intervals& intervals = counted_[Key{split->prefix, stage_id, epoch, worker_generation}];
  const uint64_t n = split->counter;
  if (Find(intervals, n) != intervals.end()) return false;
  auto next = intervals.upper_bound(n);
  const bool joins_next = next != intervals.end() && next->first == n + 1;
  auto prev = next == intervals.begin() ? intervals.end() : std::prev(next);
  const bool joins_prev = prev != intervals.end() && prev->second + 1 == n;
  if (joins_prev && joins_next) {
    prev->second = next->second;
    intervals.erase(next);
    --intervals_;
  } else if (joins_prev) {
    prev->second = n;
  } else if (joins_next) {
    const uint64_t last = next->second;
    intervals.erase(next);
    intervals.emplace(n, last);
  } else {
    intervals.emplace(n, n);
    ++intervals_;
  }
  return true;
}

size_t UsedRequests::entries() const { return intervals_ + whole_.size(); }

}  // namespace omni_edge::contract
