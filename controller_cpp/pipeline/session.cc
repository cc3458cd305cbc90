#include "pipeline/session.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <set>
#include <filesystem>

#include "base/platform/os.h"
#include "base/platform/process_stats.h"
#include "contract/codec.h"
#include "pipeline/playback.h"
#include "pipeline/wire.h"
#include "runtime/artifact.h"

namespace omni_edge::pipeline {
namespace {
namespace fs = std::filesystem;

Status PlanError(const std::string& what) { return Status::Error("invalid_plan", what); }

std::string Describe(const StagePlan& s) { return "stage " + std::to_string(s.stage_id) + " (" + s.model_stage + ")"; }

// Wakes a caller that waits on several streams when any of them has an event or ends.
class Doorbell {
 public:
  void Ring() {
    std::lock_guard<std::mutex> lock(mu_);
    ++rings_;
    changed_.notify_all();
  }
  uint64_t rings() {
    std::lock_guard<std::mutex> lock(mu_);
    return rings_;
  }
  void WaitPast(uint64_t seen) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return rings_ != seen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t rings_ = 0;
};

}  // namespace

// One final-output stream, as the caller's thread consumes it.
struct Session::Stream {
  size_t stage = 0;
  std::string type;
  std::shared_ptr<contract::EventStream> events;
  bool ended = false;
  bool withheld = false;  // events dropped after a cancel
  int64_t last_seq = 0;   // the last event the listener received
  std::optional<Json> terminal;  // the terminal event ({"kind", "seq", fields...})
  bool held = false;             // ...kept back until every stage ended (a cancel came first)
  std::unique_ptr<PlaybackClock> clock;  // an audio stream's
  double last_pcm_ms = 0;
};

Result<std::unique_ptr<Session>> Session::Open(const std::string& plan_path, const SessionOptions& options,
                                               const FamilyRegistry& families) {
  OE_ASSIGN_OR_RETURN(Plan plan, LoadPlan(plan_path, families));
  return Open(std::move(plan), options, families);
}

Result<std::unique_ptr<Session>> Session::Open(Plan plan, const SessionOptions& options, const FamilyRegistry& families) {
  std::unique_ptr<Session> s(new Session());
  s->plan_ = std::move(plan);
  OE_RETURN_IF_ERROR(s->Wire(families));
  OE_RETURN_IF_ERROR(s->Admit(options, families));
  OE_RETURN_IF_ERROR(s->OpenStages(options, families));
  s->Snapshot();
  return s;
}

Session::~Session() {
  runners_.clear();  // stages fenced and joined, their runtimes released
  if (ledger_ != nullptr) (void)ledger_->Release(reservation_, true);
}

Status Session::Wire(const FamilyRegistry& families) {
  const auto& stages = plan_.stages;
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < stages.size(); ++i) index[stages[i].stage_id] = i;
  consumers_.assign(stages.size(), {});
  edges_.assign(stages.size(), {});
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].final_output) consumers_[i].push_back(-1);
  }
  for (size_t t = 0; t < stages.size(); ++t) {
    for (int64_t source : stages[t].input_sources) {
      const size_t s = index.at(source);
      consumers_[s].push_back(int64_t(t));
      edges_[t].push_back({s, consumers_[s].size() - 1});
    }
  }
  std::map<std::string, size_t> readers;  // what entry stages read of a request -> the stage
  for (size_t i = 0; i < stages.size(); ++i) {
    if (consumers_[i].empty()) return PlanError(Describe(stages[i]) + ": no stage reads its output and it is not a final output");
    if (!stages[i].input_sources.empty()) continue;
    const Family* family = families.Find(stages[i].family);
    const std::vector<std::string> reads = family != nullptr ? family->entry_reads(stages[i]) : std::vector<std::string>{};
    if (reads.empty()) return PlanError(Describe(stages[i]) + ": reads other stages (input_sources), so it cannot be an entry stage");
    for (const auto& what : reads) {
      auto [it, fresh] = readers.emplace(what, i);
      if (!fresh) {
        return PlanError(Describe(stages[it->second]) + " and " + Describe(stages[i]) + " both read the request's " + what +
                         ": a plan has one " + what + " entry (should stage " + std::to_string(stages[i].stage_id) +
                         " read another stage through input_sources?)");
      }
    }
  }
  return CheckGraph();
}

