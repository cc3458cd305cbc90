// The C ABI over the controller's C++ API. Nothing may throw across this boundary: each
// entry point converts Status to OeError and catches anything unexpected as "internal".
#include "capi/omni_edge.h"

#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "base/status.h"
#include "contract/codec.h"
#include "contract/features.h"
#include "contract/manifest.h"

struct OeError {
  std::string reason;
  std::string message;
};

namespace {

OeError* ToError(const omni_edge::Status& status) {
  if (status.ok()) return nullptr;
  return std::make_unique<OeError>(OeError{status.reason(), status.message()}).release();
}

char* CopyString(const std::string& text) {
  auto out = std::make_unique<char[]>(text.size() + 1);
  std::memcpy(out.get(), text.c_str(), text.size() + 1);
  return out.release();
}

template <typename Fn>
OeError* Guard(Fn&& fn) {
  try {
    return ToError(fn());
  } catch (const std::exception& e) {
    return ToError(omni_edge::Status::Error("internal", e.what()));
  } catch (...) {
    return ToError(omni_edge::Status::Error("internal", "unknown failure"));
  }
}

}  // namespace

extern "C" {

const char* oe_version(void) { return OMNI_EDGE_VERSION; }
int oe_protocol_version(void) { return omni_edge::contract::kCurrentProtocol; }

const char* oe_error_reason(const OeError* error) { return error ? error->reason.c_str() : ""; }
const char* oe_error_message(const OeError* error) { return error ? error->message.c_str() : ""; }
void oe_error_free(OeError* error) { std::unique_ptr<OeError> owned(error); }
void oe_string_free(char* text) { std::unique_ptr<char[]> owned(text); }

OeError* oe_manifest_verify(const char* directory, char** out_json, int* out_qualified) {
  return Guard([&]() -> omni_edge::Status {
    if (directory == nullptr || out_json == nullptr) {
      return omni_edge::Status::Error("invalid_argument", "directory and out_json are required");
    }
    *out_json = nullptr;
    auto verified = omni_edge::contract::ReadManifest(directory);
    if (!verified.ok()) return verified.status();
    *out_json = CopyString(omni_edge::contract::ToJson(verified.value()).dump());
    if (out_qualified != nullptr) *out_qualified = verified->qualified() ? 1 : 0;
    return omni_edge::Status::Ok();
  });
}

OeError* oe_contract_canonical_json(const char* type_name, const char* json_text, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (type_name == nullptr || json_text == nullptr || out_json == nullptr) {
      return omni_edge::Status::Error("invalid_argument", "type_name, json_text and out_json are required");
    }
    *out_json = nullptr;
    auto canonical = omni_edge::contract::CanonicalJson(type_name, json_text);
    if (!canonical.ok()) return canonical.status();
    *out_json = CopyString(canonical.value());
    return omni_edge::Status::Ok();
  });
}

}  // extern "C"
