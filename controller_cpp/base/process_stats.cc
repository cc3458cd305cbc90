#include "base/process_stats.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace omni_edge {
namespace {

double StatusFieldMb(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double mb = 0;
  const size_t len = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, len) == 0) {
      mb = std::strtod(line + len, nullptr) / 1024.0;
      break;
    }
  }
  std::fclose(f);
  return mb;
}

}  // namespace

double PeakRssMb() { return StatusFieldMb("VmHWM:"); }
double CurrentRssMb() { return StatusFieldMb("VmRSS:"); }

}  // namespace omni_edge
