// The protocol simulation in the suite: a fixed budget of seeds (2,000), every invariant checked
// after every action. Longer runs: build/tests/sim/shoal-protocol-sim --seeds 100000.
#include <gtest/gtest.h>

#include "sim/protocol_sim.h"
#include "shoal/common/logging.h"

namespace shoal::sim {
namespace {

class ProtocolSimTest : public ::testing::TestWithParam<int> {};

// 2,000 seeds in 4 shards of 500, so ctest -j runs them side by side.
TEST_P(ProtocolSimTest, EveryInvariantHoldsOnEverySchedule) {
  ASSERT_TRUE(InitLogging("off").ok());
  const uint64_t first = 1 + static_cast<uint64_t>(GetParam()) * 500;
  int failed = 0;
  for (uint64_t seed = first; seed < first + 500; ++seed) {
    ScheduleOptions o;
    o.seed = seed;
    auto r = RunSchedule(o);
    if (r.ok()) continue;
    ++failed;
    std::string what;
    for (const auto& v : r.violations) what += "\n  " + v;
    std::string trace;
    for (const auto& t : r.trace) trace += "\n    | " + t;
    ADD_FAILURE() << "seed " << seed << " (replay: shoal-protocol-sim --seed " << seed
                  << " --trace):" << what << "\n  last actions:" << trace;
    if (failed >= 3) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, ProtocolSimTest, ::testing::Values(0, 1, 2, 3));

}  // namespace
}  // namespace shoal::sim
