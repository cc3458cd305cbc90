#pragma once

#include <string>

#include "capi/omni_edge.h"

namespace omni_edge::tools {

// omni-edge-run speak --plan PLAN (--text TEXT | --text-ids 1,2,3) --out OUT.wav [--json]
//                     [--max-frames N] [--prebuffer-ms MS] [--temperature T] [--top-k K] [--seed S]
//                     [--threads N] [--allow-unqualified] [--info] [--repeat N]
int Speak(int argc, char** argv, int first);

// omni-edge-run run --plan OMNI_PLAN ... --speak OUT.wav [--max-frames N]: the text events go to
// `on_text` (with `text_user`), the audio into the WAV; with `json` both streams are printed
// as JSON lines tagged "stream": "text" | "audio". Returns the exit code.
int RunOmni(const OeSessionConfig& config, const OeGenerateParams& text, int max_frames, const std::string& wav_path,
            bool json, OeEventCallback on_text, void* text_user);

}  // namespace omni_edge::tools
