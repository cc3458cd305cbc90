// Windows: the working set stands for RSS (what the OS keeps resident for the process).
#include <windows.h>
#include <psapi.h>
#include <malloc.h>

#include "base/platform/process_stats.h"

namespace omni_edge {
namespace {

PROCESS_MEMORY_COUNTERS Counters() {
  PROCESS_MEMORY_COUNTERS counters{};
  counters.cb = sizeof counters;
  if (!GetProcessMemoryInfo(GetCurrentProcess(), &counters, sizeof counters)) counters = PROCESS_MEMORY_COUNTERS{};
  return counters;
}

}  // namespace

double PeakRssMb() { return double(Counters().PeakWorkingSetSize) / (1024.0 * 1024.0); }
double CurrentRssMb() { return double(Counters().WorkingSetSize) / (1024.0 * 1024.0); }

double HeapInUseMb() { return -1; }  // the CRT heap has no cheap total: growth is read from RSS

void ReturnFreeHeapPages() { _heapmin(); }

int64_t AvailableMemoryBytes(bool* wsl) {
  *wsl = false;
  MEMORYSTATUSEX status{};
  status.dwLength = sizeof status;
  if (!GlobalMemoryStatusEx(&status)) return -1;
  return int64_t(status.ullAvailPhys);
}

}  // namespace omni_edge
