// Topic (topic.h): opening, routing, produce, consume, commit, installing maps, retirement and
// the ticks. Its part in a change (seeding, prepared partitions, seals) is in topic_handoff.cc,
// its JSON views and state metrics in topic_views.cc, the parents-first release in
// successor_gate.cc.
#include "broker/topic.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <random>
#include <set>
#include <tuple>

#include "shoal/common/hash.h"
#include "shoal/common/json.h"
#include "shoal/common/logging.h"
#include "shoal/common/metrics.h"
#include "shoal/common/replication.h"
#include "shoal/common/retirement_rule.h"
#include "storage/file_util.h"

namespace shoal::broker {

Topic::Topic(TopicOptions options, Clock& clock, SidecarProbe& probe, PeerClient* peers)
    : opts_(std::move(options)),
      fs_(opts_.fs ? *opts_.fs : storage::PosixFileSystem()),
      clock_(clock),
      probe_(probe),
      peers_(peers) {}

Topic::~Topic() {
  {
    MutexLock lock(tick_mu_);
    stopping_ = true;
  }
  tick_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  if (peer_ticker_.joinable()) peer_ticker_.join();
}

Result<std::unique_ptr<Topic>> Topic::Open(const TopicOptions& options, Clock& clock,
                                           SidecarProbe& probe, PeerClient* peers) {
  std::unique_ptr<Topic> t(new Topic(options, clock, probe, peers));
  WriterLock lock(t->map_mu_);  // not shared yet; the lock is what the analysis checks
  SHOAL_RETURN_IF_ERROR(t->LoadOrCreateMap());
  SHOAL_RETURN_IF_ERROR(t->LoadOrNameVolume());
  auto registry = GroupRegistry::Open(options.data_dir + "/" + options.topic + "/groups.json",
                                      options.max_groups, t->fs_);
  if (!registry.ok()) return registry.status();
  t->registry_ = std::move(registry).value();
  SHOAL_RETURN_IF_ERROR(t->OpenPartitions());
  lock.unlock();
  {
    MutexLock install(t->install_mu_);
    t->ReconcileReplicas();
  }
  // Successors whose seeding a crash took back inherit again before the sidecar is ready, when
  // their parents' owners answer; otherwise the ticker keeps trying.
  t->SeedPending();
  return t;
}

std::string Topic::MapPath() const { return opts_.data_dir + "/" + opts_.topic + "/map.json"; }

std::string Topic::PartitionDir(PartitionId id) const {
  return opts_.data_dir + "/" + opts_.topic + "/partitions/" + std::to_string(id.value());
}

PartitionOptions Topic::OptionsFor(const PartitionInfo& info) const {
  PartitionOptions po = opts_.partition;
  po.fs = &fs_;
  po.dir = PartitionDir(info.id);
  po.range = info.range;
  po.pod = opts_.pod.value();
  return po;
}

uint64_t RemoteCommits::MinOver(const std::string& group, const HashRange& r) const {
  uint64_t at = 0;
  if (auto pieces = ranges.find(group); pieces != ranges.end()) {
    at = UINT64_MAX;
    for (const auto& p : pieces->second) {
      if (p.hi <= r.lo || p.lo >= r.hi) continue;
      at = std::min(at, p.offset);
    }
    if (at == UINT64_MAX) at = 0;
  } else if (auto c = commits.find(group); c != commits.end()) {
    at = c->second.value();
  }
  return std::max(at, start_offset);
}

Status Topic::LoadOrNameVolume() {
  const std::string path = opts_.data_dir + "/" + opts_.topic + "/volume";
  std::string text;
  Status st = fs_.ReadWholeFile(path, &text);
  if (st.ok()) {
    VolumeId id = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec == std::errc() && id != 0) {
      volume_ = id;
      return Status::Ok();
    }
    Logger("broker")->warn("msg=\"an unreadable volume name; naming the volume again\" file={}",
                           path);
  } else if (st.code() != Status::Code::kNotFound) {
    return st.Annotate("reading " + path);
  }
  VolumeId id = 0;
  if (opts_.new_volume_id) id = opts_.new_volume_id();
  if (id == 0) {
    std::random_device rd;
    // 53 bits: exact as a number in any JSON reader.
    while (id == 0) id = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & ((uint64_t{1} << 53) - 1);
  }
  SHOAL_RETURN_IF_ERROR(fs_.WriteFileAtomic(path, std::to_string(id) + "\n"));
  volume_ = id;
  return Status::Ok();
}

bool Topic::RetiredInMap(PartitionId id) const {
  return map_.Find(id) == nullptr && id < map_.NextId();
}

Status Topic::LoadOrCreateMap() {
  SHOAL_RETURN_IF_ERROR(fs_.CreateDirs(opts_.data_dir + "/" + opts_.topic)
                            .Annotate("creating the topic directory"));
  std::string text;
  Status st = fs_.ReadWholeFile(MapPath(), &text);
  if (st.ok()) {
    auto loaded = PartitionMap::FromJson(text);
    if (!loaded.ok()) return loaded.status().Annotate("loading " + MapPath());
    if (loaded->topic() != opts_.topic) {
      return Status::FailedPrecondition(MapPath() + " belongs to topic " + loaded->topic());
    }
    map_ = std::move(loaded).value();
    map_from_disk_ = true;
    if (map_.active_count() != opts_.partitions) {
      Logger("broker")->info(
          "msg=\"using the partition map on disk\" epoch={} active_partitions={} "
          "ignored_flag_partitions={}",
          map_.epoch().value(), map_.active_count(), opts_.partitions);
    }
    return Status::Ok();
  }
  if (st.code() != Status::Code::kNotFound) return st;
  if (opts_.wait_for_map) {
    started_without_map_.store(true);
    Logger("broker")->info("msg=\"no partition map yet; waiting for one on the admin plane\"");
    return Status::Ok();
  }
  auto initial = PartitionMap::Initial(opts_.topic, opts_.partitions, opts_.pod);
  if (!initial.ok()) return initial.status();
  map_ = std::move(initial).value();
  return fs_.WriteFileAtomic(MapPath(), map_.ToJson());
}

Status Topic::OpenPartitions() {
  // Only what the map lists: a retired partition is not in it, so a restart never resurrects one.
  RemoveRetiredLeftovers();
  for (const auto& info : map_.partitions()) {
    if (!HeldHere(info)) continue;
    auto p = Partition::Open(info.id, OptionsFor(info), clock_, probe_);
    if (!p.ok()) return p.status().Annotate("partition " + std::to_string(info.id.value()));
    if (!info.replicas.empty()) SHOAL_RETURN_IF_ERROR((*p)->StartLeading(info.LeaderEpoch()));
    // A leader that restarts may have been deposed meanwhile (a failover it has not heard of,
    // its map on disk still naming it): its groups may have committed at the new leader what
    // its own store does not hold. It gathers its copies' commits before it hands out an event,
    // as a copy made the leader does; a deposed one's copies answer with the new leader's.
    if (!info.replicas.empty() && opts_.acks_quorum) (*p)->StartGathering(info.replicas);
    partitions_.emplace(info.id, std::move(p).value());
  }
  Logger("broker")->info("msg=\"topic open\" topic={} epoch={} partitions={}", opts_.topic,
                         map_.epoch().value(), partitions_.size());
  return Status::Ok();
}

void Topic::RemoveRetiredLeftovers() {
  // Only with a map read from disk: a map just created (its file was missing) says nothing about
  // what the directories hold. Directories of ids the map never had (a prepare for a coming map)
  // are left alone; they hold no events and the change that prepared them reopens them.
  if (!map_from_disk_) return;
  const std::string dir = opts_.data_dir + "/" + opts_.topic + "/partitions";
  auto names = fs_.List(dir);
  if (!names.ok()) return;  // no partitions yet
  for (const auto& name : *names) {
    uint32_t id = 0;
    auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (err != std::errc() || end != name.data() + name.size() || !RetiredInMap(PartitionId(id))) continue;
    // InstallMap persisted the map that retired it, then crashed before (or while) removing it.
    Status rm = fs_.RemoveAll(dir + "/" + name);
    Logger("broker")->info(
        "msg=\"removed the directory of a retired partition\" partition={} "
        "ok={}",
        id, rm.ok());
  }
}

bool Topic::Accepting(const PartitionInfo& info, const Partition& p) const {
  // A successor takes appends only once it holds its parents' producer state (invariant 6); its
  // parents are sealed before the map that creates it exists (invariant 2).
  return info.active() && info.owner == opts_.pod && !p.sealed_end() &&
         (info.parents.empty() || p.seeded());
}

