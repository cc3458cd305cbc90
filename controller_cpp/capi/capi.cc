// The C ABI over the controller's C++ API. Nothing may throw across this boundary: each
// entry point converts Status to OeError and catches anything unexpected as "internal".
#include "capi/omni_edge.h"

#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"
#include "contract/codec.h"
#include "contract/features.h"
#include "contract/manifest.h"
#include "models/llm/llm_session.h"
#include "models/omni/omni_session.h"
#include "models/speech/speech_session.h"
#include "runtime/admission.h"

struct OeError {
  std::string reason;
  std::string message;
};

struct OeLedger {
  OeLedger(std::map<std::string, int64_t> pools, bool on_wsl) : ledger(std::move(pools)), wsl(on_wsl) {}
  omni_edge::AdmissionLedger ledger;
  bool wsl = false;
};

struct OeSession {
  std::unique_ptr<omni_edge::llm::LlmSession> session;
  OeLedger* ledger = nullptr;
  int64_t reservation = 0;
  ~OeSession() {
    session.reset();  // the runtimes have let go of their memory: the reservation is drained
    if (ledger != nullptr) (void)ledger->ledger.Release(reservation, true);
  }
};

struct OeSpeech {
  std::unique_ptr<omni_edge::speech::SpeechSession> session;
  OeLedger* ledger = nullptr;
  int64_t reservation = 0;
  ~OeSpeech() {
    session.reset();
    if (ledger != nullptr) (void)ledger->ledger.Release(reservation, true);
  }
};

struct OeOmni {
  std::unique_ptr<omni_edge::omni::OmniSession> session;
  OeLedger* ledger = nullptr;
  int64_t reservation = 0;
  ~OeOmni() {
    session.reset();
    if (ledger != nullptr) (void)ledger->ledger.Release(reservation, true);
  }
};

namespace {

OeError* ToError(const omni_edge::Status& status) {
  if (status.ok()) return nullptr;
  return std::make_unique<OeError>(OeError{status.reason(), status.message()}).release();
}

char* CopyString(const std::string& text) {
  auto out = std::make_unique<char[]>(text.size() + 1);
  std::memcpy(out.get(), text.c_str(), text.size() + 1);
  return out.release();
}

template <typename Fn>
OeError* Guard(Fn&& fn) {
  try {
    return ToError(fn());
  } catch (const std::exception& e) {
    return ToError(omni_edge::Status::Error("internal", e.what()));
  } catch (...) {
    return ToError(omni_edge::Status::Error("internal", "unknown failure"));
  }
}

}  // namespace

extern "C" {

const char* oe_version(void) { return OMNI_EDGE_VERSION; }
int oe_protocol_version(void) { return omni_edge::contract::kCurrentProtocol; }

const char* oe_error_reason(const OeError* error) { return error ? error->reason.c_str() : ""; }
const char* oe_error_message(const OeError* error) { return error ? error->message.c_str() : ""; }
void oe_error_free(OeError* error) { std::unique_ptr<OeError> owned(error); }
void oe_string_free(char* text) { std::unique_ptr<char[]> owned(text); }

OeError* oe_manifest_verify(const char* directory, char** out_json, int* out_qualified) {
  return Guard([&]() -> omni_edge::Status {
    if (directory == nullptr || out_json == nullptr) {
      return omni_edge::Status::Error("invalid_argument", "directory and out_json are required");
    }
    *out_json = nullptr;
    auto verified = omni_edge::contract::ReadManifest(directory);
    if (!verified.ok()) return verified.status();
    *out_json = CopyString(omni_edge::contract::ToJson(verified.value()).dump());
    if (out_qualified != nullptr) *out_qualified = verified->qualified() ? 1 : 0;
    return omni_edge::Status::Ok();
  });
}

OeError* oe_contract_canonical_json(const char* type_name, const char* json_text, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (type_name == nullptr || json_text == nullptr || out_json == nullptr) {
      return omni_edge::Status::Error("invalid_argument", "type_name, json_text and out_json are required");
    }
    *out_json = nullptr;
    auto canonical = omni_edge::contract::CanonicalJson(type_name, json_text);
    if (!canonical.ok()) return canonical.status();
    *out_json = CopyString(canonical.value());
    return omni_edge::Status::Ok();
  });
}

void oe_session_config_default(OeSessionConfig* config) {
  if (config != nullptr) *config = OeSessionConfig{nullptr, 0, 0, nullptr};
}

}  // extern "C"

