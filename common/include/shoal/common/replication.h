// The rules of replication as pure functions over values (no I/O, no clock): where a partition's
// copies go, what a quorum holds, which replica leads after a failover and where a returning
// replica's log must be cut. The coordinator's planner, the sidecar and the protocol simulation
// call these and nothing else for them (docs/guarantees.md, invariants 9-11).
//
// The shape is Kafka's, with the coordinator as its controller: each partition has an owner (its
// leader) and followers (PartitionInfo::replicas) on other pods; followers fetch the leader's
// log and append at the same offsets; the leader acknowledges an event once a quorum of the
// replicas holds it (the high watermark) and consumers read only below that.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal::replication {

inline constexpr uint32_t kMaxFactor = 1 + kMaxFollowers;

// How many of `replicas` copies (the leader's included) make a quorum: a majority.
inline size_t QuorumOf(size_t replicas) { return replicas / 2 + 1; }

// The high watermark of a partition: the largest offset below which a quorum of its replicas
// holds every event. `leader_end` is what the leader holds under its fsync policy, `follower_ends`
// what each follower last reported holding (0 for one that has not reported); the quorum is over
// 1 + follower_ends.size() copies (invariant 9).
uint64_t HighWatermark(uint64_t leader_end, std::span<const uint64_t> follower_ends);

// Where a pod is, when the platform says (Kubernetes: the pod's node and that node's
// topology.kubernetes.io/zone); empty fields are unknown.
struct PodPlace {
  std::string node;
  std::string zone;
};

// A copy of `map` (same epoch, validated) in which every active partition has
// min(factor, pods.size()) - 1 followers chosen from `pods`, never its owner: followers it has
// that are still among `pods` are kept, missing ones are added, extra ones dropped. A new
// follower goes where it adds a zone, then a node, the partition's copies do not have yet, then
// to the pod that follows the fewest partitions, then by name (so the result is deterministic).
// Sealed partitions keep their followers that are still among `pods` (a parent drains from any
// of them). Factor 1 clears every list. A follower added to a partition made before `map`'s
// epoch is named in its `joined` list (it joins a partition that holds events already).
// A copy on a pod in `leaving` (going away, and not among `pods`) is moved as Kafka reassigns
// a replica: a copy on a pod of `pods` replaces it (for a sealed partition too, unless its owner
// leaves as well), and the leaving copy stays a follower beside it, after the others, until a
// later call without it in `leaving` drops it. The caller drops it once the replacements hold
// their leader's end (they are no longer `joining`): until then the events a quorum
// acknowledged with the leaving copy are still held by a quorum of the copies that stay.
Result<PartitionMap> PlaceReplicas(const PartitionMap& map, std::span<const PodName> pods,
                                   uint32_t factor,
                                   const std::map<std::string, PodPlace>& places = {},
                                   const std::set<PodName>& leaving = {});

// What a replica says of its copy of a partition when a coordinator asks it in a failover, after
// it fenced the replica at the new epoch (it then refuses the old leader).
struct ReplicaState {
  PodName pod;
  Epoch last_epoch{0};  // the leader epoch of the last entry it holds (0: none)
  uint64_t end = 0;     // one past the last entry it holds under its fsync policy
  // A copy on a volume that was emptied, refetching what it held and not caught up with its
  // leader yet: it may have acknowledged events it no longer holds, so it neither counts
  // towards the quorum of answers nor leads (Kafka keeps such a replica out of the ISR).
  bool refetching = false;
  // The volume the copy is on (0: not said), as the sidecar names it (Topic::volume).
  uint64_t volume = 0;
  // A copy a map added to a partition that existed before (a follower that replaces one on a
  // pod that is leaving, or one more for a higher factor), not caught up with its leader yet.
  // Events acknowledged before it joined were held by a quorum of the copies then, which it was
  // not one of: with it and another copy that lagged, a failover could otherwise choose a copy
  // without them. It counts once it holds its leader's end (Kafka adds a reassigned replica to
  // the ISR only then).
  bool joining = false;
  // The copy's pod answered for a partition its map does not know yet (made by a change whose
  // map has not reached it): it holds nothing of it.
  bool absent = false;
};

