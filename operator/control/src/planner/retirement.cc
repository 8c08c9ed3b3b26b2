#include "shoal/control/retirement.h"

#include <algorithm>
#include <optional>
#include <set>

#include "shoal/common/retirement_rule.h"

namespace shoal::control {

std::vector<PartitionId> RetirablePartitions(
    const PartitionMap& map, const std::map<std::string, AdminPartitionsReport>& reports) {
  std::vector<PartitionId> out;
  bool any_sealed = false;
  for (const auto& p : map.partitions()) any_sealed |= !p.active();
  if (!any_sealed) return out;
  // The topic's groups: the union of every pod's registry. A pod that did not answer may know a
  // group nobody else does, so without it nothing is retirable.
  std::set<std::string> pods;
  for (const auto& [pod, addr] : map.peers()) pods.insert(pod);
  for (const auto& p : map.partitions()) pods.insert(p.owner.value());
  std::set<std::string> groups;
  for (const auto& pod : pods) {
    auto it = reports.find(pod);
    if (it == reports.end()) return out;
    groups.insert(it->second.groups.begin(), it->second.groups.end());
  }
  auto report = [&](const PartitionInfo& p) -> const AdminPartition* {
    auto pod = reports.find(p.owner.value());
    if (pod == reports.end()) return nullptr;
    for (const auto& a : pod->second.partitions) {
      if (a.id == p.id) return &a;
    }
    return nullptr;
  };
  std::set<uint32_t> retirable;
  // Ids grow along the lineage (a successor's id is larger than its parents'), so one pass in id
  // order decides every parent before its children.
  for (const auto& p : map.partitions()) {
    if (p.active()) continue;
    // A lost partition has nothing left to consume (PartitionMap::DeclareLost); it still waits
    // for its parents, which its successors' groups read before its range's new events.
    if (!p.lost) {
      const AdminPartition* a = report(p);
      if (!a || a->state != PartitionState::kSealed) continue;
      // The sidecars' rule (common/retirement_rule.h): every group consumed it to its end.
      const HeldPartition held{a->start_offset, a->end_offset, true, a->commits};
      if (FirstNotConsumed(held, groups)) continue;
    }
    bool parents_first = true;
    for (PartitionId parent : p.parents) {
      if (map.Find(parent) && !retirable.count(parent.value())) parents_first = false;
    }
    if (!parents_first) continue;
    bool durable = true;
    for (const PartitionInfo* s : map.SuccessorsOf(p.id)) {
      if (s->lost) continue;  // nothing of it to keep
      const AdminPartition* sa = report(*s);
      durable &= sa && sa->producers_durable;
    }
    if (!durable) continue;
    retirable.insert(p.id.value());
    out.push_back(p.id);
  }
  return out;
}

std::vector<PartitionId> OneHoldersRetirement(const PartitionMap& map,
                                              const std::vector<PartitionId>& retirable) {
  // In id order (parents before children). A partition goes when its parents still in the map go
  // with it; the first that can go names the pod.
  std::vector<PartitionId> out;
  std::set<uint32_t> chosen;
  std::optional<PodName> holder;
  for (PartitionId id : retirable) {
    const PartitionInfo* p = map.Find(id);
    if (!p) continue;
    bool parents_go = true;
    for (PartitionId parent : p->parents) {
      parents_go &= !map.Find(parent) || chosen.count(parent.value()) > 0;
    }
    if (!parents_go) continue;
    if (!holder) holder = p->owner;
    if (p->owner != *holder) continue;
    chosen.insert(id.value());
    out.push_back(id);
  }
  return out;
}

}  // namespace shoal::control
