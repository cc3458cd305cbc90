// Process memory as the OS reports it (Linux / Android /proc); 0 where unavailable.
#pragma once

#include <cstdint>

namespace omni_edge {

double PeakRssMb();     // VmHWM
double CurrentRssMb();  // VmRSS
// What the C heap has handed out and not had back (glibc / bionic mallinfo), or -1: unlike RSS
// it does not include pages the allocator keeps for reuse, so a leak shows and retention does not.
double HeapInUseMb();
// Hands the heap's free pages back to the OS (after a session closed: a phone's other apps want
// them); a no-op where the allocator has no such call.
void ReturnFreeHeapPages();

// The memory the system could give this process now (Linux MemAvailable), in bytes, or -1;
// *wsl says whether this Linux runs under Windows' WSL (its memory is a quota of the host's).
int64_t AvailableMemoryBytes(bool* wsl);

}  // namespace omni_edge