namespace {

// Admission before loading: the plan's own memory cap, and the ledger's reservation (0 if
// there is no ledger). Then opens the session with `open`, releasing the reservation if that fails.
template <typename Handle, typename Open>
omni_edge::Status OpenAdmitted(const OeSessionConfig* config, Handle** out, Open open) {
  if (config == nullptr || config->plan_path == nullptr || out == nullptr) {
    return omni_edge::Status::Error("invalid_argument", "config.plan_path and the output handle are required");
  }
  *out = nullptr;
  int64_t reservation = 0;
  auto plan = omni_edge::LoadPlan(config->plan_path);
  if (!plan.ok()) return plan.status();
  if (config->ledger != nullptr || plan.value().memory_budget_mb) {
    auto budget = omni_edge::EstimatePlanBudget(plan.value(), 1, config->ledger != nullptr && config->ledger->wsl);
    if (!budget.ok()) return budget.status();
    OE_RETURN_IF_ERROR(omni_edge::CheckMemoryBudget(plan.value(), budget.value()));
    if (config->ledger != nullptr) {
      auto reserved = config->ledger->ledger.Reserve(plan.value().path, budget.value().per_pool());
      if (!reserved.ok()) return reserved.status();
      reservation = reserved.value();
    }
  }
  omni_edge::llm::SessionOptions options;
  options.allow_unqualified = config->allow_unqualified != 0;
  if (config->threads > 0) options.backend_options["threads"] = std::to_string(config->threads);
  auto session = open(std::move(plan).value(), options);
  if (!session.ok()) {
    if (config->ledger != nullptr) (void)config->ledger->ledger.Release(reservation, true);
    return session.status();
  }
  auto owned = std::make_unique<Handle>();
  owned->session = std::move(session).value();
  owned->ledger = config->ledger;
  owned->reservation = reservation;
  *out = owned.release();
  return omni_edge::Status::Ok();
}

std::optional<omni_edge::llm::SamplingParams> SamplingOf(const OeSampling& s) {
  if (s.use_plan_sampling) return std::nullopt;
  return omni_edge::llm::SamplingParams{s.temperature, s.top_k, s.top_p, s.min_p, s.repetition_penalty, s.seed};
}

void DefaultSampling(OeSampling* s) {
  *s = OeSampling{};
  s->use_plan_sampling = 1;
  s->top_p = 1.0f;
  s->repetition_penalty = 1.0f;
}

omni_edge::llm::GenerateRequest GenerateRequestOf(const OeGenerateParams* p) {
  omni_edge::llm::GenerateRequest r;
  if (p->prompt != nullptr) r.prompt = p->prompt;
  r.chat = p->chat != 0;
  if (p->system_prompt != nullptr) r.system_prompt = p->system_prompt;
  if (p->prompt_ids != nullptr && p->n_prompt_ids > 0) r.prompt_ids.assign(p->prompt_ids, p->prompt_ids + p->n_prompt_ids);
  r.continue_conversation = p->continue_conversation != 0;
  r.max_new_tokens = p->max_new_tokens;
  r.sampling = SamplingOf(p->sampling);
  for (int i = 0; p->stop_strings != nullptr && i < p->n_stop_strings; ++i) {
    if (p->stop_strings[i] != nullptr) r.stop_strings.emplace_back(p->stop_strings[i]);
  }
  r.ignore_stop_tokens = p->ignore_stop_tokens != 0;
  return r;
}

omni_edge::speech::SpeakRequest SpeakRequestOf(const OeSpeakParams* p) {
  omni_edge::speech::SpeakRequest r;
  if (p->text != nullptr) r.text = p->text;
  if (p->text_ids != nullptr && p->n_text_ids > 0) r.text_ids.assign(p->text_ids, p->text_ids + p->n_text_ids);
  r.max_frames = p->max_frames;
  r.prebuffer_ms = p->prebuffer_ms;
  r.sampling = SamplingOf(p->sampling);
  return r;
}

int CallSpeech(OeSpeechCallback on_event, const omni_edge::speech::SpeechEvent& ev, void* user_data) {
  if (on_event == nullptr) return 0;
  const void* pcm = ev.kind == "pcm" ? static_cast<const void*>(ev.pcm.data()) : nullptr;
  return on_event(ev.ToJson().dump().c_str(), pcm, ev.n_samples, user_data);
}

omni_edge::Json PlacementsJson(const std::vector<omni_edge::Placement>& placements) {
  omni_edge::Json out = omni_edge::Json::array();
  for (const auto& p : placements) {
    out.push_back({{"graph", p.graph}, {"backend", p.backend}, {"device", p.device}, {"engine", p.engine},
                   {"nodes_on_engine", p.nodes_on_engine}, {"nodes_elsewhere", p.nodes_elsewhere}, {"detail", p.detail}});
  }
  return out;
}

}  // namespace

