// omni_edge._native: the native stream, controller, codec and manifest reader for Python.
// Values cross as JSON text (the contract's own wire form), so the Python reference and the
// native controller are driven by the same objects. Refusals become the Python reference's
// ContractError; exceptions exist only here, at the Python boundary.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/json_fields.h"
#include "contract/codec.h"
#include "contract/event_stream.h"
#include "contract/features.h"
#include "contract/manifest.h"
#include "contract/stage_controller.h"
#include "models/llm/llm_engine.h"
#include "models/llm/llm_session.h"
#include "models/llm/tokenizer.h"
#include "models/omni/omni_session.h"
#include "models/speech/playback.h"
#include "models/speech/speech_session.h"
#include "runtime/admission.h"
#include "runtime/plan.h"

namespace nb = nanobind;
using namespace omni_edge;
using namespace omni_edge::contract;

namespace {

struct StatusError {
  Status status;
};

void Check(const Status& status) {
  if (!status.ok()) throw StatusError{status};
}

template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) throw StatusError{result.status()};
  return std::move(result).value();
}

Json Parse(const std::string& text, const char* where) { return Unwrap(ParseJson(text, where)); }
StageRequest Request(const std::string& text) { return Unwrap(StageRequestFromJson(Parse(text, "request"))); }
StageEvent Event(const std::string& text) { return Unwrap(StageEventFromJson(Parse(text, "event"))); }
StateHandle State(const std::string& text) { return Unwrap(StateHandleFromJson(Parse(text, "state"))); }

std::optional<EventStream::Clock::time_point> Deadline(std::optional<double> timeout_s) {
  if (!timeout_s) return std::nullopt;
  return EventStream::Clock::now() +
         std::chrono::duration_cast<EventStream::Clock::duration>(std::chrono::duration<double>(*timeout_s));
}

std::optional<std::string> EventJson(const std::optional<Delivered>& delivered) {
  if (!delivered) return std::nullopt;
  return ToJson(delivered->event).dump();
}

nb::dict CountersDict(const StreamCounters& c) {
  nb::dict d;
  d["outstanding_events"] = c.outstanding_events;
  d["outstanding_bytes"] = c.outstanding_bytes;
  d["high_water_bytes"] = c.high_water_bytes;
  d["stale_events_dropped"] = c.stale_events_dropped;
  d["waiting_producers"] = c.waiting_producers;
  d["closed"] = c.closed;
  d["cancelled"] = c.cancelled;
  d["terminal_accepted"] = c.terminal_accepted;
  d["ended"] = c.ended;
  return d;
}

std::map<int64_t, BackendIdentity> Identities(const std::string& identities_json) {
  const Json j = Parse(identities_json, "identities");
  if (!j.is_object()) throw StatusError{Status::Error("invalid_field", "identities: expected an object")};
  std::map<int64_t, BackendIdentity> identities;
  for (auto it = j.begin(); it != j.end(); ++it) {
    int64_t stage = 0;
    try {
      size_t used = 0;
      stage = std::stoll(it.key(), &used);
      if (used != it.key().size() || stage < 0) throw std::invalid_argument("stage");
    } catch (const std::exception&) {
      throw StatusError{Status::Error("invalid_field", "identities." + it.key() + ": stage ids are integers >= 0")};
    }
    FieldReader r(it.value(), "identities." + it.key());
    BackendIdentity id{r.String("backend"), r.String("backend_instance_id"), r.String("worker_generation")};
    Check(r.Done());
    identities[stage] = id;
  }
  return identities;
}

// The engine alone, straight from a plan (no manifest check): for export-time validation,
// which runs before the artifact's reports exist.
struct CapturedTensor {
  std::string bytes;
  DType dtype;
  std::vector<int64_t> shape;
};

struct EngineHandle {
  Plan plan;
  BackendPool backends;
  std::unique_ptr<llm::LlmEngine> engine;
  // Graph inputs seen while capturing, at most `capture_limit` samples per graph.
  std::map<std::string, std::vector<std::vector<CapturedTensor>>> captured;
  size_t capture_limit = 0;
};

