// How a stage's events travel in contract events: the public fields as one uint8 buffer named
// "fields" (JSON text), each payload as a buffer of its own (object_id = its name).
#pragma once

#include <string>

#include "contract/event_stream.h"
#include "pipeline/stage_worker.h"

namespace omni_edge::pipeline {

inline constexpr const char* kFieldsPayload = "fields";

// Appends `p` to the event's buffers (owned by `owner` of request `generation`) and its bytes to `data`.
Status AddPayload(Payload p, const std::string& owner, const std::string& generation, contract::StageEvent* ev,
                  contract::BufferData* data);
// The fields as the "fields" buffer (nothing when there are none).
void AddFields(const Json& fields, const std::string& owner, const std::string& generation, contract::StageEvent* ev,
               contract::BufferData* data);
// The event's kind, seq, fields and payloads (moved out of `delivered`).
Input Decode(contract::Delivered&& delivered);

}  // namespace omni_edge::pipeline