extern "C" {

OeError* oe_session_open(const OeSessionConfig* config, OeSession** out_session) {
  return Guard([&]() -> omni_edge::Status {
    return OpenAdmitted(config, out_session, [](omni_edge::Plan plan, const omni_edge::llm::SessionOptions& options) {
      return omni_edge::llm::LlmSession::Open(std::move(plan), options);
    });
  });
}

OeError* oe_ledger_create(const char* pools_json, OeLedger** out_ledger) {
  return Guard([&]() -> omni_edge::Status {
    if (out_ledger == nullptr) return omni_edge::Status::Error("invalid_argument", "out_ledger is required");
    *out_ledger = nullptr;
    bool wsl = false;
    std::map<std::string, int64_t> pools = omni_edge::DetectPools(&wsl);
    if (pools_json != nullptr) {
      auto j = omni_edge::ParseJson(pools_json, "pools");
      if (!j.ok()) return j.status();
      auto parsed = omni_edge::PoolsFromJson(j.value());
      if (!parsed.ok()) return parsed.status();
      pools = parsed.value();
      wsl = pools.count("wsl_quota") > 0;
    }
    *out_ledger = std::make_unique<OeLedger>(pools, wsl).release();
    return omni_edge::Status::Ok();
  });
}

void oe_ledger_free(OeLedger* ledger) { std::unique_ptr<OeLedger> owned(ledger); }

OeError* oe_ledger_snapshot(const OeLedger* ledger, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (ledger == nullptr || out_json == nullptr) return omni_edge::Status::Error("invalid_argument", "ledger and out_json are required");
    *out_json = CopyString(ledger->ledger.Snapshot().dump());
    return omni_edge::Status::Ok();
  });
}

OeError* oe_plan_budget(const char* plan_path, int sessions, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (plan_path == nullptr || out_json == nullptr) return omni_edge::Status::Error("invalid_argument", "plan_path and out_json are required");
    auto plan = omni_edge::LoadPlan(plan_path);
    if (!plan.ok()) return plan.status();
    bool wsl = false;
    omni_edge::DetectPools(&wsl);
    auto budget = omni_edge::EstimatePlanBudget(plan.value(), sessions, wsl);
    if (!budget.ok()) return budget.status();
    *out_json = CopyString(omni_edge::ToJson(budget.value()).dump());
    return omni_edge::Status::Ok();
  });
}

void oe_session_close(OeSession* session) { std::unique_ptr<OeSession> owned(session); }

void oe_generate_params_default(OeGenerateParams* p) {
  if (p == nullptr) return;
  *p = OeGenerateParams{};
  DefaultSampling(&p->sampling);
}

OeError* oe_session_generate(OeSession* session, const OeGenerateParams* p, OeEventCallback on_event, void* user_data) {
  return Guard([&]() -> omni_edge::Status {
    if (session == nullptr || p == nullptr) return omni_edge::Status::Error("invalid_argument", "session and params are required");
    auto result = session->session->Generate(GenerateRequestOf(p), [&](const omni_edge::llm::OutputEvent& ev) {
      if (on_event == nullptr) return true;
      return on_event(ev.ToJson().dump().c_str(), user_data) == 0;
    });
    return result.ok() ? omni_edge::Status::Ok() : result.status();
  });
}

void oe_session_cancel(OeSession* session) {
  if (session != nullptr) session->session->Cancel();
}

void oe_session_abort(OeSession* session) {
  if (session != nullptr) session->session->Abort();
}

OeError* oe_session_reset(OeSession* session) {
  return Guard([&]() -> omni_edge::Status {
    if (session == nullptr) return omni_edge::Status::Error("invalid_argument", "session is required");
    return session->session->Reset();
  });
}

OeError* oe_session_info(OeSession* session, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (session == nullptr || out_json == nullptr) return omni_edge::Status::Error("invalid_argument", "session and out_json are required");
    omni_edge::Json info = {{"plan", session->session->plan().path}, {"placements", PlacementsJson(session->session->placements())}};
    *out_json = CopyString(info.dump());
    return omni_edge::Status::Ok();
  });
}

