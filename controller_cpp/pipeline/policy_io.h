// What every policy family shares (π0's, InternVLA-A1's): the action spec a plan declares and
// the readers of a policy section, the capture time rules, the cameras' image files in the plan's
// order, the flow's initial noise, and the one "action" event with its versioned metadata.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "pipeline/request.h"
#include "pipeline/stage_worker.h"

namespace omni_edge::pipeline {

// What an action chunk means, as the checkpoint (or the export's --action-spec) declares it: one
// name and unit per action dimension, in this order, and the control period between the chunk's
// steps. Emitted with every chunk, versioned.
struct ActionSpec {
  int64_t schema_version = 1;
  std::vector<std::string> names, units;
  double dt_ms = 0;
};

// Readers every policy section shares. `count` strings (non-empty), or nothing when absent.
Status ReadStrings(const Json* array, const std::string& where, size_t count, std::vector<std::string>* out);
// Three numbers (R, G, B); `positive`: each above zero.
Status ReadTriple(const Json* array, const std::string& where, bool positive, std::array<float, 3>* out);
// `count` finite numbers (0: 1 to 65536 of them).
Status ReadFloats(const Json* array, const std::string& where, size_t count, std::vector<float>* out);
// The same, kept as float64 (values the controller computes with in double).
Status ReadDoubles(const Json* array, const std::string& where, size_t count, std::vector<double>* out);
// The "actions" object: names and units for `action_dim` dimensions, the control period.
Result<ActionSpec> ParseActions(const Json& j, int64_t action_dim, const std::string& where);

// Milliseconds since the Unix epoch, the clock observation timestamps are in.
double NowUnixMs();

Status InvalidObservation(const std::string& what);

// Refuses an observation older than `max_age_ms` (0: no limit) `when` (e.g. "when it arrives").
Status CheckAge(double timestamp_ms, double max_age_ms, const char* when);

// The capture time must be known, not in the future (beyond 1 s of clock skew), and fresh.
Status CheckCaptureTime(const Observation& o, double max_age_ms);

// Each plan camera's image file bytes, in the plan's order: every camera named, each given 1 to
// `max_per_camera` images (oldest first), none of more than 64 MB, no camera the plan lacks.
Result<std::vector<std::vector<std::string>>> CameraImages(const Observation& o,
                                                           const std::vector<std::string>& cameras,
                                                           size_t max_per_camera);

// The flow's x_1 [rows, cols]: the observation's noise (refused unless of that shape), or
// N(0, 1) reproducible from its seed.
Result<std::vector<float>> InitialNoise(const Observation& o, int64_t rows, int64_t cols);

// One "action" event: the chunk's first `dims` of `stride` values per step, the spec's names,
// units and period, the target times, ages, deadline and lateness, the model's identity, and
// `extra` fields (timings, the action mode).
struct ActionTiming {
  double timestamp_ms = 0, produced_ms = 0, deadline_ms = 0;
  double age_at_start_ms = 0;
};
Output ActionEvent(const ActionSpec& spec, const Json& identity, const float* x, int64_t chunk, int64_t dims,
                             int64_t stride, const ActionTiming& t, const Json& extra);

}  // namespace omni_edge::pipeline