std::unique_ptr<EngineHandle> OpenEngine(const std::string& plan_path, int threads) {
  auto handle = std::make_unique<EngineHandle>();
  handle->plan = Unwrap(LoadPlan(plan_path));
  for (auto& stage : handle->plan.stages) {
    if (!stage.llm) continue;
    if (threads > 0) {
      for (auto& [role, group] : stage.graphs) group.options["threads"] = std::to_string(threads);
    }
    handle->engine = Unwrap(llm::LlmEngine::Create(stage, handle->backends));
    return handle;
  }
  throw StatusError{Status::Error("invalid_plan", plan_path + ": no llm stage")};
}

nb::dict PlacementDict(const Placement& p) {
  nb::dict d;
  d["graph"] = p.graph;
  d["backend"] = p.backend;
  d["device"] = p.device;
  d["engine"] = p.engine;
  d["nodes_on_engine"] = p.nodes_on_engine;
  d["nodes_elsewhere"] = p.nodes_elsewhere;
  d["detail"] = p.detail;
  return d;
}

llm::SamplingParams SamplingFromJson(const Json& sampling, const std::string& where) {
  FieldReader sr(sampling, where);
  llm::SamplingParams p;
  p.temperature = float(sr.Number("temperature", false, 0.0));
  p.top_k = int32_t(sr.Int("top_k", false, 0, 0));
  p.top_p = float(sr.Number("top_p", false, 1.0));
  p.min_p = float(sr.Number("min_p", false, 0.0));
  p.repetition_penalty = float(sr.Number("repetition_penalty", false, 1.0));
  p.seed = uint64_t(sr.Int("seed", false, 0, 0));
  Check(sr.Done());
  return p;
}

std::vector<int32_t> IdsFromJson(const Json* ids, const std::string& where) {
  std::vector<int32_t> out;
  for (size_t i = 0; ids != nullptr && i < ids->size(); ++i) {
    int64_t v = 0;
    Check(CheckInt((*ids)[i], where + "[" + std::to_string(i) + "]", 0, &v));
    if (v > INT32_MAX) throw StatusError{Status::Error("invalid_field", where + ": token id too large")};
    out.push_back(int32_t(v));
  }
  return out;
}

speech::SpeakRequest SpeakRequestFromJson(const std::string& text) {
  const Json j = Parse(text, "request");
  FieldReader r(j, "speak");
  speech::SpeakRequest s;
  s.text = r.String("text", false, false);
  s.text_ids = IdsFromJson(r.Array("text_ids", false), "speak.text_ids");
  s.max_frames = r.Int("max_frames", false, 0, 0);
  if (const Json* sampling = r.Object("sampling", false)) s.sampling = SamplingFromJson(*sampling, "speak.sampling");
  s.prebuffer_ms = r.Number("prebuffer_ms", false, speech::kDefaultPrebufferMs);
  Check(r.Done());
  return s;
}

llm::GenerateRequest RequestFromJson(const std::string& text) {
  const Json j = Parse(text, "request");
  FieldReader r(j, "generate");
  llm::GenerateRequest g;
  g.prompt = r.String("prompt", false, false);
  g.chat = r.Bool("chat", false);
  g.system_prompt = r.String("system_prompt", false, false);
  for (int32_t v : IdsFromJson(r.Array("prompt_ids", false), "generate.prompt_ids")) g.prompt_ids.push_back(llm::TokenId(v));
  g.continue_conversation = r.Bool("continue_conversation", false);
  g.max_new_tokens = r.Int("max_new_tokens", false, 0, 0);
  if (const Json* sampling = r.Object("sampling", false)) g.sampling = SamplingFromJson(*sampling, "generate.sampling");
  if (const Json* stops = r.Array("stop_strings", false)) {
    for (const auto& s : *stops) {
      if (!s.is_string()) throw StatusError{Status::Error("invalid_field", "generate.stop_strings: expected strings")};
      g.stop_strings.push_back(s.get<std::string>());
    }
  }
  g.ignore_stop_tokens = r.Bool("ignore_stop_tokens", false);
  Check(r.Done());
  return g;
}