void oe_speech_close(OeSpeech* speech) { std::unique_ptr<OeSpeech> owned(speech); }

OeError* oe_speech_open(const OeSessionConfig* config, OeSpeech** out_speech) {
  return Guard([&]() -> omni_edge::Status {
    return OpenAdmitted(config, out_speech, [](omni_edge::Plan plan, const omni_edge::llm::SessionOptions& options) {
      return omni_edge::speech::SpeechSession::Open(std::move(plan), options);
    });
  });
}

void oe_speak_params_default(OeSpeakParams* p) {
  if (p == nullptr) return;
  *p = OeSpeakParams{};
  DefaultSampling(&p->sampling);
  p->prebuffer_ms = omni_edge::speech::kDefaultPrebufferMs;
}

OeError* oe_speech_speak(OeSpeech* speech, const OeSpeakParams* p, OeSpeechCallback on_event, void* user_data) {
  return Guard([&]() -> omni_edge::Status {
    if (speech == nullptr || p == nullptr) return omni_edge::Status::Error("invalid_argument", "speech and params are required");
    auto result = speech->session->Speak(SpeakRequestOf(p), [&](const omni_edge::speech::SpeechEvent& ev) {
      return CallSpeech(on_event, ev, user_data) == 0;
    });
    return result.ok() ? omni_edge::Status::Ok() : result.status();
  });
}

void oe_speech_cancel(OeSpeech* speech) {
  if (speech != nullptr) speech->session->Cancel();
}

OeError* oe_speech_info(OeSpeech* speech, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (speech == nullptr || out_json == nullptr) return omni_edge::Status::Error("invalid_argument", "speech and out_json are required");
    const auto& s = *speech->session;
    omni_edge::Json info = {{"plan", s.plan().path},      {"sample_rate", s.sample_rate()},
                            {"pcm_dtype", s.pcm_dtype()}, {"code_groups", s.code_groups()},
                            {"placements", PlacementsJson(s.placements())}, {"codes", s.frames()}};
    *out_json = CopyString(info.dump());
    return omni_edge::Status::Ok();
  });
}

void oe_omni_close(OeOmni* omni) { std::unique_ptr<OeOmni> owned(omni); }

OeError* oe_omni_open(const OeSessionConfig* config, OeOmni** out_omni) {
  return Guard([&]() -> omni_edge::Status {
    return OpenAdmitted(config, out_omni, [](omni_edge::Plan plan, const omni_edge::llm::SessionOptions& options) {
      return omni_edge::omni::OmniSession::Open(std::move(plan), options);
    });
  });
}

OeError* oe_omni_run(OeOmni* omni, const OeGenerateParams* text, const OeSpeakParams* speech, OeEventCallback on_text,
                     OeSpeechCallback on_audio, void* user_data) {
  return Guard([&]() -> omni_edge::Status {
    if (omni == nullptr || text == nullptr || speech == nullptr) {
      return omni_edge::Status::Error("invalid_argument", "omni, text and speech params are required");
    }
    omni_edge::omni::OmniRequest request{GenerateRequestOf(text), SpeakRequestOf(speech)};
    auto result = omni->session->Run(
        request,
        [&](const omni_edge::llm::OutputEvent& ev) {
          return on_text == nullptr || on_text(ev.ToJson().dump().c_str(), user_data) == 0;
        },
        [&](const omni_edge::speech::SpeechEvent& ev) { return CallSpeech(on_audio, ev, user_data) == 0; });
    return result.ok() ? omni_edge::Status::Ok() : result.status();
  });
}

void oe_omni_cancel(OeOmni* omni) {
  if (omni != nullptr) omni->session->Cancel();
}

OeError* oe_omni_info(OeOmni* omni, char** out_json) {
  return Guard([&]() -> omni_edge::Status {
    if (omni == nullptr || out_json == nullptr) return omni_edge::Status::Error("invalid_argument", "omni and out_json are required");
    auto& s = *omni->session;
    std::vector<omni_edge::Placement> placements = s.thinker().placements();
    for (const auto& p : s.speech().placements()) placements.push_back(p);
    omni_edge::Json info = {{"plan", s.speech().plan().path}, {"sample_rate", s.speech().sample_rate()},
                            {"pcm_dtype", s.speech().pcm_dtype()}, {"placements", PlacementsJson(placements)},
                            {"codes", s.speech().frames()}};
    *out_json = CopyString(info.dump());
    return omni_edge::Status::Ok();
  });
}

}  // extern "C"
