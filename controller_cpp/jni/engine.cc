#include "jni/engine.h"

#include <utility>

#include "jni/events.h"

namespace omni_edge::jni {
namespace {

struct Running {
  JNIEnv* env;
  jobject generation;
  const std::atomic<uint64_t>* cancel_epoch;
  uint64_t epoch;
};

int OnEvent(const OeEvent* event, void* user_data) {
  auto* r = static_cast<Running*>(user_data);
  // A Cancel() may come before the session saw the request: stop at the next event, but still
  // deliver each stream's terminal ("cancelled") event.
  const bool cancelled = r->cancel_epoch->load() != r->epoch;
  if (cancelled && !event->terminal) return 1;
  return DeliverEvent(r->env, r->generation, *event) && !cancelled ? 0 : 1;
}

}  // namespace

Engine::Engine(std::string plan_path, bool allow_unqualified, int threads)
    : plan_path_(std::move(plan_path)), allow_unqualified_(allow_unqualified), threads_(threads),
      worker_([this] { Work(); }) {}

Engine::~Engine() { Close(); }

std::optional<ErrorText> Engine::AwaitOpen() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return opened_; });
  return open_error_;
}

void Engine::Submit(std::unique_ptr<OwnedRequest> request, GlobalRef generation) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(Job{std::move(request), std::move(generation), cancel_epoch_.load()});
  cv_.notify_all();
}

void Engine::Cancel() {
  ++cancel_epoch_;
  if (OeSession* s = session_.load()) oe_session_cancel(s);  // atomic stores only
}

void Engine::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    closing_ = true;
  }
  Cancel();
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Engine::Open() {
  OeSessionConfig config;
  oe_session_config_default(&config);
  config.plan_path = plan_path_.c_str();
  config.allow_unqualified = allow_unqualified_ ? 1 : 0;
  config.threads = threads_;
  OeSession* session = nullptr;
  OeError* error = oe_session_open(&config, &session);
  std::lock_guard<std::mutex> lock(mu_);
  if (error != nullptr) open_error_ = TakeError(error);
  session_.store(session);
  opened_ = true;
  cv_.notify_all();
}

void Engine::Work() {
  AttachedThread attached("omni-edge-worker");  // once, for every callback this thread makes
  Open();
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return closing_ || !jobs_.empty(); });
      if (jobs_.empty()) break;  // closing, nothing left to complete
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (attached.env() != nullptr) RunJob(attached.env(), job);
  }
  if (OeSession* s = session_.exchange(nullptr)) oe_session_close(s);
}

void Engine::RunJob(JNIEnv* env, Job& job) {
  if (open_error_) return DeliverComplete(env, job.generation.get(), &*open_error_);
  if (job.epoch != cancel_epoch_.load()) {
    const ErrorText cancelled{"cancelled", "cancelled before it started"};
    return DeliverComplete(env, job.generation.get(), &cancelled);
  }
  Running running{env, job.generation.get(), &cancel_epoch_, job.epoch};
  OeError* error = oe_session_submit(session_.load(), job.request->View(), OnEvent, &running);
  if (error == nullptr) return DeliverComplete(env, job.generation.get(), nullptr);
  const ErrorText text = TakeError(error);
  DeliverComplete(env, job.generation.get(), &text);
}

}  // namespace omni_edge::jni
