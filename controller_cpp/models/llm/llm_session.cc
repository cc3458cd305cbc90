#include "models/llm/llm_session.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <unistd.h>

#include "base/process_stats.h"
#include "contract/codec.h"
#include "models/llm/chat.h"
#include "models/llm/text_stream.h"
#include "runtime/artifact.h"

namespace omni_edge::llm {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

contract::BufferRef Buffer(const std::string& object_id, const std::string& generation, const char* dtype,
                           int64_t count, int64_t item) {
  contract::BufferRef b;
  b.object_id = object_id;
  b.owner = "thinker";
  b.generation = generation;
  b.dtype = dtype;
  b.shape = {count};
  b.nbytes = count * item;
  return b;
}

std::string TokenBytes(const std::vector<TokenId>& ids) {
  std::string out(ids.size() * sizeof(int32_t), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t v = ids[i];
    std::memcpy(out.data() + i * sizeof(int32_t), &v, sizeof v);
  }
  return out;
}

}  // namespace

Json OutputEvent::ToJson() const {
  Json j = {{"kind", kind}, {"seq", seq}};
  if (kind == "token") {
    j["token_ids"] = token_ids;
    j["text"] = text;
    return j;
  }
  j["finish_reason"] = finish_reason;
  if (!error.empty()) j["error"] = error;
  const Json m = metrics.ToJson();  // named: items() would dangle on a temporary
  for (const auto& [k, v] : m.items()) j[k] = v;
  if (state) j["state"] = contract::ToJson(*state);
  return j;
}

Json Metrics::ToJson() const {
  return Json{{"n_prompt_tokens", n_prompt_tokens},
              {"n_generated_tokens", n_generated_tokens},
              {"context_tokens", context_tokens},
              {"ttft_ms", ttft_ms},
              {"prefill_ms", prefill_ms},
              {"decode_ms", decode_ms},
              {"total_ms", total_ms},
              {"prefill_tok_s", prefill_tok_s},
              {"decode_tok_s", decode_tok_s},
              {"backend_ms", backend_ms},
              {"controller_ms_per_token", controller_ms_per_token},
              {"peak_rss_mb", peak_rss_mb}};
}

// One request in flight: what the producer needs and what it reports back.
struct LlmSession::Run {
  contract::StageRequest request;
  std::vector<TokenId> prompt;
  SamplingParams sampling;
  int64_t max_new_tokens = 0;
  std::vector<std::string> stop_strings;
  bool ignore_stop_tokens = false;
  bool emit_hidden = false;
  Clock::time_point start;
  int64_t seq = 0;
  std::vector<TokenId> generated;  // every sampled token, in order
  Metrics metrics;
  Status error;
};

OutputEvent LlmSession::DecodeEvent(const contract::Delivered& delivered) {
  OutputEvent out;
  const contract::StageEvent& ev = delivered.event;
  out.kind = ev.kind;
  out.seq = ev.seq;
  out.error = ev.error.value_or("");
  out.state = ev.state;
  if (ev.kind == "token" && delivered.data.size() >= 2) {
    const std::string& ids = delivered.data[0];
    for (size_t i = 0; i + 4 <= ids.size(); i += 4) {
      int32_t v = 0;
      std::memcpy(&v, ids.data() + i, 4);
      out.token_ids.push_back(v);
    }
    out.text = delivered.data[1];
    if (delivered.data.size() == 3 && delivered.data[2].size() % sizeof(float) == 0) {
      out.hidden.resize(delivered.data[2].size() / sizeof(float));
      std::memcpy(out.hidden.data(), delivered.data[2].data(), delivered.data[2].size());
    }
  } else if (ev.terminal && !delivered.data.empty()) {
    auto body = ParseJson(delivered.data[0], "metrics");
    if (body.ok()) {
      const Json& j = body.value();
      out.finish_reason = j.value("finish_reason", "");
      Metrics& m = out.metrics;
      m.n_prompt_tokens = j.value("n_prompt_tokens", int64_t(0));
      m.n_generated_tokens = j.value("n_generated_tokens", int64_t(0));
      m.context_tokens = j.value("context_tokens", int64_t(0));
      m.ttft_ms = j.value("ttft_ms", 0.0);
      m.prefill_ms = j.value("prefill_ms", 0.0);
      m.decode_ms = j.value("decode_ms", 0.0);
      m.total_ms = j.value("total_ms", 0.0);
      m.prefill_tok_s = j.value("prefill_tok_s", 0.0);
      m.decode_tok_s = j.value("decode_tok_s", 0.0);
      m.backend_ms = j.value("backend_ms", 0.0);
      m.controller_ms_per_token = j.value("controller_ms_per_token", 0.0);
      m.peak_rss_mb = j.value("peak_rss_mb", 0.0);
    }
  }
  return out;
}

