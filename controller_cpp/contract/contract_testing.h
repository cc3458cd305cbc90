// Builders of valid contract values for the C++ tests.
#pragma once

#include <string>

#include "contract/types.h"

namespace omni_edge::contract::testing {

inline StageRequest MakeRequest(const std::string& id = "req-1", int64_t epoch = 0) {
  StageRequest r;
  r.request_id = id;
  r.stage_id = 0;
  r.epoch = epoch;
  r.worker_generation = "wg-1";
  r.artifact_id = "art-1";
  r.state_layout_version = 1;
  r.session_id = "sess-1";
  return r;
}

inline StateHandle MakeState(const std::string& state_id = "kv-1", int64_t epoch = 0) {
  StateHandle s;
  s.session_id = "sess-1";
  s.backend = "ort-cpu";
  s.artifact_id = "art-1";
  s.layout_version = 1;
  s.epoch = epoch;
  s.backend_instance_id = "inst-1";
  s.worker_generation = "wg-1";
  s.state_id = state_id;
  return s;
}

inline StageEvent MakeEvent(const StageRequest& r, int64_t seq, int64_t payload = 10, bool terminal = false) {
  StageEvent e;
  e.request_id = r.request_id;
  e.stage_id = r.stage_id;
  e.epoch = r.epoch;
  e.seq = seq;
  e.kind = terminal ? "done" : "token";
  e.worker_generation = r.worker_generation;
  e.terminal = terminal;
  e.payload_nbytes = payload;
  e.input_watermark = seq;
  e.release_token = r.request_id + "-tok-" + std::to_string(seq);
  return e;
}

}  // namespace omni_edge::contract::testing
