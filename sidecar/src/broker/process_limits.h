// What this sidecar process may hold and holds now: its open-files limit (RLIMIT_NOFILE, the soft
// one, which is what open(2) answers EMFILE against) and the descriptors it has open, and its
// memory limit (the cgroup's memory.max, v2, or memory.limit_in_bytes, v1; none outside a
// limited cgroup) and resident memory. Each partition a sidecar holds keeps two files open (its
// log and its commit store), so the coordinator places partitions by these numbers
// (GET /v1/admin/partitions "limits").
// A value and a function; reads /proc and /sys, never fails (what it cannot read is 0 / none).
#pragma once

#include <cstdint>
#include <optional>

namespace shoal::broker {

inline constexpr uint32_t kFilesPerPartition = 2;

struct ProcessLimits {
  uint64_t open_files_limit = 0;  // 0: unknown
  uint64_t open_files = 0;
  std::optional<uint64_t> memory_limit_bytes;
  uint64_t memory_bytes = 0;
};

ProcessLimits ReadProcessLimits();

}  // namespace shoal::broker
