// Topic: the partitions of one topic that this sidecar holds, with the partition map that says
// which hash ranges they own. The data frontend calls Produce, Consume and Commit; the admin
// frontend reads and installs maps.
//
// Lifecycle: Open (creating or recovering the map and every partition from the data directory),
// Start (the ticker thread), then any number of concurrent calls, then Close. Thread-safe: the map
// is read under a shared lock and replaced under an exclusive one; partitions synchronize
// themselves. Owned by main.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "broker/partition.h"
#include "broker/sidecar_probe.h"
#include "shoal/common/clock.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/wire.h"

namespace prometheus {
class Collectable;
}

namespace shoal::broker {

struct TopicOptions {
  std::string topic;
  uint32_t partitions = 4;  // for a new topic; an existing map on disk wins
  std::string data_dir;
  PodName pod{"local"};
  PartitionOptions partition;  // dir is filled per partition
  int64_t fsync_interval_ms = 100;
  int64_t tick_ms = 50;
};

class Topic {
 public:
  static Result<std::unique_ptr<Topic>> Open(const TopicOptions& options, Clock& clock,
                                             SidecarProbe& probe);
  Topic(const Topic&) = delete;
  Topic& operator=(const Topic&) = delete;
  ~Topic();

  const std::string& name() const { return opts_.topic; }

  // Routes each event by KeyHash to its active partition and appends it; results come back in
  // request order. Events of one request for the same key keep their order (same partition,
  // appended in request order). Acknowledged only after the fsync policy is met.
  Status Produce(const std::vector<wire::ProduceEvent>& events,
                 std::vector<wire::ProduceResult>* results);

  // Writes up to `max` events for `group` into `out` as {"events":[...]}; returns how many.
  Result<size_t> Consume(const std::string& group, size_t max, std::string* out);
  bool HasDataFor(const std::string& group) const;
  Status Commit(const wire::CommitRequest& request);

  // The topic view of GET /v1/topics/{topic}: the map plus per-partition counters.
  std::string ViewJson() const;
  PartitionMap map() const;

  // Called (from producing threads or the ticker) whenever events became visible to consumers.
  void SetDataListener(std::function<void()> fn) { on_data_ = std::move(fn); }

  // Scrape-time metrics: partition sizes and offsets, consumer lag per group, epoch.
  std::shared_ptr<prometheus::Collectable> StateCollectable();

  void Start();
  Status Close();

 private:
  Topic(TopicOptions options, Clock& clock, SidecarProbe& probe);
  Status LoadOrCreateMap();
  Status OpenPartitions();
  std::string MapPath() const;
  void TickLoop();

  const TopicOptions opts_;
  Clock& clock_;
  SidecarProbe& probe_;
  std::function<void()> on_data_;

  mutable std::shared_mutex map_mu_;
  PartitionMap map_;                                           // guarded by map_mu_
  std::map<uint32_t, std::unique_ptr<Partition>> partitions_;  // guarded by map_mu_
  std::atomic<uint32_t> consume_rotor_{0};

  std::mutex tick_mu_;
  std::condition_variable tick_cv_;
  bool stopping_ = false;  // guarded by tick_mu_
  std::thread ticker_;
};

}  // namespace shoal::broker
