#include "shoal/common/map_transition.h"

#include <algorithm>

namespace shoal {

std::vector<SuccessorRef> SuccessorRefs(const PartitionMap& map, PartitionId parent) {
  std::vector<SuccessorRef> out;
  for (const PartitionInfo* s : map.SuccessorsOf(parent)) out.push_back({s->id, s->owner, s->range});
  return out;
}

bool SameSuccessors(const std::vector<SuccessorRef>& sealed, const PartitionMap& map,
                    PartitionId parent) {
  const std::vector<const PartitionInfo*> now = map.SuccessorsOf(parent);
  if (now.size() != sealed.size()) return false;
  for (size_t i = 0; i < now.size(); ++i) {
    const PartitionInfo& s = *now[i];
    const bool failed_over = s.leader_epoch.value() > 0 && s.leader_epoch > s.born;
    if (s.id != sealed[i].id || s.range != sealed[i].range ||
        (s.owner != sealed[i].owner && !failed_over)) {
      return false;
    }
  }
  return true;
}

bool SealVoid(const SealRecord& seal, const PartitionInfo& info, Epoch map_epoch) {
  return info.active() && seal.intent && seal.confirmed.empty() &&
         seal.intent->epoch <= map_epoch;
}

std::vector<PartitionId> PartitionsMadeBefore(const PartitionMap& map, const PodName& pod,
                                              Epoch made_before) {
  std::vector<PartitionId> out;
  for (const auto& p : map.partitions()) {
    if (p.owner == pod && !p.lost && p.born < made_before) out.push_back(p.id);
  }
  return out;
}

Status CheckNothingLost(const PodName& pod, const std::vector<PartitionId>& held,
                        const PartitionMap& next,
                        const std::vector<std::pair<PartitionId, Epoch>>& fenced_empty) {
  for (const auto& p : next.partitions()) {
    if (p.owner != pod || p.lost || p.born.value() == 0 || p.born >= next.epoch()) continue;
    if (std::find(held.begin(), held.end(), p.id) != held.end()) continue;
    const bool empty_here =
        std::any_of(fenced_empty.begin(), fenced_empty.end(), [&](const auto& f) {
          return f.first == p.id && p.leader_epoch > p.born && p.LeaderEpoch() >= f.second;
        });
    if (empty_here) continue;
    return Status::DataLost("the map of epoch " + std::to_string(next.epoch().value()) +
                            " gives partition " + std::to_string(p.id.value()) +
                            " (made at epoch " + std::to_string(p.born.value()) +
                            ") to this pod, which holds nothing of it: its data is gone; the "
                            "coordinator must declare it lost");
  }
  return Status::Ok();
}

bool TakesSealGivenBack(const PodName& pod, const HeldPartitionState& held,
                        const PartitionInfo& next) {
  return !held.follower && !held.seal && next.owner == pod && !next.active() && !next.lost &&
         next.LeaderEpoch() > held.leader_epoch &&
         (held.end == next.end_offset || (next.end_known && held.end > next.end_offset));
}

Status CheckMapTransition(const PodName& pod, const std::vector<HeldPartitionState>& held,
                          const PartitionMap& next,
                          std::vector<std::pair<PartitionId, uint64_t>>* dropped,
                          const std::vector<std::pair<PartitionId, Epoch>>& fenced_empty) {
  for (const auto& h : held) {
    const std::string pid = "partition " + std::to_string(h.id.value());
    if (h.follower) {
      // A copy: whatever the map makes of it, it follows or leads, unless the map does not know
      // the partition at all (made after the map's last partition: not retired, never made in
      // its lineage). Such a map comes from a coordinator that re-made its map without a change
      // that pods installed; taken, it would drop the copies of what that change's partitions
      // acknowledged, whose leader may have lost its own.
      if (!next.Find(h.id) && h.id >= next.NextId()) {
        return Status::Conflict("the map does not know " + pid +
                                ", of which this pod holds a copy: it was made after the "
                                "map's partitions, by a change this map does not have");
      }
      continue;
    }
    const PartitionInfo* info = next.Find(h.id);
    const auto& seal = h.seal;
    if (!info) {
      // Retirement drops sealed partitions only: an active one still takes the appends of its
      // range (invariant 2), and dropping it would lose them.
      if (!seal) {
        return Status::Conflict("the map drops " + pid +
                                ", which is active here; only sealed partitions retire");
      }
      if (dropped) dropped->emplace_back(h.id, seal->end);
      continue;
    }
    if (info->lost) {
      // The coordinator declares a partition lost only when its pod came back without it; one
      // held here is not lost, and a map that says so must not take effect (its range already
      // has another writer there).
      return Status::Conflict("the map declares " + pid +
                              " lost, but it is held here: this pod did not lose its data");
    }
    if (info->owner != pod) {
      // A failover: the leadership went to a follower at a newer leader epoch, and this copy
      // follows it (invariant 10) or, placed off this pod since (a pod that leaves), goes.
      if (info->LeaderEpoch() > h.leader_epoch &&
          (info->FollowedBy(pod) || info->leader_epoch.value() > 0)) {
        continue;
      }
      // Otherwise a partition's owner is fixed for its id (a move makes a successor).
      return Status::Conflict("the map gives " + pid + ", held here, to " + info->owner.value());
    }
    if (info->range != h.range) {
      // So is its range: a map that gives the id another range speaks of another partition.
      return Status::Conflict("the map gives " + pid + " the range [" +
                              std::to_string(info->range.lo) + ", " +
                              std::to_string(info->range.hi) + "), not the one held here");
    }
    if (info->active()) {
      // Sealed here for a later change is fine (the executor seals ahead of its map). Sealed
      // for a change of this map's epoch or an earlier one that no successor confirmed: that
      // change lost (this map, of its epoch or later, has the partition active), and the seal
      // is undone when this map is installed, so that no range is left without a writer by a
      // coordinator that sealed and then lost. Confirmed, the map does not know what happened
      // here.
      if (seal && SealVoid(*seal, *info, next.epoch())) continue;
      if (seal && (!seal->intent || seal->intent->epoch <= next.epoch())) {
        return Status::Conflict("the map has " + pid + " active, but it is sealed here" +
                                (seal->intent ? " for the change of epoch " +
                                                    std::to_string(seal->intent->epoch.value()) +
                                                    " (map " + seal->intent->digest + ")"
                                              : std::string()));
      }
      continue;
    }
    // Sealed by the map: the seal happened here first (the change's step 1) and the map records
    // exactly it, end offset and successors; or the map gives back a partition sealed elsewhere
    // and this copy takes the seal as it is (TakesSealGivenBack).
    if (!seal && TakesSealGivenBack(pod, h, *info)) continue;
    if (!seal) {
      return Status::Conflict("the map seals " + pid +
                              ", which is not sealed here: seal it first (POST /v1/admin/seal)");
    }
    if (seal->end != info->end_offset) {
      return Status::Conflict("the map records end offset " + std::to_string(info->end_offset) +
                              " for " + pid + ", sealed here at " + std::to_string(seal->end));
    }
    if (seal->intent && !SameSuccessors(seal->intent->successors, next, info->id)) {
      return Status::Conflict(pid + " is sealed here for the change of epoch " +
                              std::to_string(seal->intent->epoch.value()) + " (map " +
                              seal->intent->digest + "), whose successors differ from this map's");
    }
  }
  // What it holds is in order; what the map gives it and it does not hold must be new.
  std::vector<PartitionId> ids;
  for (const auto& h : held) ids.push_back(h.id);
  return CheckNothingLost(pod, ids, next, fenced_empty);
}

}  // namespace shoal
