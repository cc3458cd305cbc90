#include "families/vocoder/chunk_schedule.h"

#include <algorithm>
#include <cmath>

namespace omni_edge::vocoder {
namespace {

// Window costs are measured, but a run can be slower than its average (another stage takes
// the core, the cache is cold): predictions carry this headroom besides the margin.
constexpr double kCostHeadroom = 1.25;

}  // namespace

int64_t ChunkSchedule::Limit(int64_t start) const {
  if (start == 0) return c_.first_chunk;
  if (!c_.schedule.adaptive) return c_.chunk;
  const auto grown = int64_t(std::floor(c_.schedule.growth * double(std::max<int64_t>(last_chunk_, 1))));
  return std::clamp<int64_t>(grown, 1, c_.chunk);
}

bool ChunkSchedule::CutNow(const ChunkMoment& m) const {
  if (m.pending <= 0) return false;
  if (m.pending >= Limit(m.start)) return true;
  if (!c_.schedule.adaptive || m.start == 0 || m.ended) return false;  // the end is the flush's
  if (!std::isfinite(m.runs_out_ms)) return false;                     // still filling a prebuffer
  const double wait = m.frame_queued ? 0.0 : m.frame_ms;
  const double ready = m.now_ms + wait + kCostHeadroom * cost_(m.start, m.pending + 1);
  return ready + c_.schedule.margin_ms >= m.runs_out_ms;
}

}  // namespace omni_edge::vocoder
