// omni_edge._native: the native stream, controller, codec and manifest reader for Python.
// Values cross as JSON text (the contract's own wire form), so the Python reference and the
// native controller are driven by the same objects. Refusals become the Python reference's
// ContractError; exceptions exist only here, at the Python boundary.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
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

std::optional<std::string> EventJson(const std::optional<StageEvent>& event) {
  if (!event) return std::nullopt;
  return ToJson(*event).dump();
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
          status = s.Submit(event, Deadline(timeout_s));
        }
        Check(status);
      }, nb::arg("event_json"), nb::arg("timeout_s") = nb::none())
      .def("close", &EventStream::Close)
      .def("try_receive", [](EventStream& s) { return EventJson(s.TryReceive()); })
      .def("receive", [](EventStream& s, std::optional<double> timeout_s) {
        std::optional<StageEvent> event;
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
