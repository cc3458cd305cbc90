#include "models/speech/speech_session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <thread>
#include <unistd.h>

#include "base/process_stats.h"
#include "models/speech/pcm.h"
#include "models/speech/playback.h"
#include "runtime/artifact.h"

namespace omni_edge::speech {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

contract::BufferRef Buffer(const std::string& object_id, const std::string& owner, const std::string& generation,
                           const std::string& dtype, int64_t count) {
  contract::BufferRef b;
  b.object_id = object_id;
  b.owner = owner;
  b.generation = generation;
  b.dtype = dtype;
  b.shape = {count};
  b.nbytes = count * contract::DtypeSize(dtype);
  return b;
}

template <typename T>
std::string Bytes(const T* data, size_t n) {
  return std::string(reinterpret_cast<const char*>(data), n * sizeof(T));
}

std::string EncodePcm(const std::vector<float>& samples, const std::string& dtype) {
  if (dtype == "float32") return Bytes(samples.data(), samples.size());
  std::vector<int16_t> out(samples.size());
  std::transform(samples.begin(), samples.end(), out.begin(), ToInt16);
  return Bytes(out.data(), out.size());
}

// The JSON body of a terminal event (its metrics), or {} if it has none.
Json BodyOf(const contract::Delivered& delivered) {
  if (delivered.data.empty()) return Json::object();
  auto body = ParseJson(delivered.data[0], "metrics");
  return body.ok() && body->is_object() ? body.value() : Json::object();
}

// Stamps `ev` as the next event of `req`'s stream `stream` (identity, sequence number, watermark,
// release token, payload size) and emits it, waiting for credit.
Result<contract::EmitResult> EmitNext(contract::StageController& controller, const contract::StageRequest& req,
                                      int64_t& seq, int64_t watermark, const char* stream, contract::StageEvent ev,
                                      contract::BufferData data) {
  ev.request_id = req.request_id;
  ev.stage_id = req.stage_id;
  ev.epoch = req.epoch;
  ev.worker_generation = req.worker_generation;
  ev.seq = ++seq;
  ev.input_watermark = watermark;
  ev.release_token = req.request_id + ":" + stream + ":" + std::to_string(ev.seq);
  for (const auto& b : ev.buffers) ev.payload_nbytes += b.nbytes;
  return controller.EmitWait(req, ev, std::move(data));
}

}  // namespace

Json SpeechMetrics::ToJson() const {
  return Json{{"finish_reason", finish_reason}, {"text_tokens", text_tokens},   {"frames", frames},
              {"samples", samples},             {"sample_rate", sample_rate},   {"chunks", chunks},
              {"audio_ms", audio_ms},           {"total_ms", total_ms},         {"rtf", rtf},
              {"first_pcm_ms", first_pcm_ms},   {"playback_start_ms", playback_start_ms},
              {"max_gap_ms", max_gap_ms},       {"tail_ms", tail_ms},           {"underruns", underruns},
              {"underrun_ms", underrun_ms},     {"talker_ms_per_frame", talker_ms_per_frame},
              {"vocoder_ms", vocoder_ms},       {"peak_rss_mb", peak_rss_mb}};
}

Json SpeechEvent::ToJson() const {
  Json j = {{"kind", kind}, {"seq", seq}};
  if (kind == "pcm") {
    j["first_sample"] = first_sample;
    j["n_samples"] = n_samples;
    j["frames_final"] = frames_final;
    j["dtype"] = pcm_dtype;
    return j;
  }
  if (!error.empty()) j["error"] = error;
  const Json m = metrics.ToJson();
  for (const auto& [k, v] : m.items()) j[k] = v;
  return j;
}

std::vector<float> SpeechEvent::Samples() const {
  std::vector<float> out(static_cast<size_t>(n_samples));
  if (pcm_dtype == "float32" && pcm.size() == out.size() * sizeof(float)) {
    std::memcpy(out.data(), pcm.data(), pcm.size());
  } else if (pcm_dtype == "int16" && pcm.size() == out.size() * sizeof(int16_t)) {
    for (size_t i = 0; i < out.size(); ++i) {
      int16_t v = 0;
      std::memcpy(&v, pcm.data() + i * sizeof v, sizeof v);
      out[i] = float(v) / 32767.0f;
    }
  }
  return out;
}

