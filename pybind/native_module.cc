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
#include <nanobind/stl/tuple.h>
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
#include "decoding/decoder.h"
#include "families/builtin.h"
#include "families/llm/config.h"
#include "families/token2wav/token2wav.h"
#include "media/audio_features.h"
#include "media/image_preprocess.h"
#include "media/image_slices.h"
#include "media/placeholders.h"
#include "pipeline/latest_queue.h"
#include "pipeline/playback.h"
#include "pipeline/request.h"
#include "pipeline/session.h"
#include "runtime/admission.h"
#include "runtime/plan.h"
#include "base/platform/mapped_files.h"
#include "text/text_stream.h"
#include "text/tokenizer.h"

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
  std::unique_ptr<decoding::Decoder> engine;
  // Graph inputs seen while capturing, at most `capture_limit` samples per graph.
  std::map<std::string, std::vector<std::vector<CapturedTensor>>> captured;
  size_t capture_limit = 0;

  nb::bytes Feed(const std::vector<text::TokenId>& ids, const nb::bytes& splice_rows,
                 const std::vector<int64_t>& splice_positions) {
    const int64_t H = engine->config().hidden_size;
    if (splice_rows.size() != splice_positions.size() * size_t(H) * sizeof(float)) {
      throw StatusError{Status::Error("invalid_argument", "splice_rows must hold hidden_size float32 values per position")};
    }
    std::vector<decoding::Decoder::Splice> splices;
    const float* rows = reinterpret_cast<const float*>(splice_rows.c_str());
    for (size_t i = 0; i < splice_positions.size(); ++i) {
      if (i > 0 && splice_positions[i] <= splice_positions[i - 1]) {
        throw StatusError{Status::Error("invalid_argument", "splice_positions must increase")};
      }
      splices.push_back({splice_positions[i], rows + i * size_t(H)});
    }
    const float* logits = nullptr;
    {
      nb::gil_scoped_release release;
      auto r = engine->Feed(ids, splices);
      if (!r.ok()) {
        nb::gil_scoped_acquire acquire;
        throw StatusError{r.status()};
      }
      logits = r.value();
    }
    return nb::bytes(reinterpret_cast<const char*>(logits), size_t(engine->config().vocab_size) * sizeof(float));
  }

  void Capture(size_t max_per_graph) {
    captured.clear();
    capture_limit = max_per_graph;
    if (max_per_graph == 0) {
      engine->set_observer(nullptr);
      return;
    }
    EngineHandle* handle = this;
    engine->set_observer([handle](const std::string& graph, const std::vector<TensorView>& inputs) {
      auto& samples = handle->captured[graph];
      if (samples.size() >= handle->capture_limit) return;
      std::vector<CapturedTensor> sample;
      for (const auto& t : inputs) {
        sample.push_back({std::string(static_cast<const char*>(t.data), t.nbytes()), t.dtype, t.shape});
      }
      samples.push_back(std::move(sample));
    });
  }

  nb::dict TakeCapture() {
    nb::dict out;
    for (auto& [graph, samples] : captured) {
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
    captured.clear();
    return out;
  }
};

