// The C ABI's structs to the controller's session and back, shared by the session functions and
// the deprecated per-kind wrappers.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "capi/omni_edge.h"
#include "decoding/sampler.h"
#include "pipeline/request.h"
#include "pipeline/session.h"

namespace omni_edge::capi {

Status OpenSession(const OeSessionConfig* config, std::unique_ptr<pipeline::Session>* out);
std::optional<decoding::SamplingParams> SamplingOf(const OeSampling& s);
void DefaultSampling(OeSampling* s);
pipeline::Request RequestOf(const OeRequest& r);
// A session event to `on_event` as an OeEvent (valid during the call); false when it asks to cancel.
bool Deliver(const pipeline::SessionEvent& ev, const std::function<int(const OeEvent&)>& on_event);
// Runs the request; `on_event` returns 0 to continue.
Status Submit(pipeline::Session& session, const pipeline::Request& request, const std::function<int(const OeEvent&)>& on_event);

}  // namespace omni_edge::capi
