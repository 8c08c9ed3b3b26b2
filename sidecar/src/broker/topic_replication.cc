// Topic's replication (see topic.h and common/replication.h): the copies this pod follows, the
// fetchers that keep them up with their leaders, and the leader's side of a fetch.
#include <algorithm>
#include <set>

#include "broker/topic.h"
#include "shoal/common/json.h"
#include "shoal/common/logging.h"

namespace shoal::broker {

void Topic::ReconcileReplicas() {
  // Which copies the map names here, and which partitions led here have followers.
  std::vector<PartitionInfo> wanted;
  std::vector<PartitionId> gone;
  bool moved = false;
  uint64_t first_map_epoch = 0;
  {
    ReaderLock lock(map_mu_);
    if (started_without_map_.load() && first_map_epoch_.load() == 0 && map_.epoch().value() > 0) {
      first_map_epoch_.store(map_.epoch().value());
    }
    first_map_epoch = first_map_epoch_.load();
    for (const auto& info : map_.partitions()) {
      if (info.FollowedBy(opts_.pod) && !info.lost && !partitions_.count(info.id) &&
          !followed_.count(info.id)) {
        wanted.push_back(info);
      }
    }
    for (const auto& [id, p] : followed_) {
      const PartitionInfo* info = map_.Find(id);
      if (!info || !info->FollowedBy(opts_.pod) || info->lost) gone.push_back(id);
    }
    for (const auto& [id, p] : partitions_) {
      const PartitionInfo* info = map_.Find(id);
      if (info && info->owner == opts_.pod) {
        // A partition that gained followers (a higher factor) starts its epochs now: its first
        // entry covers every record it holds; one failed over to this very leader (its fenced
        // copies answered and it was the most complete) starts its new leader epoch.
        const auto epochs = p->epochs();
        if ((!info->replicas.empty() && epochs.empty()) ||
            (!epochs.empty() && epochs.back().epoch < info->LeaderEpoch().value())) {
          if (Status st = p->StartLeading(info->LeaderEpoch()); !st.ok()) {
            Logger("broker")->error(
                "msg=\"cannot record the leader epoch\" partition={} reason=\"{}\"", id.value(),
                st.message());
          }
        }
        moved |= p->quorum()->SetFollowers(info->replicas, clock_.NowMs());
        p->commit_quorum()->SetFollowers(info->replicas, clock_.NowMs());
        // The end the map records for a sealed partition was held by a quorum when its seal was
        // answered (Topic::Seal), unless a failover gave it a new leader: a copy sealed as the
        // leader of a change's parent holds what it held (the most complete of a quorum), which
        // its followers copy from it before it is read.
        if (!info->active() && !info->lost && info->leader_epoch.value() == 0) {
          moved |= p->quorum()->HeldByQuorum(info->end_offset);
        }
      }
    }
  }
  // New copies are opened without the map lock (creating files is slow), then take effect.
  std::vector<std::pair<PartitionId, std::unique_ptr<Partition>>> opened;
  for (const auto& info : wanted) {
    auto p = Partition::Open(info.id, OptionsFor(info), clock_, probe_);
    if (!p.ok()) {
      Logger("broker")->error(
          "msg=\"cannot open the copy of a followed partition; it is retried with the next "
          "map\" partition={} reason=\"{}\"",
          info.id.value(), p.status().message());
      continue;
    }
    (*p)->SetFollower(true);
    // On a pod that came back with an empty volume (or started for the first time), an empty
    // copy of a partition its first map already knew may be refetching what the volume held: it
    // counts for a failover once it caught up with its leader (on a first start, at its first
    // answered fetch). A partition made by a later map was held here from its start.
    if (started_without_map_.load() && info.born.value() <= first_map_epoch &&
        (*p)->end_offset() == 0) {
      if (Status st = (*p)->MarkRefetching(); !st.ok()) {
        Logger("broker")->error(
            "msg=\"cannot mark a copy as refetching\" partition={} reason=\"{}\"", info.id.value(),
            st.message());
        continue;
      }
    }
    opened.emplace_back(info.id, std::move(p).value());
  }
  std::vector<std::pair<PartitionId, std::unique_ptr<Partition>>> closed;
  {
    WriterLock lock(map_mu_);
    for (auto& [id, p] : opened) followed_.emplace(id, std::move(p));
    for (PartitionId id : gone) {
      auto it = followed_.find(id);
      if (it == followed_.end()) continue;
      closed.emplace_back(id, std::move(it->second));
      followed_.erase(it);
    }
  }
  for (auto& [id, p] : closed) {
    p.reset();
    // A copy this pod now leads went to partitions_ when the map was installed (OpenOwned), so
    // it is not among these; nothing else uses the directory.
    (void)fs_.RemoveAll(PartitionDir(id));
    Logger("broker")->info("msg=\"stopped following a partition\" partition={}", id.value());
  }
  if (moved && on_data_) on_data_();
  // A fetcher per leader followed here; finished ones are joined.
  std::set<std::string> leaders;
  {
    ReaderLock lock(map_mu_);
    for (const auto& [id, p] : followed_) {
      if (const PartitionInfo* info = map_.Find(id)) leaders.insert(info->owner.value());
    }
  }
  MutexLock lock(fetch_mu_);
  for (auto it = fetchers_.begin(); it != fetchers_.end();) {
    if (it->second.done->load()) {
      it->second.thread.join();
      it = fetchers_.erase(it);
    } else {
      ++it;
    }
  }
  if (!started_.load()) return;
  for (const auto& leader : leaders) {
    if (fetchers_.count(leader)) continue;
    auto done = std::make_shared<std::atomic<bool>>(false);
    fetchers_[leader] = {std::thread([this, leader, done] {
                           FetchLoop(leader);
                           done->store(true);
                         }),
                         done};
  }
}

bool Topic::PauseMs(int64_t ms) {
  MutexLock lock(tick_mu_);
  if (stopping_) return false;
  tick_cv_.wait_for(lock, std::chrono::milliseconds(ms));
  return !stopping_;
}

void Topic::FetchLoop(const std::string& leader) {
  Logger("broker")->info("msg=\"following partitions of a leader\" leader={}", leader);
  for (;;) {
    const FetchStep step = FetchRound(leader);
    if (step == FetchStep::kDone) break;
    // An idle round (everything copied, or fenced until a newer map) or a refusal waits for the
    // map that changes it; a round that moved goes on at once (the leader's long-poll paces it).
    if (!PauseMs(step == FetchStep::kMore ? 0 : 200)) break;
  }
}

Topic::FetchStep Topic::FetchRound(const std::string& leader) {
  FetchRequest req;
  req.follower = opts_.pod.value();
  req.wait_ms = opts_.fetch_wait_ms;
  req.max_bytes = opts_.fetch_max_bytes;
  PeerAddress addr;
  {
    ReaderLock lock(map_mu_);
    for (const auto& [id, p] : followed_) {
      const PartitionInfo* info = map_.Find(id);
      if (!info || info->owner.value() != leader) continue;
      // A sealed partition whose end this copy holds is still fetched: its groups' commits go on
      // changing until it is retired.
      // Fenced by the coordinator for a newer leader (invariant 10): nothing more from this one.
      if (p->fenced() > info->LeaderEpoch().value()) continue;
      const auto [incarnation, version] = p->mirrored();
      req.partitions.push_back({id, info->LeaderEpoch(), p->end_offset(), p->last_epoch(),
                                incarnation, version, p->producers_durable()});
    }
    if (const PeerAddress* a = map_.Peer(PodName(leader))) addr = *a;
    if (req.partitions.empty()) {
      // Still following something of it (sealed and copied whole): stay, idle.
      for (const auto& [id, p] : followed_) {
        const PartitionInfo* info = map_.Find(id);
        if (info && info->owner.value() == leader) {
          return FetchStep::kIdle;
        }
      }
      return FetchStep::kDone;
    }
  }
  if (addr.admin.empty() || !peers_) return FetchStep::kRetry;
  auto answer = peers_->FetchReplica(addr, EncodeFetchRequest(req));
  auto blocks =
      answer.ok() ? ParseFetchAnswer(*answer) : Result<std::vector<FetchBlock>>(answer.status());
  if (!blocks.ok()) {
    Logger("broker")->warn("msg=\"fetch from the leader failed; retrying\" leader={} reason=\"{}\"",
                           leader, blocks.status().message());
    return FetchStep::kRetry;
  }
  bool refused = false;
  {
    ReaderLock lock(map_mu_);
    for (const auto& b : *blocks) {
      auto it = followed_.find(b.id);
      if (it == followed_.end()) continue;
      // Only for the leader asked, at the leader epoch asked: an answer that comes back after a
      // newer map moved the leadership must not be appended (invariant 10).
      const PartitionInfo* info = map_.Find(b.id);
      auto asked = std::find_if(req.partitions.begin(), req.partitions.end(),
                                [&](const FetchPartition& f) { return f.id == b.id; });
      if (!info || info->owner.value() != leader || asked == req.partitions.end() ||
          info->LeaderEpoch() != asked->leader_epoch) {
        continue;
      }
      Partition& p = *it->second;
      // Where its log left the leader's: the leader's point, or earlier where this copy's own
      // entries of an epoch the leader never had begin.
      const uint64_t cut = b.code == FetchCode::kDiverged
                               ? replication::FollowerTruncationPoint(b.epochs, b.log_end,
                                                                      p.epochs(), p.end_offset())
                               : p.end_offset();
      if (b.code == FetchCode::kDiverged && cut < p.end_offset()) {
        // Its tail left the leader's log: never acknowledged (invariant 11). Cut and go on.
        Logger("broker")->warn(
            "msg=\"cutting a copy's tail that left its leader's log\" leader={} partition={} "
            "from={} to={}",
            leader, b.id.value(), p.end_offset(), cut);
        if (Status st = p.CutTo(cut); !st.ok()) {
          refused = true;
          Logger("broker")->error("msg=\"cannot cut a copy's tail\" partition={} reason=\"{}\"",
                                  b.id.value(), st.message());
        }
        continue;
      }
      if (b.code == FetchCode::kBehindStart && b.log_start > p.end_offset()) {
        // The leader removed what this copy would copy next (retention), or the copy is new
        // and empty on a partition whose oldest records are gone: it copies from the
        // leader's oldest record on (Kafka's follower truncates to the leader's log start
        // offset the same way).
        Logger("broker")->warn(
            "msg=\"a copy behind its leader's oldest record starts again there\" leader={} "
            "partition={} held={} leader_start={}",
            leader, b.id.value(), p.end_offset(), b.log_start);
        if (Status st = p.StartAt(b.log_start, b.epochs); !st.ok()) {
          refused = true;
          Logger("broker")->error("msg=\"cannot start a copy afresh\" partition={} reason=\"{}\"",
                                  b.id.value(), st.message());
        }
        continue;
      }
      if (b.code != FetchCode::kOk) {
        refused = true;
        Logger("broker")->warn(
            "msg=\"the leader refused a fetch\" leader={} partition={} code={} held={} "
            "leader_start={} leader_end={}",
            leader, b.id.value(), ToString(b.code), p.end_offset(), b.log_start, b.log_end);
        continue;
      }
      if (b.commits_incarnation) {
        if (Status st = p.MirrorCommits(b.commits_incarnation, b.commits_version, b.commits);
            !st.ok()) {
          refused = true;
          Logger("broker")->error(
              "msg=\"cannot mirror the leader's commits\" leader={} partition={} reason=\"{}\"",
              leader, b.id.value(), st.message());
        } else {
          // The groups the leader knows of are known here too (GroupRegistry::Learn): a group
          // that only the leader's pod registered still holds retirement back if that pod
          // loses its volume. Before the next fetch reports the mirror, so a batch whose lease
          // a quorum holds is of a group a quorum of the pods knows.
          for (const auto& group : p.CommitGroups()) {
            if (Status learned = registry_->Learn(group, clock_.NowMs()); !learned.ok()) {
              Logger("broker")->warn(
                  "msg=\"cannot register a group of a copy's leader\" partition={} group={} "
                  "reason=\"{}\"",
                  b.id.value(), group, learned.message());
            }
          }
        }
      }
      if (!b.producers.empty() && !p.producers_durable()) {
        if (Status st = p.InheritFromLeader(b.producers); !st.ok()) {
          refused = true;
          Logger("broker")->error(
              "msg=\"cannot take the leader's inherited producer state\" leader={} partition={} "
              "reason=\"{}\"",
              leader, b.id.value(), st.message());
        }
      }
      if (b.first != p.end_offset()) continue;  // an answer to an older ask
      auto held = p.AppendCopied(b.first, b.records, b.log_start, asked->leader_epoch.value());
      if (held.status().code() == Status::Code::kFailedPrecondition) continue;  // fenced meanwhile
      if (held.ok()) {
        if (Status st = p.TakeLeaderEpochs(b.epochs); !st.ok()) held = st;
      }
      if (held.ok()) {
        // Caught up with the leader's end, not its high watermark: that falls when a copy
        // loses its volume (QuorumTracker::Holds), to below events acknowledged before, which
        // a copy refetching them must hold before it counts for a failover (invariant 10).
        if (Status st = p.CaughtUpTo(b.log_end); !st.ok()) held = st;
      }
      if (!held.ok()) {
        refused = true;
        Logger("broker")->error(
            "msg=\"cannot append copied records\" leader={} partition={} reason=\"{}\"", leader,
            b.id.value(), held.status().message());
      }
    }
  }
  // A refusal waits for the map that settles it (the coordinator's next install).
  return refused ? FetchStep::kRetry : FetchStep::kMore;
}

bool Topic::ServeFetch(const FetchRequest& request, std::string* body) {
  bool now = false, moved = false;
  uint32_t n = 0;
  size_t budget = request.max_bytes;
  {
    ReaderLock lock(map_mu_);
    for (const auto& fp : request.partitions) {
      FetchBlock b;
      b.id = fp.id;
      Partition* read_from = nullptr;  // the records go straight from its log into the answer
      const PartitionInfo* info = map_.Find(fp.id);
      auto it = partitions_.find(fp.id);
      if (!info || !HeldHere(*info) || it == partitions_.end()) {
        b.code = FetchCode::kNotLeader;
      } else if (info->LeaderEpoch() != fp.leader_epoch) {
        b.code = FetchCode::kFenced;
        b.leader_epoch = info->LeaderEpoch();
      } else if (!info->FollowedBy(PodName(request.follower))) {
        b.code = FetchCode::kNotFollower;
      } else {
        Partition& p = *it->second;
        b.leader_epoch = info->LeaderEpoch();
        b.log_start = p.start_offset();
        b.log_end = p.end_offset();
        b.epochs = p.epochs();
        // Where the follower's log leaves this one's, by their epochs (invariant 11). A leader
        // with no epochs yet (it is being given followers) has no divergence to tell.
        const uint64_t cut =
            b.epochs.empty()
                ? fp.from
                : replication::TruncationPoint(b.epochs, b.log_end, fp.last_epoch, fp.from);
        // A follower whose last entry is of an epoch this leader never had holds entries that
        // are not this log's, even where the offsets line up: it is neither counted nor sent
        // more, and cuts where its own epochs say (FollowerTruncationPoint).
        if (cut < fp.from || (fp.from > 0 && replication::ForeignEpoch(b.epochs, fp.last_epoch))) {
          b.code = FetchCode::kDiverged;
          b.log_end = cut;
        } else if (fp.from < b.log_start) {
          b.code = FetchCode::kBehindStart;
        } else {
          moved |= p.quorum()->Holds(request.follower, fp.from, b.log_end, clock_.NowMs());
          b.high_watermark = p.high_watermark();
          // The groups' commits: what the follower mirrors of this store, and the whole state
          // when that is not the current one.
          const uint64_t incarnation = p.commits_incarnation();
          const uint64_t version = p.commits_version();
          p.commit_quorum()->Holds(request.follower,
                                   fp.commits_incarnation == incarnation ? fp.commits_version : 0,
                                   version, clock_.NowMs());
          // Not while it gathers its groups' commits from its copies (a failover made it the
          // leader): the follower would mirror them over the commits it is asked for.
          if ((fp.commits_incarnation != incarnation || fp.commits_version != version) &&
              !p.gathering()) {
            storage::CommitStore::State state = p.CommitsSnapshot();
            b.commits_incarnation = state.incarnation;
            b.commits_version = state.version;
            b.commits = std::move(state.records);
          }
          // A successor's inherited producer state, once, to a follower that lacks it.
          p.NoteFollowerSeeded(request.follower, fp.seeded);
          if (request.version >= 3 && !fp.seeded && !info->parents.empty() && p.seeded()) {
            b.producers = p.ExportInheritedProducers();
          }
          b.first = fp.from;
          if (fp.from < b.log_end && budget > 0) read_from = &p;
        }
      }
      const FetchBlockMark mark = StartFetchBlock(b, *body, request.version);
      uint32_t count = 0;
      if (read_from) {
        auto read = read_from->ReadCopy(fp.from, budget, body);
        if (read.ok()) {
          count = static_cast<uint32_t>(*read);
        } else {
          body->resize(mark.records_at);
        }
        budget -= std::min(budget, body->size() - mark.records_at);
      }
      EndFetchBlock(b, *body, request.version, mark, count);
      now |= b.code != FetchCode::kOk || count > 0 || b.commits_incarnation != 0 ||
             !b.producers.empty();
      ++n;
    }
  }
  FinishFetchAnswer(*body, n, request.version);
  if (moved && on_data_) on_data_();
  return now;
}

std::vector<FencedCopy> Topic::FenceCopies(const std::vector<PartitionId>& ids,
                                           Epoch leader_epoch) {
  std::vector<FencedCopy> out;
  ReaderLock lock(map_mu_);
  for (PartitionId id : ids) {
    // A copy followed here, or the partition led here: an old leader that came back while its
    // failover could not find a quorum of copies answers too, and takes no more appends.
    Partition* copy = nullptr;
    if (auto f = followed_.find(id); f != followed_.end()) {
      copy = f->second.get();
    } else if (auto l = partitions_.find(id); l != partitions_.end()) {
      copy = l->second.get();
    }
    if (!copy) {
      // A partition of a map this pod never installed (made by a change in progress, whose map
      // did not reach it): it holds nothing of it, and says so. The fence is written where a
      // copy made later finds it, so that its answer stays true: such a copy takes nothing from
      // a leader of an older leader epoch. A pod without a map answers nothing (it may have
      // lost what it held).
      const uint64_t next_id = map_.NextId().value();
      if (map_.epoch().value() == 0 || map_.Find(id) || id.value() < next_id ||
          id.value() - next_id >= kMaxAbsentFences) {
        continue;
      }
      if (Status st = Partition::FenceAbsent(fs_, PartitionDir(id), leader_epoch.value());
          !st.ok()) {
        Logger("broker")->error(
            "msg=\"cannot fence a partition not held here\" partition={} "
            "reason=\"{}\"",
            id.value(), st.message());
        continue;
      }
      out.push_back({id, Epoch(0), 0, false, false, /*absent=*/true});
      continue;
    }
    auto held = copy->Fence(leader_epoch.value());
    if (!held.ok()) {
      Logger("broker")->error("msg=\"cannot fence a copy\" partition={} reason=\"{}\"",
                              id.value(), held.status().message());
      continue;
    }
    out.push_back({id, held->last_epoch, held->end, held->refetching, held->joining, false});
  }
  if (!out.empty()) {
    Logger("broker")->warn("msg=\"copies fenced for a failover\" partitions={} leader_epoch={}",
                           out.size(), leader_epoch.value());
  }
  return out;
}

std::vector<std::pair<PartitionId, Epoch>> Topic::FencedAbsent(const PartitionMap& next) const {
  std::vector<PartitionId> absent;
  {
    ReaderLock lock(map_mu_);
    for (const auto& info : next.partitions()) {
      if (info.owner != opts_.pod || info.leader_epoch <= info.born) continue;
      if (!partitions_.count(info.id) && !followed_.count(info.id)) absent.push_back(info.id);
    }
  }
  // The fence files are read without the map lock.
  std::vector<std::pair<PartitionId, Epoch>> out;
  for (PartitionId id : absent) {
    if (const uint64_t f = Partition::FenceIn(fs_, PartitionDir(id)); f > 0) {
      out.emplace_back(id, Epoch(f));
    }
  }
  return out;
}

std::string Topic::FollowedJson() const {
  ReaderLock lock(map_mu_);
  std::string out = "{\"volume\":" + std::to_string(volume_) + ",\"followed\":[";
  bool first = true;
  for (const auto& [id, p] : followed_) {
    const PartitionInfo* info = map_.Find(id);
    if (!first) out += ',';
    first = false;
    out += "{\"id\":" + std::to_string(id.value()) + ",\"leader\":";
    json::AppendString(out, info ? info->owner.value() : "");
    out += ",\"start\":" + std::to_string(p->start_offset()) +
           ",\"end\":" + std::to_string(p->end_offset()) +
           ",\"last_epoch\":" + std::to_string(p->last_epoch()) +
           ",\"fenced\":" + std::to_string(p->fenced()) +
           ",\"refetching\":" + (p->refetching() ? "true" : "false") +
           ",\"joining\":" + (p->joining() ? "true" : "false") + "}";
  }
  out += "]}";
  return out;
}

}  // namespace shoal::broker
