#include "base/platform/mapped_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

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

// Prepared before a run: a signal handler cannot format or allocate.
char g_fault_lines[4096];
std::atomic<size_t> g_fault_length{0};
char g_program[64] = "omni-edge";

void WriteAll(int fd, const char* text, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, text, n);
    if (w <= 0) return;
    text += w;
    n -= size_t(w);
  }
}

void WriteText(int fd, const char* text) { WriteAll(fd, text, std::strlen(text)); }

void OnFault(int signo, siginfo_t* info, void*) {
  const char* owner = MappedFile::Owner(info->si_addr);
  if (owner == nullptr) {
    signal(signo, SIG_DFL);  // the faulting access repeats and gets the default action
    return;
  }
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) {  // another thread faulted too: the first one reports and exits
    for (;;) pause();
  }
  WriteAll(1, g_fault_lines, g_fault_length.load());
  WriteText(2, g_program);
  WriteText(2, ": weights_changed: ");
  WriteText(2, owner);
  WriteText(2, " changed while mapped (truncated or rewritten during the run); an artifact must not change while in use\n");
  _exit(1);
}

}  // namespace

void ReportFaultsInMappedFiles(const char* program) {
  std::strncpy(g_program, program, sizeof g_program - 1);
  struct sigaction fault {};
  fault.sa_sigaction = OnFault;
  sigemptyset(&fault.sa_mask);
  fault.sa_flags = SA_SIGINFO;
  sigaction(SIGBUS, &fault, nullptr);
}

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
