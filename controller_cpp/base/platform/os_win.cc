// Windows (ARM64 and x64): the wide-char APIs, each UTF-8 path converted at the call.
#include <windows.h>
#include <shellapi.h>
#include <fcntl.h>
#include <io.h>
#include <malloc.h>
#include <share.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "base/platform/os.h"

namespace omni_edge::platform {
namespace {

std::wstring Wide(const std::string& utf8) {
  if (utf8.empty()) return std::wstring();
  const int n = MultiByteToWideChar(CP_UTF8, 0, utf8.data(), int(utf8.size()), nullptr, 0);
  std::wstring wide(size_t(n > 0 ? n : 0), L'\0');
  if (n > 0) MultiByteToWideChar(CP_UTF8, 0, utf8.data(), int(utf8.size()), wide.data(), n);
  return wide;
}

std::string Utf8(const std::wstring& wide) {
  if (wide.empty()) return std::string();
  const int n = WideCharToMultiByte(CP_UTF8, 0, wide.data(), int(wide.size()), nullptr, 0, nullptr, nullptr);
  std::string utf8(size_t(n > 0 ? n : 0), '\0');
  if (n > 0) WideCharToMultiByte(CP_UTF8, 0, wide.data(), int(wide.size()), utf8.data(), n, nullptr, nullptr);
  return utf8;
}

std::string LastErrorText() {
  const DWORD code = GetLastError();
  wchar_t* text = nullptr;
  FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr,
                 code, 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  std::string message = text != nullptr ? Utf8(text) : "";
  if (text != nullptr) LocalFree(text);
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r' || message.back() == ' ')) message.pop_back();
  return "error " + std::to_string(code) + (message.empty() ? "" : " (" + message + ")");
}

}  // namespace

Result<void*> LoadSharedLibrary(const std::string& path) {
  // The library's own directory first for what it loads (the QNN EP loads QnnHtp.dll beside it).
  const DWORD beside = path.find_first_of("/\\") != std::string::npos
                           ? LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS
                           : 0;
  HMODULE library = LoadLibraryExW(Wide(path).c_str(), nullptr, beside);
  if (library == nullptr) return Status::Error("backend_unavailable", "cannot load '" + path + "': " + LastErrorText());
  return reinterpret_cast<void*>(library);
}

void* FindSymbol(void* library, const char* name) {
  return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(library), name));
}

std::string ModuleDirectory() {
  HMODULE self = nullptr;
  if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                          reinterpret_cast<LPCWSTR>(&ModuleDirectory), &self)) {
    return ".";
  }
  std::wstring path(32768, L'\0');
  const DWORD n = GetModuleFileNameW(self, path.data(), DWORD(path.size()));
  if (n == 0 || n >= path.size()) return ".";
  path.resize(n);
  const size_t slash = path.find_last_of(L"\\/");
  return slash == std::wstring::npos ? "." : Utf8(path.substr(0, slash));
}

std::FILE* OpenFile(const std::string& path, const char* mode) {
  return _wfsopen(Wide(path).c_str(), Wide(mode).c_str(), _SH_DENYNO);
}

Result<std::unique_ptr<ReadOnlyMapping>> ReadOnlyMapping::Open(const std::string& path) {
  HANDLE file = CreateFileW(Wide(path).c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr,
                            OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) return Status::Error("file_missing", path + ": cannot open");
  std::unique_ptr<ReadOnlyMapping> m(new ReadOnlyMapping());
  LARGE_INTEGER size{};
  Status status;
  if (!GetFileSizeEx(file, &size)) status = Status::Error("io_error", path + ": size unknown: " + LastErrorText());
  m->size_ = status.ok() ? size_t(size.QuadPart) : 0;
  if (m->size_ > 0) {
    HANDLE section = CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
    void* data = section != nullptr ? MapViewOfFile(section, FILE_MAP_READ, 0, 0, 0) : nullptr;
    if (data == nullptr) {
      m->size_ = 0;
      status = Status::Error("io_error", path + ": mapping failed: " + LastErrorText());
    } else {
      m->data_ = data;
      m->registered_ = std::make_unique<MappedFile>(data, m->size_, path);
    }
    if (section != nullptr) CloseHandle(section);  // the view keeps the section
  }
  CloseHandle(file);
  if (!status.ok()) return status;
  return m;
}