// One utterance in flight: what both workers need and what they report.
struct SpeechSession::Run {
  contract::StageRequest talker_request, vocoder_request;
  std::shared_ptr<contract::EventStream> codes;  // talker -> vocoder
  std::vector<int32_t> text_ids;
  HiddenFeed* text_hidden = nullptr;
  llm::SamplingParams sampling;
  int64_t max_frames = 0;
  Clock::time_point start;
  int64_t talker_seq = 0, vocoder_seq = 0;
  std::vector<int32_t> frames;  // every frame the vocoder received
  Status error;
};

Result<std::unique_ptr<SpeechSession>> SpeechSession::Open(const std::string& plan_path, const llm::SessionOptions& options) {
  OE_ASSIGN_OR_RETURN(Plan plan, LoadPlan(plan_path));
  return Open(std::move(plan), options);
}

Result<std::unique_ptr<SpeechSession>> SpeechSession::Open(Plan plan, const llm::SessionOptions& options) {
  std::unique_ptr<SpeechSession> s(new SpeechSession());
  s->plan_ = std::move(plan);
  const std::string& plan_path = s->plan_.path;
  for (const auto& stage : s->plan_.stages) {
    if (stage.talker) s->talker_stage_ = &stage;
  }
  if (s->talker_stage_ == nullptr) return Status::Error("invalid_plan", plan_path + ": no talker stage");
  for (const auto& stage : s->plan_.stages) {
    const auto& src = stage.input_sources;
    if (stage.vocoder && std::find(src.begin(), src.end(), s->talker_stage_->stage_id) != src.end()) s->vocoder_stage_ = &stage;
  }
  if (s->vocoder_stage_ == nullptr) return Status::Error("invalid_plan", plan_path + ": no vocoder stage reads the talker");
  const TalkerConfig& t = *s->talker_stage_->talker;
  const VocoderConfig& v = *s->vocoder_stage_->vocoder;
  if (t.code_groups != v.code_groups) {
    return Status::Error("invalid_plan", "the talker makes " + std::to_string(t.code_groups) + " codes per frame, the vocoder reads " +
                                             std::to_string(v.code_groups));
  }
  std::map<int64_t, contract::BackendIdentity> identities[2];
  static std::atomic<int64_t> sessions{0};
  const std::string instance = std::to_string(::getpid()) + "-" + std::to_string(++sessions);
  s->session_id_ = "speech-" + instance;
  int i = 0;
  std::map<std::string, contract::VerifiedManifest> verified;  // by artifact: both stages usually share one
  for (const StagePlan* stage : {s->talker_stage_, s->vocoder_stage_}) {
    auto it = verified.find(stage->artifact);
    if (it == verified.end()) {
      OE_ASSIGN_OR_RETURN(contract::VerifiedManifest manifest, VerifyStageArtifact(*stage, !options.allow_unqualified));
      it = verified.emplace(stage->artifact, std::move(manifest)).first;
    } else {
      OE_RETURN_IF_ERROR(CheckStageArtifact(*stage, it->second, !options.allow_unqualified));
    }
    const contract::ArtifactManifest& manifest = it->second.manifest;
    (i == 0 ? s->talker_artifact_ : s->vocoder_artifact_) = manifest.artifact.checkpoint_id + "/" + manifest.component;
    const std::string backend = stage->graphs.begin()->second.backend;
    identities[i++][stage->stage_id] = {backend, backend + "-" + instance, "wg-1"};
  }
  auto with_options = [&](const StagePlan& stage) {
    StagePlan copy = stage;
    for (auto& [role, group] : copy.graphs) {
      for (const auto& [k, val] : options.backend_options) group.options[k] = val;
    }
    return copy;
  };
  OE_ASSIGN_OR_RETURN(s->tokenizer_, llm::Tokenizer::Load(t.tokenizer));
  std::vector<int64_t> prompt_text = {t.prompt.frame_text};
  if (t.prompt.text_end >= 0) prompt_text.push_back(t.prompt.text_end);
  for (const auto* rows : {&t.prompt.head, &t.prompt.tail}) {
    for (const PromptRow& r : *rows) prompt_text.push_back(r.text_id);
  }
  for (int64_t id : prompt_text) {
    if (id >= s->tokenizer_->vocab_size()) {
      return Status::Error("invalid_plan", "the talker prompt's text id " + std::to_string(id) + " is outside the tokenizer's " +
                                               std::to_string(s->tokenizer_->vocab_size()) + " tokens");
    }
  }
  OE_ASSIGN_OR_RETURN(s->talker_, Talker::Create(with_options(*s->talker_stage_), s->backends_));
  OE_ASSIGN_OR_RETURN(s->vocoder_, Vocoder::Create(with_options(*s->vocoder_stage_), s->backends_));
  s->talker_controller_ = std::make_unique<contract::StageController>(std::move(identities[0]));
  s->vocoder_controller_ = std::make_unique<contract::StageController>(std::move(identities[1]));
  return s;
}

