// Observer: what the control loop knows about a topic's load at one moment (an Observation), and
// the interface of whatever gathers it (KEDA calls this a scaler: it returns metrics; deciding is
// the policy's, a separate pure function). MetricsObserver scrapes the sidecars; the simulator
// computes observations from a load trace.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/control/platform.h"

namespace shoal::control {

inline constexpr size_t kLoadBuckets = 16;

struct AdminPartitionsReport;  // admin_partitions.h

// One partition's load over the last observation interval.
struct PartitionLoad {
  PartitionId id;
  bool active = true;
  double rate = 0;   // events appended per second
  uint64_t lag = 0;  // the largest lag (end offset - commit) over the consumer groups
  uint64_t end = 0;  // its end offset: how many events it took since it was created
  // Share of `rate` that fell in each sixteenth of the partition's hash range (sums to 1 when
  // rate > 0; all zero when unknown).
  std::array<double, kLoadBuckets> buckets{};
  // The heaviest single hash point seen and its share of `rate` (0 when unknown): a hot key.
  uint32_t top_hash = 0;
  double top_share = 0;
  // The sealed partitions this one succeeds (from the map): a new partition's load before it
  // existed is at most theirs.
  std::vector<PartitionId> parents;
};

// What one consumer group's consumers on one pod took over the last observation interval, and
// what waited for them there.
struct ConsumerLoad {
  // Events per second the pod's sidecar handed to the group's consumers, from its own
  // partitions or read through them from ancestors held elsewhere.
  double delivered_rate = 0;
  // The group's unconsumed events the pod serves: its lag on every partition the pod owns
  // (active and sealed), plus the pod's share by hash range of the lag on sealed ancestors of
  // its active partitions held by other pods. With backlog left after the interval, the
  // consumers had more to read than they took: they were saturated.
  uint64_t backlog = 0;
  // Seconds per second of the interval the group's consumers on the pod held a batch (from an
  // answer with events to their next consume request): a busy fraction, from 0 (they waited for
  // events all along) to 1 (never); a little above 1 where a batch handed out in an earlier
  // interval ended in this one. delivered_rate / busy is what they take while working, saturated
  // or not. nullopt when the sidecar does not export it (or no earlier sample of it).
  std::optional<double> busy;
  // The seconds the rates are taken over (0: not said).
  double interval_s = 0;
};

// A pod's data volume as its sidecar reports it (shoal_disk_*).
struct DiskState {
  double free_bytes = 0;     // beside the disk reserve
  double reserve_bytes = 0;  // kept for commits, groups, seals and retirement
  bool reserve_in_use = false;  // the volume filled up: produce is refused
  // Under twice the reserve free, or the reserve in use (the ShoalDiskPressure alert's rule).
  bool pressure() const { return reserve_in_use || free_bytes < 2 * reserve_bytes; }
  bool operator==(const DiskState&) const = default;
};

struct Observation {
  std::chrono::steady_clock::time_point at;
  Epoch epoch{0};  // the map these numbers were taken under
  // Every partition of that map that could be observed (active and sealed), by id.
  std::map<PartitionId, PartitionLoad> partitions;
  // Per pod: the consumer's CPU over its request, where the platform measures it.
  std::map<std::string, double> cpu_utilization;
  // Per pod: the most partitions (active and sealed) its sidecar can hold open, from its
  // open-files limit and use (admin_partitions.h PodLimits); pods without a known limit absent.
  std::map<std::string, uint32_t> max_partitions;
  // Per pod, per consumer group: what the group's consumers there took and what waited for
  // them. Only pods whose sidecar exports what it delivers, from their second observation on;
  // a pod absent here is not missing (the capacity of its consumers is unknown, nothing more).
  std::map<std::string, std::map<std::string, ConsumerLoad>> consumers;
  // Per pod: its data volume, where the sidecar reports one.
  std::map<std::string, DiskState> disks;
  // What could not be observed, in words ("orders-2: /metrics: connection refused"). A decision
  // never shrinks anything on an observation with something missing.
  std::vector<std::string> missing;

  bool complete() const { return missing.empty(); }
};

class Observer {
 public:
  virtual ~Observer() = default;
  // Observes the topic whose current map is `map`, running on `pods`. Never fails: what it
  // cannot see goes to Observation::missing.
  virtual Observation Observe(const PartitionMap& map, const std::vector<PodInfo>& pods) = 0;
  // The pod's admin plane's view of every partition it holds (commits per group, end offsets,
  // whether producer state is durable): what deciding to retire a sealed partition needs.
  // NotFound when the sidecar has no such endpoint, Unauthenticated on a wrong token,
  // Unavailable when it does not answer, InvalidArgument when the answer is malformed.
  virtual Result<AdminPartitionsReport> PartitionsOf(const PodInfo& pod) = 0;
};

}  // namespace shoal::control