// Opens a session with the GIL released (loading graphs takes a while).
template <typename Session>
std::unique_ptr<Session> OpenSession(const std::string& plan_path, bool allow_unqualified, int threads) {
  llm::SessionOptions options;
  options.allow_unqualified = allow_unqualified;
  if (threads > 0) options.backend_options["threads"] = std::to_string(threads);
  nb::gil_scoped_release release;
  auto session = Session::Open(plan_path, options);
  nb::gil_scoped_acquire acquire;
  return Unwrap(std::move(session));
}

// Calls a Python consumer from a controller thread. An exception (a closed pipe, a bug in the
// consumer) must not unwind through the controller: it is kept, the request is cancelled (the
// call returns false) and ends normally, and Raise() throws it afterwards.
class PythonConsumer {
 public:
  template <typename Call>
  bool operator()(Call&& call) {
    nb::gil_scoped_acquire acquire;
    if (raised_) return false;
    try {
      nb::object keep = call();
      return keep.is_none() || nb::cast<bool>(keep);
    } catch (nb::python_error& e) {
      raised_.emplace(std::move(e));
    } catch (const std::exception& e) {  // e.g. a result that does not convert to bool
      PyErr_SetString(PyExc_RuntimeError, e.what());
      raised_.emplace();
    }
    return false;
  }
  void Raise() {
    if (raised_) throw std::move(*raised_);
  }

 private:
  std::optional<nb::python_error> raised_;
};

nb::list PlacementList(const std::vector<Placement>& placements) {
  nb::list out;
  for (const auto& p : placements) out.append(PlacementDict(p));
  return out;
}

nb::object PcmBytes(const speech::SpeechEvent& ev) {
  return ev.kind == "pcm" ? nb::object(nb::bytes(ev.pcm.data(), ev.pcm.size())) : nb::none();
}

}  // namespace

