#include "tools/serve_command.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tools/args.h"
#include "tools/run_session.h"
#ifdef OMNI_EDGE_WITH_SERVER
#include "server/http_server.h"
#endif

namespace omni_edge::tools {

#ifdef OMNI_EDGE_WITH_SERVER
int ServeCommand(int argc, char** argv, int first) {
  server::ServeOptions o;
  if (const char* key = std::getenv("OMNI_EDGE_API_KEY")) o.api_key = key;  // kept out of the process list
  ArgReader args(argc, argv, first);
  while (const char* flag = args.Next()) {
    const std::string a = flag;
    if (a == "--plan") o.plan = args.Value(flag);
    else if (a == "--model") o.model = args.Value(flag);
    else if (a == "--host") o.host = args.Value(flag);
    else if (a == "--port") o.port = int(args.Whole(flag, 0, 65535));
    else if (a == "--api-key") o.api_key = args.Value(flag);
    else if (a == "--max-sessions") o.max_sessions = int(args.Whole(flag, 1, 64));
    else if (a == "--threads") o.threads = int(args.Whole(flag, 0, 1024));
    else if (a == "--allow-unqualified") o.allow_unqualified = true;
    else if (a == "--max-body-mb") o.max_body_bytes = size_t(args.Whole(flag, 1, 1024)) << 20;
    else if (a == "--max-connections") o.max_connections = int(args.Whole(flag, 1, 4096));
    else if (a == "--memory-pools") o.memory_pools = args.Value(flag);
    else {
      std::fprintf(stderr, "omni-edge-run serve: unknown flag %s\n", flag);
      return 2;
    }
  }
  if (o.plan.empty()) {
    std::fprintf(stderr, "omni-edge-run serve: --plan PLAN is required\n");
    return 2;
  }
  const int rc = server::Serve(o, [] { return CancelledBy() != 0; });
  // Connection threads may still wait in a keep-alive read on their sessions: the process ends
  // here, without running static destructors (the backends' among them) under them.
  std::fflush(nullptr);
  std::_Exit(rc);
}
#else
int ServeCommand(int, char**, int) {
  std::fprintf(stderr, "omni-edge-run serve: this build has no server (Boost.Beast's headers were not found "
                       "when it was built: install libboost-dev)\n");
  return 2;
}
#endif

}  // namespace omni_edge::tools