std::unique_ptr<EngineHandle> OpenEngine(const std::string& plan_path, int threads) {
  auto handle = std::make_unique<EngineHandle>();
  handle->plan = Unwrap(LoadPlan(plan_path, families::Builtin()));
  for (auto& stage : handle->plan.stages) {
    const auto* config = stage.config_as<llm::LlmConfig>();
    if (config == nullptr) continue;
    if (threads > 0) {
      for (auto& [role, group] : stage.graphs) group.options["threads"] = std::to_string(threads);
    }
    handle->engine = Unwrap(decoding::Decoder::Create(config->decoder, stage.graphs, handle->backends));
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
  d["buffers"] = p.buffers;
  d["bytes_in_per_run"] = p.bytes_in_per_run;
  d["bytes_out_per_run"] = p.bytes_out_per_run;
  d["load_bytes"] = p.load_bytes;
  d["huge_page_bytes"] = p.huge_page_bytes;
  d["pages"] = p.pages;
  return d;
}

// Opens a session with the GIL released (loading graphs takes a while).
std::unique_ptr<pipeline::Session> OpenSession(const std::string& plan_path, bool allow_unqualified, int threads) {
  pipeline::SessionOptions options;
  options.allow_unqualified = allow_unqualified;
  if (threads > 0) options.backend_options["threads"] = std::to_string(threads);
  nb::gil_scoped_release release;
  auto session = pipeline::Session::Open(plan_path, options, families::Builtin());
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

nb::object PayloadBytes(const pipeline::SessionEvent& ev) {
  return ev.payload != nullptr ? nb::object(nb::bytes(ev.payload->bytes.data(), ev.payload->bytes.size())) : nb::none();
}

// A LatestQueue for Python: its callbacks run on the queue's thread, so each takes the GIL, and a
// Python exception there is reported as unraisable (there is no caller to raise it to).
struct QueueHandle {
  struct Callbacks {
    nb::object on_event, on_done;
    ~Callbacks() {
      nb::gil_scoped_acquire acquire;
      on_event.reset();
      on_done.reset();
    }
  };
  std::unique_ptr<pipeline::LatestQueue> queue;

  void Post(const std::string& request_json, nb::object on_event, nb::object on_done) {
    if (!queue) throw std::runtime_error("closed: this queue takes no more requests");
    pipeline::Request request = Unwrap(pipeline::RequestFromJson(Parse(request_json, "request")));
    auto cb = std::make_shared<Callbacks>();
    cb->on_event = std::move(on_event);
    cb->on_done = std::move(on_done);
    const auto listener = [cb](const pipeline::SessionEvent& ev) {
      nb::gil_scoped_acquire acquire;
      if (cb->on_event.is_none()) return true;
      try {
        nb::object keep = cb->on_event(ev.stream, ev.json.dump(), PayloadBytes(ev));
        return keep.is_none() || nb::cast<bool>(keep);
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("omni_edge LatestQueue on_event");
        return false;
      }
    };
    const auto done = [cb](const Result<Json>& result) {
      nb::gil_scoped_acquire acquire;
      if (cb->on_done.is_none()) return;
      try {
        if (result.ok()) {
          cb->on_done(result->dump(), nb::none(), nb::none());
        } else {
          cb->on_done(nb::none(), result.status().reason(), result.status().message());
        }
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("omni_edge LatestQueue on_done");
      }
    };
    nb::gil_scoped_release release;
    queue->Post(std::move(request), listener, done);
  }
  void Close() {
    nb::gil_scoped_release release;  // the running request's callbacks need the GIL to finish
    queue.reset();
  }
  ~QueueHandle() {
    if (queue) Close();
  }
};

nb::list PlacementList(const std::vector<Placement>& placements) {
  nb::list out;
  for (const auto& p : placements) out.append(PlacementDict(p));
  return out;
}

void RegisterContractError() {
  // A refused Status reaches Python as the reference's ContractError(reason, message).
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object cls = nb::module_::import_("omni_edge.contracts.errors").attr("ContractError");
      nb::object err = cls(e.status.reason(), e.status.message());
      PyErr_SetObject(cls.ptr(), err.ptr());
    }
  });
}

// The contract's values on the wire: feature negotiation and canonical JSON.
void BindContractValues(nb::module_& m) {
  m.def("negotiate", [](const std::string& args_json) {
    const Json args = Parse(args_json, "negotiate");
    const Json version = args.is_object() && args.contains("protocol_version") ? args["protocol_version"] : Json();
    const Json required = args.is_object() && args.contains("required_features") ? args["required_features"] : Json();
    return Unwrap(Negotiate(version, required));
  }, nb::arg("args_json"), "Negotiate {protocol_version, required_features}; returns the offered features.");

  m.def("canonical_json", [](const std::string& type_name, const std::string& text) {
    return Unwrap(CanonicalJson(type_name, text));
  }, nb::arg("type_name"), nb::arg("json_text"));
}

