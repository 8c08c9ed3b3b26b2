// Failover (invariant 10) as a coordinator carries it out against sidecars' admin planes: fence
// every reachable copy of the partitions whose leader is gone (and the old leader itself when it
// answers: one back with its data counts among the copies), choose each partition's new leader
// with replication::ChooseLeader over the answers, build the failover map and install it, new
// leaders first. The control loop's MaybeFailOver and `shoal torture` (which plays the
// coordinator) share these steps; when to fail over (a leader down for long enough, a wiped
// one at once) stays with the caller.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shoal/client/admin_plane.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal::control {

// Fences the copies of `ids` (replicated partitions of `map`, active or sealed) at leader epoch
// `floor` and chooses a leader for each partition a quorum of whose copies answered. Every
// follower of a partition is fenced, and its old leader too, at the admin address `reachable`
// gives (nullptr: not reachable, skipped; a pod that lost its data should be given as not
// reachable, it holds nothing to answer for). Candidates are taken in the map's order of
// preference, the old leader last (a follower leads before it on a tie). Returns the chosen
// (partition, leader) pairs, possibly fewer than `ids` (the rest are named in *why, if given);
// Unavailable when no partition could be given a leader. *fenced (if given) receives every
// partition at least one copy was fenced for: those copies take nothing more from a leader
// below `floor`, so the failover must be finished at `floor` or above.
// `first_volumes`: per pod, the volume the coordinator first saw it hold a map on
// (FirstVolumes); a copy's refetching mark counts only on another volume
// (replication::RefetchingCounts).
using FirstVolumes = std::map<std::string, uint64_t>;
Result<std::vector<std::pair<PartitionId, PodName>>> FenceAndChooseLeaders(
    client::AdminPlane& admin, const PartitionMap& map, const std::vector<PartitionId>& ids,
    const std::function<const PeerAddress*(const PodName&)>& reachable, Epoch floor,
    const FirstVolumes& first_volumes, std::string* why = nullptr,
    std::set<PartitionId>* fenced = nullptr);

// Records the volume `pod` is on (AdminPlane::VolumeOf) as the first it was seen holding a map
// on, unless one is recorded already; the caller asks only pods that hold a map, and keeps
// `first_volumes` with its state (a restarted coordinator must still tell a replaced volume).
// Returns whether it recorded one.
bool RecordFirstVolume(client::AdminPlane& admin, const PodName& pod,
                       const std::string& admin_address, FirstVolumes* first_volumes);

// The failover map: `map` with each partition led by its chosen leader (PartitionMap::FailOver)
// at an epoch of at least `floor` (the fence's epoch).
Result<PartitionMap> FailOverMap(const PartitionMap& map,
                                 const std::vector<std::pair<PartitionId, PodName>>& leaders,
                                 Epoch floor);

// Installs a failover map on the new leaders first (they take writes as soon as they hold it),
// then on every other pod of the map that `reachable` gives; one attempt each (a pod that
// misses it gets it later as a pod behind the current map). Returns the pods that took it;
// *failed (if given) names the others with their reasons.
std::vector<PodName> InstallFailOverMap(
    client::AdminPlane& admin, const PartitionMap& target,
    const std::vector<std::pair<PartitionId, PodName>>& leaders,
    const std::function<const PeerAddress*(const PodName&)>& reachable,
    std::string* failed = nullptr);

}  // namespace shoal::control
