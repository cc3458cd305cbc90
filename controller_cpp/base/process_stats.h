// Process memory as the OS reports it (Linux / Android /proc); 0 where unavailable.
#pragma once

namespace omni_edge {

double PeakRssMb();     // VmHWM
double CurrentRssMb();  // VmRSS

}  // namespace omni_edge
