// A trace of one request in the Chrome trace event format (what Perfetto's UI and
// chrome://tracing import): complete events ("X") with microsecond start and duration on the
// thread that did the work, and the threads' names ("M" metadata). Off by default; an enabled
// recorder keeps the events of the request being traced (Clear() at its start).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/json_fields.h"

namespace omni_edge::trace {

using Clock = std::chrono::steady_clock;

class Recorder {
 public:
  Recorder();
  void Enable(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  void Clear();
  // One span on the calling thread; `args` shows in the viewer's details.
  void Complete(const std::string& name, const char* category, Clock::time_point start, Clock::time_point end,
                Json args = Json());
  void NameThread(const std::string& name);  // the calling thread's row label
  // {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
  Json ToJson() const;

 private:
  int64_t ThreadIdLocked(std::thread::id id);
  std::atomic<bool> enabled_{false};
  Clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<Json> events_;
  std::map<std::thread::id, int64_t> threads_;
  std::map<int64_t, std::string> names_;
  size_t dropped_ = 0;
};

// Records [construction, destruction) on the current thread if the recorder was enabled at
// construction; a null recorder records nothing.
class Span {
 public:
  Span(Recorder* recorder, std::string name, const char* category, Json args = Json());  // null: no allocation
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Recorder* recorder_;
  std::string name_;
  const char* category_;
  Json args_;
  Clock::time_point start_;
};

}  // namespace omni_edge::trace
