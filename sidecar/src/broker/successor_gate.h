// SuccessorGate: the parents-first rule (invariant 3) for the partitions one sidecar holds.
//
// An event of a successor S goes to group G only after G consumed every partition of S's lineage
// (its parents, their parents, and so on, as far as they are still in the map) up to its final
// end offset. Every event of a key before a change is in some partition of that lineage, every
// event after it in S, and each partition is delivered in offset order, so G sees a key's events
// in acknowledgement order across any number of changes.
//
// Two cases make "the parents" not enough:
//   - An empty parent is no shortcut. A partition split off a cold range holds nothing, but its
//     own parents may still hold the key's earlier events: it counts as consumed only together
//     with its lineage. Cold ranges are the normal case after a surge.
//   - A retired partition (gone from the map) counts as consumed: it was retired only once every
//     group the topic knew had consumed it, parents before children (Topic::InstallMap and the
//     coordinator check both). A group that appeared after that starts after it, as a group that
//     starts after retention removed events does.
// Gating is per group: a slow group holds back only itself. Once released, a group stays
// released for that successor (the lineage's ends are final), until the group is deleted.
//
// Thread-safe (one mutex); the caller keeps the map it passes stable for the call. Owned by Topic.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shoal/common/partition_map.h"
#include "shoal/common/thread_annotations.h"

namespace shoal::broker {

class SuccessorGate {
 public:
  // Where `group` stands in `partition` (its commit, or the oldest retained event when that is
  // later), or nullopt when that is not known here yet (a remote partition whose commits have
  // not been fetched).
  using Standing =
      std::function<std::optional<uint64_t>(PartitionId partition, const std::string& group)>;
  // The end offset to reach in a sealed partition: its seal's, as its owner knows it (a map's
  // record of it is not trusted to be higher: a map made by hand may say 0).
  using End = std::function<uint64_t(const PartitionInfo& partition)>;

  // Whether `group` may read successor `s` of `map`.
  bool Released(const PartitionMap& map, const PartitionInfo& s, const std::string& group,
                const Standing& standing, const End& end);
  // Whether every one of `groups` is released on `s` already (no need to look again).
  bool AllReleased(PartitionId s, const std::set<std::string>& groups) const;
  // The partitions of s's lineage that are still in `map`, each once.
  static std::vector<const PartitionInfo*> Lineage(const PartitionMap& map,
                                                   const PartitionInfo& s);

  // A deleted group is released nowhere: if it comes back it starts over, parents first.
  void Forget(const std::string& group);
  // Drops what is kept for partitions `map` no longer lists.
  void Retain(const PartitionMap& map);

 private:
  bool LineageConsumed(const PartitionMap& map, const PartitionInfo& s, const std::string& group,
                       const Standing& standing, const End& end, std::set<PartitionId>& visited);

  mutable Mutex mu_;
  std::map<PartitionId, std::set<std::string>> released_ GUARDED_BY(mu_);
};

}  // namespace shoal::broker
