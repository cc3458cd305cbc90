// Shared by the OS-specific fault handlers (mapped_files_posix.cc, mapped_files_win.cc).
#pragma once

#include <cstddef>

namespace omni_edge::mapped_files_internal {

void SetProgram(const char* program);
// Writes the prepared fault lines to stream 1 (stdout) and the weights_changed message naming
// `owner` to stream 2 (stderr) through `write_all`. Async-signal-safe: no allocation.
void WriteFaultReport(const char* owner, void (*write_all)(int stream, const char* text, size_t n));

}  // namespace omni_edge::mapped_files_internal
