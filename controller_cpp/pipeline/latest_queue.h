// A control loop's mailbox in front of a session. Observations arrive faster than a policy acts,
// and only the newest one waiting is worth acting on: Post() queues a request, and one still
// waiting when a newer one is posted is superseded (it never runs; its `done` gets the error
// "superseded"). A thread of the queue's own submits the waiting request once the session is
// free, so the listener and `done` of a posted request run on that thread. Every posted request
// ends with exactly one call of its `done`: its terminal fields, or why it did not run.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "pipeline/session.h"

namespace omni_edge::pipeline {

class LatestQueue {
 public:
  using Done = std::function<void(const Result<Json>&)>;

  explicit LatestQueue(Session& session);
  // Supersedes the waiting request (if any), cancels nothing that runs, and joins the thread
  // after the running request ended.
  ~LatestQueue();
  LatestQueue(const LatestQueue&) = delete;
  LatestQueue& operator=(const LatestQueue&) = delete;

  void Post(Request request, Session::Listener listener, Done done);
  // Counters: posted, superseded, run (for reports and tests).
  Json Counters() const;

 private:
  struct Item {
    Request request;
    Session::Listener listener;
    Done done;
  };
  void Loop();

  Session& session_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::optional<Item> waiting_;
  bool closing_ = false;
  int64_t posted_ = 0, superseded_ = 0, run_ = 0;
  std::thread thread_;  // last: starts after the state above exists
};

}  // namespace omni_edge::pipeline
