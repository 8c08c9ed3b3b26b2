// The protocol simulation in the suite: a fixed budget of seeds, every invariant checked after
// every action. Longer runs: build/tests/sim/shoal-protocol-sim --seeds 100000.
#include "sim/protocol_sim.h"

#include <gtest/gtest.h>

#include <vector>

#include "shoal/common/logging.h"

namespace shoal::sim {
namespace {

// Runs `seeds` and reports up to three failing ones.
void RunSeedList(const std::vector<uint64_t>& seeds, int replicated, int pods_leave = 0) {
  ASSERT_TRUE(InitLogging("off").ok());
  int failed = 0;
  for (uint64_t seed : seeds) {
    ScheduleOptions o;
    o.seed = seed;
    o.replicated = replicated;
    o.pods_leave = pods_leave;
    auto r = RunSchedule(o);
    if (r.ok()) continue;
    ++failed;
    std::string what;
    for (const auto& v : r.violations) what += "\n  " + v;
    std::string trace;
    for (const auto& t : r.trace) trace += "\n    | " + t;
    ADD_FAILURE() << "seed " << seed << " (replay: shoal-protocol-sim --seed " << seed
                  << (replicated > 0 ? " --replicated on" : " --replicated off")
                  << (pods_leave > 0 ? " --pods-leave" : "") << " --trace):" << what
                  << "\n  last actions:" << trace;
    if (failed >= 3) break;
  }
}

// Runs seeds [first, first + count).
void RunSeeds(uint64_t first, uint64_t count, int replicated) {
  std::vector<uint64_t> seeds;
  for (uint64_t seed = first; seed < first + count; ++seed) seeds.push_back(seed);
  RunSeedList(seeds, replicated);
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
// copy made the leader. Longer runs have found schedules that fail (none in seeds 1..15000
// today, see docs/replication.md, "What is not built yet").
TEST_P(ReplicatedProtocolSimTest, EveryInvariantHoldsOnEverySchedule) {
  RunSeeds(1 + static_cast<uint64_t>(GetParam()) * 200, 200, /*replicated=*/1);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ReplicatedProtocolSimTest, ::testing::Values(0, 1));

// Replicated schedules beyond the suite's budget that found a defect, each kept as a regression:
// a successor that a failover gave to a copy, or whose parent is such a copy, could not be
// seeded and held the change's map back for ever (581, 1548, 2059, 2867, 3505, 4034, 4299); a
// copy sealed for a change that lost kept its seal and, made the leader, took no append (944,
// 1332, 1689); the coordinator dropped a change whose successor had confirmed its seals when a
// sealed parent with copies could not be failed over yet (3319, 4202); 3811 failed with the
// first fix of the first kind only; a successor answered "duplicate" from the state of a parent
// whose sealed end only the copy a failover made its leader held (1309); a copy whose last
// entries were of an epoch its new leader never had kept them (3396); the sim's check of
// invariant 6 took an entry that a wiped leader alone held for stored still (9428), and one a
// replaced leader took again for cut, when the leader that replaced it was wiped and the
// replaced one led again (10619, 10891); 10314 and 10591, reported failing with those, pass
// without a change of their own.
TEST(ReplicatedProtocolSimRegressionTest, SchedulesThatFoundDefectsPass) {
  RunSeedList({581, 944, 1309, 1332, 1548, 1689, 2059, 2867, 3319, 3396, 3505, 3811, 4034, 4202,
               4299, 9428, 10314, 10591, 10619, 10891,
               // A copy refetching after a wipe counted towards a failover's quorum (invariant
               // 10): the coordinator now tells it from a first start by the pod's volume.
               21054, 22259, 25993, 26237, 26888, 27099, 33255, 34819,
               // A successor walked past a replicated parent whose leader lost its volume, as if
               // the parent were lost, and took a retry stored there again (invariant 6).
               15157, 22986, 29876, 34400,
               // A retry answered duplicate from a replaced leader's entry that leads again,
               // whose later copy was cut: the simulation lost track of where it is (25755).
               25755,
               // A wiped leader given again the map that made its partition led it empty at
               // the same leader epoch, and its copy cut an acknowledged event (11).
               58944,
               // A request refused part way (one partition appended, the next fenced) had
               // stored events the simulation did not record: their retries were answered
               // duplicate "stored nowhere" (the simulation's bookkeeping, invariant 6).
               54229, 55202, 72140, 96361,
               // A failover gave a partition back to its old leader after another copy sealed
               // it, at the end its log has: the pod refused the map ("seal it first") for
               // ever; it takes the seal (TakesSealGivenBack, invariant 8).
               36847, 55530, 56472, 59033, 63575,
               // The same with an unacknowledged tail past the seal (80907, 90483), and a
               // failover carried in a change that sealed a parent's new leader at its own end
               // after a successor took writes from the first seal's (87572, 44901: invariants
               // 3, 7): the change keeps the ends its seals were answered with (end_known).
               80907, 90483, 87572, 44901,
               // A pod fenced before its map knew a partition (answered as empty) was made the
               // leader of it sealed, and opened it empty but unsealed (42887).
               42887,
               // A power cut took an unsynced, unacknowledged append of a request refused part
               // way, and the retry stored the event at the very place: the simulation took it
               // for a second append (its bookkeeping, invariant 6).
               51219, 53440,
               // A request refused before it appended anything leaves its results zero, naming
               // p0@0, where the pod's log held the event from before (an entry of a replaced
               // leader, not cut yet): the simulation took it for a second append (its
               // bookkeeping, invariant 6).
               11081, 36046, 85975,
               // A successor whose seeding a power cut took back refused a failover's map
               // carried in a change: its parent's new leader, a copy that holds the map only
               // after it, answered 404 (not yet its leader), and the change stopped there for
               // ever (invariant 8).
               17417,
               // A failover gave a sealed parent back to its old leader together with its
               // successors: they inherited its producer state before it took the seal and cut
               // its unacknowledged tail, and answered retries of the cut events "duplicate",
               // waiting for a quorum past the parent's end (liveness; invariant 6 once the
               // parent retires).
               81124,
               // A successor's owner confirmed its local parent's seal, then was refused the
               // change's map because another parent's leader had lost its volume; that pod did
               // not answer the coordinator, which dropped the change, and the first pod
               // refused every map with its parent active (invariant 8).
               48902,
               // An old leader never fenced answered a retry "duplicate" for events a quorum
               // held, after the new leader (a full copy when chosen) lost its volume: the
               // simulation compared with what the new leader holds now (its bookkeeping,
               // invariant 10).
               204484},
              /*replicated=*/1);
}

// Replicated schedules in which changes place copies off one pod at a time (--pods-leave: a pod
// that leaves) that found a defect: an old leader that a failover replaced and the next map
// placed off the partition refused every map from then on (186: invariant 8). With pods leaving
// the simulation still fails about 8 seeds in 100 (docs/replication.md, "What is not built
// yet"), so the suite runs these only.
TEST(PodsLeaveProtocolSimRegressionTest, SchedulesThatFoundDefectsPass) {
  RunSeedList({186}, /*replicated=*/1, /*pods_leave=*/1);
}

}  // namespace
}  // namespace shoal::sim