// An artifact's manifest, read and its files hashed.
void BindManifest(nb::module_& m) {
  m.def("read_manifest", [](const std::string& directory) {
    nb::gil_scoped_release release;  // hashing large artifacts need not hold the GIL
    return ToJson(Unwrap(ReadManifest(directory))).dump();
  }, nb::arg("directory"));
}

// What this build and this host offer: the backends compiled in, and how a weights file
// truncated under its mapping ends the process.
void BindHost(nb::module_& m) {
  m.def("available_backends", &AvailableBackends);
  m.def("onnxruntime_process_threads", &OnnxRuntimeProcessThreads,
        "ONNX Runtime's shared intra-op pool in this process (its first session sized it); 0 before one.");
  m.def("report_mapped_file_faults", [](const std::string& lines) {
    // A weights file truncated under its mapping ends the process with these stdout lines and
    // a message, not a SIGBUS crash (base/platform/mapped_files.h).
    ReportFaultsInMappedFiles("omni-edge");
    SetFaultLines(lines);
  }, nb::arg("lines"));
}

// The speech session's playback clock.
void BindPlayback(nb::module_& m) {
  m.def("playback_stats", [](const std::vector<std::pair<double, int64_t>>& arrivals, int64_t sample_rate,
                             double prebuffer_ms) {
    if (sample_rate < 1 || !(prebuffer_ms >= 0)) throw nb::value_error("sample_rate >= 1 and prebuffer_ms >= 0 are required");
    pipeline::PlaybackClock clock(sample_rate, prebuffer_ms);
    for (const auto& [ms, n] : arrivals) clock.Arrive(n, ms);
    if (!arrivals.empty()) clock.End(arrivals.back().first);
    const pipeline::PlaybackStats& s = clock.stats();
    return Json{{"first_pcm_ms", s.first_pcm_ms}, {"playback_start_ms", s.playback_start_ms}, {"underruns", s.underruns},
                {"underrun_ms", s.underrun_ms}, {"max_gap_ms", s.max_gap_ms}, {"lead_min_ms", s.lead_min_ms}, {"chunks", s.chunks},
                {"samples", s.samples}}.dump();
  }, nb::arg("arrivals"), nb::arg("sample_rate"), nb::arg("prebuffer_ms"),
     "The speech session's playback clock over (ms since the request, samples) arrivals (JSON stats).");
}

// An 8-bit RGB image from Python bytes (rows of interleaved pixels); the media code checks the size.
media::RgbImage RgbFromBytes(const nb::bytes& pixels, int64_t width, int64_t height) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(pixels.c_str());
  return media::RgbImage{width, height, std::vector<uint8_t>(bytes, bytes + pixels.size())};
}