NB_MODULE(_native, m) {
  m.doc() = "omni-edge native controller core (stage contract v2)";
  m.attr("__version__") = OMNI_EDGE_VERSION;
  m.attr("PROTOCOL_VERSION") = kCurrentProtocol;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object cls = nb::module_::import_("omni_edge.contracts.errors").attr("ContractError");
      nb::object err = cls(e.status.reason(), e.status.message());
      PyErr_SetObject(cls.ptr(), err.ptr());
    }
  });

  m.def("negotiate", [](const std::string& args_json) {
    const Json args = Parse(args_json, "negotiate");
    const Json version = args.is_object() && args.contains("protocol_version") ? args["protocol_version"] : Json();
    const Json required = args.is_object() && args.contains("required_features") ? args["required_features"] : Json();
    return Unwrap(Negotiate(version, required));
  }, nb::arg("args_json"), "Negotiate {protocol_version, required_features}; returns the offered features.");

  m.def("canonical_json", [](const std::string& type_name, const std::string& text) {
    return Unwrap(CanonicalJson(type_name, text));
  }, nb::arg("type_name"), nb::arg("json_text"));

  m.def("read_manifest", [](const std::string& directory) {
    nb::gil_scoped_release release;  // hashing large artifacts need not hold the GIL
    return ToJson(Unwrap(ReadManifest(directory))).dump();
  }, nb::arg("directory"));

  m.def("available_backends", &AvailableBackends);

  m.def("playback_stats", [](const std::vector<std::pair<double, int64_t>>& arrivals, int64_t sample_rate,
                             double prebuffer_ms) {
    if (sample_rate < 1 || !(prebuffer_ms >= 0)) throw nb::value_error("sample_rate >= 1 and prebuffer_ms >= 0 are required");
    speech::PlaybackClock clock(sample_rate, prebuffer_ms);
    for (const auto& [ms, n] : arrivals) clock.Arrive(n, ms);
    if (!arrivals.empty()) clock.End(arrivals.back().first);
    const speech::PlaybackStats& s = clock.stats();
    return Json{{"first_pcm_ms", s.first_pcm_ms}, {"playback_start_ms", s.playback_start_ms}, {"underruns", s.underruns},
                {"underrun_ms", s.underrun_ms}, {"max_gap_ms", s.max_gap_ms}, {"chunks", s.chunks},
                {"samples", s.samples}}.dump();
  }, nb::arg("arrivals"), nb::arg("sample_rate"), nb::arg("prebuffer_ms"),
     "The speech session's playback clock over (ms since the request, samples) arrivals (JSON stats).");

  m.def("plan_budget", [](const std::string& plan_path, int sessions, bool wsl) {
    const Plan plan = Unwrap(LoadPlan(plan_path));
    return ToJson(Unwrap(EstimatePlanBudget(plan, sessions, wsl))).dump();
  }, nb::arg("plan_path"), nb::arg("sessions") = 1, nb::arg("wsl") = false,
     "The memory budget of a plan per stage and pool (JSON), from its manifests; loads nothing.");

  m.def("detect_pools", []() {
    bool wsl = false;
    Json pools = DetectPools(&wsl);
    return Json{{"pools", pools}, {"wsl", wsl}}.dump();
  });

  nb::class_<AdmissionLedger>(m, "AdmissionLedger")
      .def("__init__", [](AdmissionLedger* self, const std::string& pools_json) {
        new (self) AdmissionLedger(Unwrap(PoolsFromJson(Parse(pools_json, "pools"))));
      }, nb::arg("pools_json"))
      .def("reserve", [](AdmissionLedger& l, const std::string& owner, const std::string& demand_json) {
        return Unwrap(l.Reserve(owner, Unwrap(PoolsFromJson(Parse(demand_json, "demand")))));
      }, nb::arg("owner"), nb::arg("demand_json"), "All-or-nothing; raises ContractError('admission') with the numbers.")
      .def("release", [](AdmissionLedger& l, int64_t id, bool drained) { Check(l.Release(id, drained)); },
           nb::arg("reservation"), nb::arg("drained") = true)
      .def("forgive", [](AdmissionLedger& l, int64_t id) { Check(l.Forgive(id)); }, nb::arg("reservation"))
      .def("free", &AdmissionLedger::Free, nb::arg("pool"))
      .def("snapshot", [](const AdmissionLedger& l) { return l.Snapshot().dump(); });

  nb::class_<llm::Tokenizer>(m, "Tokenizer")
      .def_static("load", [](const std::string& path) { return Unwrap(llm::Tokenizer::Load(path)); }, nb::arg("path"))
      .def("encode", [](const llm::Tokenizer& t, const std::string& text) { return Unwrap(t.Encode(text)); },
           nb::arg("text"))
      .def("decode", [](const llm::Tokenizer& t, const std::vector<llm::TokenId>& ids, bool skip_special) {
        const std::string bytes = t.Decode(ids, skip_special);
        return nb::bytes(bytes.data(), bytes.size());
      }, nb::arg("ids"), nb::arg("skip_special") = true)
      .def("find", [](const llm::Tokenizer& t, const std::string& token) { return t.Find(token); }, nb::arg("token"))
      .def_prop_ro("vocab_size", &llm::Tokenizer::vocab_size);

  nb::class_<EngineHandle>(m, "LlmEngine")
      .def_static("open", &OpenEngine, nb::arg("plan_path"), nb::arg("threads") = 0)
      .def("feed", [](EngineHandle& h, const std::vector<llm::TokenId>& ids) {
        const float* logits = nullptr;
        {
          nb::gil_scoped_release release;
          auto r = h.engine->Feed(ids);
          if (!r.ok()) {
            nb::gil_scoped_acquire acquire;
            throw StatusError{r.status()};
          }
          logits = r.value();
        }
        return nb::bytes(reinterpret_cast<const char*>(logits), size_t(h.engine->config().vocab_size) * sizeof(float));
      }, nb::arg("ids"), "Feed tokens; returns the last token's logits as float32 bytes.")
      .def("reset", [](EngineHandle& h) { Check(h.engine->Reset()); })
      .def("capture", [](EngineHandle& h, size_t max_per_graph) {
        h.captured.clear();
        h.capture_limit = max_per_graph;
        if (max_per_graph == 0) {
          h.engine->set_observer(nullptr);
          return;
        }
        EngineHandle* handle = &h;
        h.engine->set_observer([handle](const std::string& graph, const std::vector<TensorView>& inputs) {
          auto& samples = handle->captured[graph];
          if (samples.size() >= handle->capture_limit) return;
          std::vector<CapturedTensor> sample;
          for (const auto& t : inputs) {
            sample.push_back({std::string(static_cast<const char*>(t.data), t.nbytes()), t.dtype, t.shape});
          }
          samples.push_back(std::move(sample));
        });
      }, nb::arg("max_per_graph"), "Capture the inputs of every graph run (0 stops).")
      .def("take_capture", [](EngineHandle& h) {
        nb::dict out;
        for (auto& [graph, samples] : h.captured) {
          nb::list list;
          for (auto& sample : samples) {
            nb::list tensors;
            for (auto& t : sample) {
              tensors.append(nb::make_tuple(nb::bytes(t.bytes.data(), t.bytes.size()), DTypeName(t.dtype), t.shape));
            }
            list.append(tensors);
          }
          out[graph.c_str()] = list;
        }
        h.captured.clear();
        return out;
      }, nb::sig("def take_capture(self) -> dict[str, list[list[tuple[bytes, str, list[int]]]]]"))
      .def_prop_ro("position", [](const EngineHandle& h) { return h.engine->position(); })
      .def_prop_ro("cache_slots", [](const EngineHandle& h) { return h.engine->cache_slots(); })
      .def_prop_ro("vocab_size", [](const EngineHandle& h) { return h.engine->config().vocab_size; })
      .def("placements", [](const EngineHandle& h) { return PlacementList(h.engine->placements()); },
           nb::sig("def placements(self) -> list[dict[str, str | int]]"));

  nb::class_<llm::LlmSession>(m, "LlmSession")
      .def_static("open", &OpenSession<llm::LlmSession>, nb::arg("plan_path"), nb::arg("allow_unqualified") = false,
                  nb::arg("threads") = 0)
      .def("generate", [](llm::LlmSession& s, const std::string& request_json, nb::callable on_event) {
        const llm::GenerateRequest request = RequestFromJson(request_json);
        Result<llm::Metrics> result = Status::Error("internal", "not run");
        PythonConsumer consumer;
        {
          nb::gil_scoped_release release;
          result = s.Generate(request, [&](const llm::OutputEvent& ev) {
            return consumer([&] { return on_event(ev.ToJson().dump()); });
          });
        }
        consumer.Raise();
        return Unwrap(std::move(result)).ToJson().dump();
      }, nb::arg("request_json"), nb::arg("on_event"),
         nb::sig("def generate(self, request_json: str, on_event: typing.Callable[[str], object]) -> str"),
         "Run one request; on_event(event_json) sees every event and may return False to cancel.")
      .def("cancel", &llm::LlmSession::Cancel)
      .def("abort", &llm::LlmSession::Abort)
      .def("reset", [](llm::LlmSession& s) { Check(s.Reset()); })
      .def("context", [](const llm::LlmSession& s) { return s.context(); })
      .def("pending", [](const llm::LlmSession& s) { return s.pending(); })
      .def_prop_ro("epoch", &llm::LlmSession::epoch)
      .def_prop_ro("poisoned", &llm::LlmSession::poisoned)
      .def("kv_state", [](const llm::LlmSession& s) -> std::optional<std::string> {
        auto st = s.kv_state();
        if (!st) return std::nullopt;
        return ToJson(*st).dump();
      })
      .def("tokenize", [](const llm::LlmSession& s, const std::string& text) { return Unwrap(s.tokenizer().Encode(text)); })
      .def("placements", [](const llm::LlmSession& s) { return PlacementList(s.placements()); },
           nb::sig("def placements(self) -> list[dict[str, str | int]]"));

  nb::class_<speech::SpeechSession>(m, "SpeechSession")
      .def_static("open", &OpenSession<speech::SpeechSession>, nb::arg("plan_path"), nb::arg("allow_unqualified") = false,
                  nb::arg("threads") = 0)
      .def("speak", [](speech::SpeechSession& s, const std::string& request_json, nb::callable on_event) {
        const speech::SpeakRequest request = SpeakRequestFromJson(request_json);
        Result<speech::SpeechMetrics> result = Status::Error("internal", "not run");
        PythonConsumer consumer;
        {
          nb::gil_scoped_release release;
          result = s.Speak(request, [&](const speech::SpeechEvent& ev) {
            return consumer([&] { return on_event(ev.ToJson().dump(), PcmBytes(ev)); });
          });
        }
        consumer.Raise();
        return Unwrap(std::move(result)).ToJson().dump();
      }, nb::arg("request_json"), nb::arg("on_event"),
         nb::sig("def speak(self, request_json: str, on_event: typing.Callable[[str, bytes | None], object]) -> str"),
         "Speak one utterance; on_event(event_json, pcm_bytes) sees every event and may return False to cancel.")
      .def("cancel", &speech::SpeechSession::Cancel)
      .def("codes", &speech::SpeechSession::frames)
      .def("tokenize", [](const speech::SpeechSession& s, const std::string& text) { return Unwrap(s.Tokenize(text)); })
      .def_prop_ro("sample_rate", &speech::SpeechSession::sample_rate)
      .def_prop_ro("pcm_dtype", &speech::SpeechSession::pcm_dtype)
      .def("placements", [](const speech::SpeechSession& s) { return PlacementList(s.placements()); },
           nb::sig("def placements(self) -> list[dict[str, str | int]]"));

  nb::class_<omni::OmniSession>(m, "OmniSession")
      .def_static("open", &OpenSession<omni::OmniSession>, nb::arg("plan_path"), nb::arg("allow_unqualified") = false,
                  nb::arg("threads") = 0)
      .def("run", [](omni::OmniSession& s, const std::string& text_json, const std::string& speak_json,
                     nb::callable on_text, nb::callable on_audio) {
        omni::OmniRequest request{RequestFromJson(text_json), SpeakRequestFromJson(speak_json)};
        Result<omni::OmniMetrics> result = Status::Error("internal", "not run");
        PythonConsumer consumer;  // the session orders the two callbacks
        {
          nb::gil_scoped_release release;
          result = s.Run(
              request, [&](const llm::OutputEvent& ev) { return consumer([&] { return on_text(ev.ToJson().dump()); }); },
              [&](const speech::SpeechEvent& ev) {
                return consumer([&] { return on_audio(ev.ToJson().dump(), PcmBytes(ev)); });
              });
        }
        consumer.Raise();
        return Unwrap(std::move(result)).ToJson().dump();
      }, nb::arg("text_json"), nb::arg("speak_json"), nb::arg("on_text"), nb::arg("on_audio"),
         nb::sig("def run(self, text_json: str, speak_json: str, on_text: typing.Callable[[str], object], "
                 "on_audio: typing.Callable[[str, bytes | None], object]) -> str"),
         "One omni request: on_text(event_json) and on_audio(event_json, pcm_bytes), one at a time, may return False to cancel.")
      .def("cancel", &omni::OmniSession::Cancel)
      .def("codes", [](omni::OmniSession& s) { return s.speech().frames(); })
      .def("tokenize", [](omni::OmniSession& s, const std::string& text) { return Unwrap(s.thinker().tokenizer().Encode(text)); })
      .def_prop_ro("sample_rate", [](omni::OmniSession& s) { return s.speech().sample_rate(); })
      .def_prop_ro("pcm_dtype", [](omni::OmniSession& s) { return s.speech().pcm_dtype(); });

  nb::class_<EventStream>(m, "EventStream")
      .def("__init__", [](EventStream* self, const std::string& request_json, int64_t max_events, int64_t max_bytes) {
        StreamLimits limits{max_events, max_bytes};
        Check(Validate(limits));
        new (self) EventStream(Request(request_json), limits);
      }, nb::arg("request_json"), nb::arg("max_events"), nb::arg("max_bytes"))
      .def("try_submit", [](EventStream& s, const std::string& event_json) {
        return Unwrap(s.TrySubmit(Event(event_json))) == SubmitResult::kAccepted ? "accepted" : "backpressure";
      }, nb::arg("event_json"))
      .def("submit", [](EventStream& s, const std::string& event_json, std::optional<double> timeout_s) {
        const StageEvent event = Event(event_json);
        Status status;
        {
          nb::gil_scoped_release release;
          status = s.Submit(event, {}, Deadline(timeout_s));
        }
        Check(status);
      }, nb::arg("event_json"), nb::arg("timeout_s") = nb::none())
      .def("close", &EventStream::Close)
      .def("try_receive", [](EventStream& s) { return EventJson(s.TryReceive()); })
      .def("receive", [](EventStream& s, std::optional<double> timeout_s) {
        std::optional<Delivered> event;
        {
          nb::gil_scoped_release release;
          event = s.Receive(Deadline(timeout_s));
        }
        return EventJson(event);
      }, nb::arg("timeout_s") = nb::none())
      .def("acknowledge", &EventStream::Acknowledge, nb::arg("token"))
      .def("cancel", &EventStream::Cancel)
      .def("counters", [](const EventStream& s) { return CountersDict(s.Counters()); },
           nb::sig("def counters(self) -> dict[str, int | bool]"));

  nb::class_<StageController>(m, "StageController")
      .def("__init__", [](StageController* self, const std::string& identities_json) {
        new (self) StageController(Identities(identities_json));
      }, nb::arg("identities_json"))
      .def("begin", [](StageController& c, const std::string& request_json, int64_t max_events, int64_t max_bytes) {
        return Unwrap(c.Begin(Request(request_json), StreamLimits{max_events, max_bytes}));
      }, nb::arg("request_json"), nb::arg("max_events"), nb::arg("max_bytes"))
      .def("emit", [](StageController& c, const std::string& request_json, const std::string& event_json) {
        return std::string(EmitResultName(Unwrap(c.Emit(Request(request_json), Event(event_json)))));
      }, nb::arg("request_json"), nb::arg("event_json"))
      .def("finish", [](StageController& c, const std::string& request_json) { Check(c.Finish(Request(request_json))); },
           nb::arg("request_json"))
      .def("cancel", [](StageController& c, const std::string& request_json) {
        return Unwrap(c.Cancel(Request(request_json)));
      }, nb::arg("request_json"))
      .def("request_release", [](StageController& c, int64_t stage_id, const std::string& state_json) {
        return Unwrap(c.RequestRelease(stage_id, State(state_json)));
      }, nb::arg("stage_id"), nb::arg("state_json"))
      .def("confirm_release", [](StageController& c, int64_t stage_id, const std::string& state_json,
                                 const std::string& op_id) { Check(c.ConfirmRelease(stage_id, State(state_json), op_id)); },
           nb::arg("stage_id"), nb::arg("state_json"), nb::arg("op_id"))
      .def("is_live", [](const StageController& c, int64_t stage_id, const std::string& state_json) {
        return c.IsLive(stage_id, State(state_json));
      }, nb::arg("stage_id"), nb::arg("state_json"));
}
