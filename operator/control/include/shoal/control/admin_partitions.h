// AdminPartition: one partition as a sidecar's admin plane reports it on
// GET /v1/admin/partitions, counters cumulative since the sidecar started:
//
//   {"topic":"orders","pod":"orders-0","epoch":7,"digest":"...","groups":["billing"],
//    "partitions":[
//     {"id":3,"state":"active","lo":0,"hi":1073741824,"start_offset":0,"end_offset":120,
//      "producers_durable":true,"appended":12345,"load_buckets":[c0,...,c15],
//      "top_hashes":[{"hash":123456,"count":789}],"commits":{"groupA":100}}]}
//
// and the pure functions over it: the parser, and the diff of two reports of one partition into
// the hash-range shape of its load over the interval between them (what the planner splits by).
// Values and free functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"
#include "shoal/control/observer.h"

namespace shoal::control {

// A heavy hash point and how many events it got since the sidecar started.
struct HashCount {
  uint32_t hash = 0;
  uint64_t count = 0;
  bool operator==(const HashCount&) const = default;
};

struct AdminPartition {
  PartitionId id;
  PartitionState state = PartitionState::kActive;
  HashRange range;
  uint64_t start_offset = 0;  // oldest retained offset
  uint64_t end_offset = 0;    // next offset to be written (final once sealed)
  // The partition's idempotent-producer state is on disk, so a successor can take it over.
  bool producers_durable = false;
  uint64_t appended = 0;  // events appended since the sidecar started
  // Events appended since the sidecar started, per sixteenth of [lo, hi).
  std::array<uint64_t, kLoadBuckets> load_buckets{};
  // The heaviest hash points the sidecar tracks (a bounded list; a hash may enter or leave it).
  std::vector<HashCount> top_hashes;
  std::map<std::string, uint64_t> commits;  // per consumer group: the committed offset

  bool operator==(const AdminPartition&) const = default;
};

// What the sidecar process may hold (its "limits"; absent from older sidecars: all zero).
struct PodLimits {
  uint64_t open_files_limit = 0;  // RLIMIT_NOFILE; 0: unknown or unlimited
  uint64_t open_files = 0;
  uint64_t files_per_partition = 2;
  uint64_t memory_limit_bytes = 0;  // 0: none
  uint64_t memory_bytes = 0;

  // The most partitions (active and sealed) the pod can hold, given the `held` it holds now:
  // what its open descriptors leave under the limit, less kFilesReserve for connections; nullopt
  // when the limit is unknown.
  std::optional<uint32_t> MaxPartitions(size_t held) const;
  bool operator==(const PodLimits&) const = default;
};
// Descriptors kept free for connections, logs and the like. A pod that takes the producers' and
// consumers' connections and forwards to its peers (two connection pools per peer, each as deep
// as its busiest moment) had 24 sockets open at 4 pods on an idle machine, and ran out of 50 on
// a loaded one; 64 keeps that room and costs a pod with a limit of 1,024 about 16 partitions.
inline constexpr uint64_t kFilesReserve = 64;

struct AdminPartitionsReport {
  std::string topic;
  std::string pod;
  Epoch epoch{0};
  PodLimits limits;
  // Every consumer group the sidecar knows (its registry), also those without a commit here.
  std::vector<std::string> groups;
  std::vector<AdminPartition> partitions;
};

// Parses the body of GET /v1/admin/partitions. Every field of the format above is required with
// its type (a missing "commits" must not read as "no group has committed"); unknown fields are
// ignored, so the sidecar can add some. InvalidArgument naming the field otherwise.
Result<AdminPartitionsReport> ParseAdminPartitions(std::string_view body);

// The shape of a partition's load over one interval.
struct HashLoad {
  // Share of the interval's events per sixteenth of the range; all zero when nothing was
  // appended in the interval or the counters cannot be compared.
  std::array<double, kLoadBuckets> buckets{};
  uint32_t top_hash = 0;  // 0 with top_share 0 when unknown
  double top_share = 0;   // in [0, 1]
};

// Diffs two reports of the same partition from the same sidecar, `before` taken earlier.
// buckets[i] = delta_i / sum of deltas. The top hash is the one with the largest count delta
// among the hashes in both reports (a hash new to the list has no earlier count; ties go to the
// smaller hash), its share = that delta / the delta of `appended`, clamped to [0, 1]. A counter
// that went down (the sidecar restarted in between) makes the whole diff unknown: all zero.
HashLoad DiffHashLoad(const AdminPartition& before, const AdminPartition& now);

}  // namespace shoal::control
