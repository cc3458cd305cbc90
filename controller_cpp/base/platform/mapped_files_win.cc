// Windows: a mapped file that shrank underneath raises EXCEPTION_IN_PAGE_ERROR at the touch;
// ExceptionInformation[1] holds the address.
#include <windows.h>

#include <atomic>

#include "base/platform/mapped_files.h"
#include "base/platform/mapped_files_internal.h"

namespace omni_edge {
namespace {

void WriteAll(int stream, const char* text, size_t n) {
  HANDLE out = GetStdHandle(stream == 1 ? STD_OUTPUT_HANDLE : STD_ERROR_HANDLE);
  while (n > 0) {
    DWORD written = 0;
    if (!WriteFile(out, text, DWORD(n), &written, nullptr) || written == 0) return;
    text += written;
    n -= written;
  }
}

LONG CALLBACK OnFault(EXCEPTION_POINTERS* info) {
  const EXCEPTION_RECORD* record = info->ExceptionRecord;
  if (record->ExceptionCode != EXCEPTION_IN_PAGE_ERROR || record->NumberParameters < 2) return EXCEPTION_CONTINUE_SEARCH;
  const char* owner = MappedFile::Owner(reinterpret_cast<const void*>(record->ExceptionInformation[1]));
  if (owner == nullptr) return EXCEPTION_CONTINUE_SEARCH;
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) {  // another thread faulted too: the first one reports and exits
    for (;;) Sleep(INFINITE);
  }
  mapped_files_internal::WriteFaultReport(owner, WriteAll);
  ExitProcess(1);
}

}  // namespace

void ReportFaultsInMappedFiles(const char* program) {
  static std::atomic<bool> installed{false};
  mapped_files_internal::SetProgram(program);
  if (!installed.exchange(true)) AddVectoredExceptionHandler(/*first=*/1, OnFault);
}

}  // namespace omni_edge
