// omni-edge-run: the native command line of the controller, built on the C ABI only.
//
//   omni-edge-run --version
//   omni-edge-run verify ARTIFACT_DIR
//   omni-edge-run budget PLAN [SESSIONS]
//   omni-edge-run [run] --plan PLAN (--prompt TEXT | --prompt-file F | --prompt-ids 1,2,3)
//                 [--image IMG]... [--audio WAV]... (a multimodal plan; media in the order given)
//                 [--chat] [--system TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]
//                 [--top-p P] [--min-p M] [--repetition-penalty R] [--seed S] [--stop STR]...
//                 [--ignore-stop-tokens] [--threads N] [--allow-unqualified] [--json] [--info]
//                 [--memory-pools auto|off|JSON] [--repeat N] [--profile] [--speak OUT.wav [--max-frames N]]
//   omni-edge-run speak --plan PLAN (--text TEXT | --text-ids 1,2,3) --out OUT.wav [--json] [--profile] ...
//   omni-edge-run serve --plan PLAN [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--max-sessions N]
//                 [--model ID] [--threads N] [--allow-unqualified] [--max-body-mb N] [--max-connections N]
//                 [--memory-pools JSON] (OpenAI chat/speech and OpenPI over HTTP; the key also from
//                 OMNI_EDGE_API_KEY; server/http_server.h)
//   omni-edge-run vad --plan PLAN --wav FILE [--threshold T] [--prefix-padding-ms N] [--silence-duration-ms N]
//                 [--min-speech-duration-ms N] [--chunk-ms N] [--frames] [--allow-unqualified] (the plan's
//                 voice activity detector over a file streamed in pieces: turn starts/ends as JSON lines)
//   omni-edge-run act --plan PLAN --observation OBS.json [--noise NOISE.npy] [--noise-seed S] [--reset-history]
//                 [--deadline-ms D] [--capture-age-ms A] [--json] ... (a policy plan: the last line is
//                 the action chunk; --capture-age-ms restamps the observation A ms before each request)
//
// One session API for every plan (text, speech, omni). Text streams to stdout; with --json every
// event is one JSON line (the last of each stream "done", "cancelled" or "error" with
// finish_reason and metrics; an omni plan's lines carry "stream"); audio goes into the WAV.
// --trace FILE writes the last request's trace (Chrome trace event JSON: stages, graph runs per
// device, waits) atomically. Ctrl-C (or SIGTERM/SIGHUP), even while loading, ends each stream with one "cancelled" line and
// exit code 128 + the signal, the audio streamed so far in the WAV (tools/run_session.h).
// Before loading, the plan's memory budget is reserved against this machine's available
// memory (--memory-pools auto) and refused with the numbers if it does not fit. --profile
// adds a first line {"kind":"session","load_ms",...} for the profiling harness; --repeat runs
// the same request N times on one loaded session (warm requests).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "base/platform/os.h"
#include "base/platform/process_stats.h"
#include "base/unicode/unicode.h"
#include "capi/omni_edge.h"
#include "tools/args.h"
#include "tools/observation_file.h"
#include "tools/run_session.h"
#include "tools/serve_command.h"
#include "tools/vad_command.h"

