// POSIX: a truncated mapped file faults with SIGBUS.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include "base/platform/mapped_files.h"
#include "base/platform/mapped_files_internal.h"

namespace omni_edge {
namespace {

int g_stdout = 1;  // where the report's stdout lines go (a duplicate taken in the handler)

void WriteAll(int stream, const char* text, size_t n) {
  const int fd = stream == 1 ? g_stdout : 2;
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
  // Other threads may still print events: from here on their output goes nowhere, so the
  // terminal lines below are the last ones on stdout.
  g_stdout = dup(1);
  const int null = open("/dev/null", O_WRONLY);
  if (g_stdout >= 0 && null >= 0) dup2(null, 1);
  if (g_stdout < 0) g_stdout = 1;
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
