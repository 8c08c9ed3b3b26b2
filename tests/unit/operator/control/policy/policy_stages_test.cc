// Table tests of the decision's stages (control/src/policy/policy.cc, policy_stages.h), each
// on its own over DecideInputs built from histories made by hand; policy_test.cc tests Decide,
// which composes them.
#include "shoal/control/policy_stages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "policy_fixtures.h"

namespace shoal::control {
namespace {

using namespace policy_testing;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Every case below has a `name`: gtest prints it and names the instance after it.
template <typename Case>
requires requires(const Case& c) { c.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
struct CaseName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    return info.param.name;
  }
};

// ---------------------------------------------------------------------------------------------
// 1. ReadLoad

struct ReadLoadCase {
  const char* name;
  uint32_t up_window_s;
  // Partition 0's rate at t = 0..20 (partition 1 stays at 1,000).
  std::function<double(int64_t)> rate0;
  bool p1_missing_last;  // partition 1 is not in the last observation
  double expect_rate0;
  double expect_total;
  std::vector<uint32_t> expect_unknown;
};

using ReadLoadTest = ::testing::TestWithParam<ReadLoadCase>;

TEST_P(ReadLoadTest, TheLatestRateOrTheWindowsLow) {
  const ReadLoadCase& c = GetParam();
  TopicSpec spec = BaseSpec();
  spec.scale_up.stabilization_window_seconds = c.up_window_s;
  spec.scale_up.predictive = false;
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(300));
  for (int64_t t = 0; t <= 20; ++t) {
    Observation o = Observe(map, t, [&](uint32_t id) { return id == 0 ? c.rate0(t) : 1000.0; });
    if (t == 20 && c.p1_missing_last) o.partitions.erase(PartitionId(1));
    h.Add(o);
  }
  const DecideInputs in(spec, h, map, 1, At(20));
  const CurrentLoad load = ReadLoad(in);
  ASSERT_FALSE(load.known.empty());
  EXPECT_EQ(load.known[0].info->id, PartitionId(0));
  EXPECT_DOUBLE_EQ(load.known[0].load.rate, c.expect_rate0);
  EXPECT_DOUBLE_EQ(load.total_rate, c.expect_total);
  // As sized: partition 0's sized rate and partition 1's 1,000 (when it has one).
  EXPECT_DOUBLE_EQ(load.sized_rate, c.expect_rate0 + (c.p1_missing_last ? 0 : 1000));
  EXPECT_EQ(load.unknown, c.expect_unknown);
  EXPECT_EQ(load.latest, At(20));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ReadLoadTest,
    ::testing::Values(
        ReadLoadCase{"latest_without_a_window",
                     0,
                     [](int64_t t) { return t < 20 ? 4000.0 : 9000.0; },
                     false,
                     9000,
                     10000,
                     {}},
        // A window of 10 s: the lowest rate within it.
        ReadLoadCase{"a_spike_waits_for_the_window",
                     10,
                     [](int64_t t) { return t < 20 ? 4000.0 : 9000.0; },
                     false,
                     4000,
                     10000,
                     {}},
        // More than twice the target at the last two observations: a surge, sized now.
        ReadLoadCase{"a_surge_skips_the_window",
                     10,
                     [](int64_t t) { return t < 19 ? 4000.0 : 12000.0; },
                     false,
                     12000,
                     13000,
                     {}},
        ReadLoadCase{"a_partition_without_a_current_rate_is_unknown",
                     0,
                     [](int64_t) { return 4000.0; },
                     true,
                     4000,
                     4000,
                     {1}}),
    CaseName());

// ---------------------------------------------------------------------------------------------
// 2. Predict

struct PredictCase {
  const char* name;
  double base, slope;  // total rate: base, rising by `slope` ev/s per s after t = 30
  uint32_t partitions, replicas;
  bool acts;
  double expect_factor;  // when it acts
  uint32_t expect_pods;
};

using PredictTest = ::testing::TestWithParam<PredictCase>;

