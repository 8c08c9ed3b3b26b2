// What the policy's tests share (policy_test.cc, policy_stages_test.cc): a base spec, maps,
// observations built by hand over a fake time base (no clock is read) and histories of them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "shoal/control/policy.h"

namespace shoal::control::policy_testing {

inline const SteadyTime kT0{};

inline SteadyTime At(int64_t s) { return kT0 + std::chrono::seconds(s); }

// The spec of every test unless a case changes it: target 5,000 ev/s per partition, 10%
// tolerance both ways, no scale-up window, a 30 s scale-down window, 4 partitions per replica.
inline TopicSpec BaseSpec() {
  TopicSpec spec;
  spec.name = "orders";
  spec.partitions.min = 1;
  spec.partitions.max = 64;
  spec.partitions.initial = 4;
  spec.replicas.min = 1;
  spec.replicas.max = 16;
  spec.scaling.events_per_second_per_partition = 5000;
  spec.scaling.cpu_utilization_percent = 70;
  spec.scaling.consumer_lag_events = 1'000'000'000;  // lag never drives these tests
  spec.scaling.partitions_per_replica = 4;
  spec.scale_up = {0, 0.1, 0};
  spec.scale_down = {30, 0.1, 0};
  return spec;
}

inline PartitionMap Initial(uint32_t count) {
  auto m = PartitionMap::Initial("orders", count, PodName("orders-0"));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

inline PartitionLoad Uniform(uint32_t id, double rate) {
  PartitionLoad l;
  l.id = PartitionId(id);
  l.rate = rate;
  l.buckets.fill(1.0 / kLoadBuckets);
  return l;
}

// An observation of every active partition of `map` at rate rate_of(id), uniformly spread; with
// `lineage`, each names its parents from the map (as the metrics observer does).
inline Observation Observe(const PartitionMap& map, int64_t t,
                           const std::function<double(uint32_t)>& rate_of, bool lineage = false) {
  Observation o;
  o.at = At(t);
  o.epoch = map.epoch();
  for (const auto& p : map.partitions()) {
    if (!p.active()) continue;
    PartitionLoad l = Uniform(p.id.value(), rate_of(p.id.value()));
    if (lineage) {
      for (const auto& parent : p.parents) l.parents.push_back(parent);
    }
    o.partitions[p.id] = l;
  }
  return o;
}

// Observations of `map` every second for t in [from, to], all at `rate` per partition.
inline void Steady(LoadHistory& h, const PartitionMap& map, int64_t from, int64_t to, double rate) {
  for (int64_t t = from; t <= to; ++t) h.Add(Observe(map, t, [&](uint32_t) { return rate; }));
}

// Observations every second for t in [from, to] with the total total_of(t) spread evenly over
// the map's partitions.
inline void Totals(LoadHistory& h, const PartitionMap& map, int64_t from, int64_t to,
                   const std::function<double(int64_t)>& total_of) {
  const double n = static_cast<double>(map.active_count());
  for (int64_t t = from; t <= to; ++t) {
    h.Add(Observe(map, t, [&](uint32_t) { return total_of(t) / n; }));
  }
}

// What one pod's consumers of a group took (ev/s over a 1 s interval) and what waited for them;
// with `busy`, the share of the interval they held a batch (the sidecar's busy counter).
inline ConsumerLoad Took(double delivered, uint64_t backlog,
                         std::optional<double> busy = std::nullopt) {
  ConsumerLoad c;
  c.delivered_rate = delivered;
  c.backlog = backlog;
  c.busy = busy;
  c.interval_s = 1;
  return c;
}

}  // namespace shoal::control::policy_testing
