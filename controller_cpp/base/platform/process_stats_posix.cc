#include "base/platform/process_stats.h"

#include <malloc.h>

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

int64_t AvailableMemoryBytes(bool* wsl) {
  char line[512] = {};
  *wsl = false;
  if (FILE* version = std::fopen("/proc/version", "r")) {
    if (std::fgets(line, sizeof line, version) != nullptr) {
      *wsl = std::strstr(line, "microsoft") != nullptr || std::strstr(line, "Microsoft") != nullptr;
    }
    std::fclose(version);
  }
  FILE* meminfo = std::fopen("/proc/meminfo", "r");
  if (meminfo == nullptr) return -1;
  long long kb = -1;
  while (std::fgets(line, sizeof line, meminfo) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    kb = -1;
  }
  std::fclose(meminfo);
  return kb < 0 ? -1 : int64_t(kb) * 1024;
}
double CurrentRssMb() { return StatusFieldMb("VmRSS:"); }

double HeapInUseMb() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 m = mallinfo2();
  return double(m.uordblks + m.hblkhd) / (1024.0 * 1024.0);
#elif defined(__GLIBC__) || defined(__ANDROID__)
  const struct mallinfo m = mallinfo();  // int fields: exact below 2 GiB
  return double(size_t(unsigned(m.uordblks)) + size_t(unsigned(m.hblkhd))) / (1024.0 * 1024.0);
#else
  return -1;
#endif
}

void ReturnFreeHeapPages() {
#if defined(__GLIBC__)
  malloc_trim(0);
#elif defined(__ANDROID__) && defined(M_PURGE)
  mallopt(M_PURGE, 0);
#endif
}

}  // namespace omni_edge