// Images and audio as the encoders and a policy read them, and M-RoPE positions of a prompt.
void BindMedia(nb::module_& m) {
  m.def("preprocess_image", [](nb::bytes pixels, int64_t width, int64_t height, const std::string& config_json) {
    const Json config = Unwrap(ParseJson(config_json, "preprocessor_config"));
    const media::VisionPreprocessing p = Unwrap(media::VisionPreprocessingFromJson(config, "preprocessor_config"));
    const media::RgbImage image = RgbFromBytes(pixels, width, height);
    const media::VisionPatches out = Unwrap(media::PreprocessImage(image, p));
    return std::make_tuple(nb::bytes(reinterpret_cast<const char*>(out.values.data()), out.values.size() * sizeof(float)),
                           out.grid_t, out.grid_h, out.grid_w);
  }, nb::arg("pixels"), nb::arg("width"), nb::arg("height"), nb::arg("config_json"),
     "An 8-bit RGB image (rows of interleaved pixels) as a Qwen2-VL vision encoder reads it: "
     "(float32 patches, grid_t, grid_h, grid_w).");

  m.def("slice_image", [](nb::bytes pixels, int64_t width, int64_t height, const std::string& config_json) {
    const Json config = Unwrap(ParseJson(config_json, "preprocessor_config"));
    const media::SliceConfig c = Unwrap(media::SliceConfigFromJson(config, "preprocessor_config"));
    const media::RgbImage image = RgbFromBytes(pixels, width, height);
    const media::SlicedImage out = Unwrap(media::SliceImage(image, c));
    std::vector<std::tuple<int64_t, int64_t, nb::bytes>> slices;
    for (const media::ImageSlice& s : out.slices) {
      slices.emplace_back(s.rows, s.cols, nb::bytes(reinterpret_cast<const char*>(s.strip.data()), s.strip.size() * sizeof(float)));
    }
    return std::make_tuple(out.grid_cols, out.grid_rows, std::move(slices));
  }, nb::arg("pixels"), nb::arg("width"), nb::arg("height"), nb::arg("config_json"),
     "An 8-bit RGB image as MiniCPM-V / MiniCPM-o 4.5 slice it: (grid cols, grid rows (0, 0: not cut), "
     "[(rows, cols, float32 strip [3, patch, rows*cols*patch])] source first).");

  m.def("policy_pixels", [](nb::bytes pixels, int64_t width, int64_t height, int64_t size, std::vector<float> mean,
                            std::vector<float> std_dev) {
    if (mean.size() != 3 || std_dev.size() != 3) throw std::invalid_argument("mean and std: three values each");
    const media::RgbImage image = RgbFromBytes(pixels, width, height);
    const std::vector<float> out = Unwrap(media::ResizeWithPad(image, size, mean.data(), std_dev.data()));
    return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float));
  }, nb::arg("pixels"), nb::arg("width"), nb::arg("height"), nb::arg("size"), nb::arg("mean"), nb::arg("std"),
     "An 8-bit RGB image as a π0 policy reads a camera: float32 [3, size, size], resized with padding, normalized.");

  m.def("decode_wav", [](nb::bytes wav) {
    const media::Pcm pcm = Unwrap(media::DecodeWav(std::string(wav.c_str(), wav.size())));
    return std::make_pair(nb::bytes(reinterpret_cast<const char*>(pcm.samples.data()), pcm.samples.size() * sizeof(float)),
                          pcm.rate);
  }, nb::arg("wav"), "A WAV file's samples (float32 mono, channels averaged) and rate.");

  m.def("resample", [](nb::bytes samples, int64_t rate, int64_t target) {
    const auto* f = reinterpret_cast<const float*>(samples.c_str());
    const std::vector<float> out = Unwrap(media::Resample(std::vector<float>(f, f + samples.size() / sizeof(float)), rate, target));
    return nb::bytes(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float));
  }, nb::arg("samples"), nb::arg("rate"), nb::arg("target"), "float32 samples resampled as scipy's resample_poly does.");

  m.def("audio_features", [](nb::bytes wav, const std::string& config_json) {
    const Json config = Unwrap(ParseJson(config_json, "preprocessor_config"));
    const media::AudioFeatureConfig c = Unwrap(media::AudioFeaturesFromJson(config, "preprocessor_config"));
    const media::LogMel mel = Unwrap(media::AudioFeatures(std::string(wav.c_str(), wav.size()), c));
    return std::make_tuple(nb::bytes(reinterpret_cast<const char*>(mel.values.data()), mel.values.size() * sizeof(float)),
                           mel.mel, mel.frames);
  }, nb::arg("wav"), nb::arg("config_json"),
     "A WAV file as a Whisper-style encoder reads it: (float32 log-mel [mel, frames], mel, frames).");

  m.def("mrope_positions", [](const std::vector<int32_t>& prompt, const std::string& thinker_config_json,
                              const std::vector<std::tuple<int64_t, int64_t, int64_t>>& image_grids) {
    const Json config = Unwrap(ParseJson(thinker_config_json, "thinker config"));
    const media::PlaceholderIds ids = Unwrap(media::PlaceholderIdsFromJson(config, "thinker config"));
    std::vector<media::ImageGrid> grids;
    for (const auto& [t, h, w] : image_grids) grids.push_back({t, h, w});
    const media::MropePositions got = Unwrap(media::ComputeMropePositions(prompt, ids, grids));
    return std::make_pair(std::vector<std::vector<int64_t>>(got.rows.begin(), got.rows.end()), got.next);
  }, nb::arg("prompt"), nb::arg("thinker_config_json"), nb::arg("image_grids"),
     "The three M-RoPE position rows of a prompt (images' grids in order, in patches) and the next position.");
}

