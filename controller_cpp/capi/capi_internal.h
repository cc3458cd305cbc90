// What the C ABI's translation units share: the opaque handles' definitions and the guard that
// turns a Status (or an escaping exception) into an OeError.
#pragma once

#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "capi/omni_edge.h"
#include "pipeline/latest_queue.h"
#include "pipeline/session.h"
#include "runtime/admission.h"

struct OeError {
  std::string reason;
  std::string message;
};

struct OeLedger {
  OeLedger(std::map<std::string, int64_t> pools, bool on_wsl) : ledger(std::move(pools)), wsl(on_wsl) {}
  omni_edge::AdmissionLedger ledger;
  bool wsl = false;
};

// One session over any plan; the deprecated per-kind handles are the same thing.
struct OeSession {
  std::unique_ptr<omni_edge::pipeline::Session> session;
  std::mutex queue_mu;
  std::unique_ptr<omni_edge::pipeline::LatestQueue> queue;  // created by the first oe_session_post
  ~OeSession() { queue.reset(); }  // before the session: it supersedes what waits, joins what runs
};
struct OeSpeech : OeSession {};
struct OeOmni : OeSession {};

namespace omni_edge::capi {

inline OeError* ToError(const omni_edge::Status& status) {
  if (status.ok()) return nullptr;
  return std::make_unique<OeError>(OeError{status.reason(), status.message()}).release();
}

inline char* CopyString(const std::string& text) {
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

}  // namespace omni_edge::capi
