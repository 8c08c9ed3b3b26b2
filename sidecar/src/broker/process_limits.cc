#include "broker/process_limits.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace shoal::broker {

namespace {

std::optional<uint64_t> ReadNumber(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text == "max") return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

ProcessLimits ReadProcessLimits() {
  ProcessLimits l;
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    l.open_files_limit = static_cast<uint64_t>(r.rlim_cur);
  }
  if (DIR* d = opendir("/proc/self/fd")) {
    uint64_t n = 0;
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
    l.open_files = n > 0 ? n - 1 : 0;  // less the one opendir holds
  }
  // cgroup v2, else v1 (whose "no limit" is a huge number, not "max").
  l.memory_limit_bytes = ReadNumber("/sys/fs/cgroup/memory.max");
  if (!l.memory_limit_bytes) {
    auto v1 = ReadNumber("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    if (v1 && *v1 < (uint64_t{1} << 60)) l.memory_limit_bytes = v1;
  }
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (statm >> size >> resident) {
    l.memory_bytes = resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  return l;
}

}  // namespace shoal::broker
