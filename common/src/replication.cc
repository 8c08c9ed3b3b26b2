#include "shoal/common/replication.h"

#include <algorithm>
#include <set>

namespace shoal::replication {

uint64_t HighWatermark(uint64_t leader_end, std::span<const uint64_t> follower_ends) {
  std::vector<uint64_t> ends(follower_ends.begin(), follower_ends.end());
  ends.push_back(leader_end);
  // The quorum-th largest end: that many copies hold everything below it.
  const size_t q = QuorumOf(ends.size());
  std::nth_element(ends.begin(), ends.begin() + static_cast<std::ptrdiff_t>(q - 1), ends.end(),
                   std::greater<uint64_t>());
  return ends[q - 1];
}

namespace {

const PodPlace& PlaceOf(const std::map<std::string, PodPlace>& places, const PodName& pod) {
  static const PodPlace kUnknown;
  auto it = places.find(pod.value());
  return it == places.end() ? kUnknown : it->second;
}

}  // namespace

Result<PartitionMap> PlaceReplicas(const PartitionMap& map, std::span<const PodName> pods,
                                   uint32_t factor, const std::map<std::string, PodPlace>& places,
                                   const std::set<PodName>& leaving) {
  if (factor < 1 || factor > kMaxFactor) {
    return Status::InvalidArgument("replication factor " + std::to_string(factor) +
                                   " is out of range; it is 1 to " + std::to_string(kMaxFactor));
  }
  const std::set<PodName> live(pods.begin(), pods.end());
  const size_t want = std::min<size_t>(factor, live.size());
  const size_t followers = want > 0 ? want - 1 : 0;
  // How many partitions each pod follows, as placed so far (kept followers first, so that new
  // ones go where there are fewest).
  std::map<PodName, size_t> load;
  for (const auto& pod : live) load[pod] = 0;
  std::vector<std::vector<PodName>> kept(map.partitions().size());
  // Copies on leaving pods, kept beside their replacements until those caught up.
  std::vector<std::vector<PodName>> staying(map.partitions().size());
  for (const auto& p : map.partitions()) {
    auto& k = kept[map.IndexOf(p)];
    for (const auto& r : p.replicas) {
      if (live.count(r) && r != p.owner && k.size() < (p.active() ? followers : kMaxFollowers)) {
        k.push_back(r);
        ++load[r];
      } else if (leaving.count(r) && r != p.owner && !leaving.count(p.owner)) {
        staying[map.IndexOf(p)].push_back(r);
      }
    }
  }
  PartitionMap out = map;
  for (const auto& p : map.partitions()) {
    auto chosen = kept[map.IndexOf(p)];
    const auto& left = staying[map.IndexOf(p)];
    // An active partition has `followers`; a sealed one keeps what it has, and a copy that
    // leaves is replaced on a pod that stays (its groups may still read it there).
    const size_t target = p.active() ? followers : std::min(followers, chosen.size() + left.size());
    if (p.active() || !left.empty()) {
      while (chosen.size() < target) {
        std::set<std::string> zones{PlaceOf(places, p.owner).zone};
        std::set<std::string> nodes{PlaceOf(places, p.owner).node};
        for (const auto& r : chosen) {
          zones.insert(PlaceOf(places, r).zone);
          nodes.insert(PlaceOf(places, r).node);
        }
        const PodName* best = nullptr;
        auto score = [&](const PodName& pod) {
          const auto& at = PlaceOf(places, pod);
          const bool new_zone = !at.zone.empty() && !zones.count(at.zone);
          const bool new_node = !at.node.empty() && !nodes.count(at.node);
          // Lower is better: a new zone, a new node, then the fewest followed partitions.
          return std::make_tuple(!new_zone, !new_node, load[pod]);
        };
        for (const auto& pod : live) {  // in name order: ties go to the first name
          if (pod == p.owner || std::find(chosen.begin(), chosen.end(), pod) != chosen.end()) {
            continue;
          }
          if (!best || score(pod) < score(*best)) best = &pod;
        }
        if (!best) break;
        chosen.push_back(*best);
        ++load[*best];
      }
    }
    for (const auto& r : left) {
      if (chosen.size() < kMaxFollowers) chosen.push_back(r);
    }
    if (chosen != p.replicas) {
      // A follower added to a partition made before this map joins it (PartitionInfo::joined).
      std::vector<JoinedCopy> joined;
      for (const auto& r : chosen) {
        const bool added = std::find(p.replicas.begin(), p.replicas.end(), r) == p.replicas.end();
        if (const JoinedCopy* was = p.JoinedBy(r); was && !added) {
          joined.push_back(*was);
        } else if (added && p.born < map.epoch()) {
          joined.push_back({r, map.epoch()});
        }
      }
      auto next = out.WithReplicas(p.id, std::move(chosen));
      if (next.ok()) next = next->WithJoined(p.id, std::move(joined));
      if (!next.ok()) return next.status();
      out = std::move(next).value();
    }
  }
  return out;
}

bool RefetchingCounts(const ReplicaState& copy, std::optional<uint64_t> first_volume,
                      const PartitionInfo* info) {
  if (copy.joining) return true;
  if (copy.absent && info && info->JoinedBy(copy.pod)) return true;
  return copy.refetching && first_volume.has_value() && *first_volume != copy.volume;
}

std::vector<PartitionId> JoiningCopies(const PartitionMap& held, const PartitionMap& next,
                                       const PodName& pod) {
  std::vector<PartitionId> out;
  for (const auto& info : next.partitions()) {
    const JoinedCopy* joined = info.JoinedBy(pod);
    // A pod that holds the map that added its copy, or a later one, marked it then.
    if (info.lost || !joined || held.epoch() >= joined->at) continue;
    out.push_back(info.id);
  }
  return out;
}

Result<PodName> ChooseLeader(std::span<const ReplicaState> answered, size_t replica_count,
                             std::optional<uint64_t> sealed_end) {
  const size_t counted = static_cast<size_t>(
      std::count_if(answered.begin(), answered.end(),
                    [](const ReplicaState& r) { return !r.refetching && !r.joining; }));
  if (counted < QuorumOf(replica_count)) {
    return Status::Unavailable(
        std::to_string(counted) + " of " + std::to_string(replica_count) +
        " replicas answered with what they acknowledged" +
        (counted < answered.size()
             ? " (a copy refetching after its volume was emptied, or new to the partition, "
               "does not count before it caught up with its leader)"
             : std::string()) +
        "; a new leader needs a quorum of " + std::to_string(QuorumOf(replica_count)));
  }
  const ReplicaState* best = nullptr;
  for (const auto& r : answered) {
    if (r.refetching || r.joining) continue;
    if (sealed_end && r.end < *sealed_end) continue;
    if (!best || r.last_epoch > best->last_epoch ||
        (r.last_epoch == best->last_epoch && r.end > best->end)) {
      best = &r;
    }
  }
  if (!best) {
    return Status::Unavailable("no copy that answered holds the sealed end " +
                               std::to_string(*sealed_end) + "; waiting for one that does");
  }
  return best->pod;
}

uint64_t TruncationPoint(std::span<const EpochStart> leader_history, uint64_t leader_end,
                         uint64_t follower_last_epoch, uint64_t follower_end) {
  if (leader_history.empty()) return 0;
  // The last epoch the leader knows that is not after the follower's last one.
  auto after = std::upper_bound(
      leader_history.begin(), leader_history.end(), follower_last_epoch,
      [](uint64_t e, const EpochStart& s) { return e < s.epoch; });
  if (after == leader_history.begin()) {
    return std::min(leader_history.front().start, follower_end);
  }
  const uint64_t epoch_end = after == leader_history.end() ? leader_end : after->start;
  return std::min(epoch_end, follower_end);
}

bool ForeignEpoch(std::span<const EpochStart> leader_history, uint64_t follower_last_epoch) {
  if (follower_last_epoch == 0 || leader_history.empty()) return false;
  return std::none_of(leader_history.begin(), leader_history.end(),
                      [&](const EpochStart& s) { return s.epoch == follower_last_epoch; });
}

uint64_t FollowerTruncationPoint(std::span<const EpochStart> leader_history, uint64_t leader_point,
                                 std::span<const EpochStart> follower_history,
                                 uint64_t follower_end) {
  uint64_t cut = std::min(leader_point, follower_end);
  // The follower's last epoch: that of its last entry.
  uint64_t last = 0;
  for (auto it = follower_history.rbegin(); it != follower_history.rend(); ++it) {
    if (it->start < follower_end) {
      last = it->epoch;
      break;
    }
  }
  // The latest epoch the leader had at or below it (0: none), and where the follower's first
  // entry of a later epoch is.
  uint64_t shared = 0;
  for (const auto& s : leader_history) {
    if (s.epoch <= last) shared = std::max(shared, s.epoch);
  }
  for (const auto& s : follower_history) {
    if (s.epoch > shared && s.start < follower_end) {
      cut = std::min(cut, s.start);
      break;
    }
  }
  return cut;
}

}  // namespace shoal::replication