SpeechSession::~SpeechSession() = default;

Result<std::vector<int32_t>> SpeechSession::Tokenize(const std::string& text) const {
  auto ids = tokenizer_->Encode(text);
  if (!ids.ok()) return Status::Error("invalid_prompt", ids.status().message());
  return std::vector<int32_t>(ids->begin(), ids->end());
}

void SpeechSession::Cancel() {
  cancel_ = true;
  std::lock_guard<std::mutex> lock(feed_mu_);
  if (feed_ != nullptr) feed_->Cancel();
}

std::vector<Frame> SpeechSession::frames() const {
  std::vector<Frame> out;
  const size_t G = size_t(code_groups());
  for (size_t i = 0; i + G <= codes_.size(); i += G) out.emplace_back(codes_.begin() + long(i), codes_.begin() + long(i + G));
  return out;
}

std::vector<Placement> SpeechSession::placements() const {
  std::vector<Placement> out = talker_->placements();
  for (const auto& p : vocoder_->placements()) out.push_back(p);
  return out;
}

void SpeechSession::ProduceCodes(Run& run) {
  const contract::StageRequest& req = run.talker_request;
  auto emit = [&](contract::StageEvent ev, contract::BufferData data) {
    return EmitNext(*talker_controller_, req, run.talker_seq, int64_t(run.text_ids.size()), "codes", std::move(ev),
                    std::move(data));
  };
  const double before = talker_->backend_seconds();
  int64_t text_tokens = int64_t(run.text_ids.size());  // dual-track: counted as they arrive
  auto terminal = [&](const std::string& kind, const std::string& reason, int64_t frames, const std::string& error) {
    Json body = {{"finish_reason", reason}, {"frames", frames}, {"text_tokens", text_tokens},
                 {"talker_ms", 1000.0 * (talker_->backend_seconds() - before)},
                 {"ended_ms", Ms(run.start, Clock::now())}};
    contract::StageEvent ev;
    ev.kind = kind;
    ev.terminal = true;
    if (!error.empty()) ev.error = error;
    const std::string text = body.dump();
    ev.buffers = {Buffer("metrics", "talker", req.request_id, "uint8", int64_t(text.size()))};
    (void)emit(std::move(ev), {text});
  };

  Status st = run.text_hidden != nullptr ? talker_->StartDual() : talker_->Start(run.text_ids);
  if (!st.ok()) return terminal("error", "error", 0, st.ToString());
  llm::Sampler sampler(run.sampling);
  int64_t frames = 0;
  std::string reason = "length";
  std::vector<float> text_hidden;
  bool text_ended = run.text_hidden == nullptr;
  while (frames < run.max_frames) {
    if (cancel_) {
      reason = "cancelled";
      break;
    }
    // Dual-track: frame t reads text hidden state t, waiting for the thinker to make it.
    if (!text_ended) {
      const HiddenFeed::Next next = run.text_hidden->Pop(&text_hidden);
      if (next == HiddenFeed::Next::kCancelled) {
        reason = "cancelled";
        break;
      }
      text_ended = next == HiddenFeed::Next::kEnded;
      text_tokens += text_ended ? 0 : 1;
      if (!text_ended && int64_t(text_hidden.size()) != talker_->text_hidden_size()) {
        return terminal("error", "error", frames, "a text hidden state of " + std::to_string(text_hidden.size()) +
                                                      " floats; this talker reads " +
                                                      std::to_string(talker_->text_hidden_size()));
      }
    }
    auto frame = talker_->Next(sampler, text_ended ? nullptr : text_hidden.data());
    if (!frame.ok()) return terminal("error", "error", frames, frame.status().ToString());
    if (!frame.value()) {
      reason = "eos";
      break;
    }
    contract::StageEvent ev;
    ev.kind = "codes";
    ev.started_monotonic_ns = MonotonicNs();
    ev.emitted_monotonic_ns = ev.started_monotonic_ns;
    const Frame& f = *frame.value();
    ev.buffers = {Buffer("codes", "talker", req.request_id, "int32", int64_t(f.size()))};
    auto emitted = emit(std::move(ev), {Bytes(f.data(), f.size())});
    if (!emitted.ok()) return terminal("error", "error", frames, emitted.status().ToString());
    if (emitted.value() == contract::EmitResult::kRetired) return;  // fenced: nobody listens
    ++frames;
  }
  terminal(reason == "cancelled" ? "cancelled" : "done", reason, frames, "");
}

