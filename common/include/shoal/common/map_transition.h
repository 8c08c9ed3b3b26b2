// The map transition rule (invariants 1, 2 and 5, docs/guarantees.md): whether a sidecar that
// holds some partitions may move from the map it holds to the next one. A pure function over
// what the sidecar holds (each partition's range and seal), called by Topic::CheckAgainstHeld
// with the state gathered under its lock; the retirement rule beside it is
// common/retirement_rule.h. Also the seal's value types that the rule reads, which the sidecar
// stores (Partition) and sends (the admin plane).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal {

// A successor of a partition as a change names it: id, owner pod and hash range. Id and range
// are fixed for the successor's whole life; so is the owner, except that a failover moves the
// leadership of a replicated successor to one of its copies (invariant 10).
struct SuccessorRef {
  PartitionId id;
  PodName owner;
  HashRange range;
  bool operator==(const SuccessorRef&) const = default;
};
// The successors `map` gives partition `parent`, in id order.
std::vector<SuccessorRef> SuccessorRefs(const PartitionMap& map, PartitionId parent);
// Whether `map` gives `parent` the successors a seal recorded: the same ids and ranges, each led
// by the owner the seal names or, once failed over (a leader epoch above its birth), by the copy
// the failover chose.
bool SameSuccessors(const std::vector<SuccessorRef>& sealed, const PartitionMap& map,
                    PartitionId parent);

// The change a seal serves (invariants 2 and 5): the epoch and digest of the change's target
// map, and the successors that map gives the sealed partition.
struct SealIntent {
  Epoch epoch{0};
  std::string digest;
  std::vector<SuccessorRef> successors;
  // The sealed partition's range as the change's map has it (a map made by hand may give an id
  // another partition's range); absent: not checked.
  std::optional<HashRange> range;
  bool operator==(const SealIntent&) const = default;
};

// A partition's seal, durable in its directory: the final end offset, the change it was made for
// (absent for a seal written before seals named their change), and the successors whose owners
// confirmed they took over from it.
struct SealRecord {
  uint64_t end = 0;
  std::optional<SealIntent> intent;
  std::vector<uint32_t> confirmed;  // successor ids, sorted
};

// Whether a seal lost its race: `info` (of a map of `map_epoch`) has the partition active, the
// seal was made for a change of that epoch or an earlier one (which can then never be
// installed), and no successor confirmed it (nothing but this partition took writes for its
// range). Such a seal is undone when the map is installed.
bool SealVoid(const SealRecord& seal, const PartitionInfo& info, Epoch map_epoch);

// What a sidecar holds of one partition.
struct HeldPartitionState {
  PartitionId id;
  HashRange range;
  std::optional<SealRecord> seal;
  // The leader epoch of the partition in the map held (PartitionInfo::LeaderEpoch).
  Epoch leader_epoch{0};
  // A copy this pod follows (another pod leads it), not a partition it leads.
  bool follower = false;
  // Where the log held here ends (one past its last record).
  uint64_t end = 0;
};

// Whether `pod`, leading `held` in the map it holds, takes the seal `next` records for it
// instead of refusing the map until it is sealed here: a failover gave the partition back to
// this pod (a newer leader epoch) after another copy sealed it, and its log ends exactly at the
// sealed end, so the seal cuts nothing. Whether that end is a sealed partition's real end or a
// placeholder of a change whose seal is still to come, sealing here takes what the copy holds,
// as the change's seal would: the failover chose it as the most complete of a quorum of copies.
// When the map knows the end as the one a seal was answered with (PartitionInfo::end_known), a
// copy that holds more takes it too, its tail cut: that tail was never acknowledged (the seal
// took everything its leader had, once a quorum held it). A copy that holds less, or more of an
// end not known, is refused (it waits for the seal or a newer map).
bool TakesSealGivenBack(const PodName& pod, const HeldPartitionState& held,
                        const PartitionInfo& next);

// Whether the pod `pod`, holding `held`, may take `next`: every partition it leads keeps its
// owner and range, unless the map moved its leadership by a failover (a newer leader epoch that
// names this pod among the followers: the copy follows the new leader, which cuts its
// unacknowledged tail); a copy it follows counts as held for what the map gives it (a follower
// made the leader holds the partition), unless the map does not know it at all (an id at or past
// the map's NextId: a coordinator re-made its map without the change that made it, and taking
// that map would drop what the copy holds); one the map drops is sealed (only sealed partitions
// retire; each is added to `dropped` with its end offset for the retirement rule); one the map has
// active is not sealed here, unless that seal is void (SealVoid) or made for a later change (the
// executor seals ahead of its map); one the map seals was sealed here first, at the end offset and
// for the successors the map records; none is one the map declares lost (PartitionMap::DeclareLost:
// a pod holding it did not lose its data). Conflict naming the first partition that breaks it, or
// Ok. `fenced_empty` as for CheckNothingLost.
Status CheckMapTransition(const PodName& pod, const std::vector<HeldPartitionState>& held,
                          const PartitionMap& next,
                          std::vector<std::pair<PartitionId, uint64_t>>* dropped,
                          const std::vector<std::pair<PartitionId, Epoch>>& fenced_empty = {});

// Whether `pod`, holding the partitions `held` (ids), holds everything `next` gives it from
// earlier maps: a partition born before next's epoch (PartitionInfo::born), not lost, that it
// owns and does not hold, was held here once (its change installed its map here before it
// completed) and is gone: DataLost naming it, so that it is declared lost by the coordinator
// instead of started again empty. Partitions of unknown birth (born 0) are not checked.
// `fenced_empty` lists the partitions this pod answered a failover's fence for while it held
// nothing of them (never in a map it installed), with the leader epoch of that fence: one the
// map makes this pod the leader of at that leader epoch or later is started empty (the
// failover chose it from a quorum of answers, so nothing acknowledged is elsewhere only).
Status CheckNothingLost(const PodName& pod, const std::vector<PartitionId>& held,
                        const PartitionMap& next,
                        const std::vector<std::pair<PartitionId, Epoch>>& fenced_empty = {});

// The partitions `map` gives `pod` that it must hold already (not lost, made by a map before
// `made_before`, or of unknown birth): what a pod that holds no map has lost. For an installed
// map made_before is its epoch + 1; for a change not carried out yet, its epoch (the
// partitions it makes are new).
std::vector<PartitionId> PartitionsMadeBefore(const PartitionMap& map, const PodName& pod,
                                              Epoch made_before);

}  // namespace shoal
