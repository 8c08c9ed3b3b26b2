// SuccessorGate: the parents-first rule (invariant 3) for the partitions one sidecar holds, per
// hash point.
//
// Per-key order needs parents first per key, not per partition: an event of successor S with
// hash h goes to group G only after G consumed every event with hash h in S's lineage (its
// parents, their parents, and so on, as far as they are still in the map). Every event of a key
// before a change is in some partition of that lineage, every event after it in S, and each
// partition's events of one hash point are delivered in offset order, so G sees a key's events
// in acknowledgement order across any number of changes.
//
// The gate applies the rule per successor range: S is released to G once every partition of its
// lineage is consumed to its final end over the part of S's range it shares with S's path to it
// (its standing per hash point, RangeStanding). Until then S's consumers read the lineage itself,
// restricted to S's range (Frontier): the ancestors whose own lineage is consumed over that
// range come first, so a split divides a parent's unread backlog among the successors' pods,
// each reading its range at the same time as the others. Kinesis and Pravega gate whole
// partitions behind whole parents, which leaves a parent's backlog to one reader; that is the
// special case where every range is the parent's whole range.
//
// Two cases make "the parents" not enough:
//   - An empty parent is no shortcut. A partition split off a cold range holds nothing, but its
//     own parents may still hold the key's earlier events: it counts as consumed only together
//     with its lineage. Cold ranges are the normal case after a surge.
//   - A retired partition (gone from the map) counts as consumed: it was retired only once every
//     group the topic knew had consumed it, parents before children (Topic::InstallMap and the
//     coordinator check both). A group that appeared after that starts after it, as a group that
//     starts after retention removed events does.
//   - A lost partition (PartitionMap::DeclareLost: its pod's volume came back empty) has nothing
//     to consume, but is no shortcut either: the gate walks past it to its parents.
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
  // Where `group` stands in `partition` over `range` (the lowest standing of its hash points
  // there: its commits, or the oldest retained event when that is later), or nullopt when that
  // is not known here yet (a remote partition whose commits have not been fetched).
  using Standing = std::function<std::optional<uint64_t>(
      PartitionId partition, const std::string& group, const HashRange& range)>;
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

  // An ancestor to read for a successor, restricted to a range.
  struct Read {
    const PartitionInfo* partition;
    HashRange range;
  };
  // What `group` reads next of s's lineage, over s's range: each ancestor not consumed over the
  // range its path from s shares with it, whose own lineage is consumed over that range (so
  // reading it keeps parents first per hash point). Empty when the lineage is consumed, or when
  // some standing is not known yet.
  std::vector<Read> Frontier(const PartitionMap& map, const PartitionInfo& s,
                             const std::string& group, const Standing& standing, const End& end);

  // A deleted group is released nowhere: if it comes back it starts over, parents first.
  void Forget(const std::string& group);
  // Drops what is kept for partitions `map` no longer lists.
  void Retain(const PartitionMap& map);

 private:
  // Whether the lineage of `p` (not `p` itself) is consumed by `group` over `range`.
  bool LineageConsumed(const PartitionMap& map, const PartitionInfo& p, const HashRange& range,
                       const std::string& group, const Standing& standing, const End& end);
  bool IsReleased(PartitionId id, const std::string& group) const;

  mutable Mutex mu_;
  std::map<PartitionId, std::set<std::string>> released_ GUARDED_BY(mu_);
};

}  // namespace shoal::broker