namespace {

using omni_edge::tools::Fail;

const char* const kUsage =
    "usage: omni-edge-run --version | --help\n"
    "       omni-edge-run verify ARTIFACT_DIR\n"
    "       omni-edge-run budget PLAN [SESSIONS]\n"
    "       omni-edge-run [run] --plan PLAN (--prompt TEXT | --prompt-file F | --prompt-ids 1,2,3)\n"
    "                     [--image IMG]... [--audio WAV]... (a multimodal plan; media in the order given)\n"
    "                     [--chat] [--system TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]\n"
    "                     [--top-p P] [--min-p M] [--repetition-penalty R] [--seed S] [--stop STR]...\n"
    "                     [--ignore-stop-tokens] [--threads N] [--allow-unqualified] [--json] [--info]\n"
    "                     [--memory-pools auto|off|JSON] [--repeat N] [--profile]\n"
    "                     [--speak OUT.wav [--max-frames N] [--prebuffer-ms MS]]   (an omni plan: also speak)\n"
    "       omni-edge-run speak --plan PLAN (--text TEXT | --text-ids 1,2,3) --out OUT.wav [--json]\n"
    "                     [--max-frames N] [--prebuffer-ms MS] [--temperature T] [--top-k K] [--top-p P]\n"
    "                     [--min-p M] [--repetition-penalty R] [--seed S] [--threads N] [--allow-unqualified]\n"
    "                     [--info] [--repeat N] [--profile] [--memory-pools auto|off|JSON]\n"
    "       omni-edge-run serve --plan PLAN [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--max-sessions N]\n"
    "                     [--model ID] [--threads N] [--allow-unqualified] [--max-body-mb N]\n"
    "                     [--max-connections N] [--memory-pools JSON]   (OpenAI and OpenPI over HTTP)\n"
    "       omni-edge-run vad --plan PLAN --wav FILE [--threshold T] [--prefix-padding-ms N]\n"
    "                     [--silence-duration-ms N] [--min-speech-duration-ms N] [--chunk-ms N] [--frames]\n"
    "                     [--allow-unqualified]   (the plan's voice activity detector: turn starts and ends)\n"
    "       omni-edge-run act --plan PLAN --observation OBS.json [--noise NOISE.npy] [--noise-seed S] [--reset-history]\n"
    "                     [--deadline-ms D] [--capture-age-ms A] [--json] [--threads N] [--allow-unqualified]\n"
    "                     [--info] [--repeat N] [--profile]\n"
    "                     (a policy plan: OBS.json {\"timestamp_ms\", \"images\": {camera: file}, \"state\", \"prompt\"};\n"
    "                      the action chunk, with --json its last line {\"kind\": \"action\", ...})\n"
    "       (run and speak: --sessions N opens, runs and closes N sessions in turn; --consumer-delay-ms MS\n"
    "        waits after each event, a slow consumer)\n"
    "       (run and speak: --trace FILE writes the last request's trace, Chrome trace JSON for ui.perfetto.dev)\n";

int Usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "omni-edge-run: %s\n", why);
  std::fputs(kUsage, stderr);
  return 2;
}

