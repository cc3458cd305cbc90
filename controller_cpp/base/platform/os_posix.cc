#include "base/platform/os.h"

#include <dlfcn.h>
#include <malloc.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#ifndef MADV_COLLAPSE  // Linux 6.1; older C library headers lack the name
#define MADV_COLLAPSE 25
#endif

namespace omni_edge::platform {

Result<void*> LoadSharedLibrary(const std::string& path) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return Status::Error("backend_unavailable", "cannot load '" + path + "': " + dlerror());
  return library;
}

void* FindSymbol(void* library, const char* name) { return dlsym(library, name); }

std::string ModuleDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ModuleDirectory), &info) == 0 || info.dli_fname == nullptr) return ".";
  std::string path = info.dli_fname;
  if (path.find('/') == std::string::npos) {  // the main program, found by name: ask the kernel
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return ".";
    path.assign(exe, size_t(n));
  }
  const size_t slash = path.find_last_of('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::FILE* OpenFile(const std::string& path, const char* mode) { return std::fopen(path.c_str(), mode); }

Result<std::unique_ptr<ReadOnlyMapping>> ReadOnlyMapping::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error("file_missing", path + ": cannot open");
  std::unique_ptr<ReadOnlyMapping> m(new ReadOnlyMapping());
  struct stat st {};
  Status status;
  if (fstat(fd, &st) != 0) status = Status::Error("io_error", path + ": stat failed");
  m->size_ = status.ok() ? size_t(st.st_size) : 0;
  if (m->size_ > 0) {
    void* data = mmap(nullptr, m->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      m->size_ = 0;
      status = Status::Error("io_error", path + ": mmap failed");
    } else {
      m->data_ = data;
      m->registered_ = std::make_unique<MappedFile>(data, m->size_, path);
    }
  }
  ::close(fd);  // the mapping keeps the file
  if (!status.ok()) return status;
  return m;
}

ReadOnlyMapping::~ReadOnlyMapping() {
  registered_.reset();  // before the unmap: the range may be reused by the next mapping
  if (data_ != nullptr) munmap(data_, size_);
}

void ReadOnlyMapping::DropResidentPages() const {
  if (data_ != nullptr) madvise(data_, size_, MADV_DONTNEED);
}

std::vector<std::string> CommandLineArguments(int argc, char** argv) { return std::vector<std::string>(argv, argv + argc); }

int ProcessId() { return int(::getpid()); }

void ReturnFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

std::vector<MemoryRange> AnonymousMemory() {
  std::vector<MemoryRange> ranges;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {  // "begin-end perms offset dev inode [name]"
    std::istringstream fields(line);
    std::string span, perms, offset, dev, name;
    uint64_t inode = 1;
    fields >> span >> perms >> offset >> dev >> inode;
    fields >> name;
    // Unnamed or the brk heap (glibc); Android names its allocators' mappings [anon:scudo:...],
    // [anon:libc_malloc] (thread stacks, [anon:stack_and_tls:...], are not weights).
    const bool allocator = name.empty() || name == "[heap]" ||
                           (name.rfind("[anon:", 0) == 0 && name.find("stack") == std::string::npos);
    if (inode != 0 || perms.size() < 4 || perms.compare(0, 2, "rw") != 0 || perms[3] != 'p' || !allocator) continue;
    const size_t dash = span.find('-');
    if (dash == std::string::npos) continue;
    ranges.push_back({uintptr_t(std::strtoull(span.c_str(), nullptr, 16)),
                      uintptr_t(std::strtoull(span.c_str() + dash + 1, nullptr, 16))});
  }
  return ranges;
}

namespace {

// The PMD huge page size: 2 MiB on x86-64 and 4 KiB-page arm64, 32 MiB with 16 KiB pages.
uintptr_t HugePageSize() {
  std::ifstream size_file("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  unsigned long long size = 0;
  size_file >> size;
  return size >= (uintptr_t(1) << 20) ? uintptr_t(size) : uintptr_t(2) << 20;
}

// Whether every small page of [start, start + bytes) is resident: collapsing a block populates
// all of it, so a sparse one (a thread stack, a reserved arena) would grow the process.
bool Resident(void* start, size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  if (mincore(start, bytes, in_core.data()) != 0) return false;
  for (unsigned char c : in_core) {
    if ((c & 1) == 0) return false;
  }
  return true;
}

}  // namespace

HugePages BackWithHugePages(const std::vector<MemoryRange>& ranges) {
  static const uintptr_t kHuge = HugePageSize();
  HugePages result;
  int refused = 0;
  int64_t sparse = 0;
  for (const MemoryRange& r : ranges) {
    for (uintptr_t block = (r.begin + kHuge - 1) & ~(kHuge - 1); block + kHuge <= r.end; block += kHuge) {
      void* start = reinterpret_cast<void*>(block);
      result.eligible_bytes += int64_t(kHuge);
      if (!Resident(start, kHuge)) {
        sparse += int64_t(kHuge);
        continue;
      }
      if (madvise(start, kHuge, MADV_HUGEPAGE) != 0 || madvise(start, kHuge, MADV_COLLAPSE) != 0) {
        refused = errno;  // e.g. EINVAL: no transparent huge pages, a kernel before 6.1, the brk heap
        continue;
      }
      result.huge_bytes += int64_t(kHuge);
    }
  }
  const int64_t refused_bytes = result.eligible_bytes - result.huge_bytes - sparse;
  if (refused_bytes > 0) {
    std::string mode;
    std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
    std::getline(setting, mode);
    result.detail = std::to_string(refused_bytes >> 20) + " MiB refused huge pages (" + std::strerror(refused) +
                    "); transparent_hugepage: " + (mode.empty() ? "unavailable" : mode);
  }
  if (sparse > 0) {
    result.detail += std::string(result.detail.empty() ? "" : "; ") + std::to_string(sparse >> 20) +
                     " MiB not fully resident, left on small pages";
  }
  return result;
}

void SetEnvironmentDefault(const char* name, const char* value) { setenv(name, value, /*overwrite=*/0); }

void OnCancelSignals(void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signo : {SIGINT, SIGTERM, SIGHUP}) sigaction(signo, &action, nullptr);
}

StdoutToStderr::StdoutToStderr() {
  std::fflush(stdout);
  saved_ = ::dup(STDOUT_FILENO);
  if (saved_ >= 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
}

StdoutToStderr::~StdoutToStderr() {
  if (saved_ < 0) return;
  std::fflush(stdout);
  ::dup2(saved_, STDOUT_FILENO);
  ::close(saved_);
}

std::FILE* CreateFileBeside(const std::string& target, std::string* temporary) {
  const size_t slash = target.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string pattern = dir + "." + base + ".partXXXXXX";
  const int fd = mkstemp(pattern.data());
  if (fd < 0) return nullptr;
  fchmod(fd, 0644);  // mkstemp's 0600 would make the renamed file private
  std::FILE* file = fdopen(fd, "w+b");
  if (file == nullptr) {
    ::close(fd);
    ::unlink(pattern.c_str());
    return nullptr;
  }
  *temporary = pattern;
  return file;
}

bool SyncFile(std::FILE* file) { return std::fflush(file) == 0 && fsync(fileno(file)) == 0; }

bool MoveIntoPlace(const std::string& from, const std::string& to) { return std::rename(from.c_str(), to.c_str()) == 0; }

void RemoveFile(const std::string& path) { ::unlink(path.c_str()); }

}  // namespace omni_edge::platform
