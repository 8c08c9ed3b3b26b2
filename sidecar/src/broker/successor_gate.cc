#include "broker/successor_gate.h"

namespace shoal::broker {

bool SuccessorGate::Released(const PartitionMap& map, const PartitionInfo& s,
                             const std::string& group, const Standing& standing, const End& end) {
  if (s.parents.empty()) return true;
  {
    MutexLock lock(mu_);
    auto it = released_.find(s.id);
    if (it != released_.end() && it->second.count(group)) return true;
  }
  std::set<PartitionId> visited;
  if (!LineageConsumed(map, s, group, standing, end, visited)) return false;
  MutexLock lock(mu_);
  released_[s.id].insert(group);
  return true;
}

bool SuccessorGate::LineageConsumed(const PartitionMap& map, const PartitionInfo& s,
                                    const std::string& group, const Standing& standing,
                                    const End& end, std::set<PartitionId>& visited) {
  for (PartitionId parent : s.parents) {
    const PartitionInfo* pi = map.Find(parent);
    if (!pi) continue;  // retired: consumed by every group known then (see the header)
    if (!visited.insert(parent).second) continue;
    const auto stands = standing(parent, group);
    if (!stands || *stands < end(*pi)) return false;
    {
      MutexLock lock(mu_);
      auto it = released_.find(parent);
      if (it != released_.end() && it->second.count(group)) continue;  // its lineage is done
    }
    // Consumed to its end, and its own lineage too: an empty parent is no shortcut.
    if (!LineageConsumed(map, *pi, group, standing, end, visited)) return false;
  }
  return true;
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
