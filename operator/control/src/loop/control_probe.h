// ControlProbe: the control loop's metrics, declared once (docs/metrics.md, "Control loop"):
// decisions by kind, plan steps by kind and outcome with their durations, and gauges of what the
// loop sees and wants, and the partition cap of the spec it holds (what alerts compare the active
// partitions with). The decision and step counters exist for every kind from the start, at 0.
// Registered on the registry of the loop's ChangeProbe so that one /metrics serves both.
// Thread-safe once constructed; owned by the ControlLoop.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>
#include <vector>

#include "shoal/control/policy.h"

namespace shoal::control {

class ControlProbe {
 public:
  ControlProbe(prometheus::Registry& registry, const std::string& topic);
  ControlProbe(const ControlProbe&) = delete;
  ControlProbe& operator=(const ControlProbe&) = delete;

  void Decided(const std::string& kind, double unix_seconds);
  void StepFinished(const std::string& kind, bool ok, double seconds);
  void Observed(double arrival_rate, double consumer_lag, size_t missing);
  void State(size_t active_partitions, size_t sealed_partitions, uint32_t desired_pods,
             uint32_t ready_pods, bool plan_in_progress);
  // The spec's partitions.max; set at construction and again when the loop takes a new spec.
  void Limits(uint32_t max_partitions);
  // The last decision's hot keys (hottest first; policy.h HotKey): how many partitions one key
  // holds back, and the hottest key's rate and hash.
  void HotKeys(const std::vector<HotKey>& hot);
  // Pods of the map that came back without their data, and the partitions they held.
  void PodsWithoutData(size_t pods, size_t partitions);
  // Partitions declared lost by a change, and the events they had taken.
  void PartitionsLost(size_t partitions, uint64_t events);
  // A failover of the partitions led by a pod that stopped answering: `outcome` ok (a new map
  // installed on the new leaders) or failed (no quorum answered, or the install failed), and
  // how long from the pod's first missed answer.
  void FailedOver(const std::string& outcome, size_t partitions, double seconds);

 private:
  const std::string topic_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Histogram>& step_seconds_;
  prometheus::Gauge& last_decision_;
  prometheus::Gauge& arrival_;
  prometheus::Gauge& lag_;
  prometheus::Gauge& missing_;
  prometheus::Gauge& active_;
  prometheus::Gauge& sealed_;
  prometheus::Gauge& desired_pods_;
  prometheus::Gauge& ready_pods_;
  prometheus::Gauge& in_progress_;
  prometheus::Gauge& max_partitions_;
  prometheus::Gauge& hot_keys_;
  prometheus::Gauge& hot_key_rate_;
  prometheus::Gauge& hot_key_hash_;
  prometheus::Gauge& pods_without_data_;
  prometheus::Gauge& partitions_without_data_;
  prometheus::Counter& partitions_lost_;
  prometheus::Counter& events_lost_;
  prometheus::Family<prometheus::Counter>& failovers_;
  prometheus::Counter& failed_over_partitions_;
  prometheus::Gauge& failover_seconds_;
};

}  // namespace shoal::control
