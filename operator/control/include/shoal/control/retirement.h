// The retirement rule (invariant 4), a pure function: which sealed partitions of a map may leave
// it, given what every pod's admin plane reports. The control loop and the protocol simulation
// decide by it; the sidecars check the same rule again when the map arrives (Topic::InstallMap),
// so that no coordinator bug can retire a partition early.
//
// A sealed partition P is retirable when
//   - every pod of the map answered (the topic's groups are the union of every sidecar's
//     registry: a group seen anywhere is a group everywhere, including one that has not read P
//     yet and so left no commit there);
//   - every such group consumed P to its end (its commit, or P's oldest retained event when that
//     is later, is at P's end offset); with no group at all, P is retirable only when it holds
//     nothing to read (a group that comes later must still find its events);
//   - P's parents still in the map are retirable too (retirement goes parents first, so a
//     retired partition never hides a lineage its successors' readers still need);
//   - P's successors hold its producers' state on their own disks (exactly-once survives).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "shoal/common/partition_map.h"
#include "shoal/control/admin_partitions.h"

namespace shoal::control {

// `reports`: the admin-plane report of each pod that answered, by pod name. Returns the retirable
// partitions in id order; empty when some pod of the map did not answer.
std::vector<PartitionId> RetirablePartitions(
    const PartitionMap& map, const std::map<std::string, AdminPartitionsReport>& reports);

// The part of `retirable` that one change retires: the partitions of one pod (the owner of the
// first). A retirement is decided by the pod that holds the partitions, which checks it against
// every group the topic knows before any other pod sees the map; with the partitions of two pods
// in one change, the first could take the map and the second refuse it (a group it learnt of in
// between), leaving a partition retired on some pods and not on others. So the sidecars refuse a
// map that retires partitions of more than one pod, and the coordinator retires pod by pod.
std::vector<PartitionId> OneHoldersRetirement(const PartitionMap& map,
                                              const std::vector<PartitionId>& retirable);

}  // namespace shoal::control
