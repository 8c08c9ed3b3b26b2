// ChangeExecutor: carries out one seal-and-succeed change against the sidecars' admin planes.
//
// The order is the protocol (DESIGN.md, invariants 2, 5 and 8):
//   1. seal every partition the target map seals, at its owner; each seal is durable and answers
//      the parent's final end offset;
//   2. record those end offsets in the target map;
//   3. install the target map on the successors' owners: from here the successors take writes
//      (the write pause is 1 to 3, never a copy of the backlog);
//   4. install it on every other pod, so that every sidecar routes and forwards by it.
// Every step is idempotent (a sealed partition answers its end again; an installed epoch answers
// "stale"), so a step is retried with backoff while a pod is down or restarting, and a change
// interrupted anywhere completes when it is applied again. It never unseals: it rolls forward.
//
// Thread-compatible: one change at a time per executor (the caller serializes changes of a
// topic). Owned by its caller; the AdminClient must outlive it.
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include "shoal/client/admin_client.h"
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
  ChangeExecutor(client::AdminClient& admin, Options options);
  explicit ChangeExecutor(client::AdminClient& admin) : ChangeExecutor(admin, Options()) {}

  // Brings every pod of `map` (its peers) to at least the map's epoch.
  Status InstallEverywhere(const PartitionMap& map, ChangeTiming* timing = nullptr);
  // Installs `map` on one pod; a pod already at that epoch or newer counts as done.
  Status InstallOn(const PodName& pod, const PartitionMap& map, ChangeTiming* timing = nullptr);

  // Applies `target`, made from `current` by Split, Merge or Move. Returns the target as
  // installed, with the sealed parents' end offsets recorded.
  Result<PartitionMap> Apply(const PartitionMap& current, const PartitionMap& target,
                             ChangeTiming* timing);

 private:
  template <typename Fn>
  Status Retry(const std::string& what, Fn&& fn, ChangeTiming* timing);

  client::AdminClient& admin_;
  const Options opts_;
};

}  // namespace shoal::control
