// One native engine behind a dev.omniedge.OmniEdge: a session and the worker thread that owns it.
// The worker attaches to the JVM once, opens the plan, then runs queued requests one at a time,
// delivering their events to each request's Generation; it closes the session when told to.
#ifndef OMNI_EDGE_JNI_ENGINE_H_
#define OMNI_EDGE_JNI_ENGINE_H_

#include <jni.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "capi/omni_edge.h"
#include "jni/errors.h"
#include "jni/jvm.h"
#include "jni/request.h"

namespace omni_edge::jni {

class Engine {
 public:
  Engine(std::string plan_path, bool allow_unqualified, int threads);
  ~Engine();  // Close()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Blocks until the plan is open: the error if it could not be.
  std::optional<ErrorText> AwaitOpen();
  // The open session, or nullptr (still loading, failed, or closing).
  OeSession* session() const { return session_.load(); }
  // Queues a request; the worker completes `generation` whatever happens.
  void Submit(std::unique_ptr<OwnedRequest> request, GlobalRef generation);
  // Ends the running request and every queued one. Any thread.
  void Cancel();
  // Cancels everything, waits for the worker (and a load in progress) and closes the session.
  void Close();
  bool OnWorkerThread() const { return std::this_thread::get_id() == worker_.get_id(); }

 private:
  struct Job {
    std::unique_ptr<OwnedRequest> request;
    GlobalRef generation;
    uint64_t epoch = 0;  // cancel_epoch_ when queued: a Cancel() since then ends it
  };
  void Work();
  void Open();
  void RunJob(JNIEnv* env, Job& job);

  const std::string plan_path_;
  const bool allow_unqualified_;
  const int threads_;
  std::atomic<OeSession*> session_{nullptr};
  std::atomic<uint64_t> cancel_epoch_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool opened_ = false;  // the open finished (session_ or open_error_ is set)
  std::optional<ErrorText> open_error_;
  bool closing_ = false;
  std::thread worker_;  // last: started once every member above exists
};

}  // namespace omni_edge::jni

#endif  // OMNI_EDGE_JNI_ENGINE_H_