void SpeechSession::ProducePcm(Run& run) {
  const contract::StageRequest& req = run.vocoder_request;
  const VocoderConfig& vc = vocoder_->config();
  const int64_t G = vc.code_groups;
  int64_t samples = 0, next = 0;  // samples emitted; first frame not yet decoded
  const double before = vocoder_->backend_seconds();
  auto emit = [&](contract::StageEvent ev, contract::BufferData data) {
    return EmitNext(*vocoder_controller_, req, run.vocoder_seq, int64_t(run.frames.size()) / G, "pcm", std::move(ev),
                    std::move(data));
  };
  auto decode = [&](int64_t end, bool final) -> Status {
    const auto started = MonotonicNs();
    OE_ASSIGN_OR_RETURN(std::vector<float> pcm, vocoder_->Decode(run.frames, next, end, final));
    contract::StageEvent ev;
    ev.kind = "pcm";
    ev.started_monotonic_ns = started;
    ev.emitted_monotonic_ns = MonotonicNs();
    const int64_t position[2] = {samples, end};
    ev.buffers = {Buffer("pcm", "vocoder", req.request_id, vc.pcm_dtype, int64_t(pcm.size())),
                  Buffer("position", "vocoder", req.request_id, "int64", 2)};
    auto emitted = emit(std::move(ev), {EncodePcm(pcm, vc.pcm_dtype), Bytes(position, 2)});
    if (!emitted.ok()) return emitted.status();
    if (emitted.value() == contract::EmitResult::kRetired) return Status::Error("aborted", "the pcm stream was fenced");
    samples += int64_t(pcm.size());
    next = end;
    return Status::Ok();
  };

  Json talker_end;
  std::string talker_kind, talker_error;
  Status failed;
  while (auto delivered = run.codes->Receive()) {
    const contract::StageEvent& ev = delivered->event;
    if (ev.kind == "codes" && delivered->data.size() == 1 && delivered->data[0].size() == size_t(G) * sizeof(int32_t)) {
      const size_t at = run.frames.size();
      run.frames.resize(at + size_t(G));
      std::memcpy(run.frames.data() + at, delivered->data[0].data(), delivered->data[0].size());
    } else if (ev.terminal) {
      talker_kind = ev.kind;
      talker_error = ev.error.value_or("");
      talker_end = BodyOf(*delivered);
    }
    run.codes->Acknowledge(ev.release_token);
    const int64_t frames = int64_t(run.frames.size()) / G;
    while (failed.ok() && !cancel_ && frames - next >= vocoder_->shape().ChunkFrames(next)) {
      failed = decode(next + vocoder_->shape().ChunkFrames(next), /*final=*/false);
    }
    if (!failed.ok()) cancel_ = true;  // stop the talker; keep draining its stream so it can end
  }
  const int64_t frames = int64_t(run.frames.size()) / G;
  // End of speech: what is left, with the tail the last frame still held back.
  if (failed.ok() && talker_kind == "done" && !cancel_ && frames > 0) failed = decode(frames, /*final=*/true);

  std::string kind = "done", reason = talker_end.value("finish_reason", std::string("error")), error;
  if (!failed.ok()) {
    kind = reason = "error";
    error = failed.ToString();
  } else if (talker_kind == "error" || talker_kind.empty()) {
    kind = reason = "error";
    error = talker_error.empty() ? "the talker ended without a terminal event" : talker_error;
  } else if (talker_kind == "cancelled" || cancel_) {
    kind = reason = "cancelled";
  }
  Json body = talker_end;
  body["finish_reason"] = reason;
  body["frames"] = frames;
  body["samples"] = samples;
  body["vocoder_ms"] = 1000.0 * (vocoder_->backend_seconds() - before);
  contract::StageEvent ev;
  ev.kind = kind;
  ev.terminal = true;
  if (!error.empty()) ev.error = error;
  const std::string text = body.dump();
  ev.buffers = {Buffer("metrics", "vocoder", req.request_id, "uint8", int64_t(text.size()))};
  (void)emit(std::move(ev), {text});
}