Status LlmSession::RewindTo(const std::vector<TokenId>& generated, int64_t shown) {
  // generated[0..k-1) were fed back, generated[k-1] is pending; keep what the consumer saw.
  const int64_t k = int64_t(generated.size());
  if (shown >= k) return Status::Ok();
  const int64_t fed = pending_.empty() ? k : k - 1;
  const int64_t keep_fed = std::max<int64_t>(0, shown - 1);
  const int64_t length = int64_t(context_.size()) - (fed - keep_fed);
  Status st = engine_->Rewind(length, context_);
  if (!st.ok()) {
    poisoned_ = true;
    return st;
  }
  context_.resize(size_t(length));
  pending_.clear();
  if (shown > 0) pending_.push_back(generated[size_t(shown - 1)]);
  return Status::Ok();
}

Result<std::unique_ptr<LlmSession>> LlmSession::Open(const std::string& plan_path, const SessionOptions& options) {
  OE_ASSIGN_OR_RETURN(Plan plan, LoadPlan(plan_path));
  return Open(std::move(plan), options);
}

Result<std::unique_ptr<LlmSession>> LlmSession::Open(Plan plan, const SessionOptions& options) {
  std::unique_ptr<LlmSession> s(new LlmSession());
  s->plan_ = std::move(plan);
  for (const auto& stage : s->plan_.stages) {
    if (stage.execution_type == "llm_ar" && stage.llm) {
      if (s->stage_ != nullptr) return Status::Error("invalid_plan", "more than one llm_ar stage; use the pipeline runner");
      s->stage_ = &stage;
    }
  }
  if (s->stage_ == nullptr) return Status::Error("invalid_plan", s->plan_.path + ": no llm_ar stage");
  // Verify the artifact before anything is allocated or loaded.
  OE_ASSIGN_OR_RETURN(contract::VerifiedManifest manifest, VerifyStageArtifact(*s->stage_, !options.allow_unqualified));
  s->artifact_id_ = manifest.manifest.artifact.checkpoint_id + "/" + manifest.manifest.component;

  StagePlan stage = *s->stage_;
  for (auto& [role, group] : stage.graphs) {
    for (const auto& [k, v] : options.backend_options) group.options[k] = v;
  }
  OE_ASSIGN_OR_RETURN(s->tokenizer_, Tokenizer::Load(stage.llm->tokenizer));
  for (const auto& stop : stage.llm->stop_tokens) {
    auto id = s->tokenizer_->Find(stop);
    if (!id) return Status::Error("invalid_plan", "stop token '" + stop + "' is not in the tokenizer's vocabulary");
    s->stop_ids_.push_back(*id);
  }
  if (s->tokenizer_->vocab_size() > stage.llm->vocab_size) {
    return Status::Error("invalid_plan", "the tokenizer has " + std::to_string(s->tokenizer_->vocab_size()) +
                                             " tokens but the model's vocabulary is " + std::to_string(stage.llm->vocab_size));
  }
  OE_ASSIGN_OR_RETURN(s->engine_, LlmEngine::Create(stage, s->backends_));

  static std::atomic<int64_t> sessions{0};
  const int64_t n = ++sessions;
  s->session_id_ = "session-" + std::to_string(::getpid()) + "-" + std::to_string(n);
  s->backend_instance_id_ = stage.graphs.at("decode").backend + "-" + std::to_string(::getpid()) + "-" + std::to_string(n);
  std::map<int64_t, contract::BackendIdentity> identities;
  identities[stage.stage_id] = {stage.graphs.at("decode").backend, s->backend_instance_id_, s->worker_generation_};
  s->controller_ = std::make_unique<contract::StageController>(std::move(identities));
  return s;
}

LlmSession::~LlmSession() = default;

void LlmSession::Cancel() { cancel_ = true; }

void LlmSession::Abort() {
  std::lock_guard<std::mutex> lock(active_mu_);
  if (!active_) return;
  aborted_ = true;
  cancel_ = true;
  (void)controller_->Cancel(*active_);
}

Status LlmSession::ReleaseState() {
  if (!kv_state_) return Status::Ok();
  // The two-step release: ask, the backend frees the cache (engine reset), confirm.
  OE_ASSIGN_OR_RETURN(std::string op, controller_->RequestRelease(stage_->stage_id, *kv_state_));
  OE_RETURN_IF_ERROR(engine_->Reset());
  OE_RETURN_IF_ERROR(controller_->ConfirmRelease(stage_->stage_id, *kv_state_, op));
  kv_state_.reset();
  return Status::Ok();
}

