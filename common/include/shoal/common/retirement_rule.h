// The retirement rule (invariant 4, docs/guarantees.md): when sealed partitions may leave the
// partition map. Pure functions over what the caller gathered (the topic's groups, where each
// stands), called alike by the sidecar before it installs a map that retires partitions
// (Topic::CheckAgainstHeld), by the planner when it proposes one (RetirablePartitions) and so by
// the protocol simulation, which runs both. The I/O stays with the callers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal {

// What the holder of a partition says of it.
struct HeldPartition {
  uint64_t start_offset = 0;  // the oldest retained event
  uint64_t end_offset = 0;    // the next offset (final once sealed)
  bool sealed = false;
  // Per group that committed: its lowest standing over the partition's range.
  std::map<std::string, uint64_t> standings;
};

// A group that has not consumed a partition to its end. `group` is empty when the topic has no
// group yet and the partition holds events.
struct NotConsumed {
  std::string group;
  uint64_t stands = 0;
  uint64_t end = 0;
};

// Whether every group of the topic (`groups`: the union of every pod's registry, groups that
// never read this partition included) consumed the sealed partition `p` to its end. nullopt
// when so; otherwise the first group that did not. A group without a commit stands at the oldest
// retained event (nothing below it can be handed out any more). With no group at all, only an
// empty partition is consumed: the first group to come reads the others. An unsealed partition
// is never consumed.
std::optional<NotConsumed> FirstNotConsumed(const HeldPartition& p,
                                            const std::set<std::string>& groups);

// The refusal of `FirstNotConsumed`'s answer for partition `id`, as the sidecar gives it.
std::string NotConsumedMessage(PartitionId id, const NotConsumed& n);

// The shape of a map that retires partitions (those of `held` absent from `next`): parents
// first (no partition leaves before a parent still in `next`, so a retired partition never hides
// a lineage some group still has to consume before its successors), and one pod's partitions at
// a time (the pod that holds them decides before any other pod takes the map; with two holders
// the first could take it while the second refuses it). Conflict naming what is wrong, or Ok.
Status CheckRetirementShape(const PartitionMap& held, const PartitionMap& next);

}  // namespace shoal
