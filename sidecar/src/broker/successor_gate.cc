#include "broker/successor_gate.h"

#include "shoal/common/range_standing.h"

namespace shoal::broker {

bool SuccessorGate::IsReleased(PartitionId id, const std::string& group) const {
  MutexLock lock(mu_);
  auto it = released_.find(id);
  return it != released_.end() && it->second.count(group);
}

bool SuccessorGate::Released(const PartitionMap& map, const PartitionInfo& s,
                             const std::string& group, const Standing& standing, const End& end) {
  if (s.parents.empty()) return true;
  if (IsReleased(s.id, group)) return true;
  if (!LineageConsumed(map, s, s.range, group, standing, end)) return false;
  MutexLock lock(mu_);
  released_[s.id].insert(group);
  return true;
}

// Walks the lineage along each path, narrowing the range to what each partition on the path
// shares with it: a split's parent is read over its successor's part, a merge's parents over
// theirs. A lineage is small (a partition has a few parents, and retired ones are gone), but a
// partition may be reached along several paths with different ranges, so nothing is skipped as
// "visited"; a partition released here stands for its whole lineage over its whole range.
bool SuccessorGate::LineageConsumed(const PartitionMap& map, const PartitionInfo& p,
                                    const HashRange& range, const std::string& group,
                                    const Standing& standing, const End& end) {
  for (PartitionId parent : p.parents) {
    const PartitionInfo* pi = map.Find(parent);
    if (!pi) continue;  // retired: consumed by every group known then (see the header)
    const HashRange r = Intersect(range, pi->range);
    if (Empty(r)) continue;
    if (pi->lost) {  // nothing to consume there; what came before it may still be unread
      if (!LineageConsumed(map, *pi, r, group, standing, end)) return false;
      continue;
    }
    const auto stands = standing(parent, group, r);
    if (!stands || *stands < end(*pi)) return false;
    if (IsReleased(parent, group)) continue;  // its lineage is done over its whole range
    // Consumed to its end, and its own lineage too: an empty parent is no shortcut.
    if (!LineageConsumed(map, *pi, r, group, standing, end)) return false;
  }
  return true;
}

std::vector<SuccessorGate::Read> SuccessorGate::Frontier(const PartitionMap& map,
                                                         const PartitionInfo& s,
                                                         const std::string& group,
                                                         const Standing& standing,
                                                         const End& end) {
  std::vector<Read> out;
  // Depth first along each path, with the range narrowed as in LineageConsumed. A partition
  // whose standing is not known here yet (a peer's commits not fetched yet) counts as not
  // consumed: reading it is safe once its own lineage is consumed (its owner hands out only what
  // the group has not consumed), and it is never taken as consumed without knowing.
  std::function<void(const PartitionInfo&, const HashRange&)> walk =
      [&](const PartitionInfo& p, const HashRange& range) {
        for (PartitionId parent : p.parents) {
          const PartitionInfo* pi = map.Find(parent);
          if (!pi) continue;
          const HashRange r = Intersect(range, pi->range);
          if (Empty(r)) continue;
          if (pi->lost) {  // nothing to read there; its own lineage may have
            walk(*pi, r);
            continue;
          }
          const auto stands = standing(parent, group, r);
          const uint64_t parent_end = end(*pi);
          const bool lineage_done = IsReleased(parent, group);
          if (parent_end == 0 || (stands && *stands >= parent_end)) {
            if (!lineage_done) walk(*pi, r);  // consumed here; what came before may not be
          } else if (lineage_done || LineageConsumed(map, *pi, r, group, standing, end)) {
            out.push_back({pi, r});
          } else {
            walk(*pi, r);
          }
        }
      };
  walk(s, s.range);
  return out;
}

bool SuccessorGate::AllReleased(PartitionId s, const std::set<std::string>& groups) const {
  MutexLock lock(mu_);
  auto it = released_.find(s);
  if (it == released_.end()) return groups.empty();
  for (const auto& g : groups) {
    if (!it->second.count(g)) return false;
  }
  return true;
}

std::vector<const PartitionInfo*> SuccessorGate::Lineage(const PartitionMap& map,
                                                         const PartitionInfo& s) {
  std::vector<const PartitionInfo*> out;
  std::set<PartitionId> seen;
  std::vector<const PartitionInfo*> todo{&s};
  while (!todo.empty()) {
    const PartitionInfo* p = todo.back();
    todo.pop_back();
    for (PartitionId parent : p->parents) {
      const PartitionInfo* pi = map.Find(parent);
      if (!pi || !seen.insert(parent).second) continue;
      out.push_back(pi);
      todo.push_back(pi);
    }
  }
  return out;
}

void SuccessorGate::Forget(const std::string& group) {
  MutexLock lock(mu_);
  for (auto& [id, groups] : released_) groups.erase(group);
}

void SuccessorGate::Retain(const PartitionMap& map) {
  MutexLock lock(mu_);
  std::erase_if(released_, [&](const auto& e) { return !map.Find(PartitionId(e.first)); });
}

}  // namespace shoal::broker