Status LlmSession::Reset() {
  Status released = ReleaseState();
  OE_RETURN_IF_ERROR(engine_->Reset());
  context_.clear();
  pending_.clear();
  kv_state_.reset();
  poisoned_ = false;
  return released.ok() || released.reason() == "state_not_live" ? Status::Ok() : released;
}

Result<std::vector<TokenId>> LlmSession::PromptTokens(const GenerateRequest& r) const {
  std::vector<TokenId> ids;
  if (r.continue_conversation) ids = pending_;
  if (!r.prompt_ids.empty()) {
    for (TokenId t : r.prompt_ids) {
      if (t < 0 || t >= stage_->llm->vocab_size) {
        return Status::Error("invalid_prompt", "prompt token id " + std::to_string(t) + " is outside the vocabulary");
      }
    }
    ids.insert(ids.end(), r.prompt_ids.begin(), r.prompt_ids.end());
    return ids;
  }
  if (r.prompt.empty()) return Status::Error("invalid_prompt", "the prompt is empty");
  std::string text = r.prompt;
  if (r.chat) {
    if (stage_->llm->chat_format != "chatml") return Status::Error("invalid_prompt", "this plan has no chat format");
    std::vector<ChatMessage> messages;
    if (!r.system_prompt.empty()) messages.push_back({"system", r.system_prompt});
    messages.push_back({"user", r.prompt});
    if (r.continue_conversation && !context_.empty()) {
      // Close an assistant turn that ended without <|im_end|> (length, cancel), then continue.
      const auto im_end = tokenizer_->Find("<|im_end|>");
      const bool closed = !ids.empty() && im_end && ids.back() == *im_end;
      text = (closed ? "" : "<|im_end|>") + ContinueChatML(messages);
    } else {
      text = FormatChatML(messages);
    }
  }
  auto encoded = tokenizer_->Encode(text);
  if (!encoded.ok()) return Status::Error("invalid_prompt", encoded.status().message());
  ids.insert(ids.end(), encoded->begin(), encoded->end());
  return ids;
}

