#include "models/omni/omni_session.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace omni_edge::omni {

Json OmniMetrics::ToJson() const { return Json{{"text", text.ToJson()}, {"audio", audio.ToJson()}}; }

Result<std::unique_ptr<OmniSession>> OmniSession::Open(const std::string& plan_path, const llm::SessionOptions& options) {
  OE_ASSIGN_OR_RETURN(Plan plan, LoadPlan(plan_path));
  return Open(std::move(plan), options);
}

Result<std::unique_ptr<OmniSession>> OmniSession::Open(Plan plan, const llm::SessionOptions& options) {
  std::unique_ptr<OmniSession> s(new OmniSession());
  const std::string plan_path = plan.path;
  OE_ASSIGN_OR_RETURN(s->thinker_, llm::LlmSession::Open(plan, options));  // each session keeps its own copy
  OE_ASSIGN_OR_RETURN(s->speech_, speech::SpeechSession::Open(std::move(plan), options));
  const int64_t thinker_id = s->thinker_->plan().stages.empty() ? -1 : [&] {
    for (const auto& stage : s->thinker_->plan().stages) {
      if (stage.llm) return stage.stage_id;
    }
    return int64_t(-1);
  }();
  for (const auto& stage : s->speech_->plan().stages) {
    if (!stage.talker) continue;
    const auto& src = stage.input_sources;
    if (std::find(src.begin(), src.end(), thinker_id) == src.end()) {
      return Status::Error("invalid_plan", plan_path + ": the talker stage does not read the thinker (input_sources)");
    }
  }
  return s;
}

void OmniSession::Cancel() {
  stop_ = true;  // also holds when the thinker has not started its request yet
  thinker_->Cancel();
  speech_->Cancel();
  std::lock_guard<std::mutex> lock(feed_mu_);
  if (feed_ != nullptr) feed_->Cancel();
}

Result<OmniMetrics> OmniSession::Run(const OmniRequest& request, const std::function<bool(const llm::OutputEvent&)>& on_text,
                                     const std::function<bool(const speech::SpeechEvent&)>& on_audio) {
  speech::HiddenFeed feed;
  stop_ = false;
  {
    std::lock_guard<std::mutex> lock(feed_mu_);
    feed_ = &feed;
  }
  std::mutex deliver;  // the caller sees one event at a time
  llm::GenerateRequest text = request.text;
  text.emit_hidden = true;
  speech::SpeakRequest speak = request.speech;
  speak.text_hidden = &feed;

  // A callback that throws cancels the request; the exception is rethrown once both threads end.
  std::exception_ptr text_raised, audio_raised;
  Result<llm::Metrics> thinker = Status::Error("internal", "not run");
  std::thread thinker_thread([&] {
    thinker = thinker_->Generate(text, [&](const llm::OutputEvent& ev) {
      if (ev.kind == "token" && !ev.token_ids.empty()) feed.Push(ev.hidden);
      std::lock_guard<std::mutex> lock(deliver);
      bool keep = false;
      try {
        keep = on_text(ev) && !stop_;
      } catch (...) {
        text_raised = std::current_exception();
      }
      if (!keep) speech_->Cancel();  // wakes the talker too
      return keep;
    });
    if (!thinker.ok()) feed.Cancel();  // the talker must not wait for text that will not come
    feed.End();
  });
  Result<speech::SpeechMetrics> audio = Status::Error("internal", "not run");
  try {
    audio = speech_->Speak(speak, [&](const speech::SpeechEvent& ev) {
      std::lock_guard<std::mutex> lock(deliver);
      const bool keep = on_audio(ev);
      if (!keep) stop_ = true, thinker_->Cancel();
      return keep;
    });
  } catch (...) {
    audio_raised = std::current_exception();
  }
  if (!audio.ok()) stop_ = true, thinker_->Cancel();
  thinker_thread.join();
  {
    std::lock_guard<std::mutex> lock(feed_mu_);
    feed_ = nullptr;
  }
  if (text_raised) std::rethrow_exception(text_raised);
  if (audio_raised) std::rethrow_exception(audio_raised);
  if (!thinker.ok()) return thinker.status();
  if (!audio.ok()) return audio.status();
  return OmniMetrics{thinker.value(), audio.value()};
}

}  // namespace omni_edge::omni
