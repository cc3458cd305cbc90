// Protocol versions and their features (CONTRACT.md, "Versions and features").
#pragma once

#include <set>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"

namespace omni_edge::contract {

inline constexpr int kCurrentProtocol = 2;

// The features `version` offers (sorted), or a refusal naming the unknown version or the
// missing features. `version` and `required` are JSON values so that non-integers, booleans
// and non-string features are refused rather than coerced.
Result<std::vector<std::string>> Negotiate(const Json& version, const Json& required);

}  // namespace omni_edge::contract
