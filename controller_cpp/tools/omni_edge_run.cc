// omni-edge-run: the native command line of the controller, built on the C ABI only.
//   omni-edge-run --version
//   omni-edge-run verify ARTIFACT_DIR     re-hash + re-check an artifact; exit 1 on any failure
#include <cstdio>
#include <cstring>
#include <string>

#include "capi/omni_edge.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: omni-edge-run --version\n"
               "       omni-edge-run verify ARTIFACT_DIR\n");
  return 2;
}

int Verify(const char* directory) {
  char* json = nullptr;
  int qualified = 0;
  OeError* error = oe_manifest_verify(directory, &json, &qualified);
  if (error != nullptr) {
    std::fprintf(stderr, "omni-edge-run: %s: %s\n", oe_error_reason(error), oe_error_message(error));
    oe_error_free(error);
    return 1;
  }
  std::printf("%s\n", json);
  oe_string_free(json);
  std::fprintf(stderr, "%s: verified, %s\n", directory, qualified ? "qualified" : "NOT qualified");
  return qualified ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("omni-edge-run %s (stage contract protocol %d)\n", oe_version(), oe_protocol_version());
    return 0;
  }
  if (argc == 3 && std::strcmp(argv[1], "verify") == 0) return Verify(argv[2]);
  return Usage();
}
