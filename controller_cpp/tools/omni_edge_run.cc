// omni-edge-run: the native command line of the controller, built on the C ABI only.
//
//   omni-edge-run --version
//   omni-edge-run verify ARTIFACT_DIR
//   omni-edge-run budget PLAN [SESSIONS]
//   omni-edge-run [run] --plan PLAN (--prompt TEXT | --prompt-file F | --prompt-ids 1,2,3)
//                 [--chat] [--system TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]
//                 [--top-p P] [--min-p M] [--repetition-penalty R] [--seed S] [--stop STR]...
//                 [--ignore-stop-tokens] [--threads N] [--allow-unqualified] [--json] [--info]
//                 [--memory-pools auto|off|JSON] [--repeat N] [--profile] [--speak OUT.wav [--max-frames N]]
//   omni-edge-run speak --plan PLAN (--text TEXT | --text-ids 1,2,3) --out OUT.wav [--json] ...
//
// Text streams to stdout; with --json every event is one JSON line (the last one "done",
// "cancelled" or "error" with finish_reason and metrics). Ctrl-C cancels at the next token.
// Before loading, the plan's memory budget is reserved against this machine's available
// memory (--memory-pools auto) and refused with the numbers if it does not fit. --profile
// adds a first line {"kind":"session","load_ms",...} for the profiling harness; --repeat runs
// the same request N times on one loaded session (warm requests).
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "base/json_fields.h"
#include "capi/omni_edge.h"
#include "tools/args.h"
#include "tools/speak.h"

namespace {

OeSession* g_session = nullptr;
volatile std::sig_atomic_t g_interrupted = 0;

void OnSigint(int) {
  g_interrupted = 1;  // also ends a --repeat loop: each request resets the session's cancel flag
  if (g_session != nullptr) oe_session_cancel(g_session);  // only sets an atomic flag
}

int Usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "omni-edge-run: %s\n", why);
  std::fprintf(stderr,
               "usage: omni-edge-run --version\n"
               "       omni-edge-run verify ARTIFACT_DIR\n"
               "       omni-edge-run budget PLAN [SESSIONS]\n"
               "       omni-edge-run [run] --plan PLAN (--prompt TEXT | --prompt-file F | --prompt-ids 1,2,3)\n"
               "                     [--chat] [--system TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]\n"
               "                     [--top-p P] [--min-p M] [--repetition-penalty R] [--seed S] [--stop STR]...\n"
               "                     [--ignore-stop-tokens] [--threads N] [--allow-unqualified] [--json] [--info]\n"
               "                     [--memory-pools auto|off|JSON] [--repeat N] [--profile]\n"
               "                     [--speak OUT.wav [--max-frames N]]   (an omni plan: also speak the reply)\n"
               "       omni-edge-run speak --plan PLAN (--text TEXT | --text-ids 1,2,3) --out OUT.wav [--json] ...\n");
  return 2;
}

int Fail(OeError* error) {
  std::fprintf(stderr, "omni-edge-run: %s: %s\n", oe_error_reason(error), oe_error_message(error));
  oe_error_free(error);
  return 1;
}

int Verify(const char* directory) {
  char* json = nullptr;
  int qualified = 0;
  if (OeError* error = oe_manifest_verify(directory, &json, &qualified)) return Fail(error);
  std::printf("%s\n", json);
  oe_string_free(json);
  std::fprintf(stderr, "%s: verified, %s\n", directory, qualified ? "qualified" : "NOT qualified");
  return qualified ? 0 : 1;
}