Status Session::CheckGraph() {
  const auto& stages = plan_.stages;
  // Stages form no cycle: each can run once its sources have (Kahn's order).
  std::vector<size_t> waiting(stages.size());
  std::vector<size_t> ready;
  for (size_t i = 0; i < stages.size(); ++i) {
    waiting[i] = stages[i].input_sources.size();
    if (waiting[i] == 0) ready.push_back(i);
  }
  size_t ordered = 0;
  while (!ready.empty()) {
    const size_t s = ready.back();
    ready.pop_back();
    ++ordered;
    for (int64_t c : consumers_[s]) {
      if (c >= 0 && --waiting[size_t(c)] == 0) ready.push_back(size_t(c));
    }
  }
  if (ordered != stages.size()) return PlanError("the stages' input_sources form a cycle");
  downstream_.assign(stages.size(), std::vector<bool>(stages.size(), false));
  for (size_t s = 0; s < stages.size(); ++s) {
    std::vector<size_t> todo = {s};
    while (!todo.empty()) {
      const size_t at = todo.back();
      todo.pop_back();
      for (int64_t c : consumers_[at]) {
        if (c >= 0 && !downstream_[s][size_t(c)]) downstream_[s][size_t(c)] = true, todo.push_back(size_t(c));
      }
    }
  }
  // A stage reads its inputs one at a time: two inputs fed by one upstream stage could each
  // wait for the other's credit. Such joins are refused until a family needs them.
  for (size_t t = 0; t < stages.size(); ++t) {
    for (size_t a = 0; a < edges_[t].size(); ++a) {
      for (size_t b = a + 1; b < edges_[t].size(); ++b) {
        const size_t x = edges_[t][a].first, y = edges_[t][b].first;
        for (size_t u = 0; u < stages.size(); ++u) {
          if ((u == x || downstream_[u][x]) && (u == y || downstream_[u][y])) {
            return PlanError(Describe(stages[t]) + " reads stages " + std::to_string(stages[x].stage_id) + " and " +
                             std::to_string(stages[y].stage_id) + ", which both depend on stage " +
                             std::to_string(stages[u].stage_id) + ": joins of one stage's output are not supported");
          }
        }
      }
    }
  }
  return Status::Ok();
}

Status Session::Admit(const SessionOptions& options, const FamilyRegistry& families) {
  OE_ASSIGN_OR_RETURN(budget_, EstimatePlanBudget(plan_, 1, options.wsl, families));
  OE_RETURN_IF_ERROR(CheckMemoryBudget(plan_, budget_));
  if (options.ledger != nullptr) {
    OE_ASSIGN_OR_RETURN(reservation_, options.ledger->Reserve(plan_.path, budget_.per_pool()));
    ledger_ = options.ledger;
  }
  return Status::Ok();
}

Status Session::OpenStages(const SessionOptions& options, const FamilyRegistry& families) {
  static std::atomic<int64_t> sessions{0};
  const std::string instance = std::to_string(platform::ProcessId()) + "-" + std::to_string(++sessions);
  session_id_ = "session-" + instance;
  std::map<std::string, contract::VerifiedManifest> verified;  // by artifact: stages often share one
  for (const StagePlan& stage : plan_.stages) {
    auto it = verified.find(stage.artifact);
    if (it == verified.end()) {
      OE_ASSIGN_OR_RETURN(contract::VerifiedManifest manifest, VerifyStageArtifact(stage, !options.allow_unqualified));
      it = verified.emplace(stage.artifact, std::move(manifest)).first;
    } else {
      OE_RETURN_IF_ERROR(CheckStageArtifact(stage, it->second, !options.allow_unqualified));
    }
    for (const auto& [name, hash] : it->second.manifest.files) {
      backends_.AddVerified({(fs::path(stage.artifact) / name).lexically_normal().string()});
    }
    StagePlan copy = stage;
    for (auto& [role, group] : copy.graphs) {
      for (const auto& [k, v] : options.backend_options) group.options[k] = v;
    }
    const Family* family = families.Find(stage.family);
    if (family == nullptr) return PlanError(Describe(stage) + ": no model family '" + stage.family + "' in this build");
    OE_ASSIGN_OR_RETURN(std::unique_ptr<StageWorker> worker, family->Open(copy, backends_));
    const contract::ArtifactManifest& manifest = it->second.manifest;
    const std::string backend = copy.graphs.empty() ? "none" : copy.graphs.begin()->second.backend;
    StageRunner::Identity identity{session_id_, manifest.artifact.checkpoint_id + "/" + manifest.component, backend,
                                   backend + "-" + instance, manifest.artifact.state_layout_version};
    runners_.push_back(std::make_unique<StageRunner>(copy, std::move(worker), identity));
    runners_.back()->set_trace(&backends_.trace());
  }
  return Status::Ok();
}

