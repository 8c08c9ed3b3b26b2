// The simulator: replays a load trace (docs/simulator.md) through the real policy and planner at
// any scale, with a simple model of the world around them (arrivals spread over the hash space
// plus hot keys, consumers with a fixed capacity per pod, pods that take a while to start,
// observations that go missing), and records every decision with its reason and the time the
// policy and planner took. `shoal simulate` prints it; tests assert on it.
//
// The world model, in short: each step (the control loop's observation interval) every active
// partition receives the trace's rate times its share of the hash space (plus the hot keys in
// its range), optionally with noise; each ready pod's consumers take up to their capacity
// (events/s per pod: a service time per event in a number of lanes, as `shoal up`'s consumers)
// from the backlog they can read, in proportion to it, and report what they took, how busy they
// were (what they took over their capacity) and what waited (the sidecar's delivered and busy
// counters); a change takes one step. Parents first, as the sidecars
// keep it: by default a change divides a sealed partition's unread events among its successors
// by hash range, each successor's share read by the successor's pod at the same time as the
// others' (the total is what the sealed parent holds, its reading spread over the successors'
// pods); with `parents: whole` (the sidecars before ranged reads), a sealed partition keeps its
// backlog on the pod that held it, read there by that pod alone, and its successors' events wait
// until it is drained.
// Values and a function; not synchronized.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/status.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/policy.h"

namespace shoal::control {

struct Trace {
  std::string name;
  double duration_s = 60;
  double step_s = 1;
  std::string topic_file;  // a PartitionedTopic file, relative to the trace's directory
  std::vector<std::pair<double, double>> rate;  // (t, events/s), piecewise linear
  double repeat_s = 0;                          // > 0: the pattern repeats with this period
  double noise = 0;
  uint64_t seed = 1;
  struct HotKey {
    std::string key;
    double share = 0;
    double from_s = 0, until_s = 1e18;
  };
  std::vector<HotKey> hot_keys;
  struct Gap {
    double from_s = 0, until_s = 0;
    std::vector<uint32_t> pods;  // ordinals whose metrics are missing
  };
  std::vector<Gap> missing;
  // Instead of `rate`: one of the load generator's profiles (shoal/common/load_profile.h, what
  // `shoal up --profile` and `shoal load` send: "surge" is the flash sale), `profile_rate`
  // events/s at 1x for `profile_duration_s`, nothing after it (the producers stop).
  std::string profile;
  double profile_rate = 0, profile_duration_s = 0;
  struct Consumer {
    double events_per_second = 20000;  // per ready pod, when service_us is 0
    // Per event, the time a consumer waits for (a database write), in `concurrency` lanes:
    // concurrency * 1e6 / service_us events/s per pod.
    double service_us = 0;
    uint32_t concurrency = 1;
    // CPU per event over the pod's request, as the platform reports utilization; 0: the
    // consumer is CPU-bound (utilization is what it took over its capacity).
    double cpu_us = 0;
    double cpu_request_cores = 0.5;
    // The consumer's loop, as `shoal consume` runs it (0: a fluid consumer that takes its
    // capacity every step): each batch is what has arrived, up to batch_max events; one round
    // trip fetches it (not busy: it waits in the sidecar) and it takes round_trip_ms for its
    // commit plus its busiest lane's events times service_us (keys spread over `concurrency`
    // lanes: a small batch balances worse). So a consumer at a light load takes small batches and
    // is busy most of the time, and one with a backlog takes full ones, faster per event.
    uint32_t batch_max = 0;
    double round_trip_ms = 0;
    double Capacity() const {
      return service_us > 0 ? concurrency * 1e6 / service_us : events_per_second;
    }
  } consumer;
  // How a sealed partition's backlog is read (above): divided among the successors by range, or
  // whole by the pod that held it before its successors' own events.
  bool parents_whole = false;
  double pod_start_s = 5;
  uint32_t initial_partitions = 0;  // 0: the spec's partitions.initial
  uint32_t initial_pods = 0;        // 0: the spec's replicas.min
  // The wall time at t = 0, for the topic's schedules (RFC 3339, UTC).
  std::string start_time = "2026-01-01T00:00:00Z";

  double RateAt(double t) const;
};

// Parses a trace file's YAML; errors name the field.
Result<Trace> ParseTrace(std::string_view yaml);
// InvalidArgument naming the field of a consumer model that cannot run (no capacity, no lanes).
Status ValidateConsumer(const Trace::Consumer& consumer);

struct SimDecision {
  double t = 0;
  uint32_t partitions_before = 0, partitions_after = 0;
  uint32_t pods_before = 0, pods_after = 0;
  std::vector<DecisionKind> kinds;
  std::string reason;
  // Wall time of Decide, and of MakePlan plus resolving every change step of the plan.
  double decide_ms = 0, plan_ms = 0;
  size_t plan_steps = 0;
};

struct SimPoint {
  double t = 0;
  bool scheduled = false;  // a schedule's window holds capacity (in progress or prepared)
  double rate = 0;
  uint32_t partitions = 0;
  uint32_t pods = 0;
  double lag = 0;
  bool plan_in_progress = false;
};

struct SimResult {
  std::vector<SimDecision> decisions;  // only those that changed something
  std::vector<SimPoint> timeline;      // one point per step
  double max_lag = 0;
  double lag_event_seconds = 0;  // the area under the lag curve
  double partition_seconds = 0, pod_seconds = 0;
  // The slowest Decide; the slowest MakePlan with its first change resolved; the slowest
  // resolution of one later change step.
  double max_decide_ms = 0, max_plan_ms = 0, max_resolve_ms = 0;
  uint32_t max_partitions = 0, max_pods = 0;
  uint64_t holds = 0;  // decisions that changed nothing
  uint32_t scale_ups = 0;  // decisions that split or added pods

  std::string ToJson(bool with_timeline) const;
};

Result<SimResult> Simulate(const TopicSpec& spec, const Trace& trace);

}  // namespace shoal::control
