// Tests of the change planner (control/src/planner/planner.cc): MakePlan's step order,
// Rebalance, ResolveChange, the plan's JSON and the pod naming helpers.
#include "shoal/control/planner.h"
#include "shoal/control/retirement.h"
#include "shoal/control/admin_partitions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace shoal::control {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Kind = PlanStep::Kind;

template <typename T>
T Must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

std::vector<PodName> Pods(uint32_t n) {
  std::vector<PodName> pods;
  for (uint32_t i = 0; i < n; ++i) pods.push_back(PodFor("orders", i));
  return pods;
}

// `count` partitions round-robin over pods orders-0..orders-(pods-1).
PartitionMap Spread(uint32_t count, uint32_t pods) {
  return Must(PartitionMap::Initial("orders", count, Pods(pods)));
}

PartitionMap Apply(const PartitionMap& map,
                   const std::vector<std::pair<PartitionId, PodName>>& moves) {
  MapChange change(map);
  for (const auto& [id, to] : moves) {
    const Status s = change.Move(id, to);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return Must(change.Build());
}

// Load per pod ordinal over the active partitions. A moved partition's successor (a new id)
// carries its parent's rate; unknown rates count 0.
std::map<int64_t, double> LoadByPod(const PartitionMap& map,
                                    const std::map<PartitionId, double>& rates) {
  std::map<int64_t, double> load;
  for (const auto& p : map.partitions()) {
    if (!p.active()) continue;
    auto it = rates.find(p.id);
    if (it == rates.end() && p.parents.size() == 1) it = rates.find(p.parents[0]);
    load[OrdinalOf("orders", p.owner)] += it == rates.end() ? 0 : it->second;
  }
  return load;
}

std::map<int64_t, int> CountByPod(const PartitionMap& map) {
  std::map<int64_t, int> n;
  for (const auto& p : map.partitions()) {
    if (p.active()) ++n[OrdinalOf("orders", p.owner)];
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// PodFor and OrdinalOf

TEST(PodNamingTest, PodForNamesLikeAStatefulSet) {
  EXPECT_EQ(PodFor("orders", 0), PodName("orders-0"));
  EXPECT_EQ(PodFor("orders", 12), PodName("orders-12"));
  EXPECT_EQ(PodFor("my-topic", 3), PodName("my-topic-3"));
  for (uint32_t i : {0u, 1u, 9u, 10u, 4294967295u}) {
    EXPECT_EQ(OrdinalOf("orders", PodFor("orders", i)), int64_t{i});
  }
}

struct OrdinalCase {
  const char* topic;
  const char* pod;
  int64_t ordinal;
};

class OrdinalOfTest : public ::testing::TestWithParam<OrdinalCase> {};

TEST_P(OrdinalOfTest, ParsesOnlyTopicDashDigits) {
  EXPECT_EQ(OrdinalOf(GetParam().topic, PodName(GetParam().pod)), GetParam().ordinal)
      << GetParam().pod;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OrdinalOfTest,
    ::testing::Values(OrdinalCase{"orders", "orders-0", 0}, OrdinalCase{"orders", "orders-7", 7},
                      OrdinalCase{"my-topic", "my-topic-3", 3},
                      OrdinalCase{"orders", "orders-", -1}, OrdinalCase{"orders", "orders", -1},
                      OrdinalCase{"orders", "orders-1a", -1},
                      OrdinalCase{"orders", "orders--1", -1},
                      OrdinalCase{"orders", "orders-+1", -1}, OrdinalCase{"orders", "orders_1", -1},
                      OrdinalCase{"orders", "order-1", -1}, OrdinalCase{"orders", "ordersx-1", -1},
                      OrdinalCase{"orders", "clicks-1", -1}, OrdinalCase{"orders", "", -1},
                      OrdinalCase{"orders", "orders-99999999999999999999999", -1},
                      OrdinalCase{"my", "my-topic-3", -1}));

// ---------------------------------------------------------------------------------------------
// MakePlan

struct ExpectStep {
  Kind kind;
  uint32_t pods;
  bool splits = false;
  bool merges = false;
  bool rebalance = false;
  bool retire = false;
};

struct PlanCase {
  const char* name;
  uint32_t pods;      // now
  uint32_t replicas;  // the decision's
  bool split;
  bool merge;
  std::vector<ExpectStep> steps;
};

void PrintTo(const PlanCase& c, std::ostream* os) { *os << c.name; }

class MakePlanTest : public ::testing::TestWithParam<PlanCase> {};

TEST_P(MakePlanTest, OrdersTheSteps) {
  const PlanCase& c = GetParam();
  const PartitionMap map = Spread(4, std::max(1u, c.pods));
  Decision d;
  d.reason = "because";
  d.replicas = c.replicas;
  d.partitions = 4;
  if (c.split) {
    const HashRange r = map.Find(PartitionId(1))->range;
    d.splits.push_back({PartitionId(1), {r.lo + r.Width() / 3, r.lo + 2 * r.Width() / 3}, 15000});
    d.partitions += 2;
    d.kinds.push_back(DecisionKind::kSplit);
  }
  if (c.merge) {
    d.merges.push_back({{PartitionId(2), PartitionId(3)}, 900});
    d.partitions -= 1;
    d.kinds.push_back(DecisionKind::kMerge);
  }
  const Plan plan = MakePlan(map, d, c.pods);
  EXPECT_EQ(plan.next, 0u);
  ASSERT_EQ(plan.steps.size(), c.steps.size());
  EXPECT_EQ(plan.done(), c.steps.empty());
  for (size_t i = 0; i < c.steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i) + " " + plan.steps[i].what);
    const PlanStep& s = plan.steps[i];
    const ExpectStep& e = c.steps[i];
    EXPECT_EQ(ToString(s.kind), ToString(e.kind));
    EXPECT_EQ(s.pods, e.pods);
    EXPECT_EQ(!s.splits.empty(), e.splits);
    EXPECT_EQ(!s.merges.empty(), e.merges);
    EXPECT_EQ(s.rebalance, e.rebalance);
    EXPECT_EQ(s.retire, e.retire);
    EXPECT_EQ(s.state, PlanStep::State::kPending);
    EXPECT_EQ(s.attempts, 0);
    EXPECT_TRUE(s.target.empty());
    EXPECT_FALSE(s.what.empty());
    if (e.splits) {
      ASSERT_EQ(s.splits.size(), 1u);
      EXPECT_EQ(s.splits[0].partition, PartitionId(1));
      EXPECT_EQ(s.splits[0].cuts, d.splits[0].cuts);
    }
    if (e.merges) {
      ASSERT_EQ(s.merges.size(), 1u);
      EXPECT_THAT(s.merges[0].run, ElementsAre(PartitionId(2), PartitionId(3)));
    }
  }
  if (!c.steps.empty()) {
    EXPECT_EQ(plan.reason, "because");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MakePlanTest,
    ::testing::Values(
        PlanCase{"nothing", 2, 2, false, false, {}},
        PlanCase{"replicas_zero_means_unchanged", 2, 0, false, false, {}},
        // Scale-up: ask for the pods first (they take longest), split in place meanwhile (fast
        // relief), then move onto the pods once they are ready.
        PlanCase{"split_and_pods_up",
                 1,
                 3,
                 true,
                 false,
                 {{Kind::kSetPods, 3},
                  {Kind::kChange, 1, true},
                  {Kind::kWaitReady, 3},
                  {Kind::kChange, 3, false, false, true}}},
        PlanCase{
            "pods_up_only",
            2,
            4,
            false,
            false,
            {{Kind::kSetPods, 4}, {Kind::kWaitReady, 4}, {Kind::kChange, 4, false, false, true}}},
        PlanCase{"split_same_pods",
                 2,
                 2,
                 true,
                 false,
                 {{Kind::kChange, 2, true}, {Kind::kChange, 2, false, false, true}}},
        // Scale-down: merge, empty the leaving pods, wait, retire, drain, and only then fewer pods.
        PlanCase{"merge_and_pods_down",
                 3,
                 1,
                 false,
                 true,
                 {{Kind::kChange, 3, false, true},
                  {Kind::kChange, 1, false, false, true},
                  {Kind::kWaitConsumed, 1},
                  {Kind::kChange, 1, false, false, false, true},
                  {Kind::kDrain, 1},
                  {Kind::kSetPods, 1}}},
        PlanCase{"pods_down_only",
                 4,
                 2,
                 false,
                 false,
                 {{Kind::kChange, 2, false, false, true},
                  {Kind::kWaitConsumed, 2},
                  {Kind::kChange, 2, false, false, false, true},
                  {Kind::kDrain, 2},
                  {Kind::kSetPods, 2}}},
        PlanCase{"merge_same_pods",
                 2,
                 2,
                 false,
                 true,
                 {{Kind::kChange, 2, false, true}, {Kind::kChange, 2, false, false, true}}}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Rebalance

TEST(RebalanceTest, EmptiesEveryPodAtOrAboveTheCount) {
  const PartitionMap map = Spread(12, 5);  // orders-0..orders-4, 2 or 3 partitions each
  std::map<PartitionId, double> rates;
  for (uint32_t i = 0; i < 12; ++i) rates[PartitionId(i)] = 1000;
  const auto moves = Rebalance(map, rates, 3);
  std::set<uint32_t> moved;
  for (const auto& [id, to] : moves) {
    EXPECT_TRUE(moved.insert(id.value()).second) << "partition " << id.value() << " moved twice";
    const int64_t o = OrdinalOf("orders", to);
    EXPECT_GE(o, 0);
    EXPECT_LT(o, 3);
  }
  const PartitionMap after = Apply(map, moves);
  const auto counts = CountByPod(after);
  EXPECT_EQ(counts.size(), 3u);
  for (const auto& [pod, n] : counts) {
    EXPECT_LT(pod, 3);
    EXPECT_EQ(n, 4) << "pod " << pod;
  }
}

TEST(RebalanceTest, VacatesOnePodThatStaysAndSpreadsItsPartitionsOverTheOthers) {
  const PartitionMap map = Spread(12, 4);  // 3 each
  std::map<PartitionId, double> rates;
  for (uint32_t i = 0; i < 12; ++i) rates[PartitionId(i)] = 1000;
  const PartitionMap after = Apply(map, Rebalance(map, rates, 4, 0.25, 0, 1u));
  const auto counts = CountByPod(after);
  EXPECT_EQ(counts.count(1), 0u) << "pod 1 still owns partitions";
  for (int64_t pod : {0, 2, 3}) EXPECT_EQ(counts.at(pod), 4) << "pod " << pod;
  // The only pod cannot be vacated: nothing moves.
  EXPECT_TRUE(Rebalance(Spread(3, 1), rates, 1, 0.25, 0, 0u).empty());
}

TEST(MakeRollPlanTest, EachOutdatedPodIsEmptiedConsumedRetiredThenRestarted) {
  const Plan plan = MakeRollPlan({2, 0}, 3);
  std::vector<std::string> kinds;
  for (const auto& s : plan.steps) {
    kinds.push_back(std::string(ToString(s.kind)) +
                    (s.vacate ? "@" + std::to_string(*s.vacate) : "") +
                    (s.rebalance ? "+move" : "") + (s.retire ? "+retire" : ""));
    EXPECT_EQ(s.pods, 3u) << s.what;
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{
                       "change@2+move", "wait_consumed@2", "change+retire", "restart@2",
                       "change@0+move", "wait_consumed@0", "change+retire", "restart@0",
                       "change+move"}));
  EXPECT_NE(plan.reason.find("old template (2, 0)"), std::string::npos) << plan.reason;
  EXPECT_TRUE(MakeRollPlan({}, 3).steps.empty());
}

TEST(MakeRollPlanTest, OnePodBorrowsASecondForTheRollAndGivesItBack) {
  const Plan plan = MakeRollPlan({0}, 1);
  std::vector<std::string> kinds;
  for (const auto& s : plan.steps) {
    kinds.push_back(std::string(ToString(s.kind)) + std::to_string(s.pods) +
                    (s.vacate ? "@" + std::to_string(*s.vacate) : ""));
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"set_pods2", "wait_ready2", "change2@0",
                                             "wait_consumed2@0", "change2", "restart2@0",
                                             "change1", "wait_consumed1", "change1", "drain1",
                                             "set_pods1"}));
}

TEST(RebalanceTest, EvacuatesOwnersOutsideTheTopicsPods) {
  const PartitionMap map = Must(PartitionMap::Initial(
      "orders", 4, {PodName("orders-0"), PodName("stranger"), PodName("orders-1"), PodName("x")}));
  const auto moves = Rebalance(map, {}, 2);
  const PartitionMap after = Apply(map, moves);
  for (uint32_t i : after.active_in_order()) {
    const int64_t o = OrdinalOf("orders", after.partitions()[i].owner);
    EXPECT_TRUE(o == 0 || o == 1) << after.partitions()[i].owner.value();
  }
  EXPECT_EQ(moves.size(), 2u);
}

struct BalanceCase {
  const char* name;
  uint32_t count;
  uint32_t on_pods;           // partitions start round-robin over this many pods
  uint32_t pods;              // balance over this many
  std::vector<double> rates;  // by partition id; empty: no rates known
};

void PrintTo(const BalanceCase& c, std::ostream* os) { *os << c.name; }

class RebalanceBalanceTest : public ::testing::TestWithParam<BalanceCase> {};

TEST_P(RebalanceBalanceTest, SpreadsLoadWithinTheSlack) {
  const BalanceCase& c = GetParam();
  const PartitionMap map = Spread(c.count, c.on_pods);
  std::map<PartitionId, double> rates;
  for (uint32_t i = 0; i < c.rates.size(); ++i) rates[PartitionId(i)] = c.rates[i];
  const auto moves = Rebalance(map, rates, c.pods);
  EXPECT_LE(moves.size(), c.count);
  const PartitionMap after = Apply(map, moves);
  if (c.rates.empty()) {
    // Idle partitions spread by count.
    const auto counts = CountByPod(after);
    int lo = INT32_MAX, hi = 0;
    for (int64_t pod = 0; pod < c.pods; ++pod) {
      const int n = counts.count(pod) ? counts.at(pod) : 0;
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    EXPECT_LE(hi - lo, 1);
    return;
  }
  const auto load = LoadByPod(after, rates);
  double lo = 1e300, hi = 0, sum = 0;
  for (int64_t pod = 0; pod < c.pods; ++pod) {
    const double l = load.count(pod) ? load.at(pod) : 0;
    lo = std::min(lo, l);
    hi = std::max(hi, l);
    sum += l;
  }
  // Greedy, one move per partition: not the optimum, but every pod within 25% of the mean.
  const double mean = sum / c.pods;
  EXPECT_LE(hi, 1.25 * mean) << "max " << hi << " min " << lo << " after " << moves.size();
  EXPECT_GE(lo, 0.75 * mean) << "max " << hi << " min " << lo << " after " << moves.size();
  EXPECT_EQ(load.size(), c.pods);  // nothing left on other pods
}

std::vector<double> Ramp(uint32_t n, double step) {
  std::vector<double> r;
  for (uint32_t i = 0; i < n; ++i) r.push_back(step * (i + 1));
  return r;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RebalanceBalanceTest,
    ::testing::Values(BalanceCase{"all_on_one_pod_equal", 16, 1, 4, std::vector<double>(16, 500)},
                      BalanceCase{"all_on_one_pod_ramp", 16, 1, 4, Ramp(16, 100)},
                      BalanceCase{"two_pods_to_four_ramp", 32, 2, 4, Ramp(32, 37)},
                      BalanceCase{"eight_pods_to_three", 24, 8, 3, Ramp(24, 10)},
                      BalanceCase{"idle_all_on_one_pod", 8, 1, 4, {}},
                      BalanceCase{"idle_uneven_count", 10, 1, 3, {}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RebalanceTest, NoMovesWhenAlreadyBalanced) {
  struct Case {
    uint32_t count, pods;
    std::vector<double> rates;
  };
  for (const Case& c : {Case{8, 4, std::vector<double>(8, 1000)}, Case{8, 4, {}},
                        // Within the 25% slack of the mean: 1,000 vs 1,100 per pod.
                        Case{4, 2, {500, 500, 500, 600}}, Case{3, 3, {5, 7000, 20}}}) {
    SCOPED_TRACE(std::to_string(c.count) + " partitions over " + std::to_string(c.pods));
    std::map<PartitionId, double> rates;
    for (uint32_t i = 0; i < c.rates.size(); ++i) rates[PartitionId(i)] = c.rates[i];
    EXPECT_THAT(Rebalance(Spread(c.count, c.pods), rates, c.pods), IsEmpty());
  }
}

TEST(RebalanceTest, HonoursMaxMovesAndZeroPods) {
  const PartitionMap map = Spread(16, 1);
  std::map<PartitionId, double> rates;
  for (uint32_t i = 0; i < 16; ++i) rates[PartitionId(i)] = 100;
  EXPECT_EQ(Rebalance(map, rates, 4, 0.25, 3).size(), 3u);
  EXPECT_THAT(Rebalance(map, rates, 0), IsEmpty());
  EXPECT_GT(Rebalance(map, rates, 4).size(), 3u);
}

// Rebalance's contract: "At most `max_moves` (0: unlimited), evacuations first": the limit
// bounds the whole list, evacuations taking the first places.
TEST(RebalanceTest, MaxMovesAlsoBoundsEvacuations) {
  const PartitionMap map = Spread(8, 4);  // 2 partitions on each of orders-0..orders-3
  std::map<PartitionId, double> rates;
  for (uint32_t i = 0; i < 8; ++i) rates[PartitionId(i)] = 100;
  const auto moves = Rebalance(map, rates, 2, 0.25, 2);  // 4 partitions on pods 2, 3 to move
  EXPECT_EQ(moves.size(), 2u);
  for (const auto& [id, to] : moves) {
    const int64_t from = OrdinalOf("orders", map.Find(id)->owner);
    EXPECT_GE(from, 2) << "an evacuation comes first";
  }
}

TEST(RebalanceTest, IgnoresSealedPartitions) {
  PartitionMap map = Spread(2, 1);
  map = Must(map.Split(PartitionId(0), 1000));  // 0 sealed on orders-0; 2, 3 active
  const auto moves = Rebalance(map, {{PartitionId(0), 1e9}, {PartitionId(1), 10}, {PartitionId(2), 10}, {PartitionId(3), 10}}, 3);
  for (const auto& [id, to] : moves) EXPECT_NE(id, PartitionId(0));
  const PartitionMap after = Apply(map, moves);
  EXPECT_EQ(CountByPod(after).size(), 3u);
}

// ---------------------------------------------------------------------------------------------
// ResolveChange

PlanStep ChangeStep(uint32_t pods) {
  PlanStep s;
  s.kind = Kind::kChange;
  s.what = "test";
  s.pods = pods;
  return s;
}

TEST(ResolveChangeTest, AppliesASplitStep) {
  const PartitionMap map = Spread(2, 1);
  const HashRange r = map.Find(PartitionId(1))->range;
  PlanStep s = ChangeStep(1);
  s.splits.push_back({PartitionId(1), {r.lo + 100, r.lo + 200}, 15000});
  const PartitionMap next = Must(ResolveChange(s, map, {}, {}, {}));
  EXPECT_TRUE(next.Validate().ok());
  EXPECT_EQ(next.epoch(), Epoch(2));
  EXPECT_FALSE(next.Find(PartitionId(1))->active());
  EXPECT_EQ(next.active_count(), 4u);
  EXPECT_EQ(next.Find(PartitionId(2))->range, (HashRange{r.lo, r.lo + 100}));
  EXPECT_EQ(next.Find(PartitionId(3))->range, (HashRange{r.lo + 100, r.lo + 200}));
  EXPECT_EQ(next.Find(PartitionId(4))->range, (HashRange{r.lo + 200, r.hi}));
  EXPECT_THAT(next.Find(PartitionId(4))->parents, ElementsAre(PartitionId(1)));
}

TEST(ResolveChangeTest, ALostPodStepDeclaresItsPartitionsLostAndNothingElse) {
  const PartitionMap map = Spread(4, 2);  // orders-0 and orders-1, two partitions each
  PlanStep s = ChangeStep(2);
  s.lost_pod = "orders-1";
  s.rebalance = true;  // ignored: a recovery is a change of its own
  const PartitionMap next = Must(ResolveChange(s, map, {}, {}, {}));
  EXPECT_EQ(next, Must(map.DeclareLost(PodName("orders-1"))));
  size_t lost = 0;
  for (const auto& p : next.partitions()) lost += p.lost ? 1 : 0;
  EXPECT_EQ(lost, 2u);
}

TEST(RetirablePartitionsTest, ALostPartitionRetiresAfterItsParentsWithoutAReport) {
  // p0 on orders-0 moves to orders-1 (p2), p1 stays; orders-1 is then emptied: p2 is lost, p3
  // takes its range. p2 waits for p0 (sealed, unconsumed); once p0 is consumed both retire, p0
  // first, and p2 needs no report (nobody holds it).
  PartitionMap m = Spread(2, 1);
  m = Must(Must(m.Move(PartitionId(0), PodName("orders-1"))).WithEndOffset(PartitionId(0), 5));
  m = Must(m.DeclareLost(PodName("orders-1")));
  ASSERT_TRUE(m.Find(PartitionId(2))->lost);
  auto report = [&](uint64_t committed) {
    std::map<std::string, AdminPartitionsReport> reports;
    for (const std::string pod : {"orders-0", "orders-1"}) {
      AdminPartitionsReport r;
      r.pod = pod;
      r.groups = {"g"};
      for (const auto& p : m.partitions()) {
        if (p.owner.value() != pod || p.lost) continue;
        AdminPartition a;
        a.id = p.id;
        a.state = p.state;
        a.end_offset = p.active() ? 0 : p.end_offset;
        a.producers_durable = true;
        a.commits["g"] = committed;
        r.partitions.push_back(a);
      }
      reports.emplace(pod, r);
    }
    return reports;
  };
  EXPECT_TRUE(RetirablePartitions(m, report(0)).empty()) << "p0 unconsumed holds p2 back";
  EXPECT_THAT(RetirablePartitions(m, report(5)), ElementsAre(PartitionId(0), PartitionId(2)));
}

TEST(ResolveChangeTest, DropsASplitOrMergeWhosePartitionIsNoLongerActive) {
  // The step was planned on the 2-partition map; meanwhile partition 1 was split.
  const PartitionMap planned_on = Spread(2, 1);
  const PartitionMap current = Must(planned_on.Split(PartitionId(1), (kHashSpace * 3) / 4));
  PlanStep s = ChangeStep(1);
  s.splits.push_back({PartitionId(1), {kHashSpace / 2 + 10}, 15000});
  s.splits.push_back({PartitionId(9), {10}, 15000});  // never existed (or retired)
  s.merges.push_back({{PartitionId(0), PartitionId(1)}, 10});
  const PartitionMap next = Must(ResolveChange(s, current, {}, {}, {}));
  // The intent is already met: the map is the current one at the next epoch.
  EXPECT_EQ(next, current.Reissued(Epoch(current.epoch().value() + 1)));
}

TEST(ResolveChangeTest, AppliesMergeRunsThatAreStillActive) {
  const PartitionMap map = Spread(4, 2);
  PlanStep s = ChangeStep(2);
  s.merges.push_back({{PartitionId(0), PartitionId(1), PartitionId(2)}, 10});
  const PartitionMap next = Must(ResolveChange(s, map, {}, {}, {}));
  EXPECT_EQ(next.active_count(), 2u);
  const PartitionInfo* merged = next.Find(PartitionId(4));
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(merged->range, (HashRange{0, map.Find(PartitionId(2))->range.hi}));
  EXPECT_THAT(merged->parents, ElementsAre(PartitionId(0), PartitionId(1), PartitionId(2)));
}

TEST(ResolveChangeTest, ReportsAnImpossibleSplitAsAnError) {
  const PartitionMap map = Spread(2, 1);
  PlanStep s = ChangeStep(1);
  s.splits.push_back({PartitionId(0), {kHashSpace / 2 + 10}, 1});  // beyond partition 0's range
  auto next = ResolveChange(s, map, {}, {}, {});
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), Status::Code::kInvalidArgument);
}

TEST(ResolveChangeTest, RebalanceMovesOntoNewPodsAndAddsTheirPeers) {
  const PartitionMap map = Spread(4, 1).WithPeer(PodFor("orders", 0), {"h0:1", "h0:2"});
  PlanStep s = ChangeStep(2);
  s.rebalance = true;
  const std::map<std::string, PeerAddress> peers = {{"orders-1", {"h1:1", "h1:2"}}};
  const std::map<PartitionId, double> rates = {{PartitionId(0), 100}, {PartitionId(1), 100}, {PartitionId(2), 100}, {PartitionId(3), 100}};
  const PartitionMap next = Must(ResolveChange(s, map, rates, {}, peers));
  EXPECT_EQ(next.epoch(), Epoch(2));
  ASSERT_NE(next.Peer(PodFor("orders", 1)), nullptr);
  EXPECT_EQ(*next.Peer(PodFor("orders", 1)), (PeerAddress{"h1:1", "h1:2"}));
  ASSERT_NE(next.Peer(PodFor("orders", 0)), nullptr);
  const auto counts = CountByPod(next);
  EXPECT_EQ(counts.at(0), 2);
  EXPECT_EQ(counts.at(1), 2);
  // Resolving the same step again on its result (with the successors' rates) changes nothing.
  std::map<PartitionId, double> next_rates;
  for (uint32_t i : next.active_in_order()) next_rates[next.partitions()[i].id] = 100;
  const PartitionMap again = Must(ResolveChange(s, next, next_rates, {}, peers));
  EXPECT_EQ(again, next.Reissued(Epoch(3)));
}

// The map of the retire cases: 3 partitions on orders-0..orders-2 with their peers, then
// partition 2 moved off orders-2 (so orders-2 owns only the sealed partition 2) and partition 1
// moved off orders-1 (sealed 1 on orders-1, successor 4 on orders-0).
PartitionMap RetireFixture() {
  PartitionMap m = Spread(3, 3);
  for (uint32_t i = 0; i < 3; ++i) {
    m = m.WithPeer(PodFor("orders", i), {"d" + std::to_string(i), "a" + std::to_string(i)});
  }
  m = Must(m.Move(PartitionId(2), PodFor("orders", 0)));  // 3 <- 2
  m = Must(m.Move(PartitionId(1), PodFor("orders", 0)));  // 4 <- 1
  return m;
}

struct RetireCase {
  const char* name;
  uint32_t pods;  // step.pods: pods at or above it are leaving
  std::vector<uint32_t> retirable;
  std::vector<uint32_t> gone;      // partitions no longer in the map
  std::vector<std::string> peers;  // peers left
};

void PrintTo(const RetireCase& c, std::ostream* os) { *os << c.name; }

class ResolveRetireTest : public ::testing::TestWithParam<RetireCase> {};

TEST_P(ResolveRetireTest, RetiresSealedPartitionsAndDropsPeersOfEmptyLeavingPods) {
  const RetireCase& c = GetParam();
  const PartitionMap base = RetireFixture();
  PlanStep s = ChangeStep(c.pods);
  s.retire = true;
  std::vector<PartitionId> retirable;
  for (uint32_t id : c.retirable) retirable.emplace_back(id);
  const PartitionMap next = Must(ResolveChange(s, base, {}, retirable, {}));
  EXPECT_TRUE(next.Validate().ok()) << next.Validate().ToString();
  EXPECT_EQ(next.epoch(), Epoch(base.epoch().value() + 1));
  for (const auto& p : base.partitions()) {
    const bool gone = std::find(c.gone.begin(), c.gone.end(), p.id.value()) != c.gone.end();
    EXPECT_EQ(next.Find(p.id) == nullptr, gone) << "partition " << p.id.value();
  }
  std::vector<std::string> peers;
  for (const auto& [pod, addr] : next.peers()) peers.push_back(pod);
  EXPECT_EQ(peers, c.peers);
  // Active partitions are never retired.
  EXPECT_EQ(next.active_count(), base.active_count());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ResolveRetireTest,
    ::testing::Values(
        // orders-2 leaves; its sealed partition 2 is consumed: retired, and its peer dropped.
        RetireCase{"leaving_pod_emptied", 2, {2}, {2}, {"orders-0", "orders-1"}},
        // Partition 2 not yet consumed: orders-2 still owns it and keeps its address.
        RetireCase{"leaving_pod_still_owns_a_sealed_partition",
                   2,
                   {},
                   {},
                   {"orders-0", "orders-1", "orders-2"}},
        // Pods 1 and 2 leave; only partition 1 is consumed: orders-1 is dropped, orders-2 not.
        RetireCase{"two_leaving_one_emptied", 1, {1}, {1}, {"orders-0", "orders-2"}},
        RetireCase{"two_leaving_both_emptied", 1, {1, 2}, {1, 2}, {"orders-0"}},
        // A pod that stays keeps its address even if it owns nothing.
        RetireCase{"staying_pod_kept", 3, {1, 2}, {1, 2}, {"orders-0", "orders-1", "orders-2"}},
        // Active or unknown ids among the retirable are skipped, not errors.
        RetireCase{"active_and_unknown_skipped", 2, {0, 3, 2, 99}, {2}, {"orders-0", "orders-1"}}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// A plan carried out step by step: every change step resolved on the map the previous one made.

struct Walk {
  PartitionMap map;
  std::vector<std::string> kinds;
};

Walk Execute(PartitionMap map, const Plan& plan, const std::map<std::string, PeerAddress>& peers) {
  Walk w{std::move(map), {}};
  for (const PlanStep& s : plan.steps) {
    w.kinds.emplace_back(ToString(s.kind));
    if (s.kind != Kind::kChange) continue;
    // Every sealed partition counts as consumed by the time a retire step runs.
    std::vector<PartitionId> retirable;
    for (const auto& p : w.map.partitions()) {
      if (!p.active()) retirable.push_back(p.id);
    }
    auto next = ResolveChange(s, w.map, {}, retirable, peers);
    EXPECT_TRUE(next.ok()) << s.what << ": " << next.status().ToString();
    if (!next.ok()) break;
    EXPECT_TRUE(next->Validate().ok()) << s.what;
    w.map = *next;
  }
  return w;
}

TEST(PlanExecutionTest, ScaleUpSplitsThenSpreadsOverTheNewPods) {
  const PartitionMap base = Spread(2, 1).WithPeer(PodFor("orders", 0), {"d0", "a0"});
  Decision d;
  d.reason = "surge";
  d.replicas = 3;
  d.partitions = 6;
  for (uint32_t id : {0u, 1u}) {
    const HashRange r = base.Find(PartitionId(id))->range;
    d.splits.push_back({PartitionId(id), {r.lo + r.Width() / 3, r.lo + 2 * r.Width() / 3}, 1});
  }
  const Plan plan = MakePlan(base, d, 1);
  const Walk w =
      Execute(base, plan, {{"orders-1", PeerAddress{"d1", "a1"}}, {"orders-2", {"d2", "a2"}}});
  EXPECT_THAT(w.kinds, ElementsAre("set_pods", "change", "wait_ready", "change"));
  EXPECT_EQ(w.map.active_count(), 6u);
  EXPECT_EQ(w.map.epoch(), Epoch(3));  // one epoch per change step
  const auto counts = CountByPod(w.map);
  EXPECT_EQ(counts.size(), 3u);
  for (const auto& [pod, n] : counts) EXPECT_EQ(n, 2) << "pod " << pod;
  EXPECT_EQ(w.map.peers().size(), 3u);
}

TEST(PlanExecutionTest, ScaleDownMergesEmptiesRetiresAndDropsTheLeavingPods) {
  PartitionMap base = Spread(8, 4);
  for (uint32_t i = 0; i < 4; ++i) {
    base = base.WithPeer(PodFor("orders", i), {"d" + std::to_string(i), "a"});
  }
  Decision d;
  d.reason = "cold";
  d.replicas = 2;
  d.partitions = 7;
  d.merges.push_back({{PartitionId(0), PartitionId(1)}, 10});
  const Plan plan = MakePlan(base, d, 4);
  const Walk w = Execute(base, plan, {});
  EXPECT_THAT(w.kinds,
              ElementsAre("change", "change", "wait_consumed", "change", "drain", "set_pods"));
  EXPECT_EQ(w.map.active_count(), 7u);
  for (const auto& p : w.map.partitions()) {
    EXPECT_TRUE(p.active()) << "sealed partition " << p.id.value() << " was not retired";
    const int64_t o = OrdinalOf("orders", p.owner);
    EXPECT_TRUE(o == 0 || o == 1) << "partition " << p.id.value() << " on " << p.owner.value();
  }
  std::vector<std::string> peers;
  for (const auto& [pod, addr] : w.map.peers()) peers.push_back(pod);
  EXPECT_THAT(peers, ElementsAre("orders-0", "orders-1"));
}

// ---------------------------------------------------------------------------------------------
// Plan JSON

Plan FullPlan() {
  PartitionMap target = Spread(4, 2).WithPeer(PodFor("orders", 0), {"h:1", "h:2"});
  target = Must(target.Split(PartitionId(3), kHashSpace - 5));
  Plan plan;
  plan.id = 0xFFFFFFFFFFFFull;
  plan.reason = "arrival 80,000 ev/s; \"quoted\"\nnew line \\ and \xC3\xA9";
  plan.next = 2;
  PlanStep split = ChangeStep(1);
  split.what = "split 2 partition(s) into 5 in place";
  split.splits = {{PartitionId(1), {kHashSpace / 4 + 1, kHashSpace / 4 + 2}, 12345.678},
                  {PartitionId(4294967295u), {kHashSpace - 1}, 0},
                  {PartitionId(2), {}, 1e-300}};
  split.merges = {{{PartitionId(5), PartitionId(6), PartitionId(7)}, 999.5},
                  {{PartitionId(8), PartitionId(9)}, 0}};
  split.rebalance = true;
  split.retire = true;
  split.state = PlanStep::State::kDone;
  split.attempts = 3;
  split.last_error = "sidecar said \"no\"\t(503)";
  split.target = target.ToJson();
  plan.steps.push_back(split);
  for (Kind k : {Kind::kSetPods, Kind::kWaitReady, Kind::kWaitConsumed, Kind::kDrain,
                 Kind::kRestart}) {
    PlanStep s = ChangeStep(7);
    s.kind = k;
    s.what = std::string(ToString(k)) + " step";
    if (k == Kind::kRestart || k == Kind::kWaitConsumed) s.vacate = 4294967295u;
    plan.steps.push_back(s);
  }
  PlanStep lost = ChangeStep(7);
  lost.what = "declare orders-1's partitions lost";
  lost.lost_pod = "orders-1";
  plan.steps.push_back(lost);
  plan.steps[1].state = PlanStep::State::kDone;
  plan.steps[2].attempts = 1000000;
  return plan;
}

void ExpectPlanEq(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.next, b.next);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const PlanStep& x = a.steps[i];
    const PlanStep& y = b.steps[i];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.what, y.what);
    EXPECT_EQ(x.pods, y.pods);
    EXPECT_EQ(x.state, y.state);
    EXPECT_EQ(x.attempts, y.attempts);
    EXPECT_EQ(x.last_error, y.last_error);
    EXPECT_EQ(x.rebalance, y.rebalance);
    EXPECT_EQ(x.retire, y.retire);
    EXPECT_EQ(x.vacate, y.vacate);
    EXPECT_EQ(x.lost_pod, y.lost_pod);
    EXPECT_EQ(x.target, y.target);
    ASSERT_EQ(x.splits.size(), y.splits.size());
    for (size_t j = 0; j < x.splits.size(); ++j) {
      EXPECT_EQ(x.splits[j].partition, y.splits[j].partition);
      EXPECT_EQ(x.splits[j].cuts, y.splits[j].cuts);
      EXPECT_EQ(x.splits[j].rate, y.splits[j].rate);
    }
    ASSERT_EQ(x.merges.size(), y.merges.size());
    for (size_t j = 0; j < x.merges.size(); ++j) {
      EXPECT_EQ(x.merges[j].run, y.merges[j].run);
      EXPECT_EQ(x.merges[j].peak_rate, y.merges[j].peak_rate);
    }
  }
}

TEST(PlanJsonTest, RoundTripsAPlanWithEveryFieldSet) {
  const Plan plan = FullPlan();
  const std::string json = PlanToJson(plan);
  auto back = PlanFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << json;
  ExpectPlanEq(*back, plan);
  EXPECT_EQ(PlanToJson(*back), json);
  // The target is a map's JSON, kept as such and still a valid map.
  auto target = PartitionMap::FromJson(back->steps[0].target);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(target->ToJson(), plan.steps[0].target);
}

TEST(PlanJsonTest, RoundTripsAnEmptyAndADonePlan) {
  for (const Plan& plan : {Plan{}, Plan{.id = 1, .reason = "", .steps = {}, .next = 0}}) {
    auto back = PlanFromJson(PlanToJson(plan));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ExpectPlanEq(*back, plan);
    EXPECT_TRUE(back->done());
  }
  Plan done = FullPlan();
  done.next = done.steps.size();
  auto back = PlanFromJson(PlanToJson(done));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->done());
}

