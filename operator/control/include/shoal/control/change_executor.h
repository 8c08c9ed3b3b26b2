// ChangeExecutor: carries out one seal-and-succeed change against the sidecars' admin planes.
//
// The order is the protocol (docs/design.md; docs/guarantees.md, invariants 2, 5 and 8):
//   1. seal every partition the target map seals, at its owner, for this change (the seal names
//      the target's epoch, digest and the successors it gives the partition); each seal is
//      durable and answers the parent's final end offset;
//   2. record those end offsets in the target map;
//   3. install the target map on the owners of partitions it retires (they refuse a retirement
//      some group has not consumed, before any other pod saw the map), then on the successors'
//      owners: from here the successors take writes (the write pause is 1 to 3, never a copy of
//      the backlog);
//   4. install it on every other pod, so that every sidecar routes and forwards by it.
// Every step is idempotent (a seal for the same change answers its end again; the map held
// already answers "already held"), so a step is retried with backoff while a pod is down or
// restarting, and a change interrupted anywhere completes when it is applied again. It never
// unseals: it rolls forward.
//
// Fencing (invariant 5): an answer "stale_epoch" or "conflict" means another map or change holds
// the epoch or the partition: some other coordinator acted. It is never counted as done; the
// change stops there and returns that status, and the caller re-reads the authority's record
// (ControlLoop::Reconcile) before it plans again.
//
// Thread-compatible: one change at a time per executor (the caller serializes changes of a
// topic). Owned by its caller; the AdminPlane must outlive it.
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include "shoal/client/admin_plane.h"
#include "shoal/common/partition_map.h"

namespace shoal::control {

struct ChangeTiming {
  double pause_ms = 0;  // first seal sent .. successors' owners hold the new map
  double total_ms = 0;  // first seal sent .. every pod holds it
  double seal_ms = 0;   // first seal sent .. every parent sealed
  int retries = 0;
};

class ChangeExecutor {
 public:
  struct Options {
    std::chrono::milliseconds step_timeout{120000};
    std::chrono::milliseconds backoff_start{5};
    std::chrono::milliseconds backoff_max{250};
    // Asked before every request to a sidecar: false stops the change where it is (the
    // operator lost its leader lease; the next leader resumes the change from the saved
    // plan). Empty: always allowed.
    std::function<bool()> may_act;
  };
  ChangeExecutor(client::AdminPlane& admin, Options options);
  explicit ChangeExecutor(client::AdminPlane& admin) : ChangeExecutor(admin, Options()) {}

  // Brings every pod of `map` (its peers) to the map.
  Status InstallEverywhere(const PartitionMap& map, ChangeTiming* timing = nullptr);
  // Installs `map` on one pod; a pod that holds it already counts as done. A pod that holds a
  // newer epoch (StaleEpoch) or another map of this one (Conflict) does not: that status comes
  // back.
  Status InstallOn(const PodName& pod, const PartitionMap& map, ChangeTiming* timing = nullptr);
  // The same at an explicit address (a leaving pod the map no longer lists).
  Status InstallAt(const PodName& pod, const PeerAddress& address, const PartitionMap& map,
                   ChangeTiming* timing = nullptr);

  // Applies `target`, made from `current` by Split, Merge or Move. Returns the target as
  // installed, with the sealed parents' end offsets recorded.
  // `on_sealed` (when given) is called once every parent is sealed, before any pod is given the
  // map (from then on successors may take writes): with the target and the ends of the seals
  // that a quorum of copies held when they were answered (those at the parent's leader in
  // `current`; PartitionInfo::end_known). The caller keeps it as the change's target, durably
  // before it returns Ok (an error stops the change there): a later try, and a failover carried
  // into the change that gives a parent a new leader, seal that parent at that very end. A
  // parent sealed at another end than the target knows is FailedPrecondition.
  using OnSealed = std::function<Status(const PartitionMap& target_with_ends)>;
  Result<PartitionMap> Apply(const PartitionMap& current, const PartitionMap& target,
                             ChangeTiming* timing, const OnSealed& on_sealed = {});

  // Whether the sidecar at `address` holds no map at all (its admin plane answers 404): after
  // its volume was emptied, or before its first map.
  bool HoldsNoMap(const PeerAddress& address);
  // Whether `pod` leads nothing in `map` (no partition, active or sealed, has it as its owner)
  // and follows at least one partition.
  static bool OnlyFollows(const PartitionMap& map, const PodName& pod);

 private:
  template <typename Fn>
  Status Retry(const std::string& what, Fn&& fn, ChangeTiming* timing);

  client::AdminPlane& admin_;
  const Options opts_;
};

}  // namespace shoal::control
