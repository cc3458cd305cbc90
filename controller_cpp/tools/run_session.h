// Runs requests on an open session for omni-edge-run, whatever the plan: text events to stdout
// (the text itself, or one JSON line per event), audio into a WAV file, a summary per stream to
// stderr. Ctrl-C cancels at every stage's next step. On the C ABI only.
#pragma once

#include <string>

#include "capi/omni_edge.h"

namespace omni_edge::tools {

struct Output {
  bool json = false;         // every event as a JSON line
  bool tag_streams = false;  // lines carry "stream" (a plan with several final streams)
  std::string wav_path;      // audio events go here; empty: a plan's audio is an error
};

// Runs `request` `repeat` times (until Ctrl-C); each run rewrites the WAV. Returns the exit code.
int RunRequests(OeSession* session, const OeRequest& request, const Output& out, int repeat);

// Prints the error and frees it; returns 1.
int Fail(OeError* error);

}  // namespace omni_edge::tools