TEST(PlanJsonTest, RoundTripsWhatMakePlanMakes) {
  const PartitionMap map = Spread(4, 2);
  Decision d;
  d.reason = "r";
  d.replicas = 1;
  d.merges.push_back({{PartitionId(0), PartitionId(1)}, 10});
  const Plan plan = MakePlan(map, d, 2);
  ASSERT_FALSE(plan.steps.empty());
  auto back = PlanFromJson(PlanToJson(plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectPlanEq(*back, plan);
}

// Every strict prefix of a valid plan is malformed: each must be rejected, never crash.
TEST(PlanJsonTest, RejectsEveryTruncation) {
  const std::string json = PlanToJson(FullPlan());
  for (size_t n = 0; n < json.size(); ++n) {
    auto r = PlanFromJson(std::string_view(json).substr(0, n));
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  }
}

struct BadPlanCase {
  const char* name;
  std::string json;
  const char* error;
};

void PrintTo(const BadPlanCase& c, std::ostream* os) { *os << c.name; }

class PlanFromJsonErrorTest : public ::testing::TestWithParam<BadPlanCase> {};

TEST_P(PlanFromJsonErrorTest, RejectsWithAClearStatus) {
  auto r = PlanFromJson(GetParam().json);
  ASSERT_FALSE(r.ok()) << GetParam().json;
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(GetParam().error));
}

// A valid step with one field replaced (or dropped when `value` is empty).
std::string StepWith(const std::string& field, const std::string& value) {
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"kind", R"("change")"},
      {"what", R"("w")"},
      {"pods", "2"},
      {"state", R"("pending")"},
      {"attempts", "0"},
      {"last_error", R"("")"},
      {"rebalance", "false"},
      {"retire", "false"},
      {"splits", R"([{"partition":1,"rate":5,"cuts":[100]}])"},
      {"merges", R"([{"run":[2,3],"peak_rate":1}])"},
      {"target", "null"}};
  std::string out = "{";
  bool known = false;
  for (const auto& [k, v] : fields) {
    const std::string& use = k == field ? value : v;
    known |= k == field;
    if (k == field && value.empty()) continue;
    if (out.size() > 1) out += ',';
    out += "\"" + k + "\":" + use;
  }
  if (!known && !field.empty()) out += ",\"" + field + "\":" + value;  // an optional field
  return out + "}";
}

