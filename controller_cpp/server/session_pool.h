// The sessions a server's requests run on, opened at start (--max-sessions, each admitted by one
// memory ledger), and what the plan serves, read from the first session's info.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "capi/omni_edge.h"
#include "server/http_server.h"

namespace omni_edge::server {

// What a plan makes and reads, as a server offers it.
struct PlanFacts {
  bool text = false;             // a text stream (chat completions)
  bool audio = false;            // an audio stream (speech; with text: an omni plan)
  int64_t sample_rate = 0;       // the audio stream's
  std::vector<std::string> inputs;  // "text", and "image" / "audio" when the plan has such an encoder
  Json policy;                   // a policy plan's: its stage's description (cameras, dims, chunk); else null
};

// oe_session_info's JSON, or the error (its reason and message).
Result<Json> SessionInfo(OeSession* session);

class SessionPool {
 public:
  SessionPool() = default;
  SessionPool(const SessionPool&) = delete;
  SessionPool& operator=(const SessionPool&) = delete;
  ~SessionPool();

  OeError* Open(const ServeOptions& o);
  // A free session, or nullptr when every one is busy.
  OeSession* Take();
  // Back into the pool; `reset` forgets its conversation and clears an error (after a failure).
  void Give(OeSession* s, bool reset);
  // Cancels every running request and waits (up to `limit`) for them to end.
  void CancelAll(std::chrono::milliseconds limit);
  size_t size() const { return all_.size(); }
  int busy() const;
  const PlanFacts& facts() const { return facts_; }
  OeLedger* ledger() const { return ledger_; }

 private:
  OeLedger* ledger_ = nullptr;
  std::vector<OeSession*> all_;
  PlanFacts facts_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::vector<OeSession*> free_;
  int busy_ = 0;
};

// Bytes of the sessions' ledger held while it lives (a connection's buffers, a request's body):
// the server's own memory is admitted as the sessions' is, and refused the same way.
class LedgerReservation {
 public:
  LedgerReservation(OeLedger* ledger, const char* owner, int64_t bytes);
  LedgerReservation(LedgerReservation&& other) noexcept
      : ledger_(other.ledger_), id_(std::exchange(other.id_, 0)), refusal_(std::move(other.refusal_)) {}
  LedgerReservation(const LedgerReservation&) = delete;
  LedgerReservation& operator=(const LedgerReservation&) = delete;
  LedgerReservation& operator=(LedgerReservation&&) = delete;
  ~LedgerReservation() { oe_ledger_release(ledger_, id_); }

  bool held() const { return refusal_.empty(); }
  const std::string& refusal() const { return refusal_; }  // the ledger's reason, with the numbers

 private:
  OeLedger* ledger_;
  int64_t id_ = 0;
  std::string refusal_;
};

// A session taken from the pool for one request. Given back as soon as the request has run,
// before the response's last bytes go out (a client that sends its next request the moment it
// has read them finds the session free), with a reset after a failure; at the latest when the
// lease ends.
class SessionLease {
 public:
  explicit SessionLease(SessionPool& pool) : pool_(pool), session_(pool.Take()) {}
  SessionLease(const SessionLease&) = delete;
  SessionLease& operator=(const SessionLease&) = delete;
  ~SessionLease() { Release(false); }

  OeSession* get() const { return session_; }
  void Release(bool reset) {
    if (session_ != nullptr) pool_.Give(session_, reset);
    session_ = nullptr;
  }

 private:
  SessionPool& pool_;
  OeSession* session_;
};

}  // namespace omni_edge::server