TEST_P(PredictTest, ActsOnlyWhenCapacityFallsShort) {
  const PredictCase& c = GetParam();
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(c.partitions);
  LoadHistory h(seconds(300));
  for (int i = 0; i < 3; ++i) h.RecordPodStart(std::chrono::duration<double>(8));
  h.RecordChange(std::chrono::duration<double>(1));
  Totals(h, map, 0, 40, [&](int64_t t) { return c.base + (t > 30 ? c.slope * (t - 30) : 0); });
  const DecideInputs in(spec, h, map, c.replicas, At(40));
  const Prediction p = Predict(in, ReadLoad(in));
  if (!c.acts) {
    EXPECT_EQ(p.factor, 1.0);
    EXPECT_EQ(p.pods, 0u);
    EXPECT_THAT(p.why, IsEmpty());
    return;
  }
  EXPECT_NEAR(p.factor, c.expect_factor, 1e-6);
  EXPECT_EQ(p.pods, c.expect_pods);
  EXPECT_THAT(p.why, HasSubstr("rising"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PredictTest,
    ::testing::Values(PredictCase{"flat", 16000, 0, 4, 1, false, 1, 0},
                      // 26,000 now, 46,000 expected in 20 s: 10 partitions' worth, 3 pods.
                      PredictCase{"ramp_beyond_capacity", 16000, 1000, 4, 1, true,
                                  46000.0 / 26000.0, 3},
                      // 13,000 rising 300 per s: far below 8 partitions and 2 pods in 9 s.
                      PredictCase{"ramp_within_capacity", 10000, 300, 8, 2, false, 1, 0}),
    CaseName());

// ---------------------------------------------------------------------------------------------
// 3. WantSplits

struct WantSplitsCase {
  const char* name;
  PartitionLoad load;  // of partition 0 of a one-partition map
  uint32_t expect_parts, expect_useful, expect_extra;
  bool expect_hot_key;
};

using WantSplitsTest = ::testing::TestWithParam<WantSplitsCase>;

TEST_P(WantSplitsTest, PiecesTheRateAsksFor) {
  const WantSplitsCase& c = GetParam();
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(1);
  LoadHistory h(seconds(300));
  Observation o;
  o.at = At(0);
  o.partitions[PartitionId(0)] = c.load;
  h.Add(o);
  const DecideInputs in(spec, h, map, 1, At(0));
  CurrentLoad load = ReadLoad(in);
  const SplitNeeds needs = WantSplits(in, load.known);
  ASSERT_EQ(load.known.size(), 1u);
  EXPECT_EQ(load.known[0].parts, c.expect_parts);
  EXPECT_EQ(load.known[0].useful, c.expect_useful);
  EXPECT_EQ(needs.extra, c.expect_extra);
  EXPECT_EQ(needs.hot_keys.size(), c.expect_hot_key ? 1u : 0u);
  EXPECT_EQ(needs.hot_notes.size(), c.expect_hot_key ? 1u : 0u);
  if (c.expect_hot_key) {
    EXPECT_THAT(needs.hot_notes[0], HasSubstr("one key"));
  }
}

// All of the load on one key, `hot`, of the whole hash space.
PartitionLoad OneKey(uint32_t id, double rate, uint32_t hot) {
  PartitionLoad l;
  l.id = PartitionId(id);
  l.rate = rate;
  l.buckets[hot * kLoadBuckets / kHashSpace] = 1;
  l.top_hash = hot;
  l.top_share = 1;
  return l;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, WantSplitsTest,
    ::testing::Values(WantSplitsCase{"within_the_tolerance", Uniform(0, 5400), 1, 1, 0, false},
                      WantSplitsCase{"three_times_the_target", Uniform(0, 15000), 3, 3, 2, false},
                      WantSplitsCase{"one_key_is_not_split", OneKey(0, 15000, 12345), 3, 1, 0,
                                     true}),
    CaseName());

// ---------------------------------------------------------------------------------------------
// 4. CpuReplicas, PodsForCpu, PodsForLag, ConsumeDemand, PodsForCapacity

struct CpuCase {
  const char* name;
  double cpu;  // < 0: not measured
  uint32_t pods;
  double factor;
  uint32_t expect;
};

using PodsForCpuTest = ::testing::TestWithParam<CpuCase>;

TEST_P(PodsForCpuTest, PodsScaledByUtilizationOverTheTarget) {
  const CpuCase& c = GetParam();
  const TopicSpec spec = BaseSpec();  // CPU target 70%
  const PartitionMap map = Initial(8);
  LoadHistory h(seconds(300));
  Observation o = Observe(map, 0, [](uint32_t) { return 1000.0; });
  if (c.cpu >= 0) {
    for (uint32_t i = 0; i < c.pods; ++i) o.cpu_utilization["orders-" + std::to_string(i)] = c.cpu;
  }
  h.Add(o);
  const DecideInputs in(spec, h, map, c.pods, At(0));
  EXPECT_EQ(PodsForCpu(in, c.factor), c.expect);
  if (c.factor == 1) {
    EXPECT_EQ(CpuReplicas(in, h.samples().back()), c.expect);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodsForCpuTest,
    ::testing::Values(CpuCase{"not_measured", -1, 2, 1, 0},
                      CpuCase{"within_the_tolerance", 0.74, 2, 1, 2},
                      CpuCase{"twice_the_target", 1.4, 2, 1, 4},
                      // At the target now, twice the rate predicted: twice the pods.
                      CpuCase{"raised_by_the_prediction", 0.7, 3, 2, 6}),
    CaseName());

struct LagCase {
  const char* name;
  uint64_t lag_target;
  // The topic's lag at t = 0..10 (on partition 0 of two at 2,000 ev/s each).
  std::function<uint64_t(int64_t)> lag;
  uint32_t replicas;
  uint32_t expect;
};

using PodsForLagTest = ::testing::TestWithParam<LagCase>;

TEST_P(PodsForLagTest, AGrowingLagAboveItsTargetAsksForMorePods) {
  const LagCase& c = GetParam();
  TopicSpec spec = BaseSpec();
  spec.scaling.consumer_lag_events = c.lag_target;
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(300));
  for (int64_t t = 0; t <= 10; ++t) {
    Observation o = Observe(map, t, [](uint32_t) { return 2000.0; });
    o.partitions[PartitionId(0)].lag = c.lag(t);
    h.Add(o);
  }
  const DecideInputs in(spec, h, map, c.replicas, At(10));
  const LagPods pods = PodsForLag(in, 1);
  // Once what a pod's consumers take is measured, the backlog is sized from it instead.
  Observation measured = Observe(map, 11, [](uint32_t) { return 2000.0; });
  measured.partitions[PartitionId(0)].lag = c.lag(11);
  measured.consumers["orders-0"]["g"] = Took(2000, 100000);
  h.Add(measured);
  EXPECT_EQ(PodsForLag(DecideInputs(spec, h, map, c.replicas, At(11)), 1).pods, 0u);
  EXPECT_EQ(pods.pods, c.expect);
  if (c.expect > 0) {
    EXPECT_THAT(pods.why, HasSubstr("and growing"));
  } else {
    EXPECT_THAT(pods.why, IsEmpty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodsForLagTest,
    ::testing::Values(
        LagCase{"below_its_target", 10000, [](int64_t t) { return uint64_t(500 * t); }, 1, 0},
        // Growing 1,000 a second at 4,000 ev/s: one pod consumes 3,000, at 70% CPU 2,100;
        // 4,000 needs two.
        LagCase{"above_and_growing", 1000, [](int64_t t) { return uint64_t(1000 * t); }, 1, 2},
        // Growing 3,000 a second: one pod consumes 1,000 (700 at the target): six pods.
        LagCase{"far_behind", 1000, [](int64_t t) { return uint64_t(3000 * t); }, 1, 6},
        LagCase{"above_but_draining", 1000, [](int64_t t) { return uint64_t(20000 - 1000 * t); }, 1,
                0}),
    CaseName());

struct DemandCase {
  const char* name;
  uint64_t lag;  // the topic's, at the latest observation (target 5,000)
  uint32_t drain_seconds;
  double factor;  // the prediction's
  double expect_rate;
  const char* expect_why;  // "" for none
};

using ConsumeDemandTest = ::testing::TestWithParam<DemandCase>;

TEST_P(ConsumeDemandTest, ArrivalsAndABacklogOverDrainSeconds) {
  const DemandCase& c = GetParam();
  TopicSpec spec = BaseSpec();
  spec.scaling.consumer_lag_events = 5000;
  spec.scaling.drain_seconds = c.drain_seconds;
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(300));
  Observation o = Observe(map, 0, [](uint32_t) { return 2500.0; });  // 5,000 in all
  o.partitions[PartitionId(1)].lag = c.lag;
  h.Add(o);
  const DecideInputs in(spec, h, map, 1, At(0));
  const Demand d = ConsumeDemand(in, ReadLoad(in), c.factor);
  EXPECT_DOUBLE_EQ(d.arrival, 5000 * c.factor);
  EXPECT_NEAR(d.rate(), c.expect_rate, 0.01);
  EXPECT_EQ(d.backlog, d.drain > 0 ? c.lag : 0);
  if (std::string(c.expect_why).empty()) {
    EXPECT_THAT(d.why, IsEmpty());
  } else {
    EXPECT_THAT(d.why, HasSubstr(c.expect_why));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConsumeDemandTest,
    ::testing::Values(
        DemandCase{"no_backlog", 0, 30, 1, 5000, ""},
        // At or below its target a lag is events in flight and short waits: nothing to size.
        DemandCase{"within_the_lag_target", 5000, 30, 1, 5000, ""},
        DemandCase{"drained_in_30_s", 40000, 30, 1, 5000 + 40000.0 / 30,
                   "backlog 40,000 to drain in 30 s: +1,333 ev/s"},
        DemandCase{"drained_in_two_minutes", 40000, 120, 1, 5000 + 40000.0 / 120,
                   "backlog 40,000 to drain in 120 s: +333 ev/s"},
        DemandCase{"with_a_prediction", 40000, 30, 2, 10000 + 40000.0 / 30, "+1,333 ev/s"}),
    CaseName());

struct CapacityPodsCase {
  const char* name;
  double per_pod;  // measured; 0: not measured
  double rate;
  uint32_t replicas;
  uint32_t expect;
};

using PodsForCapacityTest = ::testing::TestWithParam<CapacityPodsCase>;

TEST_P(PodsForCapacityTest, TheRateOverWhatAPodsConsumersTake) {
  const CapacityPodsCase& c = GetParam();
  const TopicSpec spec = BaseSpec();  // tolerance 10%
  const PartitionMap map = Initial(8);
  LoadHistory h(seconds(300));
  Observation o = Observe(map, 0, [](uint32_t) { return 1000.0; });
  if (c.per_pod > 0) o.consumers["orders-0"]["g"] = Took(c.per_pod, 100000);
  h.Add(o);
  const DecideInputs in(spec, h, map, c.replicas, At(0));
  const CapacityPods pods = PodsForCapacity(in, c.rate);
  EXPECT_EQ(pods.pods, c.expect);
  if (c.expect == 0) {
    EXPECT_THAT(pods.why, IsEmpty());
  } else {
    EXPECT_THAT(pods.why, HasSubstr("ev/s per pod measured (1 saturated samples of group g)"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodsForCapacityTest,
    ::testing::Values(CapacityPodsCase{"not_measured", 0, 5000, 1, 0},
                      CapacityPodsCase{"five_pods", 1000, 5000, 1, 5},
                      CapacityPodsCase{"rounds_up", 1000, 5001, 1, 6},
                      CapacityPodsCase{"within_the_tolerance_of_the_pods_in_place", 1000, 2150, 2,
                                       2},
                      CapacityPodsCase{"beyond_it", 1000, 2250, 2, 3},
                      // Fewer than now: the pods in place stay unless the window lets them go.
                      CapacityPodsCase{"fewer_than_now", 1000, 1500, 4, 2}),
    CaseName());

// Partitions in whole multiples of the pods the capacity adds, so that each pod gets as many.
struct BalancedCase {
  const char* name;
  uint32_t capacity_pods;  // 0: not measured
  uint32_t replicas;
  uint32_t want;
  uint32_t expect;
};

using BalancedPartitionsTest = ::testing::TestWithParam<BalancedCase>;

TEST_P(BalancedPartitionsTest, AreAMultipleOfThePodsAdded) {
  const BalancedCase& c = GetParam();
  TopicSpec spec = BaseSpec();  // partitions.max 64
  spec.replicas.max = 10;
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(300));
  h.Add(Observe(map, 0, [](uint32_t) { return 1000.0; }));
  const DecideInputs in(spec, h, map, c.replicas, At(0));
  CapacityPods capacity;
  capacity.pods = c.capacity_pods;
  EXPECT_EQ(BalancedPartitions(in, capacity, c.want), c.expect);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BalancedPartitionsTest,
    ::testing::Values(
        // shoal up's unannounced sale: 11 partitions on 8 new pods would leave three with two.
        BalancedCase{"eleven_on_eight_pods", 8, 1, 11, 16},
        BalancedCase{"already_a_multiple", 6, 1, 12, 12},
        BalancedCase{"not_measured", 0, 1, 11, 0},
        BalancedCase{"no_pods_added", 3, 3, 11, 0},
        BalancedCase{"fewer_partitions_than_pods", 8, 1, 6, 0},
        // Pods beyond replicas.max count as replicas.max.
        BalancedCase{"capped_pods", 12, 1, 11, 20},
        // Past partitions.max (64): nothing rounded.
        BalancedCase{"past_the_cap", 10, 1, 61, 0}),
    CaseName());

// The reason names how the capacity was measured.
struct CapacityWhyCase {
  const char* name;
  std::vector<ConsumerLoad> seen;  // one pod's consumers of group g, one observation each
  const char* expect;
};

using PodsForCapacityWhyTest = ::testing::TestWithParam<CapacityWhyCase>;

TEST_P(PodsForCapacityWhyTest, SaysWhichSamplesMeasuredIt) {
  const CapacityWhyCase& c = GetParam();
  const PartitionMap map = Initial(8);
  LoadHistory h(seconds(300));
  for (size_t i = 0; i < c.seen.size(); ++i) {
    Observation o = Observe(map, static_cast<int64_t>(i), [](uint32_t) { return 1000.0; });
    o.consumers["orders-0"]["g"] = c.seen[i];
    h.Add(o);
  }
  const TopicSpec spec = BaseSpec();
  const DecideInputs in(spec, h, map, 1, At(static_cast<int64_t>(c.seen.size())));
  EXPECT_THAT(PodsForCapacity(in, 5000).why, HasSubstr(c.expect));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodsForCapacityWhyTest,
    ::testing::Values(
        CapacityWhyCase{"saturated",
                        {Took(1000, 5000), Took(1000, 5000)},
                        "5 pods at 1,000 ev/s per pod measured (2 saturated samples of group g)"},
        CapacityWhyCase{"from_busy_time",
                        {Took(500, 0, 0.5), Took(250, 0, 0.25)},
                        "5 pods at 1,000 ev/s per pod measured (2 samples of group g from busy "
                        "time)"},
        // Both kinds seen: the saturated ones are what the consumers take.
        CapacityWhyCase{"saturated_wins",
                        {Took(500, 0, 0.5), Took(1000, 5000), Took(600, 0, 0.6)},
                        "5 pods at 1,000 ev/s per pod measured (1 saturated samples of group g)"}),
    CaseName());

// ---------------------------------------------------------------------------------------------
// 5. PlaceSplits

struct PlaceSplitsCase {
  const char* name;
  std::vector<double> rates;  // per partition
  uint32_t pmax, step_limit, floor;
  uint32_t expect_after;
  const char* expect_cap;  // "" for none
};

using PlaceSplitsTest = ::testing::TestWithParam<PlaceSplitsCase>;

TEST_P(PlaceSplitsTest, PiecesWithinTheCapAndTheStepLimit) {
  const PlaceSplitsCase& c = GetParam();
  TopicSpec spec = BaseSpec();
  spec.partitions.max = c.pmax;
  spec.scale_up.max_partitions_per_step = c.step_limit;
  const PartitionMap map = Initial(static_cast<uint32_t>(c.rates.size()));
  LoadHistory h(seconds(300));
  h.Add(Observe(map, 0, [&](uint32_t id) { return c.rates[id]; }));
  const DecideInputs in(spec, h, map, 1, At(0));
  CurrentLoad load = ReadLoad(in);
  const SplitNeeds needs = WantSplits(in, load.known);
  const SplitPlan plan = PlaceSplits(in, load, needs.extra, c.floor);
  EXPECT_EQ(plan.after, c.expect_after) << plan.why;
  uint32_t pieces = static_cast<uint32_t>(c.rates.size());
  for (const auto& s : plan.splits) pieces += static_cast<uint32_t>(s.cuts.size());
  EXPECT_EQ(pieces, plan.after);
  if (plan.after > c.rates.size()) {
    EXPECT_THAT(plan.why, HasSubstr("partitions"));
  } else {
    EXPECT_THAT(plan.why, IsEmpty());
  }
  EXPECT_THAT(plan.cap, HasSubstr(c.expect_cap));
  if (std::string(c.expect_cap).empty()) {
    EXPECT_THAT(plan.cap, IsEmpty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PlaceSplitsTest,
    ::testing::Values(
        PlaceSplitsCase{"nothing_hot", {4000, 4000}, 64, 0, 0, 2, ""},
        PlaceSplitsCase{"three_times_the_target", {15000, 4000}, 64, 0, 0, 4, ""},
        // 10 pieces wanted, 6 allowed: the hottest gets them first.
        PlaceSplitsCase{"capped", {25000, 25000}, 6, 0, 0, 6, "capped at partitions.max 6"},
        PlaceSplitsCase{"step_limit", {25000, 25000}, 64, 3, 0, 5, "limited to 3 new partitions"},
        // Cold, but eight pods are wanted: eight partitions to consume.
        PlaceSplitsCase{"for_pods", {1000, 1000}, 64, 0, 8, 8, ""}),
    CaseName());

// ---------------------------------------------------------------------------------------------
// 6. ScaleDownBlocked

struct BlockedCase {
  const char* name;
  int64_t observed_from;  // the history's first observation (the window is 30 s, now 60)
  int64_t missing_at;     // < 0: none
  uint64_t lag_at_55;     // the lag at t = 55 (target 5,000) on each of `lagging` partitions
  uint32_t lagging;
  bool rising;                      // the rate rises over the last 10 s
  std::vector<const char*> expect;  // substrings, one per reason, in order
};

using ScaleDownBlockedTest = ::testing::TestWithParam<BlockedCase>;

TEST_P(ScaleDownBlockedTest, WhyNothingShrinks) {
  const BlockedCase& c = GetParam();
  TopicSpec spec = BaseSpec();
  spec.scaling.consumer_lag_events = 5000;
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(300));
  for (int64_t t = c.observed_from; t <= 60; ++t) {
    Observation o = Observe(
        map, t, [&](uint32_t) { return 1000.0 + (c.rising && t > 50 ? 100.0 * (t - 50) : 0); });
    if (t == c.missing_at) o.missing.push_back("orders-1: /metrics: connection refused");
    for (uint32_t p = 0; t == 55 && p < c.lagging; ++p) {
      o.partitions[PartitionId(p)].lag = c.lag_at_55;
    }
    h.Add(o);
  }
  const DecideInputs in(spec, h, map, 1, At(60));
  const auto blocked = ScaleDownBlocked(in, ReadLoad(in));
  ASSERT_EQ(blocked.size(), c.expect.size()) << ::testing::PrintToString(blocked);
  for (size_t i = 0; i < blocked.size(); ++i) EXPECT_THAT(blocked[i], HasSubstr(c.expect[i]));
}

const char* const kBacklogWaits = "consumer lag 8,000 above its target 5,000";

INSTANTIATE_TEST_SUITE_P(
    Cases, ScaleDownBlockedTest,
    ::testing::Values(
        BlockedCase{"nothing_blocks", 0, -1, 0, 1, false, {}},
        BlockedCase{"history_shorter_than_the_window",
                    40,
                    -1,
                    0,
                    1,
                    false,
                    {"observing for less than the scale-down window (30 s)"}},
        BlockedCase{"metrics_missing_in_the_window",
                    0,
                    45,
                    0,
                    1,
                    false,
                    {"metrics missing within the scale-down window: orders-1"}},
        BlockedCase{"a_rising_trend", 0, -1, 0, 1, true, {"nothing shrinks on a rising trend"}},
        BlockedCase{"a_backlog_waits", 0, -1, 8000, 1, false, {kBacklogWaits}},
        // Each partition's lag under the target, their sum above it: a backlog all the same.
        BlockedCase{"a_backlog_spread_thin", 0, -1, 2000, 4, false, {kBacklogWaits}},
        BlockedCase{"a_lag_within_its_target", 0, -1, 1000, 4, false, {}}),
    CaseName());

// ---------------------------------------------------------------------------------------------
// 7. PlaceMerges

struct MergesCase {
  const char* name;
  std::vector<double> rates;  // per partition, for the whole window
  uint32_t pmin;
  uint32_t scheduled_partitions;
  uint32_t expect_after;
};

using PlaceMergesTest = ::testing::TestWithParam<MergesCase>;

TEST_P(PlaceMergesTest, ColdNeighboursMergeDownToTheFloor) {
  const MergesCase& c = GetParam();
  TopicSpec spec = BaseSpec();
  spec.partitions.min = c.pmin;
  const PartitionMap map = Initial(static_cast<uint32_t>(c.rates.size()));
  LoadHistory h(seconds(120));
  for (int64_t t = 0; t <= 60; ++t)
    h.Add(Observe(map, t, [&](uint32_t id) { return c.rates[id]; }));
  const DecideInputs in(spec, h, map, 1, At(60));
  Scheduled scheduled;
  scheduled.partitions = c.scheduled_partitions;
  const MergePlan plan = PlaceMerges(in, ReadLoad(in), scheduled);
  EXPECT_EQ(plan.after, c.expect_after) << plan.why;
  uint32_t removed = 0;
  for (const auto& m : plan.merges) {
    removed += static_cast<uint32_t>(m.run.size() - 1);
    EXPECT_LE(m.peak_rate, 4500);
  }
  EXPECT_EQ(plan.after, c.rates.size() - removed);
  if (plan.merges.empty()) {
    EXPECT_THAT(plan.why, IsEmpty());
  } else {
    EXPECT_THAT(plan.why, HasSubstr("cold neighbours"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PlaceMergesTest,
    ::testing::Values(MergesCase{"four_cold_into_one", {1000, 1000, 1000, 1000}, 1, 0, 1},
                      MergesCase{"too_warm_to_merge", {3000, 3000, 3000, 3000}, 1, 0, 4},
                      // Pairs only: three at 1,400 would be 4,200, under 4,500, but two pairs
                      // are where the runs close.
                      MergesCase{"pairs", {2000, 2000, 2000, 2000}, 1, 0, 2},
                      MergesCase{"not_below_partitions_min", {1000, 1000, 1000, 1000}, 3, 0, 3},
                      MergesCase{"not_below_a_schedule", {1000, 1000, 1000, 1000}, 1, 2, 2}),
    CaseName());

// ---------------------------------------------------------------------------------------------
// 8. SizePods

struct SizePodsCase {
  const char* name;
  PodsAsked asked;
  uint32_t after;     // partitions once the decision is carried out
  uint32_t replicas;  // now
  bool may_shrink;
  uint32_t expect;
  std::optional<DecisionKind> expect_kind;
};

using SizePodsTest = ::testing::TestWithParam<SizePodsCase>;

TEST_P(SizePodsTest, UpAtOnceDownToTheWindowsHighest) {
  const SizePodsCase& c = GetParam();
  TopicSpec spec = BaseSpec();  // 4 partitions per replica, 1 to 16 pods
  const PartitionMap map = Initial(c.after);
  LoadHistory h(seconds(120));
  Steady(h, map, 0, 60, 1000);
  const DecideInputs in(spec, h, map, c.replicas, At(60));
  SplitPlan split;
  split.after = c.after;
  const PodsPlan plan = SizePods(in, c.asked, split, c.after, c.may_shrink);
  EXPECT_EQ(plan.replicas, c.expect);
  EXPECT_EQ(plan.kind, c.expect_kind);
  EXPECT_EQ(plan.why.size(), c.expect_kind ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SizePodsTest,
    ::testing::Values(
        SizePodsCase{"by_partitions", {}, 8, 1, true, 2, DecisionKind::kPodsUp},
        SizePodsCase{"by_cpu", {.cpu = 5}, 8, 1, true, 5, DecisionKind::kPodsUp},
        SizePodsCase{"by_lag", {.lag = 3}, 8, 2, true, 3, DecisionKind::kPodsUp},
        SizePodsCase{"by_prediction", {.predicted = 6}, 8, 2, true, 6, DecisionKind::kPodsUp},
        SizePodsCase{
            "never_above_the_partitions", {.cpu = 12}, 8, 1, true, 8, DecisionKind::kPodsUp},
        SizePodsCase{
            "never_above_replicas_max", {.cpu = 40}, 64, 1, true, 16, DecisionKind::kPodsUp},
        SizePodsCase{"down_to_the_partitions", {}, 8, 5, true, 2, DecisionKind::kPodsDown},
        SizePodsCase{"not_down_while_blocked", {}, 8, 5, false, 5, std::nullopt},
        SizePodsCase{
            "not_below_a_schedule", {.scheduled = 4}, 8, 5, true, 4, DecisionKind::kPodsDown},
        SizePodsCase{"holds", {}, 8, 2, true, 2, std::nullopt}),
    CaseName());

}  // namespace
}  // namespace shoal::control