double Session::ElapsedMs() const { return std::chrono::duration<double, std::milli>(Clock::now() - started_).count(); }

Result<Json> Session::Submit(const Request& request, const Listener& listener) {
  if (busy_.exchange(true)) return Status::Error("busy", "a request is already running on this session");
  struct Idle {
    std::atomic<bool>& busy;
    ~Idle() { busy = false; }
  } idle{busy_};
  cancel_ = false;
  aborted_ = false;
  listener_error_.clear();
  OE_RETURN_IF_ERROR(Validate(request));
  for (auto& r : runners_) OE_RETURN_IF_ERROR(r->Check(request));
  for (auto& r : runners_) OE_RETURN_IF_ERROR(r->Settle(request));
  trace::Recorder& trace = backends_.trace();
  if (trace.enabled()) {  // the trace holds the last request
    trace.Clear();
    trace.NameThread("caller");
  }
  trace::Span traced(&trace, "request", "session", Json{{"epoch", epoch_.load()}});
  started_ = Clock::now();
  {
    std::lock_guard<std::mutex> lock(flight_mu_);
    in_flight_ = true;
  }
  // Whatever happens below (even an exception), no stage thread outlives this call.
  struct Landing {
    Session& s;
    ~Landing() {
      if (std::uncaught_exceptions() > 0) s.Abort();
      for (auto& r : s.runners_) r->Join();
      std::lock_guard<std::mutex> lock(s.flight_mu_);
      s.in_flight_ = false;
    }
  };
  std::vector<Stream> finals;
  {
    Landing landing{*this};
    Outputs outputs;
    OE_RETURN_IF_ERROR(BeginAll(request, &outputs));
    finals = StartAll(request, outputs);
    if (aborted_) Abort();  // it came while the stages started: fence them now
    if (cancel_) Cancel();
    Deliver(finals, listener);
  }
  Snapshot();
  return Conclude(finals, listener);
}

void Session::Snapshot() {
  std::vector<Json> views;
  for (const auto& r : runners_) views.push_back(r->worker().Inspect());
  std::lock_guard<std::mutex> lock(inspect_mu_);
  inspected_ = std::move(views);
}

Status Session::BeginAll(const Request& request, Outputs* outputs) {
  const std::string request_id = session_id_ + "-req-" + std::to_string(++requests_);
  for (size_t i = 0; i < runners_.size(); ++i) {
    auto streams = runners_[i]->Begin(request, request_id, epoch_, plan_.stream_limits, consumers_[i].size());
    if (!streams.ok()) {
      for (size_t j = 0; j < i; ++j) runners_[j]->Withdraw();
      return streams.status();
    }
    outputs->push_back(std::move(streams).value());
  }
  return Status::Ok();
}

std::vector<Session::Stream> Session::StartAll(const Request& request, Outputs& outputs) {
  std::vector<Stream> finals;
  last_streams_.clear();
  for (const auto& streams : outputs) last_streams_.insert(last_streams_.end(), streams.begin(), streams.end());
  for (size_t s = 0; s < runners_.size(); ++s) {
    for (size_t k = 0; k < consumers_[s].size(); ++k) {
      if (consumers_[s][k] >= 0) continue;
      Stream f;
      f.stage = s;
      f.type = plan_.stages[s].final_output_type;
      f.events = outputs[s][k];
      const Json described = runners_[s]->worker().Describe();
      const int64_t rate = described.value("sample_rate", int64_t(0));
      // A request that names no prebuffer gets the one its vocoder's chunk schedule is made for.
      const double prebuffer = request.prebuffer_ms >= 0 ? request.prebuffer_ms
                                                         : described.value("prebuffer_ms", kFixedSchedulePrebufferMs);
      if (f.type == "audio" && rate > 0) f.clock = std::make_unique<PlaybackClock>(rate, prebuffer);
      finals.push_back(std::move(f));
    }
  }
  for (size_t t = 0; t < runners_.size(); ++t) {
    std::vector<std::shared_ptr<contract::EventStream>> inputs;
    for (const auto& [s, k] : edges_[t]) inputs.push_back(outputs[s][k]);
    const bool feeds = std::any_of(consumers_[t].begin(), consumers_[t].end(), [](int64_t c) { return c >= 0; });
    runners_[t]->Start(request, std::move(inputs), feeds, started_, [this, t](Ending ending, const std::string&) {
      if (ending == Ending::kError) CancelAround(t);  // one failed stage ends the whole request
    });
  }
  return finals;
}