int Verify(const char* directory) {
  char* json = nullptr;
  int qualified = 0;
  if (OeError* error = oe_manifest_verify(directory, &json, &qualified)) return Fail(error);
  std::printf("%s\n", json);
  auto parsed = omni_edge::ParseJson(json, "verified");
  oe_string_free(json);
  std::string extra;
  if (parsed.ok()) {
    for (const auto& name : parsed->value("extra_files", omni_edge::Json::array())) extra += " " + name.get<std::string>();
  }
  std::fprintf(stderr, "%s: verified, %s%s%s\n", directory, qualified ? "qualified" : "NOT qualified",
               extra.empty() ? "" : "; not in the manifest:", extra.c_str());
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

// A media file given on the command line: why it cannot be read, or "".
std::string ReadableFile(const std::string& path) {
  std::error_code error;
  const auto status = std::filesystem::status(std::filesystem::u8path(path), error);
  if (error || !std::filesystem::exists(status)) return "no such file";
  if (!std::filesystem::is_regular_file(status)) return "not a regular file";
  return "";
}

// A prompt file: UTF-8 text without NUL bytes (the C ABI takes a C string, so a NUL would
// silently end the prompt there). Returns why not, or "".
std::string ReadPrompt(const std::string& path, std::string* out) {
  std::error_code error;
  const auto status = std::filesystem::status(std::filesystem::u8path(path), error);
  if (error) return "cannot read it: " + error.message();
  if (std::filesystem::is_directory(status)) return "is a directory";
  auto text = omni_edge::platform::ReadWholeFile(path);
  if (!text.ok()) return "cannot read it";
  *out = std::move(*text);
  if (const size_t nul = out->find('\0'); nul != std::string::npos) {
    return "holds a NUL byte at offset " + std::to_string(nul);
  }
  if (auto decoded = omni_edge::unicode::DecodeUtf8(*out); !decoded.ok()) return "is not UTF-8 text (" + decoded.status().message() + ")";
  return "";
}

// The session's trace of its last request, written beside the target and renamed into place.
bool WriteTrace(OeSession* session, const std::string& path) {
  char* json = nullptr;
  if (OeError* error = oe_session_trace_json(session, &json)) {
    Fail(error);
    return false;
  }
  std::string temporary;
  std::FILE* file = omni_edge::platform::CreateFileBeside(path, &temporary);
  bool ok = file != nullptr && std::fputs(json, file) >= 0 && omni_edge::platform::SyncFile(file);
  oe_string_free(json);
  if (file != nullptr) ok = std::fclose(file) == 0 && ok;
  ok = ok && omni_edge::platform::MoveIntoPlace(temporary, path);
  if (!ok) {
    if (!temporary.empty()) omni_edge::platform::RemoveFile(temporary);
    std::fprintf(stderr, "omni-edge-run: cannot write the trace to %s\n", path.c_str());
  }
  return ok;
}

// What `run` and `speak` read from the command line.
struct Invocation {
  OeSessionConfig config;
  OeRequest request;
  omni_edge::tools::Output out;
  std::string plan, prompt, system_prompt, pools = "off", trace_path;
  std::vector<std::string> stops;
  std::vector<std::pair<std::string, std::string>> media;  // (kind, path), in the order given
  std::vector<int32_t> ids;
  bool have_prompt = false, info = false, profile = false;
  int repeat = 1, sessions = 1;
};

// The flags both subcommands share; true if `a` was one.
bool CommonFlag(omni_edge::tools::ArgReader& args, const std::string& a, Invocation* in) {
  if (a == "--plan") in->plan = args.Value("--plan");
  else if (a == "--max-frames") in->request.max_frames = int(args.Whole("--max-frames", 0, 1 << 20));
  else if (a == "--threads") in->config.threads = int(args.Whole("--threads", 0, 1024));
  else if (a == "--allow-unqualified") in->config.allow_unqualified = 1;
  else if (a == "--json") in->out.json = true;
  else if (a == "--info") in->info = true;
  else if (a == "--repeat") in->repeat = int(args.Whole("--repeat", 1, 1e6));
  else if (a == "--profile") in->profile = true;
  else if (a == "--trace") in->trace_path = args.Value("--trace");
  else if (a == "--sessions") in->sessions = int(args.Whole("--sessions", 1, 100000));
  else if (a == "--consumer-delay-ms") in->out.consumer_delay_ms = int(args.Whole("--consumer-delay-ms", 0, 60000));
  else if (a == "--prebuffer-ms") in->request.prebuffer_ms = double(args.Whole("--prebuffer-ms", 0, 60000));
  else if (a == "--memory-pools") in->pools = args.Value("--memory-pools");
  else return false;
  return true;
}

// With --profile --json: a line when session `index` is open (its load time, RSS, the ledger's
// books), and one when it closed (RSS after), so repeated sessions show any growth.
void PrintSessionLine(const Invocation& in, OeLedger* ledger, int index, double load_ms) {
  if (!in.profile || !in.out.json) return;
  char* snapshot = nullptr;
  std::string reserved = "null";
  if (ledger != nullptr && oe_ledger_snapshot(ledger, &snapshot) == nullptr) {
    reserved = snapshot;
    oe_string_free(snapshot);
  }
  std::printf("{\"kind\":\"session\",\"session\":%d,\"pid\":%d,\"load_ms\":%.3f,\"rss_mb\":%.3f,\"ledger\":%s}\n", index,
              omni_edge::platform::ProcessId(), load_ms, omni_edge::CurrentRssMb(), reserved.c_str());
  std::fflush(stdout);
}

// Opens the plan's session, runs the requests, closes it; the exit code.
int RunSession(Invocation& in, OeLedger* ledger, int index) {
  const auto start = std::chrono::steady_clock::now();
  OeSession* session = nullptr;
  if (OeError* error = oe_session_open(&in.config, &session)) return omni_edge::tools::FailBeforeRun(error, in.out);
  PrintSessionLine(in, ledger, index, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  int rc = 0;
  if (in.info) {
    char* json = nullptr;
    if (OeError* error = oe_session_info(session, &json)) rc = Fail(error);
    else std::fprintf(stderr, "%s\n", json), oe_string_free(json);
  }
  if (rc == 0 && !in.trace_path.empty()) {
    if (OeError* error = oe_session_trace(session, 1)) rc = Fail(error);
  }
  if (rc == 0) rc = omni_edge::tools::RunRequests(session, in.request, in.out, in.repeat);
  if (!in.trace_path.empty() && !WriteTrace(session, in.trace_path) && rc == 0) rc = 1;
  oe_session_close(session);
  if (in.profile && in.out.json && in.sessions > 1) {
    std::printf("{\"kind\":\"session_closed\",\"session\":%d,\"rss_mb\":%.3f,\"heap_in_use_mb\":%.3f}\n", index,
                omni_edge::CurrentRssMb(), omni_edge::HeapInUseMb());
    std::fflush(stdout);
  }
  return rc;
}

int Execute(Invocation& in) {
  in.config.plan_path = in.plan.c_str();
  in.request.prompt = in.prompt.c_str();
  in.request.system_prompt = in.system_prompt.empty() ? nullptr : in.system_prompt.c_str();
  in.request.prompt_ids = in.ids.empty() ? nullptr : in.ids.data();
  in.request.n_prompt_ids = int(in.ids.size());
  std::vector<const char*> stop_ptrs;
  for (const auto& s : in.stops) stop_ptrs.push_back(s.c_str());
  in.request.stop_strings = stop_ptrs.data();
  in.request.n_stop_strings = int(stop_ptrs.size());
  std::vector<OeMedia> media;  // by path: the session reads each file when the request starts
  for (const auto& [kind, path] : in.media) media.push_back(OeMedia{kind.c_str(), nullptr, 0, path.c_str()});
  in.request.media = media.empty() ? nullptr : media.data();
  in.request.n_media = int(media.size());
  OeLedger* ledger = nullptr;
  if (in.pools != "off") {
    if (OeError* error = oe_ledger_create(in.pools == "auto" ? nullptr : in.pools.c_str(), &ledger)) return omni_edge::tools::FailBeforeRun(error, in.out);
    in.config.ledger = ledger;
  }
  int rc = 0;  // --sessions N: open, run and close N sessions one after another (a leak shows)
  for (int i = 0; i < in.sessions && rc == 0 && omni_edge::tools::CancelledBy() == 0; ++i) rc = RunSession(in, ledger, i);
  oe_ledger_free(ledger);
  return rc;
}

int Run(int argc, char** argv, int first) {
  Invocation in;
  oe_session_config_default(&in.config);
  oe_request_default(&in.request);
  in.pools = "auto";
  omni_edge::tools::ArgReader args(argc, argv, first);
  while (const char* flag = args.Next()) {
    const std::string a = flag;
    if (CommonFlag(args, a, &in)) continue;
    if (a == "--prompt") in.prompt = args.Value("--prompt"), in.have_prompt = true;
    else if (a == "--prompt-file") {
      const std::string path = args.Value("--prompt-file");
      if (std::string why = ReadPrompt(path, &in.prompt); !why.empty()) return Usage(("--prompt-file " + path + ": " + why).c_str());
      in.have_prompt = true;
    } else if (a == "--prompt-ids") {
      if (!omni_edge::tools::ParseIds(args.Value("--prompt-ids"), &in.ids)) return Usage("--prompt-ids takes comma-separated token ids");
      in.have_prompt = true;
    } else if (a == "--chat") in.request.chat = 1;
    else if (a == "--system") in.system_prompt = args.Value("--system");
    else if (a == "--max-new-tokens") in.request.max_new_tokens = int(args.Whole("--max-new-tokens", 0, 1 << 30));
    else if (omni_edge::tools::ReadSamplingFlag(args, a, &in.request.sampling)) continue;
    else if (a == "--stop") in.stops.emplace_back(args.Value("--stop"));
    else if (a == "--ignore-stop-tokens") in.request.ignore_stop_tokens = 1;
    else if (a == "--speak") in.out.wav_path = args.Value("--speak"), in.out.tag_streams = true;
    else if (a == "--image" || a == "--audio") {
      const std::string path = args.Value(a.c_str());
      if (std::string why = ReadableFile(path); !why.empty()) return Usage((a + " " + path + ": " + why).c_str());
      in.media.emplace_back(a.substr(2), path);
    } else return Usage(("unknown argument '" + a + "'").c_str());
  }
  if (in.plan.empty()) return Usage("--plan is required");
  if (!in.have_prompt) return Usage("one of --prompt, --prompt-file or --prompt-ids is required");
  return Execute(in);
}

int Speak(int argc, char** argv, int first) {
  Invocation in;
  oe_session_config_default(&in.config);
  oe_request_default(&in.request);
  omni_edge::tools::ArgReader args(argc, argv, first);
  while (const char* flag = args.Next()) {
    const std::string a = flag;
    if (CommonFlag(args, a, &in)) continue;
    if (a == "--text") in.prompt = args.Value("--text"), in.have_prompt = true;
    else if (a == "--text-ids") {
      if (!omni_edge::tools::ParseIds(args.Value("--text-ids"), &in.ids)) return Usage("speak: --text-ids takes comma-separated token ids");
      in.have_prompt = true;
    } else if (a == "--out") in.out.wav_path = args.Value("--out");
    else if (omni_edge::tools::ReadSamplingFlag(args, a, &in.request.speech_sampling)) continue;
    else return Usage(("speak: unknown argument '" + a + "'").c_str());
  }
  if (in.plan.empty()) return Usage("speak: --plan is required");
  if (!in.have_prompt) return Usage("speak: one of --text or --text-ids is required");
  if (in.out.wav_path.empty()) return Usage("speak: --out is required");
  return Execute(in);
}

// A file `act` reads was refused: the reason, no usage text; exit 2.
int Refuse(const std::string& why) {
  std::fprintf(stderr, "omni-edge-run: act: %s\n", why.c_str());
  return 2;
}

int Act(int argc, char** argv, int first) {
  Invocation in;
  oe_session_config_default(&in.config);
  oe_request_default(&in.request);
  in.pools = "auto";  // as run: the plan's budget is reserved against this machine's memory first
  std::string observation_path, noise_path;
  OeObservation obs{};
  omni_edge::tools::ArgReader args(argc, argv, first);
  while (const char* flag = args.Next()) {
    const std::string a = flag;
    if (CommonFlag(args, a, &in)) continue;
    if (a == "--observation") observation_path = args.Value("--observation");
    else if (a == "--noise") noise_path = args.Value("--noise");
    else if (a == "--noise-seed") obs.noise_seed = uint64_t(args.Whole("--noise-seed", 0, int64_t(1) << 62));
    else if (a == "--deadline-ms") in.request.deadline_ms = double(args.Whole("--deadline-ms", 0, 3600000));
    else if (a == "--reset-history") obs.reset_history = 1;
    else if (a == "--capture-age-ms") in.out.capture_age_ms = double(args.Whole("--capture-age-ms", 0, 3600000));
    else return Usage(("act: unknown argument '" + a + "'").c_str());
  }
  if (in.plan.empty() || observation_path.empty()) return Usage("act: --plan and --observation are required");
  auto file = omni_edge::tools::ReadObservationFile(observation_path);
  if (!file.ok()) return Refuse(file.status().message());
  omni_edge::tools::NpyFloat32 noise;
  if (!noise_path.empty()) {
    auto bytes = omni_edge::platform::ReadWholeFile(noise_path);
    if (!bytes.ok()) return Refuse("--noise " + bytes.status().message());
    auto parsed = omni_edge::tools::ParseNpyFloat32(bytes.value(), noise_path);
    if (!parsed.ok()) return Refuse(parsed.status().message());
    noise = std::move(parsed.value());
  }
  std::vector<OeCameraImage> images;
  for (const auto& [camera, path] : file->images) images.push_back(OeCameraImage{camera.c_str(), nullptr, 0, path.c_str()});
  obs.timestamp_ms = file->timestamp_ms;
  obs.reset_history = obs.reset_history || file->reset_history;
  obs.images = images.data();
  obs.n_images = int(images.size());
  obs.state = file->state.empty() ? nullptr : file->state.data();
  obs.n_state = int(file->state.size());
  obs.noise = noise.values.empty() ? nullptr : noise.values.data();
  obs.noise_rows = int(noise.rows);
  obs.noise_cols = int(noise.cols);
  in.request.observation = &obs;
  in.prompt = file->prompt;
  return Execute(in);
}

}  // namespace

int main(int argc, char** argv) {
  omni_edge::tools::InstallCancelSignals();  // before any loading: a Ctrl-C then still ends cleanly
  std::vector<std::string> utf8 = omni_edge::platform::CommandLineArguments(argc, argv);
  std::vector<char*> utf8_argv;
  for (std::string& a : utf8) utf8_argv.push_back(a.data());
  utf8_argv.push_back(nullptr);
  argc = int(utf8.size());
  argv = utf8_argv.data();
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("omni-edge-run %s (stage contract protocol %d)\n", oe_version(), oe_protocol_version());
    return 0;
  }
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "verify") == 0) {
    return argc == 3 ? Verify(argv[2]) : Usage("verify takes one artifact directory");
  }
  if (argc >= 2 && std::strcmp(argv[1], "budget") == 0) {
    return argc == 3 || argc == 4 ? Budget(argv[2], argc == 4 ? argv[3] : nullptr) : Usage("budget takes PLAN [SESSIONS]");
  }
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0) return Run(argc, argv, 2);
  if (argc >= 2 && std::strcmp(argv[1], "speak") == 0) return Speak(argc, argv, 2);
  if (argc >= 2 && std::strcmp(argv[1], "act") == 0) return Act(argc, argv, 2);
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) return omni_edge::tools::ServeCommand(argc, argv, 2);
  if (argc >= 2 && std::strcmp(argv[1], "vad") == 0) return omni_edge::tools::VadCommand(argc, argv, 2);
  if (argc >= 2 && argv[1][0] == '-') return Run(argc, argv, 1);
  return Usage(nullptr);
}