std::string PlanWith(const std::string& step, const std::string& next = "0") {
  return R"({"id":1,"reason":"r","next":)" + next + R"(,"steps":[)" + step + "]}";
}

TEST(PlanJsonTest, TheErrorCasesBaseIsValid) {
  auto r = PlanFromJson(PlanWith(StepWith("", "")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->steps.size(), 1u);
  EXPECT_EQ(r->steps[0].splits.at(0).cuts, std::vector<uint64_t>{100});
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PlanFromJsonErrorTest,
    ::testing::Values(
        BadPlanCase{"empty", "", "not JSON"}, BadPlanCase{"garbage", "plan?", "not JSON"},
        BadPlanCase{"trailing_garbage", PlanWith(StepWith("", "")) + "}", "not JSON"},
        BadPlanCase{"array", "[]", "plan needs"}, BadPlanCase{"number", "42", "plan needs"},
        BadPlanCase{"empty_object", "{}", "plan needs"},
        BadPlanCase{"missing_steps", R"({"id":1,"reason":"r","next":0})", "plan needs"},
        BadPlanCase{"steps_not_array", R"({"id":1,"reason":"r","next":0,"steps":{}})",
                    "plan needs"},
        BadPlanCase{"negative_id", R"({"id":-1,"reason":"r","next":0,"steps":[]})", "plan needs"},
        BadPlanCase{"reason_not_string", R"({"id":1,"reason":7,"next":0,"steps":[]})",
                    "plan needs"},
        BadPlanCase{"next_past_end", PlanWith(StepWith("", ""), "2"), "past its end"},
        BadPlanCase{"step_not_object", PlanWith("1"), "plan step needs"},
        BadPlanCase{"step_missing_kind", PlanWith(StepWith("kind", "")), "plan step needs"},
        BadPlanCase{"step_missing_target", PlanWith(StepWith("target", "")), "plan step needs"},
        BadPlanCase{"step_pods_string", PlanWith(StepWith("pods", R"("2")")), "plan step needs"},
        BadPlanCase{"step_negative_attempts", PlanWith(StepWith("attempts", "-1")),
                    "plan step needs"},
        BadPlanCase{"step_rebalance_not_bool", PlanWith(StepWith("rebalance", "1")),
                    "plan step needs"},
        BadPlanCase{"unknown_kind", PlanWith(StepWith("kind", R"("explode")")),
                    "unknown plan step kind \"explode\""},
        BadPlanCase{"split_missing_cuts",
                    PlanWith(StepWith("splits", R"([{"partition":1,"rate":5}])")),
                    "split needs partition, rate and cuts"},
        BadPlanCase{"split_not_object", PlanWith(StepWith("splits", "[3]")), "split needs"},
        BadPlanCase{"split_point_string",
                    PlanWith(StepWith("splits", R"([{"partition":1,"rate":5,"cuts":["x"]}])")),
                    "bad split point"},
        BadPlanCase{"split_point_negative",
                    PlanWith(StepWith("splits", R"([{"partition":1,"rate":5,"cuts":[-4]}])")),
                    "bad split point"},
        BadPlanCase{"merge_missing_peak", PlanWith(StepWith("merges", R"([{"run":[2,3]}])")),
                    "merge needs run and peak_rate"},
        BadPlanCase{"merge_run_not_ids",
                    PlanWith(StepWith("merges", R"([{"run":[2,"3"],"peak_rate":1}])")),
                    "bad merge partition"},
        // Out-of-range numbers must not wrap into other, valid-looking values (PartitionMap's
        // JSON rejects a partition id above 2^32 - 1 the same way).
        BadPlanCase{
            "split_partition_out_of_range",
            PlanWith(StepWith("splits", R"([{"partition":4294967297,"rate":5,"cuts":[100]}])")),
            "partition"},
        BadPlanCase{"merge_partition_out_of_range",
                    PlanWith(StepWith("merges", R"([{"run":[4294967298,3],"peak_rate":1}])")),
                    "partition"},
        BadPlanCase{"pods_out_of_range", PlanWith(StepWith("pods", "4294967298")), "pods"},
        BadPlanCase{"unknown_state", PlanWith(StepWith("state", R"("exploded")")), "state"},
        BadPlanCase{"vacate_not_ordinal", PlanWith(StepWith("vacate", R"("pod-1")")), "vacate"},
        BadPlanCase{"vacate_out_of_range", PlanWith(StepWith("vacate", "4294967296")), "vacate"},
        BadPlanCase{"restart_without_vacate", PlanWith(StepWith("kind", R"("restart")")),
                    "a restart step needs vacate"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace shoal::control
