#include "shoal/common/retirement_rule.h"

#include <algorithm>

namespace shoal {

std::optional<NotConsumed> FirstNotConsumed(const HeldPartition& p,
                                            const std::set<std::string>& groups) {
  if (groups.empty()) {
    if (p.sealed && p.start_offset >= p.end_offset) return std::nullopt;
    return NotConsumed{"", p.start_offset, p.end_offset};
  }
  for (const auto& g : groups) {
    auto c = p.standings.find(g);
    const uint64_t stands = std::max(c == p.standings.end() ? 0 : c->second, p.start_offset);
    if (!p.sealed || stands < p.end_offset) return NotConsumed{g, stands, p.end_offset};
  }
  return std::nullopt;
}

std::string NotConsumedMessage(PartitionId id, const NotConsumed& n) {
  const std::string pid = "partition " + std::to_string(id.value());
  if (n.group.empty()) {
    return "the map retires " + pid + ", which holds " + std::to_string(n.end - n.stands) +
           " events and the topic has no consumer group yet to read them";
  }
  return "the map retires " + pid + ", which group " + n.group + " has consumed to " +
         std::to_string(n.stands) + " of " + std::to_string(n.end);
}

Status CheckRetirementShape(const PartitionMap& held, const PartitionMap& next) {
  std::set<std::string> holders;
  for (const auto& p : held.partitions()) {
    if (!next.Find(p.id)) holders.insert(p.owner.value());
  }
  if (holders.size() > 1) {
    return Status::Conflict("the map retires partitions of " + std::to_string(holders.size()) +
                            " pods; one pod's at a time");
  }
  for (const auto& p : held.partitions()) {
    if (next.Find(p.id)) continue;
    for (PartitionId parent : p.parents) {
      if (next.Find(parent)) {
        return Status::Conflict("the map retires partition " + std::to_string(p.id.value()) +
                                " before its parent " + std::to_string(parent.value()));
      }
    }
  }
  return Status::Ok();
}

}  // namespace shoal
