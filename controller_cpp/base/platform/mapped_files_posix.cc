// POSIX: a truncated mapped file faults with SIGBUS.
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "base/platform/mapped_files.h"
#include "base/platform/mapped_files_internal.h"

namespace omni_edge {
namespace {

void WriteAll(int fd, const char* text, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, text, n);
    if (w <= 0) return;
    text += w;
    n -= size_t(w);
  }
}

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
  mapped_files_internal::WriteFaultReport(owner, WriteAll);
  _exit(1);
}

}  // namespace

void ReportFaultsInMappedFiles(const char* program) {
  mapped_files_internal::SetProgram(program);
  struct sigaction fault {};
  fault.sa_sigaction = OnFault;
  sigemptyset(&fault.sa_mask);
  fault.sa_flags = SA_SIGINFO;
  sigaction(SIGBUS, &fault, nullptr);
}

}  // namespace omni_edge
