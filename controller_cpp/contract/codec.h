// JSON <-> contract types. Decoders are strict (wrong types, unknown fields and rule
// violations are refused naming the field) and encoders write every field, so any value
// round-trips to an equal value, and the Python reference reads what this writes.
#pragma once

#include <string>

#include "base/json_fields.h"
#include "base/status.h"
#include "contract/types.h"

namespace omni_edge::contract {

Result<BufferRef> BufferRefFromJson(const Json& j, const std::string& where = "buffer");
Result<StateHandle> StateHandleFromJson(const Json& j, const std::string& where = "state");
Result<StageRequest> StageRequestFromJson(const Json& j, const std::string& where = "request");
Result<StageEvent> StageEventFromJson(const Json& j, const std::string& where = "event");
Result<DeviceDescriptor> DeviceDescriptorFromJson(const Json& j, const std::string& where = "device");

Json ToJson(const BufferRef& b);
Json ToJson(const StateHandle& s);
Json ToJson(const StageRequest& r);
Json ToJson(const StageEvent& e);
Json ToJson(const DeviceDescriptor& d);

// Decode JSON text of the named type ("buffer", "state", "request", "event", "device") and
// re-encode it canonically; the fuzz target and the bindings' round-trip checks use this.
Result<std::string> CanonicalJson(const std::string& type_name, const std::string& text);

}  // namespace omni_edge::contract
