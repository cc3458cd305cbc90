#include "base/trace.h"

#include <algorithm>
#include <utility>

namespace omni_edge::trace {
namespace {

constexpr size_t kMaxEvents = 1 << 20;  // a runaway trace stops growing; the count of dropped ones is kept

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

Recorder::Recorder() : origin_(Clock::now()) {}

void Recorder::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
  dropped_ = 0;
  origin_ = Clock::now();
}

int64_t Recorder::ThreadIdLocked(std::thread::id id) {
  auto [it, added] = threads_.emplace(id, int64_t(threads_.size()) + 1);
  return it->second;
}

void Recorder::Complete(const std::string& name, const char* category, Clock::time_point start, Clock::time_point end,
                        Json args) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  // A span begun before the trace was cleared is cut at the trace's start.
  const double ts = std::max(0.0, Micros(start - origin_));
  const double dur = std::max(0.0, Micros(end - origin_) - ts);
  events_.push_back(Json{{"name", name}, {"cat", category}, {"ph", "X"}, {"ts", ts}, {"dur", dur}, {"pid", 1},
                         {"tid", ThreadIdLocked(std::this_thread::get_id())},
                         {"args", args.is_null() ? Json::object() : std::move(args)}});
}

void Recorder::NameThread(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  names_[ThreadIdLocked(std::this_thread::get_id())] = name;
}

Json Recorder::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json events = Json::array();
  events.push_back(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "omni-edge"}}}});
  for (const auto& [tid, name] : names_) {
    events.push_back(Json{{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  for (const Json& e : events_) events.push_back(e);
  return Json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData", {{"producer", "omni-edge"}, {"dropped_events", dropped_}}}};
}

Span::Span(Recorder* recorder, std::string name, const char* category, Json args)
    : recorder_(recorder != nullptr && recorder->enabled() ? recorder : nullptr),
      name_(std::move(name)),
      category_(category),
      args_(std::move(args)),
      start_(recorder_ != nullptr ? Clock::now() : Clock::time_point()) {}

Span::~Span() {
  if (recorder_ != nullptr) recorder_->Complete(name_, category_, start_, Clock::now(), std::move(args_));
}

}  // namespace omni_edge::trace
