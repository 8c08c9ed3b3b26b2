// Decide + plan at scale: the policy and the planner must decide and plan a 10,000-partition
// topic in under 50 ms. Each iteration runs the control loop's work for one decision: Decide over
// a history of observations, MakePlan, and resolving the plan's first change (the composed map
// with every split). Run:
//   build/bench/micro/shoal_micro_decide_plan_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <random>

#include "shoal/common/partition_map.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/planner.h"
#include "shoal/control/policy.h"

namespace {

using namespace shoal;
using namespace shoal::control;

TopicSpec Spec(uint32_t cap) {
  TopicSpec s;
  s.name = "clicks";
  s.partitions = {.min = 100, .max = cap, .initial = 10000};
  s.replicas = {.min = 10, .max = 5000};
  s.scaling.events_per_second_per_partition = 1000;
  s.scaling.partitions_per_replica = 8;
  s.scale_down.stabilization_window_seconds = 300;
  return s;
}

// A 10,000-partition map over 1,250 pods and a 5-minute history at one observation per second,
// every partition at `base` times its target (with a little noise), then at `last` times it.
struct World {
  PartitionMap map;
  LoadHistory history{std::chrono::seconds(360)};
  SteadyTime now{};

  World(uint32_t partitions, double base, double last) {
    std::vector<PodName> pods;
    for (uint32_t i = 0; i < 1250; ++i) pods.push_back(PodFor("clicks", i));
    map = *PartitionMap::Initial("clicks", partitions, pods);
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<double> noise(0.95, 1.05);
    for (int t = 0; t <= 300; ++t) {
      Observation o;
      o.at = SteadyTime{} + std::chrono::seconds(t);
      o.epoch = map.epoch();
      for (const auto& p : map.partitions()) {
        PartitionLoad l;
        l.id = p.id;
        l.rate = 1000 * (t == 300 ? last : base) * noise(rng);
        l.buckets.fill(1.0 / kLoadBuckets);
        o.partitions[p.id] = l;
      }
      history.Add(o);
      now = o.at;
    }
  }
};

void DecideAndPlan(benchmark::State& state, double base, double last) {
  const TopicSpec spec = Spec(20000);
  World w(static_cast<uint32_t>(state.range(0)), base, last);
  size_t parts = w.map.active_count();
  for (auto _ : state) {
    Decision d = Decide(spec, w.history, w.map, 1250, w.now);
    Plan plan = MakePlan(w.map, d, 1250);
    if (!plan.steps.empty() && plan.steps[0].kind == PlanStep::Kind::kChange) {
      auto next = ResolveChange(plan.steps[0], w.map, {}, {}, {});
      if (!next.ok()) state.SkipWithError(next.status().message().c_str());
      parts = next->active_count();
    }
    benchmark::DoNotOptimize(d);
  }
  state.counters["partitions_after"] = static_cast<double>(parts);
}

// The surge: every partition at 1.8x its target: thousands of splits composed into one change.
void BM_DecidePlanSurge(benchmark::State& state) { DecideAndPlan(state, 0.8, 1.8); }
// Steady: within tolerance, the decision holds (the loop's cost on most ticks).
void BM_DecideHold(benchmark::State& state) { DecideAndPlan(state, 0.8, 1.0); }
// After a surge: everything cold for the whole window, runs of neighbours merge.
void BM_DecidePlanMerge(benchmark::State& state) { DecideAndPlan(state, 0.2, 0.2); }

BENCHMARK(BM_DecidePlanSurge)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecideHold)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecidePlanMerge)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