// Whether a fenced copy does not count for a failover yet: it is joining, or its `refetching`
// mark stands. A joining copy's mark always stands. A sidecar that found no map on its volume
// marks the empty copies of partitions its first map already lists, on a first start and after
// a wipe alike: it cannot tell them apart. The coordinator can: it remembers the volume it first
// saw each pod hold a map on (`first_volume`, none for a pod it never saw with one). The mark
// stands on another volume than that one (the first was emptied or replaced, and what this copy
// acknowledged there may be gone); on that very volume it is a first start's, whose copies lost
// nothing. Kafka tells a replaced log directory the same way, by its directory id.
// With `info`, the partition as the failover's map has it: an absent copy (its pod's map does
// not know the partition yet) that `info` names as joined stands as joining too; one there from
// the partition's start counts (it holds nothing a quorum acknowledged without it).
bool RefetchingCounts(const ReplicaState& copy, std::optional<uint64_t> first_volume,
                      const PartitionInfo* info = nullptr);

// The partitions whose copies on `pod` join them with `next`: `next` names `pod` among a
// partition's followers added after it was made (PartitionInfo::joined, set by PlaceReplicas),
// by a map newer than `held`, the map the pod holds (one that held the map that added it, or a
// later one, marked it then and cleared the mark once caught up; one removed from the copies
// and added again is added at the later epoch). Such a copy was in none of the quorums that
// acknowledged what the partition holds and is `joining` until it caught up with its leader.
std::vector<PartitionId> JoiningCopies(const PartitionMap& held, const PartitionMap& next,
                                       const PodName& pod);

// The new leader of a partition whose leader is gone (invariant 10): once a quorum of its
// `replica_count` copies answered, the most complete of them: the highest last epoch, then the
// longest log, then the order of `answered` (the map's preference). It holds every acknowledged
// event, since each was held by a quorum and any two quorums meet. Unavailable while fewer than a
// quorum answered. A sealed partition's leader must hold its sealed end (`sealed_end`, the
// map's): a copy below it (one refetching after its volume was wiped) is never chosen, and
// while no copy that answered holds it the answer is Unavailable.
Result<PodName> ChooseLeader(std::span<const ReplicaState> answered, size_t replica_count,
                             std::optional<uint64_t> sealed_end = std::nullopt);

// One leader epoch's first offset in a replica's log (Kafka's leader-epoch checkpoint).
struct EpochStart {
  uint64_t epoch = 0;
  uint64_t start = 0;
  bool operator==(const EpochStart&) const = default;
};

// Where a follower whose last entry was appended in `follower_last_epoch` and whose log ends at
// `follower_end` must cut its log to follow a leader with this epoch history and end (invariant
// 11): the end of the follower's last epoch in the leader's log (the start of the next epoch the
// leader knows, or the leader's end for its own current epoch), never past the follower's end.
// Everything after that point was never acknowledged: it was not on the leader, which holds
// every acknowledged event. A follower with an epoch the leader never had is cut to the end of
// the latest epoch before it that the leader had, at least: where its own entries of later
// epochs begin, only the follower knows (ForeignEpoch, FollowerTruncationPoint).
uint64_t TruncationPoint(std::span<const EpochStart> leader_history, uint64_t leader_end,
                         uint64_t follower_last_epoch, uint64_t follower_end);

// Whether a follower's last entry, appended in `follower_last_epoch` (0: it has none), is of an
// epoch the leader never had: then that entry is not the leader's, whatever the offsets say,
// and the follower's log left the leader's in that epoch or before (the leader answers
// `diverged` even when TruncationPoint is the follower's end).
bool ForeignEpoch(std::span<const EpochStart> leader_history, uint64_t follower_last_epoch);

// Where a follower cuts its log on a `diverged` answer that names `leader_point`
// (TruncationPoint) and carries the leader's epoch history: there, or earlier where the
// follower's own entries of an epoch the leader never had begin. The last epoch the leader had
// at or below the follower's last one is shared up to its end in the leader's log; the
// follower's entries of any later epoch are its own (Kafka's KIP-279: the follower goes on
// from the epoch the leader answers with). A cut that leaves a foreign epoch behind is followed
// by another `diverged` answer, until the logs meet.
uint64_t FollowerTruncationPoint(std::span<const EpochStart> leader_history, uint64_t leader_point,
                                 std::span<const EpochStart> follower_history,
                                 uint64_t follower_end);

}  // namespace shoal::replication