// Memory: a plan's budget, a decoder's KV state, the host's pools, and the admission ledger.
void BindMemoryBudget(nb::module_& m) {
  m.def("plan_budget", [](const std::string& plan_path, int sessions, bool wsl) {
    const Plan plan = Unwrap(LoadPlan(plan_path, families::Builtin()));
    return ToJson(Unwrap(EstimatePlanBudget(plan, sessions, wsl, families::Builtin()))).dump();
  }, nb::arg("plan_path"), nb::arg("sessions") = 1, nb::arg("wsl") = false,
     "The memory budget of a plan per stage and pool (JSON), from its manifests; loads nothing.");

  m.def("decoder_memory", [](const std::string& decoder_json) {
    const decoding::DecoderConfig c = Unwrap(decoding::ParseDecoder(Parse(decoder_json, "decoder"), "decoder"));
    return Json{{"state", decoding::StateBytes(c)}, {"workspace", decoding::WorkspaceBytes(c)}}.dump();
  }, nb::arg("decoder_json"), "A decoder section's resident KV state and prefill workspace in bytes (JSON).");

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
}

// tokenizer.json, and the text deltas a session streams.
void BindTokenizer(nb::module_& m) {
  nb::class_<text::Tokenizer>(m, "Tokenizer")
      .def_static("load", [](const std::string& path) { return Unwrap(text::Tokenizer::Load(path)); }, nb::arg("path"))
      // add_special_tokens defaults to true, as `tokenizers`' Tokenizer.encode does.
      .def("encode", [](const text::Tokenizer& t, const std::string& text, bool add_special_tokens) {
        return Unwrap(t.Encode(text, add_special_tokens));
      }, nb::arg("text"), nb::arg("add_special_tokens") = true)
      .def("decode", [](const text::Tokenizer& t, const std::vector<text::TokenId>& ids, bool skip_special) {
        const std::string bytes = t.Decode(ids, skip_special);
        return nb::bytes(bytes.data(), bytes.size());
      }, nb::arg("ids"), nb::arg("skip_special") = true)
      .def("find", [](const text::Tokenizer& t, const std::string& token) { return t.Find(token); }, nb::arg("token"))
      .def("stream", [](const text::Tokenizer& t, const std::vector<text::TokenId>& ids) {
        // The text deltas a session streams for these ids, one per id and the flush last.
        text::TextStream stream(t, {});
        std::vector<std::string> deltas;
        for (text::TokenId id : ids) deltas.push_back(stream.Push(id).text);
        deltas.push_back(stream.Flush());
        return deltas;
      }, nb::arg("ids"))
      .def_prop_ro("vocab_size", &text::Tokenizer::vocab_size);
}

