// omni-edge-run vad: a plan's voice activity detector over a WAV file, streamed in pieces as a
// realtime client sends them; prints each turn start and end as a JSON line, then a summary.
#pragma once

namespace omni_edge::tools {

// The exit code: 0, 1 when the plan, its detector or the file could not be used, 2 for usage.
int VadCommand(int argc, char** argv, int first);

}  // namespace omni_edge::tools
