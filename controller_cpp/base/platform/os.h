// The controller's one seam to the operating system. Outside base/platform/ no code includes an
// OS header or calls an OS API (scripts/check_native.py); each function here has a POSIX
// implementation (Linux, Android: os_posix.cc) and a Windows one (os_win.cc); what needs no OS
// call is shared (os.cc). Paths are UTF-8 everywhere (wide-char APIs on Windows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/platform/mapped_files.h"
#include "base/status.h"

namespace omni_edge::platform {

// (Names avoid the Win32 macros: LoadLibrary, ReplaceFile.)
// A shared library loaded for the life of the process (ONNX Runtime and its plugins are never
// unloaded: their threads and allocations outlive any one session).
Result<void*> LoadSharedLibrary(const std::string& path);
void* FindSymbol(void* library, const char* name);

// A whole file mapped read-only, registered for fault reports (mapped_files.h) while it lives.
class ReadOnlyMapping {
 public:
  static Result<std::unique_ptr<ReadOnlyMapping>> Open(const std::string& path);
  ~ReadOnlyMapping();
  ReadOnlyMapping(const ReadOnlyMapping&) = delete;
  ReadOnlyMapping& operator=(const ReadOnlyMapping&) = delete;
  const char* data() const { return static_cast<const char*>(data_); }
  size_t size() const { return size_; }
  // Drops the resident pages; they fault back in from the file when touched.
  void DropResidentPages() const;

 private:
  ReadOnlyMapping() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<MappedFile> registered_;
};

// The directory of the binary that holds this code (the executable, or the C ABI library when
// another program loads it), so a bundle finds its lib/ wherever it is unpacked.
std::string ModuleDirectory();
// A compiled-in default path: a leading "$ORIGIN/" stands for ModuleDirectory() (as in rpath).
std::string ResolveOrigin(const std::string& path);

// fopen with a UTF-8 path; nullptr on failure.
std::FILE* OpenFile(const std::string& path, const char* mode);
// A whole file's bytes; "file_missing" when it cannot be opened, "io_error" when a read fails.
Result<std::string> ReadWholeFile(const std::string& path);

// The program's arguments in UTF-8 (Windows passes main() the ANSI code page's; POSIX, bytes).
std::vector<std::string> CommandLineArguments(int argc, char** argv);

int ProcessId();
// Returns memory the allocator holds free to the system (after large temporary buffers).
void ReturnFreedMemory();

// Private anonymous memory (heap and allocator mappings) as address ranges, sorted. Taken before
// and after a backend loads a graph, the difference (Subtract) is what that load allocated: the
// backend's packed copy of the weights.
struct MemoryRange {
  uintptr_t begin = 0, end = 0;
};
std::vector<MemoryRange> AnonymousMemory();
std::vector<MemoryRange> Subtract(const std::vector<MemoryRange>& after, const std::vector<MemoryRange>& before);
// Backs the ranges with huge pages now, where the OS allows it (Linux: transparent huge pages,
// madvise MADV_HUGEPAGE then MADV_COLLAPSE on each aligned huge-page block, 2 MiB on x86-64,
// whose small pages are all resident: a sparse block would grow). Decode streams every weight
// once per token: on 4 KiB pages each page is a TLB miss.
struct HugePages {
  int64_t eligible_bytes = 0;   // bytes of the aligned blocks inside the ranges
  int64_t huge_bytes = 0;       // of those, now on huge pages
  std::string detail;           // why not, where not all are
};
HugePages BackWithHugePages(const std::vector<MemoryRange>& ranges);
// Sets an environment variable unless it is set already (the user's choice wins).
void SetEnvironmentDefault(const char* name, const char* value);

// Calls `handler(signal number)` on Ctrl-C, a termination request or a hang-up (POSIX: SIGINT,
// SIGTERM, SIGHUP). The handler runs in signal context: atomic stores only.
void OnCancelSignals(void (*handler)(int));

// While alive, what the process writes to stdout goes to stderr (libraries that print banners
// must not corrupt JSON lines on stdout).
class StdoutToStderr {
 public:
  StdoutToStderr();
  ~StdoutToStderr();
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_ = -1;
};

// Crash-safe output: a new, private-to-this-process file beside `target` (same file system),
// opened for writing; its path in *temporary. Then SyncFile, and ReplaceFile into place.
std::FILE* CreateFileBeside(const std::string& target, std::string* temporary);
bool SyncFile(std::FILE* file);
bool MoveIntoPlace(const std::string& from, const std::string& to);  // atomic where the OS allows
void RemoveFile(const std::string& path);

}  // namespace omni_edge::platform
