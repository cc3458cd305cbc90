// Runs requests on an open session for omni-edge-run, whatever the plan: text events to stdout
// (the text itself, or one JSON line per event), audio into a WAV file, a summary per stream to
// stderr. On the C ABI only.
//
// The cancel contract: SIGINT, SIGTERM or SIGHUP at any moment (while loading too) cancels the
// request at every stage's next step; with --json each stream's last line is then its one
// terminal event ("cancelled"), the audio streamed so far is in the WAV, and the exit code is
// 128 + the signal (130 for Ctrl-C). Any failure ends each stream with an "error" line (exit 1),
// a weights file truncated under its mapping too (SIGBUS there is caught: base/platform/mapped_files.h).
#pragma once

#include <string>

#include "capi/omni_edge.h"

namespace omni_edge::tools {

struct Output {
  bool json = false;         // every event as a JSON line
  bool tag_streams = false;  // lines carry "stream" (a plan with several final streams)
  std::string wav_path;      // audio events go here; empty: a plan's audio is an error
  int consumer_delay_ms = 0; // a slow consumer: wait this long after each event (reliability runs)
  double capture_age_ms = -1; // >= 0: each request's observation is stamped this long before it starts
};

// Cancels the running (or next) request on SIGINT, SIGTERM and SIGHUP, and turns a fault in
// mapped weights into an error exit; call first in main.
void InstallCancelSignals();
// The signal that cancelled this process's work, or 0.
int CancelledBy();

// Runs `request` `repeat` times (until a signal); each run replaces the WAV (temporary file,
// renamed once the request finished or was cancelled). Returns the exit code.
int RunRequests(OeSession* session, const OeRequest& request, const Output& out, int repeat);

// Prints the error and frees it; returns 1.
int Fail(OeError* error);
// For a session that did not open: the terminal line (--json), the message; the exit code.
int FailBeforeRun(OeError* error, const Output& out);

}  // namespace omni_edge::tools