void Session::Deliver(std::vector<Stream>& finals, const Listener& listener) {
  auto bell = std::make_shared<Doorbell>();
  const bool several = finals.size() > 1;
  if (several) {
    for (auto& f : finals) f.events->SetObserver([bell] { bell->Ring(); });
  }
  auto open = [&] { return std::any_of(finals.begin(), finals.end(), [](const Stream& f) { return !f.ended; }); };
  while (open()) {
    const uint64_t seen = bell->rings();
    bool progressed = false;
    for (auto& f : finals) {
      if (f.ended) continue;
      auto delivered = several ? f.events->TryReceive() : f.events->Receive();
      if (delivered) {
        Consume(f, std::move(*delivered), listener);
        progressed = true;
      } else if (!several || f.events->Counters().ended) {
        f.ended = true;  // fenced before its terminal event
        progressed = true;
      }
    }
    if (!progressed) bell->WaitPast(seen);
  }
  for (auto& f : finals) f.events->SetObserver(nullptr);
}

void Session::Consume(Stream& f, contract::Delivered&& delivered, const Listener& listener) {
  const std::string token = delivered.event.release_token;
  const bool terminal = delivered.event.terminal;
  const Input in = Decode(std::move(delivered));
  const double now = ElapsedMs();
  const bool withholding = cancel_ || aborted_;
  SessionEvent ev;
  ev.stream = f.type;
  ev.stage_id = plan_.stages[f.stage].stage_id;
  ev.terminal = terminal;
  ev.json = Json{{"kind", in.kind}, {"seq", in.seq}};
  if (!terminal) {
    f.events->Acknowledge(token);
    if (withholding) {
      f.withheld = true;
      return;
    }
    ev.payload = in.Find("pcm");
    double lead = -1;  // the audio still queued for the speaker as this chunk arrives (-1: not playing yet)
    if (f.clock && ev.payload != nullptr) {
      if (std::isfinite(f.clock->runs_out_ms())) lead = std::max(0.0, f.clock->runs_out_ms() - now);
      f.clock->Arrive(int64_t(ev.payload->bytes.size()) / contract::DtypeSize(ev.payload->dtype), now);
      f.last_pcm_ms = now;
    }
    ev.json.update(in.fields);
    if (ev.payload != nullptr && f.clock) ev.json["lead_ms"] = lead;
    const bool keep = Call(listener, ev);
    f.last_seq = in.seq;
    if (!keep) Cancel();
    return;
  }
  f.events->Acknowledge(token);
  f.ended = true;
  Json fields = in.fields;
  if (f.clock) {
    f.clock->End(now);
    fields = AudioFields(f, std::move(fields), now);
  }
  ev.json.update(fields);
  f.terminal = ev.json;
  f.held = withholding;  // delivered once every stage ended, as the consumer's view says
  if (!f.held) Call(listener, ev);
}

