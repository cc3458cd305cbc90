// libFuzzer target: the native JSON decoding of every contract type and of manifests and
// validation reports must refuse bad input with a Status, never crash or leak. The first
// byte picks the decoder so one corpus covers them all.
#include <cstddef>
#include <cstdint>
#include <string>

#include "contract/codec.h"
#include "contract/features.h"
#include "contract/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const kTypes[] = {"buffer", "state", "request", "event", "device"};
  const uint8_t selector = data[0] % 8;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (selector < 5) {
    auto canonical = omni_edge::contract::CanonicalJson(kTypes[selector], text);
    if (canonical.ok()) {
      // What we write must read back to the same canonical text.
      auto again = omni_edge::contract::CanonicalJson(kTypes[selector], canonical.value());
      if (!again.ok() || again.value() != canonical.value()) __builtin_trap();
    }
    return 0;
  }
  auto parsed = omni_edge::ParseJson(text, "fuzz");
  if (!parsed.ok()) return 0;
  const auto& j = parsed.value();
  if (selector == 5) {
    (void)omni_edge::contract::ArtifactManifestFromJson(j);
  } else if (selector == 6) {
    (void)omni_edge::contract::ValidationReportFromJson(j);
  } else if (j.is_object() && j.contains("protocol_version") && j.contains("required_features")) {
    (void)omni_edge::contract::Negotiate(j["protocol_version"], j["required_features"]);
  }
  return 0;
}
