#include "tools/vad_command.h"

#include <cstdio>
#include <string>

#include "base/json_fields.h"
#include "base/platform/os.h"
#include "base/wav.h"
#include "capi/omni_edge.h"
#include "tools/args.h"

namespace omni_edge::tools {
namespace {

struct VadOptions {
  std::string plan, wav;
  Json turn = Json::object();
  int64_t chunk_ms = 20;  // a client's append size
  bool frames = false, allow_unqualified = false;
};

void Print(const Json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

int Fail(const std::string& reason, const std::string& message) {
  Print({{"kind", "error"}, {"reason", reason}, {"message", message}});
  return 1;
}

int Fail(OeError* e) {
  const int rc = Fail(oe_error_reason(e), oe_error_message(e));
  oe_error_free(e);
  return rc;
}

// Takes the JSON a C ABI call returned.
Json Take(char* text) {
  Json j = Json::parse(text);
  oe_string_free(text);
  return j;
}

int RunVad(const VadOptions& o) {
  auto bytes = platform::ReadWholeFile(o.wav);
  if (!bytes.ok()) return Fail(bytes.status().reason(), bytes.status().message());
  auto pcm = DecodeWav(*bytes);
  if (!pcm.ok()) return Fail(pcm.status().reason(), o.wav + ": " + pcm.status().message());
  OeVoiceActivity* vad = nullptr;
  if (OeError* e = oe_vad_open(o.plan.c_str(), int(pcm->rate), o.turn.dump().c_str(), o.allow_unqualified, &vad)) return Fail(e);
  oe_vad_record(vad, o.frames);
  const size_t chunk = size_t(std::max<int64_t>(1, pcm->rate * o.chunk_ms / 1000));
  int64_t turns = 0;
  for (size_t at = 0; at < pcm->samples.size(); at += chunk) {
    char* out = nullptr;
    if (OeError* e = oe_vad_push(vad, pcm->samples.data() + at, int64_t(std::min(chunk, pcm->samples.size() - at)), &out)) {
      oe_vad_close(vad);
      return Fail(e);
    }
    for (const Json& change : Take(out)) {
      Print(change);
      turns += change["kind"] == "speech_stopped" ? 1 : 0;
    }
  }
  char* info = nullptr;
  OeError* e = oe_vad_info(vad, o.frames, &info);
  oe_vad_close(vad);
  if (e != nullptr) return Fail(e);
  Json done = Take(info);
  done["kind"] = "done";
  done["turns"] = turns;
  Print(done);
  return 0;
}

}  // namespace

int VadCommand(int argc, char** argv, int first) {
  VadOptions o;
  ArgReader args(argc, argv, first);
  while (const char* flag = args.Next()) {
    const std::string a = flag;
    if (a == "--plan") o.plan = args.Value(flag);
    else if (a == "--wav") o.wav = args.Value(flag);
    else if (a == "--threshold") o.turn["threshold"] = args.Number(flag);
    else if (a == "--prefix-padding-ms") o.turn["prefix_padding_ms"] = args.Whole(flag, 0, 60000);
    else if (a == "--silence-duration-ms") o.turn["silence_duration_ms"] = args.Whole(flag, 0, 60000);
    else if (a == "--min-speech-duration-ms") o.turn["min_speech_duration_ms"] = args.Whole(flag, 0, 60000);
    else if (a == "--chunk-ms") o.chunk_ms = args.Whole(flag, 1, 10000);
    else if (a == "--frames") o.frames = true;
    else if (a == "--allow-unqualified") o.allow_unqualified = true;
    else {
      std::fprintf(stderr, "omni-edge-run vad: unknown flag %s\n", flag);
      return 2;
    }
  }
  if (o.plan.empty() || o.wav.empty()) {
    std::fprintf(stderr, "omni-edge-run vad: --plan PLAN and --wav FILE are required\n");
    return 2;
  }
  return RunVad(o);
}

}  // namespace omni_edge::tools