Json Session::AudioFields(const Stream& f, Json fields, double now) const {
  // The metrics of the intermediate stages that fed this stream (a talker's), under its own.
  std::vector<size_t> upstream = {f.stage};
  for (size_t i = 0; i < upstream.size(); ++i) {
    for (const auto& [s, k] : edges_[upstream[i]]) {
      if (plan_.stages[s].final_output) continue;
      upstream.push_back(s);
      const Json theirs = runners_[s]->terminal_fields();  // named: items() would dangle on a temporary
      for (const auto& [key, value] : theirs.items()) {
        if (!fields.contains(key) && key != "error" && key != "state") fields[key] = value;
      }
    }
  }
  const PlaybackStats& p = f.clock->stats();
  const double rate = double(runners_[f.stage]->worker().Describe().value("sample_rate", int64_t(1)));
  const double audio_ms = 1000.0 * double(p.samples) / rate;
  const double input_ended = edges_[f.stage].empty() ? now : runners_[edges_[f.stage][0].first]->ended_ms();
  fields["samples"] = p.samples;
  fields["sample_rate"] = int64_t(rate);
  fields["chunks"] = p.chunks;
  fields["audio_ms"] = audio_ms;
  fields["total_ms"] = now;
  fields["rtf"] = audio_ms > 0 ? now / audio_ms : 0.0;
  fields["first_pcm_ms"] = p.first_pcm_ms;
  fields["playback_start_ms"] = p.playback_start_ms;
  fields["max_gap_ms"] = p.max_gap_ms;
  fields["underruns"] = p.underruns;
  fields["underrun_ms"] = p.underrun_ms;
  fields["lead_min_ms"] = p.lead_min_ms;
  fields["prebuffer_ms"] = f.clock->prebuffer_ms();
  fields["tail_ms"] = p.samples > 0 ? std::max(0.0, f.last_pcm_ms - input_ended) : 0.0;
  fields["peak_rss_mb"] = PeakRssMb();
  return fields;
}

bool Session::Call(const Listener& listener, const SessionEvent& event) {
  if (!listener_error_.empty()) return false;
  std::optional<trace::Span> span;  // the consumer's time with the event
  if (backends_.trace().enabled()) span.emplace(&backends_.trace(), "listener " + event.json.value("kind", ""), "session");
  try {
    return listener(event);
  } catch (const std::exception& e) {
    listener_error_ = e.what();
  } catch (...) {
    listener_error_ = "an unknown exception";
  }
  Cancel();
  return false;
}

Result<Json> Session::Conclude(std::vector<Stream>& finals, const Listener& listener) {
  // A fence that came after every stream delivered its terminal event fenced nothing.
  const bool fenced = aborted_ && std::any_of(finals.begin(), finals.end(), [](const Stream& f) {
    return !f.terminal || f.held;
  });
  if (fenced) {
    epoch_ += 1;
    for (auto& r : runners_) r->DropState();
    Snapshot();
    return Status::Error("aborted", "the request was fenced by its consumer (next epoch " + std::to_string(epoch_) + ")");
  }
  Json results = Json::object();
  Status kept;
  for (auto& f : finals) {
    if (!f.terminal) {
      if (kept.ok()) kept = Status::Error("internal", "the " + f.type + " stream ended without a terminal event");
      continue;
    }
    Json& t = *f.terminal;
    if (f.held && f.withheld && t.value("kind", "") != "error") {
      // The consumer did not get it all: the state keeps what it got, and it was cancelled.
      if (Status st = runners_[f.stage]->worker().Withheld(f.last_seq, &t); !st.ok() && kept.ok()) kept = st;
      t["kind"] = t["finish_reason"] = "cancelled";
    }
    if (f.held && !listener_error_.empty()) {
      t["kind"] = t["finish_reason"] = "error";
      t["error"] = "the listener failed: " + listener_error_;
    }
    if (f.held) {
      SessionEvent ev{f.type, plan_.stages[f.stage].stage_id, t, true, nullptr};
      try {
        listener(ev);
      } catch (...) {  // the request is over; a listener that fails again changes nothing
      }
    }
    Json fields = t;
    fields.erase("kind");
    fields.erase("seq");
    results[f.type] = fields;
  }
  Snapshot();  // after a rewind the views changed
  if (!listener_error_.empty()) return Status::Error("listener_failed", "the event listener failed: " + listener_error_);
  for (const auto& r : runners_) {  // the stage where a failure began, not those it propagated to
    if (!r->error().ok() && !r->propagated()) return r->error();
  }
  for (const auto& r : runners_) {
    if (!r->error().ok()) return r->error();
  }
  if (!kept.ok()) return kept;
  return results;
}

void Session::CancelAround(size_t failed) {
  for (size_t s = 0; s < runners_.size(); ++s) {
    if (s != failed && !downstream_[failed][s]) runners_[s]->Cancel();
  }
}

