#include "broker/topic.h"

#include <filesystem>

#include "shoal/common/hash.h"
#include "shoal/common/json.h"
#include "shoal/common/logging.h"
#include "shoal/common/metrics.h"
#include "storage/file_util.h"

namespace shoal::broker {

Topic::Topic(TopicOptions options, Clock& clock, SidecarProbe& probe)
    : opts_(std::move(options)), clock_(clock), probe_(probe) {}

Topic::~Topic() {
  {
    std::lock_guard<std::mutex> lock(tick_mu_);
    stopping_ = true;
  }
  tick_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

Result<std::unique_ptr<Topic>> Topic::Open(const TopicOptions& options, Clock& clock,
                                           SidecarProbe& probe) {
  std::unique_ptr<Topic> t(new Topic(options, clock, probe));
  SHOAL_RETURN_IF_ERROR(t->LoadOrCreateMap());
  SHOAL_RETURN_IF_ERROR(t->OpenPartitions());
  return t;
}

std::string Topic::MapPath() const { return opts_.data_dir + "/" + opts_.topic + "/map.json"; }

Status Topic::LoadOrCreateMap() {
  std::error_code ec;
  std::filesystem::create_directories(opts_.data_dir + "/" + opts_.topic, ec);
  if (ec) return Status::IoError("creating the topic directory: " + ec.message());
  std::string text;
  Status st = storage::ReadWholeFile(MapPath(), &text);
  if (st.ok()) {
    auto loaded = PartitionMap::FromJson(text);
    if (!loaded.ok()) return loaded.status().Annotate("loading " + MapPath());
    if (loaded->topic() != opts_.topic) {
      return Status::FailedPrecondition(MapPath() + " belongs to topic " + loaded->topic());
    }
    map_ = std::move(loaded).value();
    if (map_.active_count() != opts_.partitions) {
      Logger("broker")->info(
          "msg=\"using the partition map on disk\" epoch={} active_partitions={} "
          "ignored_flag_partitions={}",
          map_.epoch().value(), map_.active_count(), opts_.partitions);
    }
    return Status::Ok();
  }
  if (st.code() != Status::Code::kNotFound) return st;
  auto initial = PartitionMap::Initial(opts_.topic, opts_.partitions, opts_.pod);
  if (!initial.ok()) return initial.status();
  map_ = std::move(initial).value();
  return storage::WriteFileAtomic(MapPath(), map_.ToJson());
}

Status Topic::OpenPartitions() {
  for (const auto& info : map_.partitions()) {
    if (info.owner != opts_.pod) continue;
    PartitionOptions po = opts_.partition;
    po.dir = opts_.data_dir + "/" + opts_.topic + "/partitions/" + std::to_string(info.id.value());
    auto p = Partition::Open(info.id, po, clock_, probe_);
    if (!p.ok()) return p.status().Annotate("partition " + std::to_string(info.id.value()));
    partitions_.emplace(info.id.value(), std::move(p).value());
  }
  Logger("broker")->info("msg=\"topic open\" topic={} epoch={} partitions={}", opts_.topic,
                         map_.epoch().value(), partitions_.size());
  return Status::Ok();
}

Status Topic::Produce(const std::vector<wire::ProduceEvent>& events,
                      std::vector<wire::ProduceResult>* results) {
  results->assign(events.size(), {});
  std::shared_lock<std::shared_mutex> lock(map_mu_);
  // Group the events by partition, keeping request order inside each group.
  struct Group {
    Partition* partition;
    std::vector<const wire::ProduceEvent*> events;
    std::vector<wire::ProduceResult*> results;
  };
  std::vector<Group> groups;
  std::vector<int32_t> group_of(map_.NextId().value(), -1);
  for (size_t i = 0; i < events.size(); ++i) {
    const PartitionInfo& info = map_.Route(KeyHash(events[i].key));
    if (info.owner != opts_.pod) {
      return Status::FailedPrecondition("partition " + std::to_string(info.id.value()) +
                                        " is owned by " + info.owner.value());
    }
    int32_t& g = group_of[info.id.value()];
    if (g < 0) {
      auto it = partitions_.find(info.id.value());
      if (it == partitions_.end()) {
        return Status::Unavailable("partition " + std::to_string(info.id.value()) +
                                   " is not open on this sidecar");
      }
      g = static_cast<int32_t>(groups.size());
      groups.push_back({it->second.get(), {}, {}});
    }
    groups[g].events.push_back(&events[i]);
    groups[g].results.push_back(&(*results)[i]);
  }
  for (auto& g : groups) SHOAL_RETURN_IF_ERROR(g.partition->Append(g.events, g.results));
  // Acknowledge only what the fsync policy made durable; under fsync=always the concurrent
  // requests of a partition share one fdatasync (group commit in DiskLog::Sync).
  for (auto& g : groups) SHOAL_RETURN_IF_ERROR(g.partition->SyncForAck());
  lock.unlock();
  if (on_data_) on_data_();
  return Status::Ok();
}

Result<size_t> Topic::Consume(const std::string& group, size_t max, std::string* out) {
  constexpr size_t kMaxBytes = 4 << 20;
  out->append("{\"events\":[");
  size_t total = 0;
  {
    std::shared_lock<std::shared_mutex> lock(map_mu_);
    std::vector<Partition*> order;
    for (auto& [id, p] : partitions_) order.push_back(p.get());
    if (!order.empty()) {
      // Start at a rotating partition so that one busy partition cannot starve the others.
      const size_t start = consume_rotor_.fetch_add(1) % order.size();
      for (size_t k = 0; k < order.size() && total < max; ++k) {
        Partition* p = order[(start + k) % order.size()];
        auto n = p->ReadForGroup(group, max - total, kMaxBytes, total > 0, out);
        if (!n.ok()) return n.status();
        total += *n;
      }
    }
  }
  out->append("]}");
  return total;
}

bool Topic::HasDataFor(const std::string& group) const {
  std::shared_lock<std::shared_mutex> lock(map_mu_);
  for (const auto& [id, p] : partitions_) {
    if (p->HasDataFor(group)) return true;
  }
  return false;
}

Status Topic::Commit(const wire::CommitRequest& request) {
  std::shared_lock<std::shared_mutex> lock(map_mu_);
  // Check every entry before applying any: a refused request changes nothing. An end offset
  // only grows, so an entry valid here is still valid when it is applied below.
  for (const auto& c : request.offsets) {
    auto it = partitions_.find(c.partition);
    if (it == partitions_.end()) {
      return Status::NotFound("partition " + std::to_string(c.partition) +
                              " is not on this sidecar");
    }
    if (c.offset > it->second->end_offset()) {
      return Status::InvalidArgument("offset " + std::to_string(c.offset) + " is past the end " +
                                     std::to_string(it->second->end_offset()) + " of partition " +
                                     std::to_string(c.partition));
    }
  }
  for (const auto& c : request.offsets) {
    SHOAL_RETURN_IF_ERROR(partitions_.at(c.partition)->Commit(request.group, c.offset));
  }
  return Status::Ok();
}

PartitionMap Topic::map() const {
  std::shared_lock<std::shared_mutex> lock(map_mu_);
  return map_;
}

std::string Topic::ViewJson() const {
  std::shared_lock<std::shared_mutex> lock(map_mu_);
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
    out += "{\"id\":";
    json::AppendUint(out, info.id.value());
    out += ",\"range\":{\"lo\":";
    json::AppendUint(out, info.range.lo);
    out += ",\"hi\":";
    json::AppendUint(out, info.range.hi);
    out += "},\"state\":\"";
    out += ToString(info.state);
    out += "\",\"owner\":";
    json::AppendString(out, info.owner.value());
    out += ",\"parents\":[";
    for (size_t i = 0; i < info.parents.size(); ++i) {
      if (i) out += ',';
      json::AppendUint(out, info.parents[i].value());
    }
    out += ']';
    auto it = partitions_.find(info.id.value());
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
      out += ",\"segments\":";
      json::AppendUint(out, p.segment_count());
      out += ",\"groups\":{";
      bool g_first = true;
      for (const auto& [g, o] : p.Commits()) {
        if (!g_first) out += ',';
        g_first = false;
        json::AppendString(out, g);
        out += ":{\"committed\":";
        json::AppendUint(out, o);
        out += ",\"lag\":";
        json::AppendUint(out, p.end_offset() > o ? p.end_offset() - o : 0);
        out += '}';
      }
      out += '}';
    }
    out += '}';
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
    auto segments = metrics::GaugeFamily("shoal_partition_segments",
                                         "Segment files of a partition's log");
    auto lag = metrics::GaugeFamily(
        "shoal_consumer_lag_events", "Events of a partition not yet committed by a group");
    auto committed = metrics::GaugeFamily("shoal_consumer_committed_offset",
                                          "A group's committed offset in a partition");
    auto epoch = metrics::GaugeFamily("shoal_epoch", "Epoch of the partition map this sidecar holds");
    auto parts = metrics::GaugeFamily("shoal_partitions",
                                      "Partitions of this sidecar by state");
    std::shared_lock<std::shared_mutex> lock(map_mu_);
    metrics::AddGauge(epoch, {{"topic", opts_.topic}},
                      static_cast<double>(map_.epoch().value()));
    double active = 0, sealed = 0;
    for (const auto& info : map_.partitions()) {
      auto it = partitions_.find(info.id.value());
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
      for (const auto& [g, o] : p.Commits()) {
        const std::map<std::string, std::string> gl = {
            {"topic", opts_.topic}, {"partition", pid}, {"group", g}};
        metrics::AddGauge(lag, gl, static_cast<double>(p.end_offset() > o ? p.end_offset() - o : 0));
        metrics::AddGauge(committed, gl, static_cast<double>(o));
      }
    }
    metrics::AddGauge(parts, {{"topic", opts_.topic}, {"state", "active"}}, active);
    metrics::AddGauge(parts, {{"topic", opts_.topic}, {"state", "sealed"}}, sealed);
    return std::vector<prometheus::MetricFamily>{size,   end, start, segments, lag,
                                                 committed, epoch, parts};
  });
}

void Topic::Start() { ticker_ = std::thread([this] { TickLoop(); }); }

void Topic::TickLoop() {
  auto last_sync = clock_.SteadyNow();
  std::unique_lock<std::mutex> lock(tick_mu_);
  while (!stopping_) {
    tick_cv_.wait_for(lock, std::chrono::milliseconds(opts_.tick_ms), [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    const auto now = clock_.SteadyNow();
    const bool sync_due = now - last_sync >= std::chrono::milliseconds(opts_.fsync_interval_ms);
    if (sync_due) last_sync = now;
    bool moved = false;
    {
      std::shared_lock<std::shared_mutex> map_lock(map_mu_);
      for (auto& [id, p] : partitions_) moved |= p->Tick(sync_due);
    }
    if (moved && on_data_) on_data_();
    lock.lock();
  }
}

Status Topic::Close() {
  {
    std::lock_guard<std::mutex> lock(tick_mu_);
    stopping_ = true;
  }
  tick_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  std::unique_lock<std::shared_mutex> lock(map_mu_);
  Status first;
  for (auto& [id, p] : partitions_) {
    Status st = p->Close();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

}  // namespace shoal::broker