// A plan's llm decoder alone, as LlmEngine (export-time validation: no manifest check).
void BindLlmEngine(nb::module_& m) {
  nb::class_<EngineHandle>(m, "LlmEngine")
      .def_static("open", &OpenEngine, nb::arg("plan_path"), nb::arg("threads") = 0)
      .def("feed", &EngineHandle::Feed, nb::arg("ids"), nb::arg("splice_rows") = nb::bytes("", 0),
           nb::arg("splice_positions") = std::vector<int64_t>(),
           "Feed tokens (the embeddings at splice_positions replaced by splice_rows, float32 [n, hidden]); returns the "
           "last token's logits as float32 bytes.")
      .def("set_position_table", [](EngineHandle& h, const std::vector<std::vector<int64_t>>& rows, int64_t next_position) {
        std::vector<int64_t> flat;
        for (const auto& row : rows) {
          if (row.size() != rows[0].size()) throw StatusError{Status::Error("invalid_argument", "position rows differ in length")};
          flat.insert(flat.end(), row.begin(), row.end());
        }
        Check(h.engine->SetPositionTable(std::move(flat), next_position));
      }, nb::arg("rows"), nb::arg("next_position"), "M-RoPE: the position rows of the prompt and the position after it.")
      .def("reset", [](EngineHandle& h) { Check(h.engine->Reset()); })
      .def("rewind", [](EngineHandle& h, int64_t position, const std::vector<text::TokenId>& context) {
        Check(h.engine->Rewind(position, context));
      }, nb::arg("position"), nb::arg("context"), "Forget the positions from `position` on (context: every position's token).")
      .def("recurrent_state", [](const EngineHandle& h) {
        const std::string bytes = h.engine->recurrent_state();
        return nb::bytes(bytes.data(), bytes.size());
      }, "A hybrid's conv and recurrent states as float32 bytes (every layer's conv state, then every recurrent state).")
      .def_prop_ro("last_rewind", [](const EngineHandle& h) { return h.engine->last_rewind(); })
      .def("capture", &EngineHandle::Capture, nb::arg("max_per_graph"), "Capture the inputs of every graph run (0 stops).")
      .def("take_capture", &EngineHandle::TakeCapture,
           nb::sig("def take_capture(self) -> dict[str, list[list[tuple[bytes, str, list[int]]]]]"))
      .def_prop_ro("position", [](const EngineHandle& h) { return h.engine->position(); })
      .def_prop_ro("cache_slots", [](const EngineHandle& h) { return h.engine->cache_slots(); })
      .def_prop_ro("vocab_size", [](const EngineHandle& h) { return h.engine->config().vocab_size; })
      .def("placements", [](const EngineHandle& h) { return PlacementList(h.engine->placements()); },
           nb::sig("def placements(self) -> list[dict[str, str | int]]"));
}

// A plan's token2wav stage alone (export-time validation and tests: no manifest check).
struct Token2WavHandle {
  Plan plan;
  BackendPool backends;
  std::unique_ptr<token2wav::Token2Wav> engine;
};

std::unique_ptr<Token2WavHandle> OpenToken2Wav(const std::string& plan_path, int threads) {
  auto handle = std::make_unique<Token2WavHandle>();
  handle->plan = Unwrap(LoadPlan(plan_path, families::Builtin()));
  for (auto& stage : handle->plan.stages) {
    if (stage.config_as<token2wav::Token2WavConfig>() == nullptr) continue;
    if (threads > 0) {
      for (auto& [role, group] : stage.graphs) group.options["threads"] = std::to_string(threads);
    }
    handle->engine = Unwrap(token2wav::Token2Wav::Create(stage, handle->backends));
    return handle;
  }
  throw StatusError{Status::Error("invalid_plan", plan_path + ": no token2wav stage")};
}

void BindToken2Wav(nb::module_& m) {
  nb::class_<Token2WavHandle>(m, "Token2WavEngine")
      .def_static("open", &OpenToken2Wav, nb::arg("plan_path"), nb::arg("threads") = 0)
      .def("start", [](Token2WavHandle& h, uint64_t seed) {
        nb::gil_scoped_release release;
        Check(h.engine->Start(seed));
      }, nb::arg("seed"), "Forget the last utterance: the caches after the voice prompt; HiFT's noise from seed.")
      .def("decode", [](Token2WavHandle& h, const std::vector<int32_t>& codes, bool last) {
        Result<std::vector<float>> r = Status::Error("internal", "not run");
        {
          nb::gil_scoped_release release;
          r = h.engine->Decode(codes, last);
        }
        const std::vector<float> pcm = Unwrap(std::move(r));
        return nb::bytes(reinterpret_cast<const char*>(pcm.data()), pcm.size() * sizeof(float));
      }, nb::arg("codes"), nb::arg("last"), "One window (carried codes, then new ones): its float32 samples.")
      .def("placements", [](const Token2WavHandle& h) { return PlacementList(h.engine->placements()); },
           nb::sig("def placements(self) -> list[dict[str, str | int]]"));
}