Result<SpeechMetrics> SpeechSession::Speak(const SpeakRequest& r, const std::function<bool(const SpeechEvent&)>& on_event) {
  Run run;
  run.start = Clock::now();
  const TalkerConfig& tc = talker_->config();
  const VocoderConfig& vc = vocoder_->config();
  run.sampling = r.sampling.value_or(tc.sampling);
  OE_RETURN_IF_ERROR(llm::Validate(run.sampling));
  if (r.max_frames < 0) return Status::Error("invalid_argument", "max_frames must be >= 0 (0: the plan's default)");
  if (!(r.prebuffer_ms >= 0) || r.prebuffer_ms > 60000) {
    return Status::Error("invalid_argument", "prebuffer_ms must be within [0, 60000]");
  }
  if (r.text_hidden != nullptr) {
    run.text_hidden = r.text_hidden;  // the text comes from a thinker, as it is generated
  } else if (!r.text_ids.empty()) {
    for (int32_t id : r.text_ids) {
      if (id < 0 || id >= tokenizer_->vocab_size()) {
        return Status::Error("invalid_prompt", "text token id " + std::to_string(id) + " is outside the vocabulary");
      }
    }
    run.text_ids = r.text_ids;
  } else {
    if (r.text.empty()) return Status::Error("invalid_prompt", "the text is empty");
    OE_ASSIGN_OR_RETURN(run.text_ids, Tokenize(r.text));
    if (run.text_ids.empty()) return Status::Error("invalid_prompt", "the text has no tokens");
  }
  const int64_t prefix = run.text_hidden != nullptr ? 0 : talker_->PrefixLength(run.text_ids);
  const int64_t room = talker_->MaxPositions() - prefix;
  if (room < 1) {
    return Status::Error("context_overflow", "the text takes " + std::to_string(prefix) + " positions but the talker holds " +
                                                 std::to_string(talker_->MaxPositions()));
  }
  run.max_frames = std::min(r.max_frames > 0 ? r.max_frames : tc.max_frames, room);

  const std::string request_id = session_id_ + "-utt-" + std::to_string(++request_counter_);
  auto request = [&](contract::StageRequest& req, const StagePlan& stage, const std::string& artifact) {
    req.request_id = request_id;
    req.artifact_id = artifact;
    req.state_layout_version = 1;
    req.stage_id = stage.stage_id;
    req.epoch = 0;
    req.worker_generation = "wg-1";
    req.session_id = session_id_;
  };
  request(run.talker_request, *talker_stage_, talker_artifact_);
  request(run.vocoder_request, *vocoder_stage_, vocoder_artifact_);
  OE_ASSIGN_OR_RETURN(run.codes, talker_controller_->Begin(run.talker_request, plan_.stream_limits));
  auto pcm_stream = vocoder_controller_->Begin(run.vocoder_request, plan_.stream_limits);
  if (!pcm_stream.ok()) {
    (void)talker_controller_->Cancel(run.talker_request);
    (void)talker_controller_->Finish(run.talker_request);
    return pcm_stream.status();
  }

  cancel_ = false;
  {
    std::lock_guard<std::mutex> lock(feed_mu_);
    feed_ = run.text_hidden;
  }
  // A callback that throws must not unwind past the running workers: it cancels the utterance,
  // which then ends normally, and the exception is rethrown once the workers are joined.
  std::exception_ptr raised;
  auto deliver = [&](const SpeechEvent& ev) {
    if (raised) return false;
    try {
      return on_event(ev);
    } catch (...) {
      raised = std::current_exception();
      return false;
    }
  };
  std::thread talker([this, &run] {
    ProduceCodes(run);
    (void)talker_controller_->Finish(run.talker_request);
  });
  std::thread vocoder([this, &run] {
    ProducePcm(run);
    (void)vocoder_controller_->Finish(run.vocoder_request);
  });

  PlaybackClock playback(vc.sample_rate, r.prebuffer_ms);
  std::optional<SpeechEvent> last;
  double last_pcm_ms = 0;
  bool withholding = false;
  int64_t withheld = 0;
  while (auto delivered = pcm_stream.value()->Receive()) {
    const contract::StageEvent& ev = delivered->event;
    const double now = Ms(run.start, Clock::now());
    SpeechEvent out;
    out.kind = ev.kind;
    out.seq = ev.seq;
    // Once a cancel is asked for, PCM still queued is stale: withheld, only acknowledged.
    withholding = withholding || cancel_;
    if (ev.kind == "pcm") {
      if (withholding || delivered->data.size() != 2 || delivered->data[1].size() != 2 * sizeof(int64_t)) {
        withheld += withholding ? 1 : 0;
        pcm_stream.value()->Acknowledge(ev.release_token);
        continue;
      }
      out.pcm_dtype = vc.pcm_dtype;
      out.pcm = std::move(delivered->data[0]);
      out.n_samples = int64_t(out.pcm.size()) / contract::DtypeSize(vc.pcm_dtype);
      int64_t position[2];
      std::memcpy(position, delivered->data[1].data(), sizeof position);
      out.first_sample = position[0];
      out.frames_final = position[1];
      playback.Arrive(out.n_samples, now);
      last_pcm_ms = now;
      const bool keep = deliver(out);
      pcm_stream.value()->Acknowledge(ev.release_token);
      if (!keep) Cancel();
      continue;
    }
    if (!ev.terminal) {
      pcm_stream.value()->Acknowledge(ev.release_token);
      continue;
    }
    playback.End(now);
    Json body = BodyOf(*delivered);
    out.error = ev.error.value_or("");
    SpeechMetrics& m = out.metrics;
    m.finish_reason = body.value("finish_reason", ev.kind);
    if (out.kind == "done" && withheld > 0) out.kind = m.finish_reason = "cancelled";  // the consumer did not get it all
    m.text_tokens = body.value("text_tokens", int64_t(run.text_ids.size()));
    m.frames = body.value("frames", int64_t(0));
    m.samples = playback.stats().samples;
    m.sample_rate = vc.sample_rate;
    m.chunks = playback.stats().chunks;
    m.audio_ms = 1000.0 * double(m.samples) / double(vc.sample_rate);
    m.total_ms = now;
    m.rtf = m.audio_ms > 0 ? m.total_ms / m.audio_ms : 0;
    m.first_pcm_ms = playback.stats().first_pcm_ms;
    m.playback_start_ms = playback.stats().playback_start_ms;
    m.max_gap_ms = playback.stats().max_gap_ms;
    m.underruns = playback.stats().underruns;
    m.underrun_ms = playback.stats().underrun_ms;
    m.tail_ms = m.samples > 0 ? std::max(0.0, last_pcm_ms - body.value("ended_ms", last_pcm_ms)) : 0;
    m.talker_ms_per_frame = m.frames > 0 ? body.value("talker_ms", 0.0) / double(m.frames) : 0;
    m.vocoder_ms = body.value("vocoder_ms", 0.0);
    m.peak_rss_mb = PeakRssMb();
    deliver(out);
    pcm_stream.value()->Acknowledge(ev.release_token);
    last = std::move(out);
  }
  talker.join();
  vocoder.join();
  {
    std::lock_guard<std::mutex> lock(feed_mu_);
    feed_ = nullptr;
  }
  codes_ = std::move(run.frames);
  if (raised) std::rethrow_exception(raised);
  if (!last) return Status::Error("internal", "the utterance ended without a terminal event");
  if (last->kind == "error") return Status::Error("speech_failed", last->error);
  return last->metrics;
}

}  // namespace omni_edge::speech