void LlmSession::Produce(Run& run) {
  const contract::StageRequest& req = run.request;
  const int64_t stage_id = req.stage_id;
  auto emit = [&](contract::StageEvent ev, contract::BufferData data) -> Result<contract::EmitResult> {
    ev.request_id = req.request_id;
    ev.stage_id = stage_id;
    ev.epoch = req.epoch;
    ev.worker_generation = req.worker_generation;
    ev.seq = ++run.seq;
    ev.input_watermark = int64_t(run.prompt.size());
    ev.release_token = req.request_id + ":" + std::to_string(ev.seq);
    int64_t bytes = 0;
    for (const auto& b : ev.buffers) bytes += b.nbytes;
    ev.payload_nbytes = bytes;
    return controller_->EmitWait(req, ev, std::move(data));
  };
  auto make_state = [&]() {
    contract::StateHandle h = *kv_state_;
    h.epoch = req.epoch;
    return h;
  };
  auto terminal = [&](const std::string& kind, const std::string& reason, const std::string& error) {
    Metrics& m = run.metrics;
    m.total_ms = Ms(run.start, Clock::now());
    m.context_tokens = engine_->position();
    m.peak_rss_mb = PeakRssMb();
    Json body = m.ToJson();
    body["finish_reason"] = reason;
    contract::StageEvent ev;
    ev.kind = kind;
    ev.terminal = true;
    if (!error.empty()) ev.error = error;
    if (kind != "error" && kv_state_) ev.state = make_state();
    const std::string text = body.dump();
    ev.buffers = {Buffer("metrics", req.request_id, "uint8", int64_t(text.size()), 1)};
    (void)emit(std::move(ev), {text});
  };

  const double backend_before = engine_->backend_seconds();
  const auto t_prefill = Clock::now();
  auto logits = engine_->Feed(run.prompt);
  if (!logits.ok()) {
    poisoned_ = true;  // the cache may hold part of the prompt: only Reset() makes it consistent
    run.error = logits.status();
    terminal("error", "error", logits.status().ToString());
    return;
  }
  context_.insert(context_.end(), run.prompt.begin(), run.prompt.end());
  pending_.clear();
  Metrics& m = run.metrics;
  m.n_prompt_tokens = int64_t(run.prompt.size());
  m.prefill_ms = Ms(t_prefill, Clock::now());
  m.prefill_tok_s = m.prefill_ms > 0 ? 1000.0 * double(m.n_prompt_tokens) / m.prefill_ms : 0;

  Sampler sampler(run.sampling);
  TextStream text(*tokenizer_, run.stop_strings);
  const int64_t vocab = engine_->config().vocab_size;
  Clock::time_point t_first, t_last;
  std::string reason = "length";
  for (int64_t i = 0; i < run.max_new_tokens; ++i) {
    if (cancel_) {
      reason = "cancelled";
      break;
    }
    const TokenId token = sampler.Sample(logits.value(), vocab, context_);
    pending_ = {token};
    run.generated.push_back(token);
    ++m.n_generated_tokens;
    const bool is_stop = !run.ignore_stop_tokens &&
                         std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end();
    if (is_stop) {
      reason = "stop";
      break;
    }
    const auto delta = text.Push(token);
    contract::StageEvent ev;
    ev.kind = "token";
    ev.started_monotonic_ns = MonotonicNs();
    ev.emitted_monotonic_ns = ev.started_monotonic_ns;
    const std::string ids = TokenBytes({token});
    ev.buffers = {Buffer("token_ids", req.request_id, "int32", 1, 4),
                  Buffer("text", req.request_id, "uint8", int64_t(delta.text.size()), 1)};
    contract::BufferData data = {ids, delta.text};
    if (run.emit_hidden) {
      const int64_t H = engine_->config().hidden_size;
      ev.buffers.push_back(Buffer("hidden", req.request_id, "float32", H, 4));
      data.emplace_back(reinterpret_cast<const char*>(engine_->last_hidden()), size_t(H) * sizeof(float));
    }
    auto emitted = emit(std::move(ev), std::move(data));
    if (i == 0) {
      t_first = Clock::now();
      m.ttft_ms = Ms(run.start, t_first);
    }
    t_last = Clock::now();
    if (!emitted.ok() || emitted.value() == contract::EmitResult::kRetired) {
      run.error = emitted.ok() ? Status::Error("aborted", "the request was fenced by its consumer") : emitted.status();
      return;  // fenced: no terminal event can be delivered any more
    }
    if (delta.stopped) {
      reason = "stop_string";
      break;
    }
    if (i + 1 == run.max_new_tokens) break;
    if (engine_->config().kv.mode == "full" && engine_->config().kv.overflow == "refuse" && !engine_->ringing() &&
        engine_->position() + 1 > engine_->config().kv.buckets.back()) {
      reason = "context_full";
      break;
    }
    logits = engine_->Feed({token});
    if (!logits.ok()) {
      poisoned_ = true;
      run.error = logits.status();
      terminal("error", "error", logits.status().ToString());
      return;
    }
    context_.push_back(token);
    pending_.clear();
  }
  if (m.n_generated_tokens > 1 && t_last > t_first) {
    m.decode_ms = Ms(t_first, t_last);
    m.decode_tok_s = 1000.0 * double(m.n_generated_tokens - 1) / m.decode_ms;
  }
  const double backend_ms = 1000.0 * (engine_->backend_seconds() - backend_before);
  m.backend_ms = backend_ms;
  const double loop_ms = Ms(t_prefill, Clock::now());
  if (m.n_generated_tokens > 0) m.controller_ms_per_token = (loop_ms - backend_ms) / double(m.n_generated_tokens);
  const std::string tail = text.Flush();
  if (!tail.empty()) {
    contract::StageEvent ev;
    ev.kind = "token";
    ev.buffers = {Buffer("token_ids", req.request_id, "int32", 0, 4),
                  Buffer("text", req.request_id, "uint8", int64_t(tail.size()), 1)};
    (void)emit(std::move(ev), {std::string(), tail});
  }
  terminal(reason == "cancelled" ? "cancelled" : "done", reason, "");
}