void Session::Cancel() {
  cancel_ = true;
  for (auto& r : runners_) r->Cancel();
}

void Session::Abort() {
  std::lock_guard<std::mutex> lock(flight_mu_);
  if (!in_flight_) return;  // nothing to fence: the state stays, as the contract's cancel of no request
  aborted_ = true;
  cancel_ = true;
  for (auto& r : runners_) r->Fence();
}

Status Session::Reset() {
  if (busy_.exchange(true)) return Status::Error("busy", "a request is running; cancel it first");
  Status first;
  for (auto& r : runners_) {
    Status st = r->Reset();
    if (!st.ok() && first.ok()) first = st;
  }
  busy_ = false;
  Snapshot();
  return first;
}

Status Session::KeepOutput(const std::string& stream, int64_t tokens) {
  if (busy_.exchange(true)) return Status::Error("busy", "a request is running; cancel it first");
  Status st = Status::Error("invalid_argument", "no final-output stage streams '" + stream + "'");
  for (auto& r : runners_) {
    if (r->stage().final_output && r->stage().final_output_type == stream) {
      st = r->state() ? r->worker().KeepOutput(tokens)
                      : Status::Error("invalid_state", "the '" + stream + "' stage holds no resident state");
      break;
    }
  }
  busy_ = false;
  Snapshot();
  return st;
}

std::vector<contract::StreamCounters> Session::LastStreamCounters() const {
  std::vector<contract::StreamCounters> out;
  for (const auto& s : last_streams_) out.push_back(s->Counters());
  return out;
}

std::vector<Placement> Session::placements() const {
  std::vector<Placement> out;
  for (const auto& r : runners_) {
    for (const auto& p : r->worker().placements()) out.push_back(p);
  }
  return out;
}

Json Session::LastRequest(size_t stage) const {
  std::lock_guard<std::mutex> lock(inspect_mu_);
  return stage < inspected_.size() ? inspected_[stage] : Json::object();
}

Json Session::Info() const {
  Json stages = Json::array(), streams = Json::object(), placements = Json::array();
  for (const auto& r : runners_) {
    const StagePlan& s = r->stage();
    Json stage = {{"stage_id", s.stage_id}, {"family", s.family}, {"model_stage", s.model_stage},
                  {"describe", r->worker().Describe()}, {"last_request", LastRequest(stages.size())}};
    stage["state"] = r->state() ? contract::ToJson(*r->state()) : Json();
    if (s.final_output) streams[s.final_output_type] = r->worker().Describe();
    stages.push_back(stage);
    for (const auto& p : r->worker().placements()) {
      placements.push_back({{"stage_id", s.stage_id}, {"graph", p.graph}, {"backend", p.backend}, {"device", p.device}, {"engine", p.engine},
                            {"nodes_on_engine", p.nodes_on_engine}, {"nodes_elsewhere", p.nodes_elsewhere},
                            {"detail", p.detail}, {"buffers", p.buffers}, {"bytes_in_per_run", p.bytes_in_per_run},
                            {"bytes_out_per_run", p.bytes_out_per_run}, {"load_bytes", p.load_bytes},
                            {"huge_page_bytes", p.huge_page_bytes}, {"pages", p.pages}});
    }
  }
  return {{"plan", plan_.path}, {"epoch", epoch_.load()}, {"streams", streams}, {"placements", placements}, {"stages", stages}};
}

Result<std::vector<int32_t>> Session::Tokenize(const std::string& text) const {
  for (const auto& r : runners_) {
    const text::Tokenizer* tokenizer = r->worker().tokenizer();
    if (tokenizer == nullptr || !r->stage().input_sources.empty()) continue;
    auto ids = tokenizer->Encode(text, /*add_special_tokens=*/false);
    if (!ids.ok()) return Status::Error("invalid_prompt", ids.status().message());
    return std::vector<int32_t>(ids->begin(), ids->end());
  }
  return Status::Error("no_tokenizer", "no entry stage of this plan reads text");
}

void Session::Trace(bool on) { backends_.trace().Enable(on); }

Json Session::TraceJson() const { return backends_.trace().ToJson(); }

}  // namespace omni_edge::pipeline
