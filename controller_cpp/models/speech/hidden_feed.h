// Text hidden states handed from a thinker to a talker as the thinker produces them: one
// vector per text token, then the end of the text. The talker blocks on the next one; Cancel()
// wakes it. Thread-safe, one producer and one consumer.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

namespace omni_edge::speech {

class HiddenFeed {
 public:
  enum class Next { kHidden, kEnded, kCancelled };

  void Push(std::vector<float> hidden) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_ || cancelled_) return;
    queue_.push_back(std::move(hidden));
    changed_.notify_all();
  }
  void End() {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    changed_.notify_all();
  }
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    changed_.notify_all();
  }
  // Waits for the next hidden state (into *out), the end of the text, or a cancel.
  Next Pop(std::vector<float>* out) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return cancelled_ || ended_ || !queue_.empty(); });
    if (cancelled_) return Next::kCancelled;
    if (queue_.empty()) return Next::kEnded;
    *out = std::move(queue_.front());
    queue_.pop_front();
    return Next::kHidden;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::vector<float>> queue_;
  bool ended_ = false, cancelled_ = false;
};

}  // namespace omni_edge::speech
