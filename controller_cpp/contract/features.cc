#include "contract/features.h"

namespace omni_edge::contract {

Result<std::vector<std::string>> Negotiate(const Json& version, const Json& required) {
  static const std::set<std::string> kV1 = {"host-copy", "request-epochs"};
  static const std::set<std::string> kV2 = {"host-copy",     "request-epochs", "backend-state",
                                            "ordered-events", "credit-ack",     "artifact-manifest-v2"};
  const std::set<std::string>* offered = nullptr;
  if (version.is_number_integer()) {
    if (version == 1) offered = &kV1;
    if (version == 2) offered = &kV2;
  }
  if (offered == nullptr) {
    return Status::Error("unsupported_version",
                         "protocol_version: unknown protocol version " + version.dump() + " (known: 1, 2)");
  }
  if (!required.is_array()) return Status::Error("invalid_field", "required_features: expected an array of strings");
  std::set<std::string> missing;
  for (size_t i = 0; i < required.size(); ++i) {
    if (!required[i].is_string()) {
      return Status::Error("invalid_field", "required_features[" + std::to_string(i) + "]: expected a string");
    }
    const auto name = required[i].get<std::string>();
    if (offered->count(name) == 0) missing.insert(name);
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    return Status::Error("missing_features",
                         "protocol " + std::to_string(version.get<int64_t>()) + " does not offer: " + list);
  }
  return std::vector<std::string>(offered->begin(), offered->end());
}

}  // namespace omni_edge::contract