ReadOnlyMapping::~ReadOnlyMapping() {
  registered_.reset();  // before the unmap: the range may be reused by the next mapping
  if (data_ != nullptr) UnmapViewOfFile(data_);
}

void ReadOnlyMapping::DropResidentPages() const {
  // Unlocking pages that are not locked takes them out of the working set (they stay in the
  // file cache and fault back in when touched); the call "fails" with ERROR_NOT_LOCKED.
  if (data_ != nullptr) VirtualUnlock(data_, size_);
}

std::vector<std::string> CommandLineArguments(int argc, char** argv) {
  int count = 0;
  wchar_t** wide = CommandLineToArgvW(GetCommandLineW(), &count);
  if (wide == nullptr) return std::vector<std::string>(argv, argv + argc);
  std::vector<std::string> args;
  for (int i = 0; i < count; ++i) args.push_back(Utf8(wide[i]));
  LocalFree(wide);
  return args;
}

int ProcessId() { return int(GetCurrentProcessId()); }

void ReturnFreedMemory() { _heapmin(); }

// Windows' large pages need the SeLockMemoryPrivilege and an allocation made for them: the
// backends' own allocations stay on small pages.
std::vector<MemoryRange> AnonymousMemory() { return {}; }
HugePages BackWithHugePages(const std::vector<MemoryRange>&) {
  HugePages result;
  result.detail = "large pages not used on Windows (they need SeLockMemoryPrivilege)";
  return result;
}

void SetEnvironmentDefault(const char* name, const char* value) {
  // The C runtime's copy (getenv) and the process's (GetEnvironmentVariable) are kept apart on
  // Windows; _putenv_s updates both.
  if (std::getenv(name) == nullptr) _putenv_s(name, value);
}

namespace {

std::atomic<void (*)(int)> g_cancel_handler{nullptr};

BOOL WINAPI OnConsoleControl(DWORD event) {
  void (*handler)(int) = g_cancel_handler.load();
  if (handler == nullptr) return FALSE;
  // The POSIX numbers the callers already know: Ctrl-C / Ctrl-Break as SIGINT (2), closing the
  // console, logging off or shutting down as SIGTERM (15) or SIGHUP (1).
  const int signo = event == CTRL_C_EVENT || event == CTRL_BREAK_EVENT ? 2 : event == CTRL_CLOSE_EVENT ? 1 : 15;
  handler(signo);
  if (signo != 2) Sleep(4000);  // the process ends when this returns: let the run end first
  return TRUE;
}

}  // namespace

void OnCancelSignals(void (*handler)(int)) {
  g_cancel_handler.store(handler);
  SetConsoleCtrlHandler(OnConsoleControl, TRUE);
}

StdoutToStderr::StdoutToStderr() {
  std::fflush(stdout);
  saved_ = _dup(_fileno(stdout));
  if (saved_ >= 0) _dup2(_fileno(stderr), _fileno(stdout));
}

StdoutToStderr::~StdoutToStderr() {
  if (saved_ < 0) return;
  std::fflush(stdout);
  _dup2(saved_, _fileno(stdout));
  _close(saved_);
}

std::FILE* CreateFileBeside(const std::string& target, std::string* temporary) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string candidate =
        target + ".part" + std::to_string(GetCurrentProcessId()) + "-" + std::to_string(GetTickCount64() + attempt);
    int fd = -1;
    if (_wsopen_s(&fd, Wide(candidate).c_str(), _O_CREAT | _O_EXCL | _O_RDWR | _O_BINARY, _SH_DENYNO,
                  _S_IREAD | _S_IWRITE) != 0) {
      if (errno == EEXIST) continue;
      return nullptr;
    }
    std::FILE* file = _fdopen(fd, "w+b");
    if (file == nullptr) {
      _close(fd);
      RemoveFile(candidate);
      return nullptr;
    }
    *temporary = candidate;
    return file;
  }
  return nullptr;
}

bool SyncFile(std::FILE* file) { return std::fflush(file) == 0 && _commit(_fileno(file)) == 0; }

bool MoveIntoPlace(const std::string& from, const std::string& to) {
  return MoveFileExW(Wide(from).c_str(), Wide(to).c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH) != 0;
}

void RemoveFile(const std::string& path) { DeleteFileW(Wide(path).c_str()); }

}  // namespace omni_edge::platform
