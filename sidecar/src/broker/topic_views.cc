// Topic, its views: the JSON of the topic view, the admin plane's partitions, groups and
// commits, and the state metrics collectable. The rest of Topic is in topic.cc.
#include <algorithm>

#include "broker/process_limits.h"
#include "broker/topic.h"
#include "shoal/common/json.h"
#include "shoal/common/metrics.h"

namespace shoal::broker {

namespace {
// [[lo,hi,offset],...]: a group's standing per hash point, as pieces covering the range.
void AppendPieces(std::string& out, const RangeStanding& st) {
  out += '[';
  bool first = true;
  for (const auto& piece : st.Pieces()) {
    if (!first) out += ',';
    first = false;
    out += '[';
    json::AppendUint(out, piece.lo);
    out += ',';
    json::AppendUint(out, piece.hi);
    out += ',';
    json::AppendUint(out, piece.offset);
    out += ']';
  }
  out += ']';
}

// ,"ranges":{group:[[lo,hi,offset],...]} for the groups that consumed some part of the range
// further than the rest (read through ranges); the others stand at their commit everywhere.
void AppendRanges(std::string& out, const Partition& p) {
  out += ",\"ranges\":{";
  bool first = true;
  for (const auto& [g, st] : p.Standings()) {
    if (st.raised().empty()) continue;
    if (!first) out += ',';
    first = false;
    json::AppendString(out, g);
    out += ':';
    AppendPieces(out, st);
  }
  out += '}';
}
}  // namespace

namespace {
// ,"leases":{G:{reader:{"ranges":[[lo,hi],...],"last":N,"scanned_to":N}}}: the read leases of
// batches still out (not complete), which a copy made the leader gathers.
void AppendLeases(std::string& out, const LeasesByGroup& leases) {
  out += ",\"leases\":{";
  bool first_group = true;
  for (const auto& [group, by_reader] : leases) {
    bool first_reader = true;
    for (const auto& [reader, lease] : by_reader) {
      if (lease.complete) continue;
      if (first_reader) {
        if (!first_group) out += ',';
        first_group = false;
        json::AppendString(out, group);
        out += ":{";
      } else {
        out += ',';
      }
      first_reader = false;
      json::AppendString(out, reader);
      out += ":{\"ranges\":[";
      for (size_t i = 0; i < lease.ranges.size(); ++i) {
        if (i) out += ',';
        out += '[';
        json::AppendUint(out, lease.ranges[i].lo);
        out += ',';
        json::AppendUint(out, lease.ranges[i].hi);
        out += ']';
      }
      out += "],\"last\":";
      json::AppendUint(out, lease.last);
      out += ",\"scanned_to\":";
      json::AppendUint(out, lease.scanned_to);
      out += '}';
    }
    if (!first_reader) out += '}';
  }
  out += '}';
}
}  // namespace

Result<std::string> Topic::BrowseJson(PartitionId id, uint64_t from, size_t max,
                                      const std::optional<std::string>& key) const {
  ReaderLock lock(map_mu_);
  const Partition* p = CommitsHolder(id, false);
  if (!p) {
    return Status::NotFound("partition " + std::to_string(id.value()) + " is not on this sidecar");
  }
  std::string events;
  auto b = p->Browse(from, max, key, &events);
  if (!b.ok()) return b.status();
  std::string out = "{\"partition\":";
  json::AppendUint(out, id.value());
  out += ",\"start_offset\":";
  json::AppendUint(out, p->start_offset());
  out += ",\"end_offset\":";
  json::AppendUint(out, p->visible_end());
  out += ",\"from\":";
  json::AppendUint(out, b->from);
  out += ",\"next\":";
  json::AppendUint(out, b->next);
  out += ",\"events\":[";
  out += events;
  out += "]}";
  return out;
}

Result<std::string> Topic::CommitsJson(PartitionId id, bool copy, Epoch leader_epoch) {
  ReaderLock lock(map_mu_);
  const Partition* held = CommitsHolder(id, copy);
  if (!held) {
    return Status::NotFound("partition " + std::to_string(id.value()) + " is not on this sidecar");
  }
  if (copy) SHOAL_RETURN_IF_ERROR(CheckAskingLeaderLocked(id, *held, leader_epoch));
  const Partition& p = *held;
  std::string out = "{\"commits\":{";
  bool first = true;
  for (const auto& [g, commit] : p.Commits()) {
    const uint64_t o = commit.value();
    if (!first) out += ',';
    first = false;
    json::AppendString(out, g);
    out += ':';
    json::AppendUint(out, o);
  }
  out += '}';
  AppendRanges(out, p);
  out += ",\"sealed\":";
  out += p.sealed_end() ? "true" : "false";
  out += ",\"start_offset\":";
  json::AppendUint(out, p.start_offset());
  out += ",\"end_offset\":";
  json::AppendUint(out, p.end_offset());
  out += ",\"lo\":";
  json::AppendUint(out, p.range().lo);
  out += ",\"hi\":";
  json::AppendUint(out, p.range().hi);
  if (copy) {
    out += ",\"mirror\":";
    out += p.MirrorsALeader() ? "true" : "false";
    AppendLeases(out, p.Leases());
  }
  out += '}';
  return out;
}

std::string Topic::GroupsJson() const { return registry_->ToJson(); }

std::string Topic::ViewJson() const {
  ReaderLock lock(map_mu_);
  std::string out = "{\"topic\":";
  json::AppendString(out, opts_.topic);
  out += ",\"epoch\":";
  json::AppendUint(out, map_.epoch().value());
  out += ",\"pod\":";
  json::AppendString(out, opts_.pod.value());
  out += ",\"partitions\":[";
  bool first = true;
  for (const auto& info : map_.partitions()) {
    if (!first) out += ',';
    first = false;
    out += '{';
    AppendPartitionFields(out, info);
    auto it = partitions_.find(info.id);
    if (it != partitions_.end()) {
      const Partition& p = *it->second;
      out += ",\"start_offset\":";
      json::AppendUint(out, p.start_offset());
      out += ",\"end_offset\":";
      json::AppendUint(out, p.end_offset());
      out += ",\"visible_end_offset\":";
      json::AppendUint(out, p.visible_end());
      out += ",\"size_bytes\":";
      json::AppendUint(out, p.size_bytes());
      out += ",\"accepting\":";
      out += Accepting(info, p) ? "true" : "false";
      out += ",\"sealed_here\":";
      out += p.sealed_end() ? "true" : "false";
      out += ",\"segments\":";
      json::AppendUint(out, p.segment_count());
      out += ",\"groups\":{";
      bool g_first = true;
      for (const auto& [g, st] : p.Standings()) {
        if (!g_first) out += ',';
        g_first = false;
        json::AppendString(out, g);
        out += ":{\"committed\":";
        json::AppendUint(out, st.Low());
        out += ",\"lag\":";
        json::AppendUint(out, p.LagOf(g));
        if (!st.raised().empty()) {
          out += ",\"ranges\":";
          AppendPieces(out, st);
        }
        out += '}';
      }
      out += '}';
    }
    out += '}';
  }
  out += "],\"peers\":{";
  // Each pod's data address, for a client outside the pods that sends events to their owners.
  bool p_first = true;
  for (const auto& [pod, address] : map_.peers()) {
    if (!p_first) out += ',';
    p_first = false;
    json::AppendString(out, pod);
    out += ":{\"data\":";
    json::AppendString(out, address.data);
    out += '}';
  }
  out += "}}";
  return out;
}

std::string Topic::PartitionsJson() const {
  ReaderLock lock(map_mu_);
  std::string out = "{\"topic\":";
  json::AppendString(out, opts_.topic);
  out += ",\"pod\":";
  json::AppendString(out, opts_.pod.value());
  out += ",\"epoch\":";
  json::AppendUint(out, map_.epoch().value());
  out += ",\"digest\":";
  json::AppendString(out, map_.Digest());
  // The groups this sidecar knows, read or not here: the coordinator's retirement rule waits
  // for the union of every sidecar's (invariant 4).
  out += ",\"groups\":[";
  bool first_group = true;
  for (const auto& [g, info] : registry_->All()) {
    if (!first_group) out += ',';
    first_group = false;
    json::AppendString(out, g);
  }
  // What this process may hold: the coordinator places no more partitions here than it can open.
  const ProcessLimits limits = ReadProcessLimits();
  out += "],\"limits\":{\"open_files_limit\":";
  json::AppendUint(out, limits.open_files_limit);
  out += ",\"open_files\":";
  json::AppendUint(out, limits.open_files);
  out += ",\"files_per_partition\":";
  json::AppendUint(out, kFilesPerPartition);
  if (limits.memory_limit_bytes) {
    out += ",\"memory_limit_bytes\":";
    json::AppendUint(out, *limits.memory_limit_bytes);
  }
  out += ",\"memory_bytes\":";
  json::AppendUint(out, limits.memory_bytes);
  out += "},\"partitions\":[";
  bool first = true;
  for (const auto& [id, p] : partitions_) {
    const PartitionInfo* info = map_.Find(PartitionId(id));
    if (!info) continue;  // every held partition is in the map; retired ones are gone
    if (!first) out += ',';
    first = false;
    // Sealed as soon as it is sealed here, also ahead of the map that records the seal.
    const bool sealed = !info->active() || p->sealed_end().has_value();
    out += "{\"id\":";
    json::AppendUint(out, id.value());
    out += ",\"state\":\"";
    out += ToString(sealed ? PartitionState::kSealed : PartitionState::kActive);
    out += "\",\"lo\":";
    json::AppendUint(out, info->range.lo);
    out += ",\"hi\":";
    json::AppendUint(out, info->range.hi);
    out += ",\"start_offset\":";
    json::AppendUint(out, p->start_offset());
    out += ",\"end_offset\":";
    json::AppendUint(out, p->end_offset());
    // A partition without parents inherited nothing; a successor's inherited state is durable
    // once a producer snapshot taken after its seeding is on disk (Partition::MarkSeeded), here
    // and on every follower the map names (Partition::InheritFromLeader): any of them may lead
    // it after a failover, when the parents may be gone.
    out += ",\"producers_durable\":";
    out += info->parents.empty() ||
                   (p->producers_durable() && p->FollowersSeeded(info->replicas))
               ? "true"
               : "false";
    out += ",\"appended\":";
    json::AppendUint(out, p->appended());
    const LoadSketch load = p->Load();
    out += ",\"load_buckets\":[";
    for (size_t b = 0; b < load.buckets.size(); ++b) {
      if (b) out += ',';
      json::AppendUint(out, load.buckets[b]);
    }
    out += "],\"top_hashes\":[";
    for (size_t k = 0; k < load.top.size(); ++k) {
      if (k) out += ',';
      out += "{\"hash\":";
      json::AppendUint(out, load.top[k].hash);
      out += ",\"count\":";
      json::AppendUint(out, load.top[k].count);
      out += '}';
    }
    out += "],\"commits\":{";
    bool g_first = true;
    for (const auto& [g, commit] : p->Commits()) {
      const uint64_t o = commit.value();
      if (!g_first) out += ',';
      g_first = false;
      json::AppendString(out, g);
      out += ':';
      json::AppendUint(out, o);
    }
    out += "}}";
  }
  out += "]}";
  return out;
}

std::shared_ptr<prometheus::Collectable> Topic::StateCollectable() {
  return std::make_shared<metrics::CallbackCollectable>([this] {
    auto size = metrics::GaugeFamily("shoal_partition_log_size_bytes",
                                     "Bytes on disk of a partition's log segments");
    auto end = metrics::GaugeFamily("shoal_partition_end_offset",
                                    "Offset the next event of a partition will get");
    auto start = metrics::GaugeFamily("shoal_partition_start_offset",
                                      "Oldest offset still retained in a partition");
    auto segments =
        metrics::GaugeFamily("shoal_partition_segments", "Segment files of a partition's log");
    auto lag = metrics::GaugeFamily("shoal_consumer_lag_events",
                                    "Events of a partition not yet committed by a group");
    auto committed = metrics::GaugeFamily("shoal_consumer_committed_offset",
                                          "A group's committed offset in a partition");
    auto epoch =
        metrics::GaugeFamily("shoal_epoch", "Epoch of the partition map this sidecar holds");
    auto parts = metrics::GaugeFamily("shoal_partitions", "Partitions of this sidecar by state");
    auto hw = metrics::GaugeFamily(
        "shoal_partition_high_watermark",
        "Offset below which a quorum of a replicated partition's copies holds every event (what "
        "consumers may read), on its leader");
    auto lag_events = metrics::GaugeFamily(
        "shoal_replica_lag_events", "Events a follower's copy of a partition lacks, on its leader");
    auto lag_seconds = metrics::GaugeFamily(
        "shoal_replica_lag_seconds",
        "Seconds since a follower's copy of a partition last held everything its leader did");
    auto under = metrics::GaugeFamily(
        "shoal_partition_under_replicated",
        "1 when some copy of a partition led here has not caught up with it for over 10 s");
    auto followed = metrics::GaugeFamily(
        "shoal_followed_partition_end_offset",
        "The end of this sidecar's copy of a partition another pod leads");
    std::vector<std::string> known;
    for (const auto& [g, info] : registry_->All()) known.push_back(g);
    ReaderLock lock(map_mu_);
    metrics::AddGauge(epoch, {{"topic", opts_.topic}}, static_cast<double>(map_.epoch().value()));
    double active = 0, sealed = 0;
    for (const auto& info : map_.partitions()) {
      auto it = partitions_.find(info.id);
      if (it == partitions_.end()) continue;
      (info.active() ? active : sealed) += 1;
      const Partition& p = *it->second;
      const std::string pid = std::to_string(info.id.value());
      const std::map<std::string, std::string> labels = {{"topic", opts_.topic},
                                                         {"partition", pid}};
      metrics::AddGauge(size, labels, static_cast<double>(p.size_bytes()));
      metrics::AddGauge(end, labels, static_cast<double>(p.end_offset()));
      metrics::AddGauge(start, labels, static_cast<double>(p.start_offset()));
      metrics::AddGauge(segments, labels, static_cast<double>(p.segment_count()));
      if (p.quorum()->replicated()) {
        metrics::AddGauge(hw, labels, static_cast<double>(p.high_watermark()));
        bool behind = false;
        for (const auto& [pod, l] : p.quorum()->Lags(clock_.NowMs())) {
          const std::map<std::string, std::string> fl = {
              {"topic", opts_.topic}, {"partition", pid}, {"follower", pod}};
          metrics::AddGauge(lag_events, fl,
                            static_cast<double>(p.end_offset() - std::min(p.end_offset(), l.end)));
          metrics::AddGauge(lag_seconds, fl, l.seconds);
          behind |= l.seconds > 10;
        }
        metrics::AddGauge(under, labels, behind ? 1.0 : 0.0);
      }
      const auto commits = p.Commits();
      for (const auto& [g, commit] : commits) {
        const std::map<std::string, std::string> gl = {
            {"topic", opts_.topic}, {"partition", pid}, {"group", g}};
        // Read through ranges, a group consumed parts of the range to different offsets: its
        // lag counts each part by its width (LagOf).
        metrics::AddGauge(lag, gl, static_cast<double>(p.LagOf(g)));
        metrics::AddGauge(committed, gl, static_cast<double>(commit.value()));
      }
      // A group known here that has not committed this partition yet lags by all it retains:
      // a slow group that has not reached a successor is behind on it too.
      for (const auto& g : known) {
        if (commits.count(g)) continue;
        metrics::AddGauge(lag, {{"topic", opts_.topic}, {"partition", pid}, {"group", g}},
                          static_cast<double>(p.LagOf(g)));
      }
    }
    for (const auto& [id, p] : followed_) {
      metrics::AddGauge(followed, {{"topic", opts_.topic}, {"partition", std::to_string(id.value())}},
                        static_cast<double>(p->end_offset()));
    }
    metrics::AddGauge(parts, {{"topic", opts_.topic}, {"state", "active"}}, active);
    metrics::AddGauge(parts, {{"topic", opts_.topic}, {"state", "sealed"}}, sealed);
    std::vector<prometheus::MetricFamily> out{size,  end,       start,      segments,
                                              lag,   committed, epoch,      parts,
                                              hw,    lag_events, lag_seconds, under,
                                              followed};
    if (const storage::DiskReserve* r = opts_.disk_reserve) {
      auto free = metrics::GaugeFamily("shoal_disk_free_bytes",
                                       "Free bytes of the data volume (beside the disk reserve)");
      auto reserve = metrics::GaugeFamily(
          "shoal_disk_reserve_bytes",
          "Bytes kept on the data volume for commits, groups, seals and retirement");
      auto in_use = metrics::GaugeFamily(
          "shoal_disk_reserve_in_use",
          "1 while the disk reserve is in use (the volume filled up): produce is refused");
      const std::map<std::string, std::string> tl = {{"topic", opts_.topic}};
      metrics::AddGauge(free, tl, static_cast<double>(r->free_bytes()));
      metrics::AddGauge(reserve, tl, static_cast<double>(r->reserve_bytes()));
      metrics::AddGauge(in_use, tl, r->ballast_bytes() < r->reserve_bytes() ? 1.0 : 0.0);
      out.push_back(std::move(free));
      out.push_back(std::move(reserve));
      out.push_back(std::move(in_use));
    }
    return out;
  });
}

}  // namespace shoal::broker