// A session over any plan, and the fields its requests may carry.
void BindSession(nb::module_& m) {
  m.def("request_schema", []() { return pipeline::RequestSchema().dump(); },
        "Every field a session request may carry, with its default (JSON).");

  nb::class_<pipeline::Session>(m, "Session")
      .def_static("open", &OpenSession, nb::arg("plan_path"), nb::arg("allow_unqualified") = false, nb::arg("threads") = 0,
                  "Any plan: verifies its artifacts, admits its memory budget, loads every stage.")
      .def("submit", [](pipeline::Session& s, const std::string& request_json, nb::callable on_event) {
        const pipeline::Request request = Unwrap(pipeline::RequestFromJson(Parse(request_json, "request")));
        Result<Json> result = Status::Error("internal", "not run");
        PythonConsumer consumer;
        {
          nb::gil_scoped_release release;
          result = s.Submit(request, [&](const pipeline::SessionEvent& ev) {
            return consumer([&] { return on_event(ev.stream, ev.json.dump(), PayloadBytes(ev)); });
          });
        }
        consumer.Raise();
        return Unwrap(std::move(result)).dump();
      }, nb::arg("request_json"), nb::arg("on_event"),
         nb::sig("def submit(self, request_json: str, on_event: typing.Callable[[str, str, bytes | None], object]) -> str"),
         "Run one request; on_event(stream, event_json, payload) sees every event, one at a time, and may return False "
         "to cancel. Returns each stream's terminal fields (JSON).")
      .def("cancel", &pipeline::Session::Cancel)
      .def("abort", &pipeline::Session::Abort)
      .def("reset", [](pipeline::Session& s) { Check(s.Reset()); })
      .def("info", [](const pipeline::Session& s) { return s.Info().dump(); })
      .def("tokenize", [](const pipeline::Session& s, const std::string& text) { return Unwrap(s.Tokenize(text)); })
      .def_prop_ro("epoch", &pipeline::Session::epoch)
      .def("placements", [](const pipeline::Session& s) { return PlacementList(s.placements()); },
           nb::sig("def placements(self) -> list[dict[str, str | int]]"));
}

// A mailbox in front of a session.
void BindLatestQueue(nb::module_& m) {
  nb::class_<QueueHandle>(m, "LatestQueue")
      .def("__init__", [](QueueHandle* self, pipeline::Session& session) {
        new (self) QueueHandle{std::make_unique<pipeline::LatestQueue>(session)};
      }, nb::arg("session"), nb::keep_alive<1, 2>(),
         "A mailbox in front of a session: a posted request still waiting when a newer one is posted is superseded.")
      .def("post", &QueueHandle::Post, nb::arg("request_json"), nb::arg("on_event").none(), nb::arg("on_done").none(),
           nb::sig("def post(self, request_json: str, on_event: typing.Callable[[str, str, bytes | None], object] | None, "
                   "on_done: typing.Callable[[str | None, str | None, str | None], object] | None) -> None"),
           "Queue a request; on_event(stream, event_json, payload) and then on_done(terminal_json, None, None) or "
           "on_done(None, reason, message) run on the queue's thread (reason 'superseded': it never ran).")
      .def("counters", [](const QueueHandle& h) { return h.queue ? h.queue->Counters().dump() : std::string("{}"); })
      .def("close", &QueueHandle::Close, "Supersede the waiting request and wait for the running one to end.");
}

// One stage's event stream (the contract's backpressure and acknowledgements).
void BindEventStream(nb::module_& m) {
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
}

// The stage controller: requests, events and state releases across stages.
void BindStageController(nb::module_& m) {
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

}  // namespace

NB_MODULE(_native, m) {
  m.doc() = "omni-edge native controller core (stage contract v2)";
  m.attr("__version__") = OMNI_EDGE_VERSION;
  m.attr("PROTOCOL_VERSION") = kCurrentProtocol;
  RegisterContractError();
  BindContractValues(m);
  BindManifest(m);
  BindHost(m);
  BindPlayback(m);
  BindMedia(m);
  BindMemoryBudget(m);
  BindTokenizer(m);
  BindLlmEngine(m);
  BindToken2Wav(m);
  BindSession(m);
  BindLatestQueue(m);
  BindEventStream(m);
  BindStageController(m);
}
