#include "shoal/control/failover.h"

#include <map>
#include <optional>

#include "shoal/common/replication.h"

namespace shoal::control {

Result<std::vector<std::pair<PartitionId, PodName>>> FenceAndChooseLeaders(
    client::AdminPlane& admin, const PartitionMap& map, const std::vector<PartitionId>& ids,
    const std::function<const PeerAddress*(const PodName&)>& reachable, Epoch floor,
    const FirstVolumes& first_volumes, std::string* why, std::set<PartitionId>* fenced) {
  std::string reasons;
  auto note = [&reasons](const std::string& s) { reasons += (reasons.empty() ? "" : "; ") + s; };
  // Fence the copies first (invariant 10): a follower that answers takes nothing more from the
  // old leader, so what it holds can only be overtaken by the new one. Once a quorum of copies
  // is fenced, the old leader (paused, cut off, or not ready only to the coordinator) can
  // acknowledge nothing more, and the most complete of them holds every acknowledged event.
  std::map<std::string, std::vector<PartitionId>> to_fence;
  std::vector<PartitionId> wanted;
  for (PartitionId id : ids) {
    const PartitionInfo* info = map.Find(id);
    // Active or sealed: a sealed partition's groups drain it from the copy made its leader.
    if (!info || info->lost || info->replicas.empty()) {
      note("partition " + std::to_string(id.value()) + " is not a replicated one");
      continue;
    }
    wanted.push_back(id);
    for (const auto& f : info->replicas) to_fence[f.value()].push_back(id);
    to_fence[info->owner.value()].push_back(id);
  }
  std::map<uint32_t, std::vector<replication::ReplicaState>> answered;
  for (const auto& [pod, pids] : to_fence) {
    const PeerAddress* addr = reachable(PodName(pod));
    if (!addr) continue;
    auto r = admin.FenceCopies(addr->admin, pids, floor);
    if (!r.ok()) {
      note("cannot fence " + pod + ": " + r.status().message());
      continue;
    }
    std::optional<uint64_t> first;
    if (auto v = first_volumes.find(pod); v != first_volumes.end()) first = v->second;
    for (auto [id, state] : *r) {
      state.pod = PodName(pod);
      state.refetching = replication::RefetchingCounts(state, first, map.Find(id));
      answered[id.value()].push_back(state);
      if (fenced) fenced->insert(id);
    }
  }
  std::vector<std::pair<PartitionId, PodName>> leaders;
  for (PartitionId id : wanted) {
    const PartitionInfo& info = *map.Find(id);
    // In the map's order of preference.
    std::vector<replication::ReplicaState> states;
    std::vector<PodName> copies = info.replicas;
    copies.push_back(info.owner);  // last: a follower leads before it on a tie
    for (const auto& c : copies) {
      for (const auto& s : answered[id.value()]) {
        if (s.pod == c) states.push_back(s);
      }
    }
    auto leader = replication::ChooseLeader(
        states, 1 + info.replicas.size(),
        info.active() ? std::nullopt : std::optional<uint64_t>(info.end_offset));
    if (!leader.ok()) {
      note("partition " + std::to_string(id.value()) + " (led by " + info.owner.value() +
           "): " + leader.status().message());
      continue;
    }
    leaders.emplace_back(id, *leader);
  }
  if (why) *why = reasons;
  if (leaders.empty()) {
    return Status::Unavailable("no partition could be given a new leader" +
                               (reasons.empty() ? std::string() : ": " + reasons));
  }
  return leaders;
}

bool RecordFirstVolume(client::AdminPlane& admin, const PodName& pod,
                       const std::string& admin_address, FirstVolumes* first_volumes) {
  if (first_volumes->count(pod.value()) || first_volumes->size() >= kMaxMapPeers) return false;
  auto volume = admin.VolumeOf(admin_address);
  if (!volume.ok() || *volume == 0) return false;
  first_volumes->emplace(pod.value(), *volume);
  return true;
}

Result<PartitionMap> FailOverMap(const PartitionMap& map,
                                 const std::vector<std::pair<PartitionId, PodName>>& leaders,
                                 Epoch floor) {
  auto target = map.FailOver(leaders);
  if (!target.ok()) return target.status();
  if (target->epoch() < floor) return target->WithEpoch(floor);
  return target;
}

std::vector<PodName> InstallFailOverMap(
    client::AdminPlane& admin, const PartitionMap& target,
    const std::vector<std::pair<PartitionId, PodName>>& leaders,
    const std::function<const PeerAddress*(const PodName&)>& reachable, std::string* failed) {
  // New leaders first: they take writes again as soon as they hold it.
  std::vector<std::string> order;
  for (const auto& [id, leader] : leaders) order.push_back(leader.value());
  for (const auto& [pod, addr] : target.peers()) order.push_back(pod);
  std::set<std::string> done;
  std::vector<PodName> installed;
  for (const auto& pod : order) {
    if (!done.insert(pod).second) continue;
    const PeerAddress* addr = reachable(PodName(pod));
    if (!addr) continue;
    auto r = admin.InstallMap(addr->admin, target);
    if (r.ok()) {
      installed.push_back(PodName(pod));
    } else if (failed) {
      *failed += (failed->empty() ? "" : "; ") + pod + ": " + r.status().message();
    }
  }
  return installed;
}

}  // namespace shoal::control
