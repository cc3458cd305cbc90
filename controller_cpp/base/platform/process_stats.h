// Process memory as the OS reports it (Linux / Android /proc); 0 where unavailable.
#pragma once

#include <cstdint>

namespace omni_edge {

double PeakRssMb();     // VmHWM
double CurrentRssMb();  // VmRSS

// The memory the system could give this process now (Linux MemAvailable), in bytes, or -1;
// *wsl says whether this Linux runs under Windows' WSL (its memory is a quota of the host's).
int64_t AvailableMemoryBytes(bool* wsl);

}  // namespace omni_edge