Status Topic::Produce(const std::vector<wire::ProduceEvent>& events,
                      std::vector<wire::ProduceResult>* results, bool forwarded,
                      std::vector<ForwardPlan>* forwards, std::vector<size_t>* unknown,
                      std::vector<QuorumWait>* quorum) {
  results->assign(events.size(), {});
  ReaderLock lock(map_mu_);
  if (map_.active_count() == 0) {
    return Status::Unavailable("this sidecar has no partition map yet; retry");
  }
  // Group the events by partition, keeping request order inside each group; events of other
  // owners are grouped by owner for forwarding.
  struct Group {
    Partition* partition;
    std::vector<const wire::ProduceEvent*> events;
    std::vector<uint32_t> hashes;  // the routing hash of each event, for the load sketch
    std::vector<wire::ProduceResult*> results;
    std::vector<size_t> indices;  // of the events in the request
  };
  std::vector<Group> groups;
  // Indexed by the partition's place in the map, never by its id: an id is not a size.
  std::vector<int32_t> group_of(map_.partitions().size(), -1);
  std::map<std::string, std::vector<size_t>> remote;
  for (size_t i = 0; i < events.size(); ++i) {
    const uint32_t hash = KeyHash(events[i].key);
    const PartitionInfo& info = map_.Route(hash);
    if (info.owner != opts_.pod) {
      if (forwarded || !forwards) {
        // One hop only. The sender routed by an older map than this one: the range is changing
        // hands and the sender learns the new owner with the change's next install. Retryable,
        // as the data plane promises for a change in progress.
        return Status::Unavailable(
            "not the owner: partition " + std::to_string(info.id.value()) + " is owned by " +
            info.owner.value() + " at epoch " + std::to_string(map_.epoch().value()) +
            "; a change is in progress, retry");
      }
      remote[info.owner.value()].push_back(i);
      continue;
    }
    int32_t& g = group_of[map_.IndexOf(info)];
    if (g < 0) {
      auto it = partitions_.find(info.id);
      if (it == partitions_.end() || !Accepting(info, *it->second)) {
        return Status::Unavailable("partition " + std::to_string(info.id.value()) +
                                   " is being created by a change in progress; retry");
      }
      g = static_cast<int32_t>(groups.size());
      groups.push_back({it->second.get(), {}, {}, {}, {}});
    }
    groups[g].events.push_back(&events[i]);
    groups[g].hashes.push_back(hash);
    groups[g].results.push_back(&(*results)[i]);
    groups[g].indices.push_back(i);
  }
  for (auto& [pod, idx] : remote) {
    const PeerAddress* addr = map_.Peer(PodName(pod));
    if (!addr) {
      return Status::Unavailable("no address known for " + pod + ", the owner of some keys");
    }
    std::vector<const wire::ProduceEvent*> subset;
    bool raw = false;
    for (size_t i : idx) {
      subset.push_back(&events[i]);
      raw = raw || events[i].raw;
    }
    if (raw) {
      forwards->push_back(
          {*addr, wire::EncodeBinaryProduceRequest(subset), std::move(idx), wire::Format::kBinary});
    } else {
      forwards->push_back({*addr, wire::EncodeProduceRequest(subset), std::move(idx)});
    }
  }
  // A full volume refuses produce first, so that commits, group registrations, seals and
  // retirement keep working inside the reserve and consumers can drain and free space.
  if (opts_.disk_reserve && !groups.empty()) {
    uint64_t bytes = 0;
    for (const auto& g : groups) {
      for (const auto* e : g.events) {
        bytes += e->key.size() + e->value.size() + e->producer.size() + 64;
      }
    }
    SHOAL_RETURN_IF_ERROR(opts_.disk_reserve->AdmitProduce(bytes));
  }
  // A request is refused whole for what the producer state cannot decide, before anything of it
  // is appended (invariant 6: such events are never taken as stored).
  {
    std::vector<size_t> undecided;
    for (auto& g : groups) {
      for (size_t k : g.partition->Undecidable(g.events, g.hashes)) undecided.push_back(g.indices[k]);
    }
    if (!undecided.empty()) {
      std::sort(undecided.begin(), undecided.end());
      const auto& first = events[undecided.front()];
      std::string msg = std::to_string(undecided.size()) +
                        " event(s) carry a (producer, seq) older than what their partition "
                        "remembers of that producer, e.g. (" +
                        std::string(first.producer) + ", " + std::to_string(*first.seq) +
                        "): whether they were stored cannot be told, so nothing of the request was "
                        "appended; send them again under a new producer id or seq "
                        "(docs/producer-state.md)";
      if (unknown) *unknown = std::move(undecided);
      return Status::SequenceUnknown(std::move(msg));
    }
  }
  for (auto& g : groups) {
    std::vector<size_t> undecided;
    Status st = g.partition->Append(g.events, g.hashes, g.results, &undecided);
    if (st.code() == Status::Code::kSequenceUnknown && unknown) {
      for (size_t k : undecided) unknown->push_back(g.indices[k]);
    }
    SHOAL_RETURN_IF_ERROR(st);
  }
  // Acknowledge only what the fsync policy made durable; under fsync=always the concurrent
  // requests of a partition share one fdatasync (group commit in DiskLog::Sync).
  for (auto& g : groups) SHOAL_RETURN_IF_ERROR(g.partition->SyncForAck());
  // Replicated partitions: with acks quorum, what a quorum of copies must hold before the ack,
  // waited for without the map lock (followers' fetches and installs go on meanwhile).
  std::vector<QuorumWait> awaited;
  std::vector<QuorumWait> parents_awaited;  // after every partition's own
  for (auto& g : groups) {
    if (!opts_.acks_quorum || !g.partition->quorum()->replicated()) continue;
    // A duplicate answered from a parent's producer state (a successor inherits it) names the
    // parent's offset. The parent's sealed end was held by a quorum before the successor took
    // appends, unless a failover carried in the change made a copy the parent's leader and
    // sealed it at its end before its followers could copy it (Topic::Seal): a parent held here
    // is waited for too (its mark is its sealed end at once otherwise).
    const uint32_t id = g.partition->id().value();
    uint64_t end = 0;
    std::map<uint32_t, uint64_t> parents;
    for (const auto* r : g.results) {
      uint64_t& named = r->partition == id ? end : parents[r->partition];
      named = std::max(named, r->offset + 1);
    }
    if (end > 0) awaited.push_back({g.partition->quorum(), end, g.partition->id()});
    for (const auto& [parent, parent_end] : parents) {
      auto it = partitions_.find(PartitionId(parent));
      if (it != partitions_.end() && it->second->quorum()->replicated()) {
        parents_awaited.push_back({it->second->quorum(), parent_end, PartitionId(parent)});
      }
    }
  }
  awaited.insert(awaited.end(), parents_awaited.begin(), parents_awaited.end());
  lock.unlock();
  if (!groups.empty() && on_append_) on_append_();
  SHOAL_RETURN_IF_ERROR(HandOverOrAwait(std::move(awaited), quorum));
  if (!groups.empty() && on_data_) on_data_();
  return Status::Ok();
}

