// The protocol simulation in the suite: a fixed budget of seeds, every invariant checked after
// every action. Longer runs: build/tests/sim/shoal-protocol-sim --seeds 100000.
#include <gtest/gtest.h>

#include "sim/protocol_sim.h"
#include "shoal/common/logging.h"

namespace shoal::sim {
namespace {

// Runs seeds [first, first + count) and reports up to three failing ones.
void RunSeeds(uint64_t first, uint64_t count, int replicated) {
  ASSERT_TRUE(InitLogging("off").ok());
  int failed = 0;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    ScheduleOptions o;
    o.seed = seed;
    o.replicated = replicated;
    auto r = RunSchedule(o);
    if (r.ok()) continue;
    ++failed;
    std::string what;
    for (const auto& v : r.violations) what += "\n  " + v;
    std::string trace;
    for (const auto& t : r.trace) trace += "\n    | " + t;
    ADD_FAILURE() << "seed " << seed << " (replay: shoal-protocol-sim --seed " << seed
                  << (replicated > 0 ? " --replicated on" : " --replicated off")
                  << " --trace):" << what << "\n  last actions:" << trace;
    if (failed >= 3) break;
  }
}

class ProtocolSimTest : public ::testing::TestWithParam<int> {};

// 2,000 seeds in 4 shards of 500, so ctest -j runs them side by side: the change protocol
// without replication, the schedules these seeds always ran.
TEST_P(ProtocolSimTest, EveryInvariantHoldsOnEverySchedule) {
  RunSeeds(1 + static_cast<uint64_t>(GetParam()) * 500, 500, /*replicated=*/0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ProtocolSimTest, ::testing::Values(0, 1, 2, 3));

class ReplicatedProtocolSimTest : public ::testing::TestWithParam<int> {};

// 400 replicated schedules in 2 shards (each about four times the cost of one without
// replication): failovers with fencing (inside changes in progress too), paused and isolated
// leaders, divergent tails, wiped copies, sealed partitions failed over, commits gathered by a
// copy made the leader. Longer runs still find schedules that fail (2 in seeds 1..1000 today,
// see docs/replication.md, "What is not built yet").
TEST_P(ReplicatedProtocolSimTest, EveryInvariantHoldsOnEverySchedule) {
  RunSeeds(1 + static_cast<uint64_t>(GetParam()) * 200, 200, /*replicated=*/1);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ReplicatedProtocolSimTest, ::testing::Values(0, 1));

}  // namespace
}  // namespace shoal::sim
