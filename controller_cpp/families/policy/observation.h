// What every policy family does with an observation before and after its model: the capture
// time rules, the cameras' image files in the plan's order, the flow's initial noise, and the
// one "action" event with its versioned metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "families/policy/config.h"
#include "pipeline/request.h"
#include "pipeline/stage_worker.h"

namespace omni_edge::policy {

// Milliseconds since the Unix epoch, the clock observation timestamps are in.
double NowUnixMs();

Status InvalidObservation(const std::string& what);

// Refuses an observation older than `max_age_ms` (0: no limit) `when` (e.g. "when it arrives").
Status CheckAge(double timestamp_ms, double max_age_ms, const char* when);

// The capture time must be known, not in the future (beyond 1 s of clock skew), and fresh.
Status CheckCaptureTime(const pipeline::Observation& o, double max_age_ms);

// Each plan camera's image file bytes, in the plan's order: every camera named, each given 1 to
// `max_per_camera` images (oldest first), none of more than 64 MB, no camera the plan lacks.
Result<std::vector<std::vector<std::string>>> CameraImages(const pipeline::Observation& o,
                                                           const std::vector<std::string>& cameras,
                                                           size_t max_per_camera);

// The flow's x_1 [rows, cols]: the observation's noise (refused unless of that shape), or
// N(0, 1) reproducible from its seed.
Result<std::vector<float>> InitialNoise(const pipeline::Observation& o, int64_t rows, int64_t cols);

// One "action" event: the chunk's first `dims` of `stride` values per step, the spec's names,
// units and period, the target times, ages, deadline and lateness, the model's identity, and
// `extra` fields (timings, the action mode).
struct ActionTiming {
  double timestamp_ms = 0, produced_ms = 0, deadline_ms = 0;
  double age_at_start_ms = 0;
};
pipeline::Output ActionEvent(const ActionSpec& spec, const Json& identity, const float* x, int64_t chunk, int64_t dims,
                             int64_t stride, const ActionTiming& t, const Json& extra);

}  // namespace omni_edge::policy
