// The parts of os.h that need no OS call of their own.
#include "base/platform/os.h"

#include <memory>

namespace omni_edge::platform {

std::string ResolveOrigin(const std::string& path) {
  static const std::string kOrigin = "$ORIGIN/";
  if (path.compare(0, kOrigin.size(), kOrigin) != 0) return path;
  return ModuleDirectory() + "/" + path.substr(kOrigin.size());
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(OpenFile(path, "rb"), &std::fclose);
  if (file == nullptr) return Status::Error("file_missing", path + ": cannot open");
  std::string bytes;
  char chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, file.get())) > 0) bytes.append(chunk, n);
  if (std::ferror(file.get())) return Status::Error("io_error", path + ": read failed");
  return bytes;
}

std::vector<MemoryRange> Subtract(const std::vector<MemoryRange>& after, const std::vector<MemoryRange>& before) {
  std::vector<MemoryRange> out;
  size_t j = 0;
  for (MemoryRange r : after) {  // both sorted and disjoint
    while (j < before.size() && before[j].end <= r.begin) ++j;
    for (size_t k = j; k < before.size() && before[k].begin < r.end && r.begin < r.end; ++k) {
      if (before[k].begin > r.begin) out.push_back({r.begin, before[k].begin});
      r.begin = before[k].end > r.begin ? before[k].end : r.begin;
    }
    if (r.begin < r.end) out.push_back(r);
  }
  return out;
}

}  // namespace omni_edge::platform
