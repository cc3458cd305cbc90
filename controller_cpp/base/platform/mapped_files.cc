// The registry of mapped files and the fault report text; the handlers that use them are
// OS-specific (mapped_files_posix.cc: SIGBUS, mapped_files_win.cc: EXCEPTION_IN_PAGE_ERROR).
#include "base/platform/mapped_files.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#include "base/platform/mapped_files_internal.h"

namespace omni_edge {
namespace {

constexpr int kSlots = 64;
constexpr size_t kPathBytes = 512;

struct Slot {
  std::atomic<bool> taken{false};
  std::atomic<uintptr_t> begin{0}, end{0};  // end == 0: not (yet) valid
  char path[kPathBytes] = {};
};

Slot g_slots[kSlots];

// Prepared before a run: a fault handler cannot format or allocate.
char g_fault_lines[4096];
std::atomic<size_t> g_fault_length{0};
char g_program[64] = "omni-edge";

}  // namespace

namespace mapped_files_internal {

void SetProgram(const char* program) {
  std::strncpy(g_program, program, sizeof g_program - 1);
  g_program[sizeof g_program - 1] = '\0';
}

void WriteFaultReport(const char* owner, void (*write_all)(int stream, const char* text, size_t n)) {
  const auto text = [&](int stream, const char* s) { write_all(stream, s, std::strlen(s)); };
  write_all(1, g_fault_lines, g_fault_length.load());
  text(2, g_program);
  text(2, ": weights_changed: ");
  text(2, owner);
  text(2, " changed while mapped (truncated or rewritten during the run); an artifact must not change while in use\n");
}

}  // namespace mapped_files_internal

void SetFaultLines(const std::string& lines) {
  g_fault_length.store(0);
  if (lines.size() > sizeof g_fault_lines) return;
  std::memcpy(g_fault_lines, lines.data(), lines.size());
  g_fault_length.store(lines.size());
}

MappedFile::MappedFile(const void* base, size_t size, const std::string& path) {
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].taken.compare_exchange_strong(expected, true)) continue;
    Slot& s = g_slots[i];
    std::strncpy(s.path, path.c_str(), kPathBytes - 1);
    s.path[kPathBytes - 1] = '\0';
    s.begin.store(reinterpret_cast<uintptr_t>(base));
    s.end.store(reinterpret_cast<uintptr_t>(base) + size);  // published last
    slot_ = i;
    return;
  }
}

MappedFile::~MappedFile() {
  if (slot_ < 0) return;
  g_slots[slot_].end.store(0);
  g_slots[slot_].begin.store(0);
  g_slots[slot_].taken.store(false);
}

const char* MappedFile::Owner(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  for (const Slot& s : g_slots) {
    const uintptr_t end = s.end.load();
    if (end != 0 && a >= s.begin.load() && a < end) return s.path;
  }
  return nullptr;
}

}  // namespace omni_edge
