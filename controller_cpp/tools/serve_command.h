// omni-edge-run serve: the plan behind an HTTP server speaking OpenAI's Chat Completions
// (server/http_server.h), until SIGINT, SIGTERM or SIGHUP.
#pragma once

namespace omni_edge::tools {

// The exit code: 0 after a signal, 1 when the plan or the address could not be opened, 2 for
// usage errors (and a build without the server).
int ServeCommand(int argc, char** argv, int first);

}  // namespace omni_edge::tools