Result<Metrics> LlmSession::Generate(const GenerateRequest& r, const std::function<bool(const OutputEvent&)>& on_event) {
  if (poisoned_) return Status::Error("session_poisoned", "an earlier error left the session unusable; call Reset()");
  Run run;
  run.start = Clock::now();
  run.sampling = r.sampling.value_or(stage_->llm->sampling);
  OE_RETURN_IF_ERROR(Validate(run.sampling));
  run.max_new_tokens = r.max_new_tokens > 0 ? r.max_new_tokens : stage_->llm->max_new_tokens;
  run.stop_strings = r.stop_strings;
  run.ignore_stop_tokens = r.ignore_stop_tokens;
  run.emit_hidden = r.emit_hidden;
  if (r.continue_conversation && !kv_state_) {
    return Status::Error("no_conversation", "nothing to continue: the session holds no resident context");
  }
  OE_ASSIGN_OR_RETURN(run.prompt, PromptTokens(r));
  const LlmConfig& c = *stage_->llm;
  if (!r.continue_conversation) {
    OE_RETURN_IF_ERROR(ReleaseState());
    OE_RETURN_IF_ERROR(engine_->Reset());
    context_.clear();
    pending_.clear();
  }
  if (c.kv.mode == "full" && c.kv.overflow == "refuse" &&
      int64_t(context_.size() + run.prompt.size()) > c.kv.buckets.back()) {
    return Status::Error("context_overflow", "the prompt needs " + std::to_string(context_.size() + run.prompt.size()) +
                                                 " positions but the largest KV bucket holds " +
                                                 std::to_string(c.kv.buckets.back()) + " (plan: kv.overflow = refuse)");
  }
  if (!kv_state_) {
    contract::StateHandle h;
    h.session_id = session_id_;
    h.backend = stage_->graphs.at("decode").backend;
    h.artifact_id = artifact_id_;
    h.layout_version = 1;
    h.epoch = epoch_;
    h.replayable = true;   // the context can be rebuilt by feeding its tokens again
    h.migratable = c.kv.mode == "full" && c.kv.buckets.size() > 1;
    h.backend_instance_id = backend_instance_id_;
    h.worker_generation = worker_generation_;
    h.state_id = "kv-" + std::to_string(++context_counter_);
    kv_state_ = h;
  }
  contract::StageRequest& req = run.request;
  req.request_id = session_id_ + "-req-" + std::to_string(++request_counter_);
  req.stage_id = stage_->stage_id;
  req.epoch = epoch_;
  req.worker_generation = worker_generation_;
  req.artifact_id = artifact_id_;
  req.state_layout_version = 1;
  req.session_id = session_id_;
  if (r.continue_conversation) req.state = kv_state_;
  OE_ASSIGN_OR_RETURN(std::shared_ptr<contract::EventStream> stream, controller_->Begin(req, plan_.stream_limits));

  cancel_ = false;
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    active_ = req;
    aborted_ = false;
  }
  std::thread producer([this, &run] {
    Produce(run);
    (void)controller_->Finish(run.request);
  });
  // Once a cancel is requested, token events still queued are withheld from the consumer and
  // the context is rewound to what it saw: cancellation takes effect at the next token it sees.
  std::optional<OutputEvent> last;
  int64_t shown = 0;
  bool withholding = false;
  while (auto delivered = stream->Receive()) {
    const contract::StageEvent& ev = delivered->event;
    OutputEvent out = DecodeEvent(*delivered);
    withholding = withholding || cancel_;
    if (ev.kind == "token" && withholding) {
      stream->Acknowledge(ev.release_token);
      continue;
    }
    if (ev.terminal && withholding) out.metrics.n_generated_tokens = shown;
    shown += int64_t(out.token_ids.size());
    const bool keep_going = on_event(out);
    stream->Acknowledge(ev.release_token);
    if (!keep_going) Cancel();
    if (ev.terminal) last = std::move(out);
  }
  producer.join();
  bool aborted = false;
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    active_.reset();
    aborted = aborted_;
  }
  if (aborted) {
    // Fenced: the state handle of this epoch is retired and the context holds tokens nobody
    // saw. The next request starts fresh at the next epoch.
    epoch_ = req.epoch + 1;
    if (kv_state_ && controller_->IsLive(stage_->stage_id, *kv_state_) == false) {
      // Retired by the fence (a continued state) or never announced (a fresh one): release
      // what the controller knows of, so its books end clean.
      auto op = controller_->RequestRelease(stage_->stage_id, *kv_state_);
      if (op.ok()) (void)controller_->ConfirmRelease(stage_->stage_id, *kv_state_, op.value());
    }
    kv_state_.reset();
    context_.clear();
    pending_.clear();
    OE_RETURN_IF_ERROR(engine_->Reset());
    return Status::Error("aborted", "the request was fenced by its consumer (next epoch " + std::to_string(epoch_) + ")");
  }
  if (withholding && run.error.ok()) OE_RETURN_IF_ERROR(RewindTo(run.generated, shown));
  if (!run.error.ok()) return run.error;
  if (!last) return Status::Error("internal", "the request ended without a terminal event");
  return last->metrics;
}

}  // namespace omni_edge::llm
