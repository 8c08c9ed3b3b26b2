// Console: what the live console shows of one topic, gathered from its sidecars' admin planes
// (docs/console.md). Every `sample_every` it reads the partition map from the sidecars it knows
// (the newest epoch wins, and that map's peers are the sidecars read next time) and each pod's
// GET /v1/admin/partitions, and keeps a bounded history: arrival (events/s, from the `appended`
// counters), active partitions, pods and each group's lag; with a control loop in the process
// (`shoal up`), its status and the decisions it made, each with its reason. Read-only: it never
// writes to a sidecar and never consumes for a group (the event browser reads
// GET /v1/admin/partitions/{id}/events).
//
// Start runs the sampler thread, Stop (or the destructor) ends it. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/admin_plane.h"
#include "shoal/common/clock.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal::console {

struct ConsoleOptions {
  std::string topic;
  // Admin addresses (host:port) of some of the topic's sidecars: where the first map is read
  // (and again whenever none of the map's own peers answers).
  std::function<std::vector<std::string>()> seeds;
  // The control loop's status (ControlLoop::StatusJson), when one runs in this process; unset
  // otherwise (the console then shows no decisions).
  std::function<std::string()> status;
  std::chrono::milliseconds sample_every{1000};
  size_t history = 900;    // samples kept (15 minutes at one a second)
  size_t decisions = 200;  // decisions kept
};

class Console {
 public:
  Console(ConsoleOptions options, client::AdminPlane& admin, Clock& clock);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  void Start();
  void Stop();

  // One round of reading (the sampler thread calls it; tests may too).
  void Sample();

  // GET /api/state: {"topic","at_ms","epoch","map":{...as the admin plane's GET /v1/admin/map},
  // "pods":{pod:{"admin","error"?,"partitions":{...as GET /v1/admin/partitions}}},
  // "retired":[{"id","lo","hi","owner","parents","end_offset"}] (partitions seen in an earlier
  // map, retired since), "status":{...}|null,
  // "history":[{"at_ms","arrival","partitions","pods","lag":{group:n}}],
  // "decisions":[{"at_ms","kinds","partitions","replicas","reason"}]} (the decisions that
  // changed something; the last one, a hold included, is in "status").
  std::string StateJson() const;

  // GET /api/events: `partition` and `from` (and `max`) browse a partition; `key` finds a key's
  // events in every partition whose range holds its hash, oldest partition first (at most 200
  // events, 4 MiB and 10 s of searching: "truncated" says when it stopped short). 400 for a bad
  // query, 404 for a partition the map does not know, 503 when its owner does not answer or two
  // browses run already.
  Result<std::string> EventsJson(const std::map<std::string, std::string>& query) const;

 private:
  struct Sampled;
  std::string AdminOf(const PartitionMap& map, const std::string& pod) const;

  const ConsoleOptions opts_;
  client::AdminPlane& admin_;
  Clock& clock_;

  mutable std::mutex mu_;
  PartitionMap map_;                              // the newest map read
  std::string map_json_;                          // as its sidecar answered it
  std::string map_from_;                          // the admin address that answered it
  std::map<std::string, std::string> pods_json_;  // pod -> its entry in "pods"
  std::string status_json_ = "null";
  std::deque<std::string> history_;    // samples, as JSON objects
  std::deque<std::string> decisions_;  // as JSON objects
  int64_t last_decision_at_ = 0;
  // Per pod and partition: the last `appended` read, for the arrival rate.
  struct Counted {
    uint64_t n = 0;
    int64_t at_ms = 0;  // when it was read
  };
  std::map<std::pair<std::string, uint32_t>, Counted> appended_;
  int64_t last_sample_ms_ = 0;
  // Every partition seen in a map (at most kRemembered, the newest ids), as a JSON object, so
  // that the lineage still shows the parents a change retired once every group read them.
  static constexpr size_t kRemembered = 2000;
  std::map<uint32_t, std::string> seen_;

  mutable std::atomic<int> browsing_{0};  // EventsJson calls running
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace shoal::console
