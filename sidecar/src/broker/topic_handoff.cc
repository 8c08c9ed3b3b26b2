// Topic, its part in a change: seeding successors from their parents (producer state and
// commits), partitions prepared ahead of a map, seals, and the producer state a successor's
// owner fetches. The rest of Topic is in topic.cc; its views in topic_views.cc.
#include "broker/topic.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "shoal/common/json.h"
#include "shoal/common/logging.h"

namespace shoal::broker {

// Seeding in id order: a parent's id is below its successors', so a sealed partition that must
// inherit again (a crash took back its seeding before its snapshot) does so before a successor
// of it takes over its state.
Status Topic::SeedSuccessors(const PartitionMap& next,
                             const std::function<Partition*(PartitionId)>& held, bool defer) {
  const PartitionMap installed = map();  // what took effect here (next itself from SeedPending)
  for (const auto& info : next.partitions()) {
    if (info.owner != opts_.pod || info.parents.empty()) continue;
    Partition* p = held(info.id);
    if (!p || p->seeded()) continue;
    bool confirmed = false;
    Status st = SeedSuccessor(next, info, *p, held, &confirmed);
    if (st.ok()) continue;
    // What seeding at the install is for is the confirmation (invariant 2): every parent says
    // it was sealed for the change that made this successor, so a map whose change lost is
    // refused before it takes effect. The producer state itself can come later, as after a
    // restart: the successor takes no append until it is seeded (Accepting), and the peer
    // ticker retries (SeedPending). It must be allowed to come later where a parent is not
    // whole yet: a copy that a failover made the parent's leader and that never got the state
    // its first leader inherited (that leader lost its volume or went down before its
    // followers fetched it) inherits it from its own parents again, and one of those may be
    // led, by a failover carried in the same map, by this very pod, which leads it only once
    // it holds this map. Waiting for the parent there waits for ever. A successor made the
    // leader of a copy by a failover confirms nothing (its first leader did). Nor is a successor
    // confirmed again that the map held here gives this pod already (its seeding taken back by
    // a crash before its snapshot): its parents confirmed it before that map was persisted, so
    // a newer map has nothing of it to refuse, and a parent's leader that cannot answer yet (a
    // copy that a failover in this very map made the leader, which holds the map only after
    // this pod: "not on this sidecar") is waited for by the peer ticker, not by the install,
    // which would otherwise hold that leader's own install back for ever. Seeding still asks
    // every parent to confirm before the successor takes an append.
    const bool failed_over = info.leader_epoch.value() > 0 && info.leader_epoch > info.born;
    const PartitionInfo* was = installed.Find(info.id);
    const bool took_effect =
        was && was->owner == info.owner && was->range == info.range && was->parents == info.parents;
    const bool deferrable = (failed_over || took_effect)
                                ? st.code() == Status::Code::kUnavailable ||
                                      st.code() == Status::Code::kNotFound ||
                                      st.code() == Status::Code::kFailedPrecondition
                                : confirmed;
    if (!defer || !deferrable) {
      // A parent that is not whole yet is a reason to retry, as any other wait is.
      if (st.code() == Status::Code::kFailedPrecondition) return Status::Unavailable(st.message());
      return st;
    }
    Logger("broker")->warn(
        "msg=\"a successor is not seeded yet; it takes appends once it is\" partition={} "
        "reason=\"{}\"",
        info.id.value(), st.message());
  }
  return Status::Ok();
}

Status Topic::SeedSuccessor(const PartitionMap& next, const PartitionInfo& info, Partition& part,
                            const std::function<Partition*(PartitionId)>& held, bool* confirmed) {
  *confirmed = false;
  const SuccessorRef me{info.id, info.owner, info.range};
  // The parents, and in place of a lost one (its producer state went with it: a retry of a
  // batch stored there is taken again) its own parents, whose batches a retry must still
  // find. Those are not sealed for this successor, so it confirms nothing there. A parent
  // without copies whose owner answers that it lost it counts as lost before the map says so:
  // its owner held the only copy, and the coordinator declares it lost next. One with copies
  // waits for its failover.
  // A copy made the leader by a failover took over a successor its first leader had seeded:
  // the parents confirmed that one already and are not asked to again (the seal names the
  // successor with its first owner).
  const bool failed_over = info.leader_epoch.value() > 0 && info.leader_epoch > info.born;
  std::vector<std::pair<PartitionId, bool>> todo;  // a stack of (partition, confirm)
  for (auto it = info.parents.rbegin(); it != info.parents.rend(); ++it) {
    todo.emplace_back(*it, !failed_over);
  }
  std::set<PartitionId> walked;
  Status not_whole = Status::Ok();
  auto walk_past = [&](const PartitionInfo& lost) {
    for (auto it = lost.parents.rbegin(); it != lost.parents.rend(); ++it) {
      todo.emplace_back(*it, false);
    }
  };
  while (!todo.empty()) {
    const auto [parent, confirm] = todo.back();
    todo.pop_back();
    const PartitionInfo* pi = next.Find(parent);
    if (!pi || !walked.insert(parent).second) continue;  // retired, or reached twice
    if (pi->lost) {
      walk_past(*pi);
      continue;
    }
    Result<std::string> table = Status::Internal("unset");
    Partition* local = held(parent);
    if (local) {
      Status confirmation = confirm ? local->ConfirmSuccessor(me) : Status::Ok();
      const auto sealed_at = local->sealed_end();
      if (!confirmation.ok()) {
        table = confirmation;
      } else if (sealed_at && *sealed_at != pi->end_offset) {
        table = Status::Conflict("the map records end offset " + std::to_string(pi->end_offset) +
                                 " for parent " + std::to_string(parent.value()) +
                                 ", sealed here at " + std::to_string(*sealed_at));
      } else if (!sealed_at && !pi->active()) {
        // The map has the parent sealed and this pod leads it, but has not sealed it yet: a
        // failover gave it back to this pod, which takes the seal only after seeding
        // (TakeSealsGivenBack), cutting a never-acknowledged tail past the recorded end. Its
        // producer state still names that tail; handed on now, a retry of those events would be
        // answered "duplicate" for entries stored nowhere (invariant 6), and until the parent
        // retires, would wait for a quorum of an offset past its end for ever. The successor
        // takes it once the seal is taken (SeedPending).
        table = Status::FailedPrecondition("parent " + std::to_string(parent.value()) +
                                           " is not sealed here yet");
      } else if (!pi->parents.empty() && !local->seeded()) {
        table = Status::FailedPrecondition("parent " + std::to_string(parent.value()) +
                                           " has not inherited its own parents' producer state "
                                           "yet");
      } else if (!SealedEndHeldByQuorum(*pi, *local)) {
        table = Status::FailedPrecondition("parent " + std::to_string(parent.value()) +
                                           " is sealed at an end that a quorum of its copies "
                                           "does not hold yet");
      } else {
        table = local->ExportProducers();
      }
    } else if (const PeerAddress* addr = next.Peer(pi->owner); addr && peers_) {
      table = peers_->FetchProducers(*addr, parent, confirm ? &me : nullptr, pi->end_offset);
    } else {
      table = Status::Unavailable("no address for " + pi->owner.value());
    }
    if (!local && table.status().code() == Status::Code::kDataLost) {
      // With copies the parent is not lost: a failover gives it a leader that holds it, whose
      // producer state a retry of a batch stored there must still find (invariant 6).
      // Refused as it is (data_lost): the coordinator finds the pod that lost its data and
      // fails the parent over, inside the change when there is one.
      if (!pi->replicas.empty()) {
        return table.status().Annotate("the leader of parent " + std::to_string(parent.value()) +
                                       " of partition " + std::to_string(info.id.value()) +
                                       " lost its data; it waits for the parent's failover");
      }
      walk_past(*pi);
      continue;
    }
    if (table.status().code() == Status::Code::kFailedPrecondition) {
      // Confirmed (the parent's owner confirms before it answers anything else), but the
      // parent's producer state is not whole yet. The other parents are still asked, so that
      // every confirmation is made now.
      not_whole =
          table.status().Annotate("taking over from parent " + std::to_string(parent.value()) +
                                  " of partition " + std::to_string(info.id.value()));
      continue;
    }
    if (!table.ok()) {
      return table.status().Annotate("taking over from parent " + std::to_string(parent.value()) +
                                     " of partition " + std::to_string(info.id.value()));
    }
    SHOAL_RETURN_IF_ERROR(part.InheritProducers(*table));
  }
  if (!not_whole.ok()) {
    *confirmed = true;
    return not_whole;
  }
  return part.MarkSeeded();
}

bool Topic::SealedEndHeldByQuorum(const PartitionInfo& info, const Partition& p) const {
  // A successor answers a retry of an event stored in a parent "duplicate" from the state it
  // inherited, with no wait of its own (Produce waits only for a parent held on its pod): the
  // parent's end must be held by a quorum of its copies before that state is handed on
  // (invariant 9). A seal is answered once it is, except the seal of a copy that a failover
  // carried in the change made the parent's leader (Topic::Seal): its end is held by that copy
  // alone until its followers copied it from it, which they do once it leads.
  const auto end = p.sealed_end();
  if (!opts_.acks_quorum || info.replicas.empty() || !end) return true;
  if (p.follower()) return false;  // not leading yet: no follower reported to it
  const auto& q = *p.quorum();
  return q.replicated() && q.followers_mark() >= *end;
}

void Topic::SeedPending() {
  MutexLock install(install_mu_);
  const PartitionMap m = map();
  bool pending = false;
  {
    ReaderLock lock(map_mu_);
    for (const auto& info : m.partitions()) {
      auto it = partitions_.find(info.id);
      pending |= info.owner == opts_.pod && !info.parents.empty() && it != partitions_.end() &&
                 !it->second->seeded();
    }
  }
  if (!pending) return;
  Status st = SeedSuccessors(
      m,
      [this](PartitionId id) -> Partition* {
        ReaderLock lock(map_mu_);
        auto it = partitions_.find(id);
        return it == partitions_.end() ? nullptr : it->second.get();
      },
      /*defer=*/true);
  if (!st.ok()) {
    Logger("broker")->warn("msg=\"successor not seeded yet; retrying\" reason=\"{}\"",
                           st.message());
  }
}

Status Topic::Prepare(const PartitionMap& next) {
  MutexLock install(install_mu_);
  SHOAL_RETURN_IF_ERROR(next.Validate());
  if (next.epoch() <= map().epoch()) {
    return Status::StaleEpoch("stale epoch " + std::to_string(next.epoch().value()) +
                              ": this sidecar holds epoch " +
                              std::to_string(map().epoch().value()));
  }
  {
    // Nothing is prepared on a pod that lost partitions the map still gives it.
    const auto absent = FencedAbsent(next);
    std::vector<PartitionId> held;
    ReaderLock lock(map_mu_);
    for (const auto& [id, p] : partitions_) held.push_back(id);
    SHOAL_RETURN_IF_ERROR(CheckNothingLost(opts_.pod, held, next, absent));
  }
  for (const auto& info : next.partitions()) {
    // Only new partitions: a sealed one given to this pod is a copy a failover made its leader.
    if (!HeldHere(info) || !info.active()) continue;
    {
      ReaderLock lock(map_mu_);
      // A copy followed here that the map makes this pod lead is taken over as it is when the
      // map is installed (OpenOwned): opening it again would give one directory two writers.
      if (partitions_.count(info.id) || followed_.count(info.id)) continue;
    }
    auto p = TakePrepared(info);
    if (!p) {
      auto opened = Partition::Open(info.id, OptionsFor(info), clock_, probe_);
      if (!opened.ok()) {
        return opened.status().Annotate("partition " + std::to_string(info.id.value()));
      }
      p = std::move(opened).value();
    }
    prepared_.emplace(info.id, Prepared{info, std::move(p)});
  }
  return Status::Ok();
}

std::unique_ptr<Partition> Topic::TakePrepared(const PartitionInfo& info) {
  auto it = prepared_.find(info.id);
  if (it == prepared_.end()) return nullptr;
  Prepared prepared = std::move(it->second);
  prepared_.erase(it);
  const PartitionInfo& as = prepared.as;
  if (as.range == info.range && as.owner == info.owner && as.parents == info.parents) {
    return std::move(prepared.partition);
  }
  // Another map's partition of this id (a second coordinator's): nothing of it may serve this
  // one, neither its range nor the producer state it may have inherited from other parents. It
  // never took a write (it was never in a map this sidecar held).
  Logger("broker")->warn(
      "msg=\"discarding a partition prepared for another map of this id\" partition={}",
      info.id.value());
  prepared.partition.reset();
  if (Status rm = fs_.RemoveAll(PartitionDir(info.id)); !rm.ok()) {
    Logger("broker")->warn("msg=\"could not remove the discarded partition\" reason=\"{}\"",
                           rm.message());
  }
  return nullptr;
}

Status Topic::NotLostHere(PartitionId id, const std::string& asked) const {
  // Asked about a partition this pod should hold (its map gives it the partition, or it holds
  // no map at all, as after its volume was emptied) and does not: its data is gone.
  const PartitionInfo* info = map_.Find(id);
  if (map_.epoch().value() == 0 || (info && HeldHere(*info))) {
    return Status::DataLost(asked + " partition " + std::to_string(id.value()) +
                            ", which this pod should hold and does not: its data is gone; the "
                            "coordinator must declare it lost");
  }
  return Status::Ok();
}

Result<uint64_t> Topic::Seal(PartitionId id, const SealIntent& intent,
                             std::chrono::milliseconds quorum_wait,
                             const std::optional<MapLeader>& leader, std::optional<uint64_t> at) {
  std::shared_ptr<QuorumTracker> quorum;
  uint64_t sealed_at = 0;
  {
    ReaderLock lock(map_mu_);
    auto it = partitions_.find(id);
    if (it == partitions_.end()) {
      SHOAL_RETURN_IF_ERROR(NotLostHere(id, "asked to seal"));
      if (auto f = followed_.find(id); f != followed_.end()) {
        // A copy that a failover carried in this change made the leader of a parent the change
        // seals (its leader went down or lost its volume): the copy is fenced, so it takes
        // nothing more from the old leader, and a quorum's answers chose it as the most complete
        // (fenced at or below the leader epoch the map gives it). It is sealed here at its end
        // before the map that makes it the leader arrives.
        if (leader && leader->pod == opts_.pod && leader->leader_epoch.value() > 0 &&
            f->second->fenced() > 0 && f->second->fenced() <= leader->leader_epoch.value()) {
          return f->second->Seal(intent, map_.epoch(), at);
        }
        // A copy this pod follows: the map that makes it the leader (a failover's) has not
        // reached it yet. The coordinator installs its current map on pods behind and retries.
        return Status::Unavailable("partition " + std::to_string(id.value()) +
                                   " is followed here: the map that makes this pod its leader "
                                   "has not reached it yet (it holds epoch " +
                                   std::to_string(map_.epoch().value()) + "); retry");
      }
      return Status::NotFound("partition " + std::to_string(id.value()) +
                              " is not on this sidecar");
    }
    auto end = it->second->Seal(intent, map_.epoch(), at);
    if (!end.ok()) return end;
    // Its successors' pods read it through ranges from now on: batches out whole are recorded so
    // that their commits keep meaning those batches across a restart.
    SHOAL_RETURN_IF_ERROR(it->second->RecordWholeBatches());
    sealed_at = *end;
    // Sealed already by the map this pod holds, as a failover's new leader (a copy sealed as a
    // change's parent, Seal below): its followers copy the sealed end once they hold that map,
    // which the change installs after this answer; its readers wait for them (the map's end
    // is not taken as held by a quorum for such a partition, ReconcileReplicas).
    const PartitionInfo* held = map_.Find(id);
    const bool sealed_by_failover = held && !held->active() && held->leader_epoch.value() > 0;
    if (it->second->quorum()->replicated() && !sealed_by_failover) quorum = it->second->quorum();
  }
  // Waited for without the map lock: the followers' fetches that move the mark take it.
  if (quorum && !quorum->Await(sealed_at, quorum_wait).ok()) {
    return Status::Unavailable("partition " + std::to_string(id.value()) + " is sealed at " +
                               std::to_string(sealed_at) +
                               ", but fewer than a quorum of its copies hold that end yet; the "
                               "seal stands, retry it");
  }
  return sealed_at;
}

Result<uint64_t> Topic::Seal(const PartitionMap& target, PartitionId id,
                             std::chrono::milliseconds quorum_wait) {
  const PartitionInfo* info = target.Find(id);
  const SealIntent intent{target.epoch(), target.Digest(), SuccessorRefs(target, id),
                          info ? std::optional<HashRange>(info->range) : std::nullopt};
  std::optional<MapLeader> leader;
  if (info) leader = MapLeader{info->owner, info->leader_epoch};
  std::optional<uint64_t> at;
  if (info && !info->active() && info->end_known) at = info->end_offset;
  return Seal(id, intent, quorum_wait, leader, at);
}

Result<std::string> Topic::ExportProducers(PartitionId id, const SuccessorRef* successor,
                                           std::optional<uint64_t> end) {
  ReaderLock lock(map_mu_);
  Partition* part = nullptr;
  if (auto it = partitions_.find(id); it != partitions_.end()) {
    part = it->second.get();
  } else if (auto f = followed_.find(id); f != followed_.end() && f->second->sealed_end()) {
    // A copy sealed as the parent's new leader by a failover carried in the change (Seal), the
    // map that makes it the leader not installed here yet: it answers for the parent.
    part = f->second.get();
  }
  if (!part) {
    SHOAL_RETURN_IF_ERROR(NotLostHere(id, "asked for the producer state of"));
    return Status::NotFound("partition " + std::to_string(id.value()) + " is not on this sidecar");
  }
  if (successor) SHOAL_RETURN_IF_ERROR(part->ConfirmSuccessor(*successor));
  // Asked as a sealed parent (`end`, the end the successor's map records) while not sealed
  // here: this pod holds an older map than the asker (a failover gave the partition back to it
  // and it has not taken that map's seal yet, which cuts what it took past the sealed end as a
  // replaced leader). Its producer state may know events the partition never kept.
  if (end && !part->sealed_end()) {
    return Status::FailedPrecondition("partition " + std::to_string(id.value()) +
                                      " is not sealed here yet (this pod holds an older map "
                                      "than the successor's); retry");
  }
  if (const auto sealed = part->sealed_end(); end && sealed && *sealed != *end) {
    return Status::Conflict("partition " + std::to_string(id.value()) + " is sealed at " +
                            std::to_string(*sealed) + ", not at " + std::to_string(*end) +
                            " as the successor's map records");
  }
  // Only a whole producer state is handed on (invariant 6): a partition with parents that has
  // not inherited theirs yet (a crash took back its seeding before its snapshot) would hand on
  // only its own events' entries, and its successor would take retries of the rest as new.
  // FailedPrecondition, not Unavailable: a successor's owner tells from it that the seal is
  // confirmed (above) and only the producer state is still to come (SeedSuccessors).
  const PartitionInfo* info = map_.Find(id);
  if (info && !info->parents.empty() && !part->seeded()) {
    return Status::FailedPrecondition("partition " + std::to_string(id.value()) +
                                      " has not inherited its parents' producer state yet; "
                                      "retry");
  }
  if (info && !SealedEndHeldByQuorum(*info, *part)) {
    return Status::FailedPrecondition("partition " + std::to_string(id.value()) +
                                      " is sealed at an end that a quorum of its copies does not "
                                      "hold yet; retry");
  }
  return part->ExportProducers();
}

}  // namespace shoal::broker