// Consume serves `group` what this pod's consumers may read now, by invariant 3 per hash point:
//   - each active partition this pod owns that the gate released (its lineage is consumed over
//     its range), whole, from the group's cursor;
//   - for each one not released yet, the frontier of its lineage (SuccessorGate::Frontier):
//     ancestors whose own lineage is consumed over the successor's range, restricted to that
//     range, read here when held here and from their owner otherwise (only the events of the
//     range cross between pods). Several successors here that read one ancestor read it in one
//     batch over the union of their ranges, so that the consumers' commit of that ancestor names
//     one batch.
// Sealed partitions are not read for themselves: the successors' owners read them, each its
// range, which is what divides a parent's backlog among the pods that own its successors.
std::vector<Topic::ReadJob> Topic::PlanReads(const std::string& group) {
  std::vector<ReadJob> jobs;
  std::map<PartitionId, std::vector<HashRange>> ancestors;
  for (auto& [id, p] : partitions_) {
    const PartitionInfo* info = map_.Find(id);
    if (!opts_.range_reads || !info) {
      if (!info || Released(*info, group)) jobs.push_back({id, p.get(), true, {}, {}});
      continue;
    }
    if (!info->active()) continue;
    if (Released(*info, group)) {
      jobs.push_back({id, p.get(), true, {}, {}});
      continue;
    }
    const auto frontier = gate_.Frontier(
        map_, *info, group,
        [this](PartitionId a, const std::string& g, const HashRange& r)
            REQUIRES_SHARED(map_mu_) { return StandingOf(a, g, r); },
        [this](const PartitionInfo& a) REQUIRES_SHARED(map_mu_) { return SealedEndOf(a); });
    for (const auto& read : frontier) ancestors[read.partition->id].push_back(read.range);
  }
  for (auto& [id, ranges] : ancestors) {
    ReadJob job{id, nullptr, false, NormalizeRanges(std::move(ranges)), {}};
    if (auto it = partitions_.find(id); it != partitions_.end()) {
      job.local = it->second.get();
    } else {
      const PartitionInfo* info = map_.Find(id);
      const PeerAddress* addr = info ? map_.Peer(info->owner) : nullptr;
      if (!addr) continue;  // nobody to ask yet; the next map will say
      job.peer = *addr;
      reads_remote_.store(true);
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

Result<size_t> Topic::Consume(const std::string& group, size_t max, std::string* out,
                              std::vector<QuorumWait>* quorum, wire::Format format) {
  constexpr size_t kMaxBytes = 4 << 20;
  // Known topic-wide from its first request (invariant 4), on disk before anything is served.
  SHOAL_RETURN_IF_ERROR(registry_->Touch(group, clock_.NowMs()));
  wire::OpenConsumeAnswer(format, *out);
  size_t total = 0, through = 0;
  Status failed;
  std::vector<ReadJob> remote;
  std::vector<QuorumWait> awaited;
  {
    ReaderLock lock(map_mu_);
    std::vector<ReadJob> jobs = PlanReads(group);
    // Start at a rotating job so that one busy partition cannot starve the others.
    const size_t start = jobs.empty() ? 0 : consume_rotor_.fetch_add(1) % jobs.size();
    for (size_t k = 0; k < jobs.size() && total < max; ++k) {
      ReadJob& job = jobs[(start + k) % jobs.size()];
      if (!job.local) {
        remote.push_back(std::move(job));  // after the lock: no network under map_mu_
        continue;
      }
      Result<size_t> n = size_t{0};
      if (job.whole) {
        n = job.local->ReadForGroup(group, max - total, kMaxBytes, total > 0, out, format);
        // The batch's lease (Partition::ReadForGroup) is held by a quorum before it goes out.
        if (n.ok() && *n > 0) {
          if (auto w = CommitWait(*job.local)) awaited.push_back(std::move(*w));
        }
      } else {
        auto b = job.local->ReadRanges(group, opts_.pod.value(), job.ranges, max - total, kMaxBytes,
                                       total > 0, out, format);
        n = b.ok() ? Result<size_t>(b->count) : Result<size_t>(b.status());
        if (b.ok()) through += b->count;
      }
      if (!n.ok()) {
        // This partition's batch did not go out (its cursor did not move); what the others
        // handed out in this call does, instead of waiting for redelivery.
        Logger("broker")->error("msg=\"read failed\" partition={} group={} reason=\"{}\"",
                                job.id.value(), group, n.status().message());
        if (failed.ok()) failed = n.status();
        continue;
      }
      total += *n;
    }
  }
  size_t from_peers = 0;
  for (const auto& job : remote) {
    if (total >= max) break;
    const size_t n = ReadRemote(group, job, max - total, kMaxBytes, total > 0, out, format);
    total += n;
    from_peers += n;
  }
  if (total == 0 && !failed.ok()) return failed;
  wire::CloseConsumeAnswer(format, *out);
  probe_.Delivered(group, total, through, from_peers);
  if (!awaited.empty()) {
    if (on_append_) on_append_();  // parked fetches carry the leases on
    // Handed out without a quorum if none comes (DataFrontend::Hand says why).
    (void)HandOverOrAwait(std::move(awaited), quorum);
  }
  return total;
}

bool Topic::RemoteReadDue(const std::string& group, PartitionId id, int64_t now) {
  // An empty answer is tried again after this long (the ranges may be held by another reader's
  // batch for a while); a failed one after longer (the owner is restarting, or paused: each try
  // may wait for the forward timeout).
  constexpr int64_t kRetryMs = 100, kRetryFailedMs = 1000;
  MutexLock lock(remote_mu_);
  auto it = remote_reads_.find({group, id});
  if (it == remote_reads_.end()) return true;
  const RemoteRead& r = it->second;
  if (r.out) return now - r.at_ms > opts_.partition.redelivery_ms;
  return !r.idle || now - r.at_ms >= (r.failed ? kRetryFailedMs : kRetryMs);
}

size_t Topic::ReadRemote(const std::string& group, const ReadJob& job, size_t max, size_t max_bytes,
                         bool comma_first, std::string* out, wire::Format format) {
  const int64_t now = clock_.NowMs();
  if (!peers_ || !RemoteReadDue(group, job.id, now)) return 0;
  auto answer = peers_->ReadRange(job.peer, job.id, group, opts_.pod, job.ranges, max, max_bytes);
  MutexLock lock(remote_mu_);
  RemoteRead& r = remote_reads_[{group, job.id}];
  r.at_ms = now;
  if (!answer.ok()) {
    Logger("broker")->warn(
        "msg=\"reading an ancestor's range from its owner failed; trying again\" partition={} "
        "group={} owner={} reason=\"{}\"",
        job.id.value(), group, job.peer.admin, answer.status().message());
    r.idle = true;
    r.failed = true;
    return 0;
  }
  r.failed = false;
  if (answer->batch.count == 0) {
    r.idle = true;
    return 0;
  }
  // Peers exchange range reads as JSON; a binary consumer gets them in its format. The batch
  // is out (its lease taken) either way: events that cannot be converted would come back by
  // redelivery, and a peer's JSON that does not parse is a bug worth a loud log.
  r.idle = false;
  r.out = true;
  r.last = answer->batch.last;
  Result<std::string> events = std::move(answer->events);
  if (format != wire::Format::kJson) {
    events = wire::ConvertAnswerEvents(*events, wire::Format::kJson, format);
  }
  if (!events.ok()) {
    Logger("broker")->error(
        "msg=\"a range read's events do not parse; they come back by redelivery\" partition={} "
        "group={} owner={} reason=\"{}\"",
        job.id.value(), group, job.peer.admin, events.status().message());
    return 0;
  }
  if (comma_first && format == wire::Format::kJson) out->push_back(',');
  out->append(*events);
  return answer->batch.count;
}

bool Topic::HasDataFor(const std::string& group) {
  ReaderLock lock(map_mu_);
  const int64_t now = clock_.NowMs();
  for (const auto& job : PlanReads(group)) {
    // A gated successor only costs one empty read.
    if (job.whole && job.local->HasDataFor(group)) return true;
    if (!job.whole && job.local &&
        job.local->HasDataInRanges(group, opts_.pod.value(), job.ranges)) {
      return true;
    }
    if (!job.local && RemoteReadDue(group, job.id, now)) return true;
  }
  return false;
}

bool Topic::Released(const PartitionInfo& info, const std::string& group) {
  return gate_.Released(
      map_, info, group,
      [this](PartitionId id, const std::string& g, const HashRange& r)
          REQUIRES_SHARED(map_mu_) { return StandingOf(id, g, r); },
      [this](const PartitionInfo& p) REQUIRES_SHARED(map_mu_) { return SealedEndOf(p); });
}

uint64_t Topic::SealedEndOf(const PartitionInfo& info) {
  uint64_t end = info.end_offset;
  if (auto it = partitions_.find(info.id); it != partitions_.end()) {
    const auto sealed = it->second->sealed_end();
    return std::max(end, sealed ? *sealed : it->second->end_offset());
  }
  MutexLock lock(remote_mu_);
  if (auto rc = remote_commits_.find(info.id); rc != remote_commits_.end()) {
    end = std::max(end, rc->second.end_offset);
  }
  return end;
}

std::optional<uint64_t> Topic::StandingOf(PartitionId id, const std::string& group,
                                          const HashRange& range) {
  if (auto it = partitions_.find(id); it != partitions_.end()) {
    return it->second->StandingOver(group, range);
  }
  MutexLock lock(remote_mu_);
  auto rc = remote_commits_.find(id);
  if (rc == remote_commits_.end()) return std::nullopt;  // not fetched yet
  // A group without a commit there stands at its oldest retained event.
  return rc->second.MinOver(group, range);
}

bool Topic::TakeRemoteCommits(PartitionId id, RemoteCommits commits, uint64_t deletions) {
  // The map may have retired the partition meanwhile; its entry must not come back.
  ReaderLock lock(map_mu_);
  const PartitionInfo* known = map_.Find(id);
  if (!known) return false;
  if (known->range != commits.range) {
    // The owner's partition of that id is another than this map's (a map made by hand): its
    // commits say nothing of this lineage, and the successors stay gated.
    Logger("broker")->warn(
        "msg=\"a lineage partition's owner holds another range under its id; not gating by "
        "it\" partition={}",
        id.value());
    return false;
  }
  MutexLock r(remote_mu_);
  // A group deleted since the fetch began may be in it: fetch again next tick.
  if (group_deletions_ != deletions) return false;
  auto& held = remote_commits_[id];
  const bool changed = !(held == commits);
  held = std::move(commits);
  return changed;
}

void Topic::RefreshRemoteCommits() {
  if (!peers_) return;
  // Which remote partitions of local successors' lineages still hold back some known group?
  std::vector<std::pair<PeerAddress, PartitionId>> wanted;
  uint64_t deletions = 0;
  const auto known = registry_->All();
  std::set<std::string> groups;
  for (const auto& [g, info] : known) groups.insert(g);
  {
    ReaderLock lock(map_mu_);
    {
      MutexLock r(remote_mu_);
      deletions = group_deletions_;
    }
    std::set<PartitionId> seen;
    for (const auto& [id, p] : partitions_) {
      const PartitionInfo* info = map_.Find(PartitionId(id));
      if (!info || info->parents.empty() || gate_.AllReleased(info->id, groups)) continue;
      for (const PartitionInfo* pi : SuccessorGate::Lineage(map_, *info)) {
        if (pi->lost || partitions_.count(pi->id) || !seen.insert(pi->id).second) continue;
        if (const PeerAddress* addr = map_.Peer(pi->owner)) wanted.emplace_back(*addr, pi->id);
      }
    }
  }
  for (const auto& [addr, parent] : wanted) {
    auto commits = peers_->FetchCommits(addr, parent);
    if (!commits.ok()) continue;  // the owner may be restarting; try again next tick
    // New remote commits may release a successor: wake parked consumers.
    if (TakeRemoteCommits(parent, std::move(commits).value(), deletions) && on_data_) on_data_();
  }
}

Status Topic::CheckCopiesOfNewPartitions(const PartitionMap& next) {
  if (!peers_) return Status::Ok();
  for (const auto& p : next.partitions()) {
    if (p.owner != opts_.pod || p.lost || p.replicas.empty() || p.born != next.epoch() ||
        p.leader_epoch > p.born || next.epoch() != next.epoch()) {
      continue;
    }
    for (const auto& f : p.replicas) {
      const PeerAddress* addr = next.Peer(f);
      if (!addr) continue;
      // No copy there (404), or no answer: nothing is known against this pod.
      auto copy = peers_->FetchCopyCommits(*addr, p.id);
      if (!copy.ok() || copy->end_offset == 0) continue;
      return Status::DataLost(
          "the map of epoch " + std::to_string(next.epoch().value()) + " gives partition " +
          std::to_string(p.id.value()) + ", which it makes, to this pod, but its copy on " +
          f.value() + " holds " + std::to_string(copy->end_offset) +
          " events this pod appended before its volume was emptied: its data is gone; the "
          "coordinator must fail the partition over");
    }
  }
  return Status::Ok();
}

Result<InstallOutcome> Topic::InstallMap(const PartitionMap& next) {
  // A pod that holds no map (a first start, or a volume emptied) cannot tell a partition the
  // map makes from one it led before its volume was emptied, when the map is the one that made
  // it (CheckNothingLost passes those): leading it empty at the same leader epoch, it would
  // make its copies cut what they hold of it (invariant 11). Its copies tell: asked before the
  // install lock, as the retirement facts are.
  if (map().epoch().value() == 0 && next.topic() == opts_.topic && next.Validate().ok()) {
    SHOAL_RETURN_IF_ERROR(CheckCopiesOfNewPartitions(next));
  }
  // A map that retires partitions is checked against every peer's groups and the holders'
  // commits, asked before the install lock; their answers hold for the map held when they were
  // asked, so a map that changed meanwhile asks again.
  for (int attempt = 0;; ++attempt) {
    const PartitionMap before = map();
    RetirementFacts facts;
    bool retires = false;
    for (const auto& p : before.partitions()) retires |= next.Find(p.id) == nullptr;
    if (retires && next.epoch() > before.epoch() && next.topic() == opts_.topic &&
        next.Validate().ok()) {
      auto asked = AskBeforeRetiring(before, next);
      if (!asked.ok()) return asked.status();
      facts = std::move(asked).value();
    }
    MutexLock install(install_mu_);
    if (map().epoch() == before.epoch()) return InstallLocked(next, facts);
    if (attempt == 2) {
      return Status::Unavailable("the map held here changed three times while the peers were "
                                 "asked about the partitions epoch " +
                                 std::to_string(next.epoch().value()) + " retires; retry");
    }
  }
}

Result<InstallOutcome> Topic::InstallLocked(const PartitionMap& next,
                                            const RetirementFacts& facts) {
  const PartitionMap held = map();
  auto fenced = CheckInstall(held, next, facts);
  if (!fenced.ok()) return fenced.status();
  if (*fenced) return **fenced;
  const auto t0 = clock_.SteadyNow();
  auto ms_since = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(clock_.SteadyNow() - t).count();
  };
  auto opened = OpenOwned(next);
  if (!opened.ok()) return opened.status();
  const double opened_ms = ms_since(t0);
  SHOAL_RETURN_IF_ERROR(SeedOpened(next, *opened));
  const double seeded_ms = ms_since(t0);
  Status st = UnsealLostSeals(next, *opened);
  if (st.ok()) st = TakeSealsGivenBack(held, next);
  // The copies this map adds to partitions made before it are marked joining before the map is
  // durable, so that a restart in between still knows them (replication::JoiningCopies).
  // A copy open here already (its pod missed the maps that placed it off the partition and
  // added it again) joins from now on too. Copies are opened and closed under install_mu_ only.
  for (PartitionId id : replication::JoiningCopies(held, next, opts_.pod)) {
    if (!st.ok()) break;
    Partition* open = nullptr;
    {
      ReaderLock lock(map_mu_);
      if (auto f = followed_.find(id); f != followed_.end()) {
        open = f->second.get();
      } else if (auto l = partitions_.find(id); l != partitions_.end()) {
        open = l->second.get();
      }
    }
    st = open ? open->MarkJoining() : Partition::MarkJoining(fs_, PartitionDir(id));
  }
  // Persist, then take effect. A crash between the two re-opens the new map on restart.
  if (st.ok()) st = fs_.WriteFileAtomic(MapPath(), next.ToJson());
  if (!st.ok()) {
    ReturnCopies(*opened);
    return st;
  }
  const double persisted_ms = ms_since(t0);
  RetiredPartitions retired;
  const size_t held_count = TakeEffect(next, std::move(opened).value(), &retired);
  DropPreparedFor(next, &retired);
  const size_t retired_count = retired.size();
  RemoveRetired(next, std::move(retired));
  ReconcileReplicas();
  Logger("broker")->info(
      "msg=\"installed map\" epoch={} digest={} active_partitions={} held={} retired={} "
      "opened_ms={:.2f} seeded_ms={:.2f} persisted_ms={:.2f} total_ms={:.2f}",
      next.epoch().value(), next.Digest(), next.active_count(), held_count, retired_count,
      opened_ms, seeded_ms, persisted_ms, ms_since(t0));
  return InstallOutcome::kInstalled;
}

Result<std::optional<InstallOutcome>> Topic::CheckInstall(const PartitionMap& held,
                                                          const PartitionMap& next,
                                                          const RetirementFacts& facts) {
  SHOAL_RETURN_IF_ERROR(next.Validate());
  if (next.topic() != opts_.topic) {
    return Status::InvalidArgument("the map is for topic " + next.topic() + ", not " + opts_.topic);
  }
  // Fencing (invariant 5): one map per epoch in the whole system. A sidecar moves only to a
  // newer epoch; the map it holds again is "already held", and any other map of the held epoch
  // is a conflict (two coordinators minted one epoch), never "already done": the coordinator
  // that gets it stops and re-reads instead of counting the install as made.
  if (next.epoch() < held.epoch()) {
    return Status::StaleEpoch("stale epoch " + std::to_string(next.epoch().value()) +
                              ": this sidecar holds epoch " + std::to_string(held.epoch().value()));
  }
  if (next.epoch() == held.epoch()) {
    if (next == held) return std::optional<InstallOutcome>(InstallOutcome::kAlreadyHeld);
    return Status::Conflict("another map of epoch " + std::to_string(held.epoch().value()) +
                            " is held here (map " + held.Digest() + ", this one " +
                            next.Digest() + ")");
  }
  SHOAL_RETURN_IF_ERROR(CheckAgainstHeld(held, next, facts));
  return std::optional<InstallOutcome>();
}

Result<Topic::OwnedPartitions> Topic::OpenOwned(const PartitionMap& next) {
  // What this pod owns in the new map and does not hold yet, opened outside the map lock,
  // unless Prepare opened it already.
  OwnedPartitions opened;
  for (const auto& info : next.partitions()) {
    if (!HeldHere(info)) continue;
    {
      ReaderLock lock(map_mu_);
      if (partitions_.count(info.id)) continue;
    }
    if (auto prepared = TakePrepared(info)) {
      opened.emplace(info.id, std::move(prepared));
      continue;
    }
    {
      // A copy this pod followed and now leads: its log is the partition's (no copying).
      WriterLock lock(map_mu_);
      // It stays a follower (follower()) until the map takes effect: an install that fails
      // before gives it back (ReturnCopies).
      if (auto it = followed_.find(info.id); it != followed_.end()) {
        opened.emplace(info.id, std::move(it->second));
        followed_.erase(it);
        continue;
      }
    }
    auto p = Partition::Open(info.id, OptionsFor(info), clock_, probe_);
    if (!p.ok()) {
      ReturnCopies(opened);
      return p.status().Annotate("partition " + std::to_string(info.id.value()));
    }
    opened.emplace(info.id, std::move(p).value());
  }
  // A replicated partition records its leader epoch before it takes an append here (invariant
  // 11); a copy made the leader by a failover starts its new epoch at its end. Outside the map
  // lock: it is a durable file write.
  for (auto& [id, p] : opened) {
    const PartitionInfo* info = next.Find(id);
    // A copy made the leader of a sealed partition (its leader died or lost its volume after
    // the seal) takes the seal the map records. A quorum of the copies held the sealed end when
    // the seal was answered, and the failover chose the most complete of a quorum, so this copy
    // holds it; what it holds past it was never acknowledged (the seal took everything its
    // leader had) and is cut. So does a copy opened here only now, empty (the failover fenced
    // this pod before its map knew the partition, and it answered as empty): chosen as the most
    // complete of a quorum, it holds everything acknowledged, and the end is 0.
    if (info && !info->active() && !info->lost && !p->sealed_end() &&
        (p->follower() || info->leader_epoch.value() > 0)) {
      // (ReturnCopies moves the copies out of `opened`: nothing of `p` is read after it.)
      Status st = Status::Ok();
      if (p->end_offset() < info->end_offset) {
        st = Status::Unavailable("the copy of sealed partition " + std::to_string(id.value()) +
                                 " holds " + std::to_string(p->end_offset()) +
                                 " events, less than its sealed end " +
                                 std::to_string(info->end_offset) + ": it cannot lead it");
      } else if (auto sealed = p->SealAt(info->end_offset, /*cut_past=*/true); !sealed.ok()) {
        st = sealed.status();
      }
      if (!st.ok()) {
        ReturnCopies(opened);
        return st;
      }
    }
    // A copy made the leader gathers its groups' commits from the other copies first.
    if (info && p->follower() && !info->replicas.empty() && opts_.acks_quorum) {
      p->StartGathering(info->replicas);
    }
    if (info && (!info->replicas.empty() || info->leader_epoch.value() > 0)) {
      if (Status st = p->StartLeading(info->LeaderEpoch()); !st.ok()) {
        ReturnCopies(opened);
        return st;
      }
    }
  }
  return opened;
}

void Topic::ReturnCopies(OwnedPartitions& opened) {
  // The copies an install that failed took from followed_ go back, before anything else of it
  // is dropped: what a pod follows is what the map transition check counts as held here.
  WriterLock lock(map_mu_);
  for (auto it = opened.begin(); it != opened.end();) {
    if (!it->second->follower()) {
      ++it;
      continue;
    }
    followed_.emplace(it->first, std::move(it->second));
    it = opened.erase(it);
  }
}

Status Topic::SeedOpened(const PartitionMap& next, OwnedPartitions& opened) {
  // Each new successor inherits its parents' producer state (handoff of dedup state), once each
  // parent's owner confirmed the parent was sealed for this very change (invariant 2: a
  // successor takes writes only after its parents are sealed for the change that created it).
  // A parent is read here only if the new map leads it here: a copy this pod led before a
  // failover it has not heard of yet is not the parent (its leader sealed it, not this copy).
  auto held_partition = [&](PartitionId id) -> Partition* {
    if (auto it = opened.find(id); it != opened.end()) return it->second.get();
    const PartitionInfo* info = next.Find(id);
    if (!info || !HeldHere(*info)) return nullptr;
    ReaderLock lock(map_mu_);
    auto it = partitions_.find(id);
    return it == partitions_.end() ? nullptr : it->second.get();
  };
  Status seeded = SeedSuccessors(next, held_partition, /*defer=*/true);
  if (!seeded.ok()) {
    // Nothing took effect; copies followed here go back, and what was opened is kept for the
    // retry, as if prepared.
    ReturnCopies(opened);
    for (auto& [id, p] : opened) {
      if (const PartitionInfo* info = next.Find(id)) {
        prepared_.emplace(id, Prepared{*info, std::move(p)});
      }
    }
  }
  return seeded;
}

Status Topic::UnsealLostSeals(const PartitionMap& next, const OwnedPartitions& opened) {
  // Seals of changes that lost to this map (see CheckAgainstHeld) are undone before it takes
  // effect. Copies too: a copy is sealed for a change that carries a failover of a parent it
  // seals (Seal, the copy chosen as the parent's new leader), and that change may lose as any
  // other. A void seal left on a copy would outlive the change: a map that then makes the copy
  // the leader of the partition, active, would hold a leader that never takes an append again,
  // and a later change's seal of it would be refused as a conflict with the lost one.
  auto unseal_void = [&](PartitionId id, Partition& p) -> Status {
    const PartitionInfo* info = next.Find(id);
    if (info && p.SealVoidFor(*info, next.epoch())) return p.Unseal();
    return Status::Ok();
  };
  for (const auto& [id, p] : opened) {
    if (p->follower()) SHOAL_RETURN_IF_ERROR(unseal_void(id, *p));
  }
  ReaderLock lock(map_mu_);
  for (const auto& [id, p] : partitions_) {
    const PartitionInfo* info = next.Find(id);
    if (info && info->owner == opts_.pod) SHOAL_RETURN_IF_ERROR(unseal_void(id, *p));
  }
  for (const auto& [id, p] : followed_) SHOAL_RETURN_IF_ERROR(unseal_void(id, *p));
  return Status::Ok();
}

Status Topic::TakeSealsGivenBack(const PartitionMap& held, const PartitionMap& next) {
  ReaderLock lock(map_mu_);
  for (const auto& [id, p] : partitions_) {
    const PartitionInfo* info = next.Find(id);
    const PartitionInfo* was = held.Find(id);
    if (!info || p->sealed_end()) continue;
    const HeldPartitionState h{id,    p->range(),     {}, was ? was->LeaderEpoch() : Epoch(0),
                               false, p->end_offset()};
    if (!TakesSealGivenBack(opts_.pod, h, *info)) continue;
    // At that end or not at all: an append that came in since the check leaves it unsealed,
    // and the install is refused (the map is retried), unless the map knows the end as the one
    // a seal was answered with: then what is past it was never acknowledged, and is cut.
    auto sealed = p->SealAt(info->end_offset, /*cut_past=*/info->end_known);
    if (!sealed.ok()) return sealed.status();
    Logger("broker")->warn(
        "msg=\"took the seal of a partition a failover gave back after it was sealed "
        "elsewhere\" partition={} end={} leader_epoch={}",
        id.value(), *sealed, info->LeaderEpoch().value());
  }
  return Status::Ok();
}

size_t Topic::TakeEffect(const PartitionMap& next, OwnedPartitions opened,
                         RetiredPartitions* retired) {
  // What the new map no longer lists leaves partitions_ under the exclusive lock, together with
  // the map change: every reader (produce, consume, commit, the ticker, the admin views) holds
  // the shared lock while it uses a Partition*, so none is in use once the lock is ours, and none
  // can be found afterwards. They are destroyed and their directories removed after the lock is
  // released (RemoveRetired). A crash before the removal leaves directories that the next start
  // removes (the persisted map no longer lists them).
  WriterLock lock(map_mu_);
  map_ = next;
  for (auto& [id, p] : opened) {
    p->SetFollower(false);  // a copy followed here until now leads from this map on
    partitions_.emplace(id, std::move(p));
  }
  for (auto it = partitions_.begin(); it != partitions_.end();) {
    const PartitionInfo* info = next.Find(it->first);
    if (info && info->owner != opts_.pod) {
      // A failover gave the leadership to a follower: this copy follows it from now on, and its
      // tail past the new leader's is cut at its first fetch (invariant 11). Produces waiting
      // for a quorum here are refused, retryable. A copy the map placed off this pod since (a
      // pod that leaves) goes with the followed copies the map drops (ReconcileReplicas).
      it->second->quorum()->Abandon();
      it->second->commit_quorum()->Abandon();
      it->second->SetFollower(true);
      followed_.emplace(it->first, std::move(it->second));
      it = partitions_.erase(it);
      continue;
    }
    if (info) {
      // A partition this map gives followers that had none here (a copy made the leader, a
      // higher factor): its trackers know them before any append under this map is answered,
      // or an acknowledgement would wait for no copy until ReconcileReplicas. No produce or
      // commit waits on a tracker without followers, so none is answered under this lock.
      if (info->owner == opts_.pod && !info->replicas.empty() &&
          !it->second->quorum()->replicated()) {
        it->second->quorum()->SetFollowers(info->replicas, clock_.NowMs());
        it->second->commit_quorum()->SetFollowers(info->replicas, clock_.NowMs());
      }
      ++it;
      continue;
    }
    retired->emplace_back(it->first, std::move(it->second));
    it = partitions_.erase(it);
  }
  // Gating state of partitions gone from the map: groups released per successor (held here)
  // and commits fetched of remote parents.
  gate_.Retain(next);
  MutexLock r(remote_mu_);
  std::erase_if(remote_commits_, [&](const auto& e) { return !next.Find(e.first); });
  return partitions_.size();
}

void Topic::DropPreparedFor(const PartitionMap& next, RetiredPartitions* retired) {
  // Prepared for a map that this one retired or gave to another pod (an id it has); ids beyond
  // it belong to a coming map.
  for (auto it = prepared_.begin(); it != prepared_.end();) {
    const PartitionInfo* in = next.Find(it->first);
    if ((in && in->owner == opts_.pod) || it->first >= next.NextId()) {
      ++it;
      continue;
    }
    retired->emplace_back(it->first, std::move(it->second.partition));
    it = prepared_.erase(it);
  }
}

void Topic::RemoveRetired(const PartitionMap& next, RetiredPartitions retired) {
  for (auto& [id, p] : retired) {
    p.reset();  // closes its files; nothing of it is needed any more
    if (Status rm = fs_.RemoveAll(PartitionDir(id)); !rm.ok()) {
      Logger("broker")->warn(
          "msg=\"could not remove a retired partition's directory; the next start removes it\" "
          "partition={} reason=\"{}\"",
          id.value(), rm.message());
    } else {
      Logger("broker")->info("msg=\"retired partition\" partition={} epoch={}", id.value(),
                             next.epoch().value());
    }
  }
}

Result<Topic::RetirementFacts> Topic::AskBeforeRetiring(const PartitionMap& held,
                                                        const PartitionMap& next) {
  // Retirement waits for every group the topic knows (invariant 4): the groups of every peer's
  // registry too, including groups that never read here and so left no commit on the
  // partition. A peer that cannot be asked blocks the retirement for now.
  RetirementFacts facts;
  std::map<std::string, PeerAddress> peers = held.peers();
  for (const auto& [pod, addr] : next.peers()) peers.emplace(pod, addr);
  for (const auto& [pod, addr] : peers) {
    if (pod == opts_.pod.value()) continue;
    if (!peers_) {
      return Status::Unavailable("cannot ask " + pod + " for its consumer groups before retiring");
    }
    auto theirs = peers_->FetchGroups(addr);
    if (!theirs.ok()) {
      return theirs.status().Annotate("asking " + pod +
                                      " for its consumer groups before retiring partitions");
    }
    for (const auto& [g, info] : *theirs) facts.peer_groups.insert(g);
  }
  // Partitions of other pods that the map retires: this pod checks them too (with their
  // owner's commits), so that installing a retirement on other pods before its holder cannot
  // skip the holder's check.
  for (const auto& p : held.partitions()) {
    if (next.Find(p.id) || p.owner == opts_.pod || p.lost) continue;  // a lost one holds nothing
    const PeerAddress* addr = held.Peer(p.owner);
    if (!addr) addr = next.Peer(p.owner);
    if (!addr || !peers_) {
      return Status::Unavailable("cannot ask " + p.owner.value() + " whether partition " +
                                 std::to_string(p.id.value()) + " may retire");
    }
    auto theirs = peers_->FetchCommits(*addr, p.id);
    if (theirs.status().code() == Status::Code::kNotFound) continue;  // retired by its holder
    if (!theirs.ok()) return theirs.status().Annotate("before retiring");
    HeldPartition view{theirs->start_offset, theirs->end_offset, theirs->sealed, {}};
    for (const auto& [g, c] : theirs->commits) view.standings.emplace(g, c.value());
    facts.remote.emplace(p.id, std::move(view));
  }
  return facts;
}

Status Topic::CheckAgainstHeld(const PartitionMap& held, const PartitionMap& next,
                               const RetirementFacts& facts) {
  const std::string at = " (map " + next.Digest() + " of epoch " +
                         std::to_string(next.epoch().value()) + ")";
  // What this pod holds, against the next map (common/map_transition.h).
  std::vector<HeldPartitionState> here;
  {
    ReaderLock lock(map_mu_);
    for (const auto& [id, p] : partitions_) {
      const PartitionInfo* info = held.Find(id);
      here.push_back({id, p->range(), p->seal_record(), info ? info->LeaderEpoch() : Epoch(0),
                      false, p->end_offset()});
    }
    for (const auto& [id, p] : followed_) here.push_back({id, p->range(), {}, Epoch(0), true});
  }
  std::vector<std::pair<PartitionId, uint64_t>> dropped;  // held here, gone from next: end
  if (Status st = CheckMapTransition(opts_.pod, here, next, &dropped, FencedAbsent(next));
      !st.ok()) {
    return Status::FromCode(st.code(), st.message() + at);  // conflict, or data lost here
  }
  // Retirement's shape and its consumed rule are common/retirement_rule.h's, the planner's too.
  if (Status shape = CheckRetirementShape(held, next); !shape.ok()) {
    return Status::Conflict(shape.message() + at);
  }
  if (dropped.empty() && facts.remote.empty()) return Status::Ok();
  std::set<std::string> groups = facts.peer_groups;
  for (const auto& [g, info] : registry_->All()) groups.insert(g);
  auto consumed = [&](PartitionId id, const HeldPartition& p) {
    if (auto n = FirstNotConsumed(p, groups)) {
      return Status::Conflict(NotConsumedMessage(id, *n) + at);
    }
    return Status::Ok();
  };
  for (const auto& [id, view] : facts.remote) SHOAL_RETURN_IF_ERROR(consumed(id, view));
  ReaderLock lock(map_mu_);
  for (const auto& [id, end] : dropped) {
    auto it = partitions_.find(id);
    if (it == partitions_.end()) continue;
    HeldPartition view{it->second->start_offset(), end, true, {}};
    for (const auto& [g, c] : it->second->Commits()) view.standings.emplace(g, c.value());
    SHOAL_RETURN_IF_ERROR(consumed(id, view));
  }
  return Status::Ok();
}

namespace {
RemoteCommits CommitsOfPartition(const Partition& p) {
  RemoteCommits out;
  out.start_offset = p.start_offset();
  out.end_offset = p.end_offset();
  out.sealed = p.sealed_end().has_value();
  out.range = p.range();
  out.commits = p.Commits();
  for (const auto& [g, st] : p.Standings()) {
    if (!st.raised().empty()) out.ranges.emplace(g, st.Pieces());
  }
  return out;
}
}  // namespace

const Partition* Topic::CommitsHolder(PartitionId id, bool copy) const {
  if (auto f = followed_.find(id); copy && f != followed_.end()) return f->second.get();
  auto it = partitions_.find(id);
  return it != partitions_.end() ? it->second.get() : nullptr;
}

Status Topic::CheckAskingLeaderLocked(PartitionId id, const Partition& p,
                                      Epoch leader_epoch) const {
  if (leader_epoch.value() == 0) return Status::Ok();
  const PartitionInfo* info = map_.Find(id);
  const uint64_t newer = std::max<uint64_t>(p.fenced(), info ? info->LeaderEpoch().value() : 0);
  if (newer <= leader_epoch.value()) return Status::Ok();
  return Status::FailedPrecondition(
      "partition " + std::to_string(id.value()) + " has a leader of leader epoch " +
      std::to_string(newer) + " here, newer than the asker's " +
      std::to_string(leader_epoch.value()) + ": a failover replaced it");
}

Result<RemoteCommits> Topic::CommitsOf(PartitionId id, bool copy, Epoch leader_epoch) {
  ReaderLock lock(map_mu_);
  const Partition* p = CommitsHolder(id, copy);
  if (!p) {
    return Status::NotFound("partition " + std::to_string(id.value()) + " is not on this sidecar");
  }
  if (copy) SHOAL_RETURN_IF_ERROR(CheckAskingLeaderLocked(id, *p, leader_epoch));
  RemoteCommits out = CommitsOfPartition(*p);
  if (copy) {
    out.mirror = p->MirrorsALeader();
    out.leases = p->Leases();
  }
  return out;
}

void Topic::GatherCommits() {
  std::vector<std::tuple<PartitionId, PodName, PeerAddress, Epoch>> asks;
  {
    ReaderLock lock(map_mu_);
    for (const auto& [id, p] : partitions_) {
      if (!p->gathering()) continue;
      const PartitionInfo* info = map_.Find(PartitionId(id));
      const Epoch leader_epoch = info ? info->LeaderEpoch() : Epoch(0);
      for (const auto& pod : p->StillToGather()) {
        if (const PeerAddress* addr = map_.Peer(pod)) {
          asks.emplace_back(PartitionId(id), pod, *addr, leader_epoch);
        }
      }
    }
  }
  if (asks.empty() || !peers_) return;
  bool done = false;
  std::set<std::string> unanswered;  // this round: not asked again (each ask would wait)
  for (const auto& [id, pod, addr, leader_epoch] : asks) {
    // Asked without the map lock; one that does not answer (down, restarting, hung) is asked
    // again on the next tick. A copy that knows a newer leader refuses (a failover replaced
    // this one, restarted on its old map): it stays gathering and hands out nothing until the
    // newer map makes it a follower (invariant 10).
    if (unanswered.count(pod.value())) continue;
    auto theirs = peers_->FetchCopyCommits(addr, id, leader_epoch);
    if (!theirs.ok() && theirs.status().code() == Status::Code::kUnavailable) {
      unanswered.insert(pod.value());
    }
    if (!theirs.ok() && theirs.status().code() == Status::Code::kNotFound) {
      // It holds no copy of the partition (its volume was emptied, or its map no longer gives
      // it one): it has nothing to add, and waiting for it would wait for ever.
      theirs = RemoteCommits{};  // mirrors nothing
    }
    if (!theirs.ok()) continue;
    std::map<std::string, std::vector<RangeOffset>> pieces;
    for (const auto& [g, offset] : theirs->commits) {
      const HashRange& whole = theirs->range;
      auto r = theirs->ranges.find(g);
      pieces[g] = r != theirs->ranges.end()
                      ? r->second
                      : std::vector<RangeOffset>{{whole.lo, whole.hi, offset.value()}};
    }
    ReaderLock lock(map_mu_);
    auto it = partitions_.find(id);
    if (it == partitions_.end()) continue;
    auto over = it->second->MergeCommitsOf(pod, pieces, theirs->leases, theirs->mirror);
    if (!over.ok()) {
      Logger("broker")->error(
          "msg=\"cannot merge a copy's commits\" partition={} copy={} reason=\"{}\"", id.value(),
          pod.value(), over.status().message());
      continue;
    }
    if (*over) {
      Logger("broker")->info(
          "msg=\"gathered the groups' commits from the copies; handing out events\" partition={}",
          id.value());
      done = true;
    }
  }
  if (done) {
    if (on_append_) on_append_();  // parked fetches carry the merged commits on
    if (on_data_) on_data_();      // parked consumers read
  }
}

Result<RemoteBatch> Topic::ReadFor(PartitionId id, const std::string& group, const PodName& reader,
                                   const std::vector<HashRange>& ranges, size_t max,
                                   size_t max_bytes, std::optional<QuorumWait>* quorum) {
  SHOAL_RETURN_IF_ERROR(wire::ValidateGroup(group));
  RemoteBatch out;
  std::optional<QuorumWait> wait;
  {
    ReaderLock lock(map_mu_);
    auto it = partitions_.find(id);
    if (it == partitions_.end()) {
      return Status::NotFound("partition " + std::to_string(id.value()) +
                              " is not on this sidecar");
    }
    auto b =
        it->second->ReadRanges(group, reader.value(), ranges, max, max_bytes, false, &out.events);
    if (!b.ok()) return b.status();
    out.batch = std::move(b).value();
    if (out.batch.count > 0) wait = CommitWait(*it->second);
  }
  if (wait) {
    if (on_append_) on_append_();  // parked fetches carry the lease on
    if (quorum) *quorum = std::move(wait);
  }
  return out;
}

Result<RemoteCommits> Topic::CommitFor(PartitionId id, const std::string& group,
                                       const PodName& reader, Offset offset,
                                       std::optional<QuorumWait>* quorum) {
  SHOAL_RETURN_IF_ERROR(wire::ValidateGroup(group));
  Status st;
  RemoteCommits out;
  std::optional<QuorumWait> wait;
  {
    ReaderLock lock(map_mu_);
    auto it = partitions_.find(id);
    if (it == partitions_.end()) {
      if (map_.epoch().value() == 0 || followed_.count(id)) {
        // This pod came back with an empty volume, or a failover gave the partition to one of
        // its copies: the reader's pod learns the leader from a newer map and commits there
        // (the new leader holds the batch's lease, Partition::MergeCommitsOf).
        return Status::Unavailable("partition " + std::to_string(id.value()) +
                                   " is not led by this sidecar (" +
                                   (map_.epoch().value() == 0 ? "it holds no partition map yet"
                                                              : "a copy of it follows here") +
                                   "); retry at its leader");
      }
      return Status::NotFound("partition " + std::to_string(id.value()) +
                              " is not on this sidecar");
    }
    st = it->second->CommitBy(group, reader.value(), offset, /*require_lease=*/true);
    if (st.code() == Status::Code::kNotFound && it->second->gathering()) {
      // A copy made the leader that has not gathered its copies' leases yet: the batch's lease
      // may be among them.
      st = Status::Unavailable("partition " + std::to_string(id.value()) +
                               " is gathering its groups' commits from its copies; retry");
    }
    if (st.ok()) out = CommitsOfPartition(*it->second);
    wait = CommitWait(*it->second);
  }
  if (!st.ok()) return st;
  if (wait) {
    if (on_append_) on_append_();  // parked fetches carry the commit on
    if (quorum) {
      *quorum = std::move(wait);
    } else {
      SHOAL_RETURN_IF_ERROR(wait->tracker->Await(wait->end, std::chrono::milliseconds(0)));
    }
  }
  // A range consumed to its end may release a successor held here: wake parked consumers.
  if (on_data_) on_data_();
  return out;
}

std::vector<std::pair<PartitionId, HashRange>> Topic::AcceptingPartitions() const {
  ReaderLock lock(map_mu_);
  std::vector<std::pair<PartitionId, HashRange>> out;
  for (const auto& [id, p] : partitions_) {
    const PartitionInfo* info = map_.Find(PartitionId(id));
    if (info && Accepting(*info, *p)) out.emplace_back(info->id, info->range);
  }
  return out;
}

Status Topic::HandOverOrAwait(std::vector<QuorumWait> awaited,
                              std::vector<QuorumWait>* quorum) const {
  if (quorum) {
    for (auto& w : awaited) quorum->push_back(std::move(w));
    return Status::Ok();
  }
  for (const auto& w : awaited) {
    SHOAL_RETURN_IF_ERROR(
        w.tracker->Await(w.end, std::chrono::milliseconds(opts_.replication_timeout_ms)));
  }
  return Status::Ok();
}

std::optional<QuorumWait> Topic::CommitWait(const Partition& p) const {
  if (!opts_.acks_quorum || !p.commit_quorum()->replicated()) return std::nullopt;
  return QuorumWait{p.commit_quorum(), p.commits_version()};
}

Status Topic::Commit(const wire::CommitRequest& request, std::vector<QuorumWait>* quorum,
                     bool forwarded) {
  SHOAL_RETURN_IF_ERROR(registry_->Touch(request.group, clock_.NowMs()));
  std::vector<QuorumWait> awaited;  // of replicated partitions under acks quorum
  // Commits of ancestors held by peers, which this pod's consumers read through ranges: sent to
  // their owners after the local ones, without the map lock.
  std::vector<std::pair<PeerAddress, wire::CommitOffset>> remote;
  // Commits of active partitions another pod leads now, by their leader's data address.
  std::map<std::string, std::pair<PeerAddress, wire::CommitRequest>> to_leaders;
  // Whether this pod's consumers of the group read `id` through ranges at its owner now: a
  // commit of it is a range commit, never a whole-partition one. (map_mu_, then remote_mu_.)
  auto reads_through = [&](PartitionId id) {
    MutexLock r(remote_mu_);
    auto it = remote_reads_.find({request.group, id});
    return it != remote_reads_.end() && it->second.out;
  };
  {
    ReaderLock lock(map_mu_);
    // Check every entry before applying any: a refused request changes nothing. An end offset
    // only grows, so an entry valid here is still valid when it is applied below.
    for (const auto& c : request.offsets) {
      auto it = partitions_.find(c.partition);
      if (it == partitions_.end()) {
        // A retired partition was consumed to its end by every group before it was retired: a
        // late commit of it has nothing left to record, so it is skipped, not refused.
        if (RetiredInMap(c.partition)) continue;
        const PartitionInfo* info = map_.Find(c.partition);
        const PeerAddress* addr = info ? map_.Peer(info->owner) : nullptr;
        // Led here when this pod's consumers took a batch of it, and failed over since (sealed
        // since, perhaps): its new leader takes the commit as a whole-partition one.
        auto copy = followed_.find(c.partition);
        const bool led_here = copy != followed_.end() && !reads_through(c.partition) &&
                              copy->second->HandedWholeBatch(request.group, c.offset);
        if (opts_.range_reads && info && !info->active() && !led_here && !forwarded && addr &&
            peers_) {
          remote.emplace_back(*addr, c);
          continue;
        }
        if (!forwarded && info && (info->active() || led_here) && info->owner != opts_.pod &&
            addr && peers_) {
          auto& [leader, sent] = to_leaders[addr->data];
          leader = *addr;
          sent.group = request.group;
          sent.offsets.push_back(c);
          continue;
        }
        if (map_.epoch().value() == 0) {
          // No map yet (a pod back with an empty volume): once the coordinator installs one,
          // the commit goes to the partition's leader; the consumer's batch stays committable.
          return Status::Unavailable("partition " + std::to_string(c.partition.value()) +
                                     " is not on this sidecar, which holds no partition map "
                                     "yet; retry once it does");
        }
        return Status::NotFound("partition " + std::to_string(c.partition.value()) +
                                " is not on this sidecar");
      }
      if (c.offset.value() > it->second->end_offset()) {
        return Status::InvalidArgument("offset " + std::to_string(c.offset.value()) +
                                       " is past the end " +
                                       std::to_string(it->second->end_offset()) +
                                       " of partition " + std::to_string(c.partition.value()));
      }
    }
    for (const auto& c : request.offsets) {
      auto it = partitions_.find(c.partition);
      if (it == partitions_.end()) continue;  // retired or remote, see above
      // A commit passed on by the pod that led the partition before a failover is of a
      // whole-partition batch its consumers took there, whatever this pod's consumers read.
      SHOAL_RETURN_IF_ERROR(forwarded
                                ? it->second->Commit(request.group, c.offset)
                                : it->second->CommitBy(request.group, opts_.pod.value(), c.offset));
      if (auto w = CommitWait(*it->second)) awaited.push_back(std::move(*w));
    }
  }
  if (!awaited.empty() && on_append_) on_append_();  // parked fetches carry the commit on
  uint64_t deletions = 0;
  {
    MutexLock r(remote_mu_);
    deletions = group_deletions_;
  }
  for (const auto& [addr, c] : remote) {
    auto commits = peers_->CommitFor(addr, c.partition, request.group, opts_.pod, c.offset);
    if (!commits.ok()) {
      // Retryable whatever the owner said but NotFound: commits only raise.
      if (commits.status().code() == Status::Code::kNotFound) return commits.status();
      return Status::Unavailable("committing partition " + std::to_string(c.partition.value()) +
                                 " at its owner " + addr.admin + ": " +
                                 commits.status().message());
    }
    {
      MutexLock r(remote_mu_);
      auto it = remote_reads_.find({request.group, c.partition});
      if (it != remote_reads_.end() && c.offset.value() >= it->second.last) it->second.out = false;
    }
    TakeRemoteCommits(c.partition, std::move(commits).value(), deletions);
  }
  for (const auto& [data, to] : to_leaders) {
    Status st = peers_->ForwardCommit(to.first, opts_.topic, to.second);
    if (!st.ok()) {
      // Retryable whatever the leader said but a refused offset: commits only raise. A leader
      // that does not hold the partition has not taken the map that makes it the leader yet.
      if (st.code() == Status::Code::kInvalidArgument) return st;
      return Status::Unavailable("committing at the leader " + data + ": " + st.message());
    }
  }
  // A commit to a parent's end may release a successor to this group: wake parked consumers.
  if (on_data_) on_data_();
  return HandOverOrAwait(std::move(awaited), quorum);
}

Result<std::vector<PartitionId>> Topic::DeleteGroup(const std::string& group, bool force) {
  SHOAL_RETURN_IF_ERROR(wire::ValidateGroup(group));
  // Exclusive: no consume or commit runs between the checks, the deletions and the release
  // reset, so a returning group is never handed a successor on a release made before.
  WriterLock lock(map_mu_);
  if (!force) {
    for (auto& [id, p] : partitions_) SHOAL_RETURN_IF_ERROR(p->CheckGroupIdle(group));
  }
  gate_.Forget(group);
  {
    MutexLock r(remote_mu_);
    for (auto& [id, commits] : remote_commits_) {
      commits.commits.erase(group);
      commits.ranges.erase(group);
    }
    std::erase_if(remote_reads_, [&](const auto& e) { return e.first.first == group; });
    ++group_deletions_;
  }
  std::vector<PartitionId> had;
  for (auto& [id, p] : partitions_) {
    auto deleted = p->DeleteGroup(group);
    if (!deleted.ok()) return deleted.status();
    if (*deleted) had.push_back(id);
  }
  auto removed = registry_->Remove(group);
  if (!removed.ok()) return removed.status();
  return had;
}

PartitionMap Topic::map() const {
  ReaderLock lock(map_mu_);
  return map_;
}

void Topic::Start() {
  ticker_ = std::thread([this] { TickLoop(); });
  peer_ticker_ = std::thread([this] { PeerTickLoop(); });
  started_.store(true);
  MutexLock install(install_mu_);
  ReconcileReplicas();
}

// Work that talks to other sidecars runs on its own thread: a slow or hung peer must not delay
// the interval fsync, retention or redelivery of the partitions held here.
void Topic::PeerTickLoop() {
  MutexLock lock(tick_mu_);
  while (!stopping_) {
    // A spurious wakeup only runs a round early; stop is checked under the lock.
    tick_cv_.wait_for(lock, std::chrono::milliseconds(opts_.tick_ms));
    if (stopping_) break;
    lock.unlock();
    PeerTickOnce();
    lock.lock();
  }
}

void Topic::PeerTickOnce() {
  GatherCommits();
  RefreshRemoteCommits();
  SeedPending();
  ExpireGroups();
  // Remote reads held back a moment (an empty answer, a batch past redelivery) are due again:
  // parked consumers look once more.
  if (reads_remote_.exchange(false) && on_data_) on_data_();
}

void Topic::ExpireGroups() {
  constexpr int64_t kEveryMs = 5000;
  const int64_t now = clock_.NowMs();
  if (opts_.group_expiry_ms <= 0 || now - last_expiry_ms_ < kEveryMs) return;
  last_expiry_ms_ = now;
  std::vector<std::string> idle;
  for (const auto& [g, info] : registry_->All()) {
    if (now - info.last_active_ms > opts_.group_expiry_ms) idle.push_back(g);
  }
  if (idle.empty()) return;
  // Idle here is not idle topic-wide: a group reading other sidecars is alive. Every peer of the
  // map must say so too, or nothing expires this round.
  const PartitionMap m = map();
  for (const auto& [pod, addr] : m.peers()) {
    if (pod == opts_.pod.value()) continue;
    if (!peers_) return;
    auto theirs = peers_->FetchGroups(addr);
    if (!theirs.ok()) return;
    std::erase_if(idle, [&](const std::string& g) {
      auto it = theirs->find(g);
      return it != theirs->end() && now - it->second.last_active_ms <= opts_.group_expiry_ms;
    });
  }
  for (const auto& g : idle) {
    auto had = DeleteGroup(g, /*force=*/true);
    Logger("broker")->info(
        "msg=\"consumer group expired: idle on every sidecar for longer than the expiry\" "
        "group={} expiry_ms={} ok={}",
        g, opts_.group_expiry_ms, had.ok());
  }
}

void Topic::TickLoop() {
  auto last_sync = clock_.SteadyNow();
  MutexLock lock(tick_mu_);
  while (!stopping_) {
    // A spurious wakeup only runs a round early; stop is checked under the lock.
    tick_cv_.wait_for(lock, std::chrono::milliseconds(opts_.tick_ms));
    if (stopping_) break;
    lock.unlock();
    const auto now = clock_.SteadyNow();
    const bool sync_due = now - last_sync >= std::chrono::milliseconds(opts_.fsync_interval_ms);
    if (sync_due) last_sync = now;
    TickOnce(sync_due);
    lock.lock();
  }
}

void Topic::TickOnce(bool sync_due) {
  bool moved = false;
  {
    ReaderLock map_lock(map_mu_);
    const auto steady = clock_.SteadyNow();
    for (auto& [id, p] : partitions_) {
      moved |= p->Tick(sync_due);
      p->quorum()->Expire(steady);
      p->commit_quorum()->Expire(steady);
    }
    for (auto& [id, p] : followed_) (void)p->Tick(sync_due);
  }
  if (opts_.disk_reserve) opts_.disk_reserve->Tick();
  const int64_t now = clock_.NowMs();
  if (now - last_registry_flush_ms_ >= 10000) {
    last_registry_flush_ms_ = now;
    if (auto st = registry_->Flush(); !st.ok()) {
      Logger("broker")->warn("msg=\"writing group activity failed\" reason=\"{}\"", st.message());
    }
  }
  if (moved && on_data_) on_data_();
}

Status Topic::Close() {
  {
    MutexLock lock(tick_mu_);
    stopping_ = true;
  }
  tick_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  if (peer_ticker_.joinable()) peer_ticker_.join();
  {
    MutexLock lock(fetch_mu_);
    for (auto& [leader, f] : fetchers_) f.thread.join();
    fetchers_.clear();
  }
  WriterLock lock(map_mu_);
  Status first = registry_->Flush();
  for (auto& [id, p] : partitions_) {
    Status st = p->Close();
    if (!st.ok() && first.ok()) first = st;
  }
  for (auto& [id, p] : followed_) {
    Status st = p->Close();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

}  // namespace shoal::broker
