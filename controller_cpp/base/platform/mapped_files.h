// The file mappings weights are read through, for the one hazard of mapping: a file truncated
// underneath faults (SIGBUS on POSIX) at the next touch of a page past its new end. Backends
// register each mapping; a fault handler (omni-edge-run's) asks Owner() whether the address
// lies in one, to end the run with a clear error instead of a crash. Lock-free and
// async-signal-safe to read.
#pragma once

#include <cstddef>
#include <string>

namespace omni_edge {

class MappedFile {
 public:
  // Registers [base, base + size) as a mapping of `path` until destroyed (up to 64 at once;
  // beyond that a mapping is simply not recognized).
  MappedFile(const void* base, size_t size, const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // The path of the registered mapping holding `address`, or nullptr. Async-signal-safe.
  static const char* Owner(const void* address);

 private:
  int slot_ = -1;
};

// Installs a SIGBUS handler: a fault inside a registered mapping writes the fault lines (set
// below) to stdout and "<program>: weights_changed: <path> changed while mapped ..." to stderr,
// then exits with 1; any other fault keeps the default action. Idempotent.
void ReportFaultsInMappedFiles(const char* program);
// What stdout gets first on such a fault (for --json: each stream's terminal "error" line).
void SetFaultLines(const std::string& lines);

}  // namespace omni_edge
