// The C ABI: versions, errors, manifests, contract values, the admission ledger and plan
// budgets. Nothing may throw across this boundary (capi_internal.h: Guard).
#include "capi/omni_edge.h"

#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"
#include "contract/codec.h"
#include "contract/features.h"
#include "contract/manifest.h"
#include "capi/capi_internal.h"
#include "families/builtin.h"
#include "runtime/admission.h"

using omni_edge::capi::CopyString;
using omni_edge::capi::Guard;


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


OeError* oe_ledger_create(const char* pools_json, OeLedger** out_ledger) {
  return Guard([&]() -> omni_edge::Status {
    if (out_ledger == nullptr) return omni_edge::Status::Error("invalid_argument", "out_ledger is required");
    *out_ledger = nullptr;
    bool wsl = false;
    std::map<std::string, int64_t> pools = omni_edge::DetectPools(&wsl);
    if (pools_json != nullptr) {
      auto j = omni_edge::ParseJson(pools_json, "pools");
      if (!j.ok()) return j.status();
      auto parsed = omni_edge::PoolsFromJson(j.value());
      if (!parsed.ok()) return parsed.status();
      pools = parsed.value();
      wsl = pools.count("wsl_quota") > 0;
    }
    *out_ledger = std::make_unique<OeLedger>(pools, wsl).release();
    return omni_edge::Status::Ok();
  });
}

void oe_ledger_free(OeLedger* ledger) { std::unique_ptr<OeLedger> owned(ledger); }

OeError* oe_ledger_snapshot(const OeLedger* ledger, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (ledger == nullptr || out_json == nullptr) return omni_edge::Status::Error("invalid_argument", "ledger and out_json are required");
    *out_json = CopyString(ledger->ledger.Snapshot().dump());
    return omni_edge::Status::Ok();
  });
}

OeError* oe_ledger_reserve(OeLedger* ledger, const char* owner, int64_t bytes, int64_t* out_reservation) {
  return Guard([&]() -> omni_edge::Status {
    if (ledger == nullptr || owner == nullptr || out_reservation == nullptr) {
      return omni_edge::Status::Error("invalid_argument", "ledger, owner and out_reservation are required");
    }
    *out_reservation = 0;
    if (bytes < 0) return omni_edge::Status::Error("invalid_argument", "bytes must not be negative");
    OE_ASSIGN_OR_RETURN(*out_reservation, ledger->ledger.Reserve(owner, {{omni_edge::StagePool(ledger->wsl), bytes}}));
    return omni_edge::Status::Ok();
  });
}

void oe_ledger_release(OeLedger* ledger, int64_t reservation) {
  if (ledger != nullptr && reservation != 0) (void)ledger->ledger.Release(reservation, true);
}

OeError* oe_plan_budget(const char* plan_path, int sessions, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (plan_path == nullptr || out_json == nullptr) return omni_edge::Status::Error("invalid_argument", "plan_path and out_json are required");
    const auto& families = omni_edge::families::Builtin();
    auto plan = omni_edge::LoadPlan(plan_path, families);
    if (!plan.ok()) return plan.status();
    bool wsl = false;
    omni_edge::DetectPools(&wsl);
    auto budget = omni_edge::EstimatePlanBudget(plan.value(), sessions, wsl, families);
    if (!budget.ok()) return budget.status();
    *out_json = CopyString(omni_edge::ToJson(budget.value()).dump());
    return omni_edge::Status::Ok();
  });
}

}  // extern "C"
