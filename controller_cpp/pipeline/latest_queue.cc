#include "pipeline/latest_queue.h"

#include <utility>

namespace omni_edge::pipeline {
namespace {

Status Superseded() {
  return Status::Error("superseded", "a newer observation was posted before this one ran");
}

}  // namespace

LatestQueue::LatestQueue(Session& session) : session_(session), thread_([this] { Loop(); }) {}

LatestQueue::~LatestQueue() {
  std::optional<Item> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    dropped.swap(waiting_);
  }
  wake_.notify_all();
  if (dropped && dropped->done) dropped->done(Superseded());
  thread_.join();
}

void LatestQueue::Post(Request request, Session::Listener listener, Done done) {
  std::optional<Item> older;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++posted_;
    if (closing_) {
      older = Item{std::move(request), std::move(listener), std::move(done)};
    } else {
      if (waiting_) ++superseded_;
      older.swap(waiting_);
      waiting_ = Item{std::move(request), std::move(listener), std::move(done)};
    }
  }
  wake_.notify_all();
  // Outside the lock: a `done` may post again.
  if (older && older->done) older->done(Superseded());
}

void LatestQueue::Loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return closing_ || waiting_.has_value(); });
      if (!waiting_) return;  // closing, nothing left
      item = std::move(*waiting_);
      waiting_.reset();
      ++run_;
    }
    const Session::Listener listener = item.listener ? item.listener : [](const SessionEvent&) { return true; };
    Result<Json> result = session_.Submit(item.request, listener);
    if (item.done) item.done(result);
  }
}

Json LatestQueue::Counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {{"posted", posted_}, {"superseded", superseded_}, {"run", run_}};
}

}  // namespace omni_edge::pipeline