int Budget(const char* plan, const char* sessions_text) {
  char* end = nullptr;
  const long sessions = sessions_text == nullptr ? 1 : std::strtol(sessions_text, &end, 10);
  if (sessions_text != nullptr && (*end != '\0' || sessions < 1 || sessions > 1024)) {
    return Usage("budget: SESSIONS is a count from 1 to 1024");
  }
  char* json = nullptr;
  if (OeError* error = oe_plan_budget(plan, int(sessions), &json)) return Fail(error);
  std::printf("%s\n", json);
  oe_string_free(json);
  return 0;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Output {
  bool json = false;
  std::string finish_reason;
  std::string summary;
};

int OnEvent(const char* event_json, void* user_data) {
  auto* out = static_cast<Output*>(user_data);
  if (out->json) {
    std::printf("%s\n", event_json);
    std::fflush(stdout);
    return 0;
  }
  auto parsed = omni_edge::ParseJson(event_json, "event");
  if (!parsed.ok()) return 0;
  const auto& e = parsed.value();
  if (e.value("kind", "") == "token") {
    std::fputs(e.value("text", "").c_str(), stdout);
    std::fflush(stdout);
  } else {
    out->finish_reason = e.value("finish_reason", "");
    char line[512];
    std::snprintf(line, sizeof line,
                  "\n[%s: %s] prompt %lld tok, generated %lld tok, TTFT %.1f ms, prefill %.1f tok/s, "
                  "decode %.2f tok/s, peak RSS %.0f MB%s%s\n",
                  e.value("kind", "").c_str(), out->finish_reason.c_str(),
                  static_cast<long long>(e.value("n_prompt_tokens", int64_t(0))),
                  static_cast<long long>(e.value("n_generated_tokens", int64_t(0))), e.value("ttft_ms", 0.0),
                  e.value("prefill_tok_s", 0.0), e.value("decode_tok_s", 0.0), e.value("peak_rss_mb", 0.0),
                  e.contains("error") ? ", error: " : "", e.value("error", "").c_str());
    out->summary = line;
  }
  return 0;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}


int Run(int argc, char** argv, int first) {
  OeSessionConfig config;
  oe_session_config_default(&config);
  OeGenerateParams params;
  oe_generate_params_default(&params);
  Output out;
  std::string prompt, system_prompt, plan;
  std::vector<std::string> stops;
  std::vector<int32_t> ids;
  bool info = false, have_prompt = false, profile = false;
  std::string pools = "auto", speak_path;
  int repeat = 1, max_frames = 0;
  omni_edge::tools::ArgReader args(argc, argv, first);
  while (const char* flag = args.Next()) {
    const std::string a = flag;
    if (a == "--plan") plan = args.Value("--plan");
    else if (a == "--prompt") prompt = args.Value("--prompt"), have_prompt = true;
    else if (a == "--prompt-file") {
      const char* path = args.Value("--prompt-file");
      if (!ReadFile(path, &prompt)) return Usage("cannot read the prompt file");
      have_prompt = true;
    } else if (a == "--prompt-ids") {
      if (!omni_edge::tools::ParseIds(args.Value("--prompt-ids"), &ids)) return Usage("--prompt-ids takes comma-separated token ids");
      have_prompt = true;
    } else if (a == "--chat") params.chat = 1;
    else if (a == "--system") system_prompt = args.Value("--system");
    else if (a == "--max-new-tokens") params.max_new_tokens = int(args.Whole("--max-new-tokens", 0, 1 << 30));
    else if (ReadSamplingFlag(args, a, &params.sampling)) continue;
    else if (a == "--stop") stops.emplace_back(args.Value("--stop"));
    else if (a == "--ignore-stop-tokens") params.ignore_stop_tokens = 1;
    else if (a == "--threads") config.threads = int(args.Whole("--threads", 0, 1024));
    else if (a == "--allow-unqualified") config.allow_unqualified = 1;
    else if (a == "--json") out.json = true;
    else if (a == "--info") info = true;
    else if (a == "--profile") profile = true;
    else if (a == "--memory-pools") pools = args.Value("--memory-pools");
    else if (a == "--speak") speak_path = args.Value("--speak");
    else if (a == "--max-frames") max_frames = int(args.Whole("--max-frames", 0, 1 << 20));
    else if (a == "--repeat") {
      repeat = int(args.Whole("--repeat", 1, 1e6));
    }
    else return Usage(("unknown argument '" + a + "'").c_str());
  }
  if (plan.empty()) return Usage("--plan is required");
  if (!have_prompt) return Usage("one of --prompt, --prompt-file or --prompt-ids is required");
  config.plan_path = plan.c_str();
  std::vector<const char*> stop_ptrs;
  for (const auto& s : stops) stop_ptrs.push_back(s.c_str());
  params.prompt = prompt.c_str();
  params.system_prompt = system_prompt.empty() ? nullptr : system_prompt.c_str();
  params.prompt_ids = ids.empty() ? nullptr : ids.data();
  params.n_prompt_ids = int(ids.size());
  params.stop_strings = stop_ptrs.data();
  params.n_stop_strings = int(stop_ptrs.size());
  if (!speak_path.empty()) {  // an omni plan: the reply is also spoken
    const int rc = omni_edge::tools::RunOmni(config, params, max_frames, speak_path, out.json, OnEvent, &out);
    if (!out.json) std::fputs(out.summary.c_str(), stderr);
    return rc;
  }
  const auto start = std::chrono::steady_clock::now();
  OeLedger* ledger = nullptr;
  if (pools != "off") {
    if (OeError* error = oe_ledger_create(pools == "auto" ? nullptr : pools.c_str(), &ledger)) return Fail(error);
    config.ledger = ledger;
  }
  OeSession* session = nullptr;
  if (OeError* error = oe_session_open(&config, &session)) {
    oe_ledger_free(ledger);
    return Fail(error);
  }
  if (profile && out.json) {
    char* snapshot = nullptr;
    std::string reserved = "null";
    if (ledger != nullptr && oe_ledger_snapshot(ledger, &snapshot) == nullptr) {
      reserved = snapshot;
      oe_string_free(snapshot);
    }
    std::printf("{\"kind\":\"session\",\"pid\":%d,\"load_ms\":%.3f,\"ledger\":%s}\n", int(getpid()), MsSince(start),
                reserved.c_str());
    std::fflush(stdout);
  }
  if (info) {
    char* json = nullptr;
    if (OeError* error = oe_session_info(session, &json)) return Fail(error);
    std::fprintf(stderr, "%s\n", json);
    oe_string_free(json);
  }
  g_session = session;
  std::signal(SIGINT, OnSigint);
  OeError* error = nullptr;
  for (int i = 0; i < repeat && error == nullptr && !g_interrupted; ++i) {
    error = oe_session_generate(session, &params, OnEvent, &out);
  }
  g_session = nullptr;
  oe_session_close(session);
  oe_ledger_free(ledger);
  if (!out.json) std::fputs(out.summary.c_str(), stderr);
  if (error != nullptr) return Fail(error);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("omni-edge-run %s (stage contract protocol %d)\n", oe_version(), oe_protocol_version());
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "verify") == 0) {
    return argc == 3 ? Verify(argv[2]) : Usage("verify takes one artifact directory");
  }
  if (argc >= 2 && std::strcmp(argv[1], "budget") == 0) {
    return argc == 3 || argc == 4 ? Budget(argv[2], argc == 4 ? argv[3] : nullptr) : Usage("budget takes PLAN [SESSIONS]");
  }
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0) return Run(argc, argv, 2);
  if (argc >= 2 && std::strcmp(argv[1], "speak") == 0) return omni_edge::tools::Speak(argc, argv, 2);
  if (argc >= 2 && argv[1][0] == '-') return Run(argc, argv, 1);
  return Usage(nullptr);
}
