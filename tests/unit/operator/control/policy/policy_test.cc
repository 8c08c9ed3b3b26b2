// Tests of the scaling policy (control/src/policy/policy.cc): Decide, LoadHistory and the cut
// helpers, on observations built by hand over a fake time base (no clock is read).
#include "shoal/control/policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "policy_fixtures.h"

namespace shoal::control {
namespace {

using namespace policy_testing;

using std::chrono::seconds;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A load whose `share` falls on one hash point `hot` of `range`, the rest spread evenly.
PartitionLoad HotKey(uint32_t id, double rate, const HashRange& range, uint32_t hot, double share) {
  PartitionLoad l = Uniform(id, rate);
  for (double& b : l.buckets) b *= 1 - share;
  l.buckets[(hot - range.lo) * kLoadBuckets / range.Width()] += share;
  l.top_hash = hot;
  l.top_share = share;
  return l;
}

uint32_t CeilDivForTest(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// The map with its sealed partitions retired, as once every group consumed them.
PartitionMap WithoutSealedForTest(const PartitionMap& m) {
  MapChange c(m);
  for (const auto& p : m.partitions()) {
    if (!p.active()) {
      EXPECT_TRUE(c.Retire(p.id).ok());
    }
  }
  auto next = c.Build();
  EXPECT_TRUE(next.ok()) << next.status().ToString();
  return *next;
}

uint32_t Pieces(const Decision& d) {
  uint32_t n = 0;
  for (const auto& s : d.splits) n += static_cast<uint32_t>(s.cuts.size());
  return n;
}

const SplitDecision* SplitOf(const Decision& d, uint32_t id) {
  for (const auto& s : d.splits) {
    if (s.partition == PartitionId(id)) return &s;
  }
  return nullptr;
}

// Every split's cuts must be strictly increasing and strictly inside its partition's range, and
// every merge a run of adjacent active partitions in hash order: the planner feeds them straight
// to MapChange.
void ExpectWellFormed(const Decision& d, const PartitionMap& map) {
  MapChange change(map);
  for (const auto& s : d.splits) {
    EXPECT_TRUE(change.Split(s.partition, s.cuts).ok()) << "split of " << s.partition.value();
  }
  for (const auto& m : d.merges) {
    EXPECT_GE(m.run.size(), 2u);
    for (size_t i = 1; i < m.run.size(); ++i) {
      EXPECT_EQ(map.Find(m.run[i - 1])->range.hi, map.Find(m.run[i])->range.lo);
    }
    EXPECT_TRUE(change.MergeRun(m.run).ok());
  }
  auto next = change.Build();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->active_count(), d.partitions);
  EXPECT_FALSE(d.kinds.empty());
  EXPECT_FALSE(d.reason.empty());
}

// ---------------------------------------------------------------------------------------------
// LoadQuantileCuts and HeaviestShare

const HashRange kWhole{0, kHashSpace};
const HashRange kQuarter1{kHashSpace / 4, kHashSpace / 2};

struct CutsCase {
  const char* name;
  HashRange range;
  PartitionLoad load;
  uint32_t parts;
  std::vector<double> expect_at;  // cut points as fractions of the range (within 0.5%)
  double heaviest;                // HeaviestShare at those cuts (within 0.01)
};

void PrintTo(const CutsCase& c, std::ostream* os) { *os << c.name; }

class LoadQuantileCutsTest : public ::testing::TestWithParam<CutsCase> {};

TEST_P(LoadQuantileCutsTest, CutsAtTheLoadQuantiles) {
  const CutsCase& c = GetParam();
  const auto cuts = LoadQuantileCuts(c.range, c.load, c.parts);
  ASSERT_EQ(cuts.size(), c.expect_at.size()) << ::testing::PrintToString(cuts);
  uint64_t prev = c.range.lo;
  for (size_t i = 0; i < cuts.size(); ++i) {
    EXPECT_GT(cuts[i], prev);
    EXPECT_LT(cuts[i], c.range.hi);
    const double at = static_cast<double>(cuts[i] - c.range.lo) / double(c.range.Width());
    EXPECT_NEAR(at, c.expect_at[i], 0.005) << "cut " << i;
    prev = cuts[i];
  }
  EXPECT_NEAR(HeaviestShare(c.range, c.load, cuts), c.heaviest, 0.01);
}

PartitionLoad FrontLoaded() {
  // All the load in the first quarter of the range (buckets 0..3).
  PartitionLoad l = Uniform(0, 1000);
  l.buckets.fill(0);
  for (size_t i = 0; i < 4; ++i) l.buckets[i] = 0.25;
  return l;
}

PartitionLoad Unknown() {
  PartitionLoad l;
  l.rate = 1000;  // buckets all zero: the spread is unknown, taken as uniform
  return l;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LoadQuantileCutsTest,
    ::testing::Values(
        CutsCase{"uniform_halves", kWhole, Uniform(0, 1), 2, {0.5}, 0.5},
        CutsCase{"uniform_thirds", kWhole, Uniform(0, 1), 3, {1.0 / 3, 2.0 / 3}, 1.0 / 3},
        CutsCase{"uniform_tenths_of_a_quarter",
                 kQuarter1,
                 Uniform(0, 1),
                 10,
                 {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9},
                 0.1},
        CutsCase{"unknown_spread_is_uniform", kWhole, Unknown(), 4, {0.25, 0.5, 0.75}, 0.25},
        CutsCase{"front_loaded", kWhole, FrontLoaded(), 4, {0.0625, 0.125, 0.1875}, 0.25},
        CutsCase{"one_part_no_cuts", kWhole, Uniform(0, 1), 1, {}, 1.0},
        CutsCase{"zero_parts_no_cuts", kWhole, Uniform(0, 1), 0, {}, 1.0},
        CutsCase{"width_one_cannot_be_cut", HashRange{7, 8}, Uniform(0, 1), 4, {}, 1.0},
        // A key with 60% of the load at 30% of the range: three parts isolate it, a cut on
        // each side of it; the key alone is the heaviest piece.
        CutsCase{"hot_key_isolated",
                 kWhole,
                 HotKey(0, 1, kWhole, static_cast<uint32_t>(kHashSpace * 3 / 10), 0.6),
                 3,
                 {0.3, 0.3},
                 0.6},
        // A light key (below the 5% that counts as hot) is part of the spread.
        CutsCase{"light_key_ignored",
                 kWhole,
                 HotKey(0, 1, kWhole, static_cast<uint32_t>(kHashSpace / 10), 0.01),
                 2,
                 {0.495},
                 0.5}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LoadQuantileCutsTest, AHotKeyGetsACutAtItsHashAndJustAfterIt) {
  const uint32_t hot = static_cast<uint32_t>(kQuarter1.lo + kQuarter1.Width() / 3 + 12345);
  const PartitionLoad load = HotKey(1, 15000, kQuarter1, hot, 0.6);
  const auto cuts = LoadQuantileCuts(kQuarter1, load, 3);
  EXPECT_THAT(cuts, ElementsAre(uint64_t{hot}, uint64_t{hot} + 1));
  EXPECT_NEAR(HeaviestShare(kQuarter1, load, cuts), 0.6, 1e-9);
  EXPECT_NEAR(HeaviestShare(kQuarter1, load, {}), 1.0, 1e-9);
}

TEST(LoadQuantileCutsTest, AKeyThatIsAllTheLoadCannotBeSpread) {
  const uint32_t hot = static_cast<uint32_t>(kQuarter1.lo + 1000);
  const PartitionLoad load = HotKey(1, 15000, kQuarter1, hot, 1.0);
  for (uint32_t parts : {2u, 3u, 8u}) {
    const auto cuts = LoadQuantileCuts(kQuarter1, load, parts);
    EXPECT_NEAR(HeaviestShare(kQuarter1, load, cuts), 1.0, 1e-9) << parts << " parts";
  }
}

// ---------------------------------------------------------------------------------------------
// LoadHistory

TEST(LoadHistoryTest, SummarizesEachObservation) {
  LoadHistory h(seconds(60));
  EXPECT_FALSE(h.first_at().has_value());
  Observation o;
  o.at = At(10);
  o.partitions[PartitionId(0)] = Uniform(0, 100);
  o.partitions[PartitionId(0)].lag = 7;
  o.partitions[PartitionId(1)] = Uniform(1, 300);
  o.partitions[PartitionId(1)].lag = 5;
  o.partitions[PartitionId(2)] = Uniform(2, 999);  // sealed: its lag counts, its rate does not
  o.partitions[PartitionId(2)].active = false;
  o.partitions[PartitionId(2)].lag = 40;
  o.cpu_utilization = {{"orders-0", 0.5}, {"orders-1", 1.0}};
  h.Add(o);
  ASSERT_EQ(h.samples().size(), 1u);
  const auto& s = h.samples().back();
  EXPECT_EQ(s.at, At(10));
  EXPECT_DOUBLE_EQ(s.total_rate, 400);
  EXPECT_EQ(s.max_lag, 40u);
  EXPECT_EQ(s.total_lag, 52u);
  ASSERT_TRUE(s.cpu.has_value());
  EXPECT_DOUBLE_EQ(*s.cpu, 0.75);
  EXPECT_EQ(s.cpu_pods, 2u);
  EXPECT_EQ(s.active, 2u);
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(h.first_at(), At(10));
  EXPECT_FALSE(h.last_incomplete().has_value());
  ASSERT_NE(h.Partition(PartitionId(1)), nullptr);
  EXPECT_DOUBLE_EQ(h.Partition(PartitionId(1))->last.rate, 300);
  EXPECT_EQ(h.Partition(PartitionId(1))->first_seen, At(10));
  EXPECT_EQ(h.Partition(PartitionId(2)), nullptr);  // sealed partitions have no history
}

TEST(LoadHistoryTest, RecordsIncompleteObservations) {
  LoadHistory h(seconds(60));
  Observation o;
  o.at = At(3);
  o.missing = {"orders-2: /metrics: connection refused", "orders-3: timeout"};
  h.Add(o);
  EXPECT_FALSE(h.samples().back().complete);
  EXPECT_EQ(h.last_incomplete(), At(3));
  EXPECT_THAT(h.last_missing(), ElementsAre(HasSubstr("orders-2"), HasSubstr("orders-3")));
  o.at = At(4);
  o.missing.clear();
  h.Add(o);
  EXPECT_EQ(h.last_incomplete(), At(3));  // the last one with something missing
}

TEST(LoadHistoryTest, PeaksAndLowsOverAWindow) {
  LoadHistory h(seconds(100));  // buckets of 5 s
  const PartitionMap map = Initial(1);
  // 1,000 ev/s, a peak of 9,000 at t=50 and a dip to 200 at t=80.
  for (int64_t t = 0; t <= 100; ++t) {
    const double r = t == 50 ? 9000 : t == 80 ? 200 : 1000;
    h.Add(Observe(map, t, [&](uint32_t) { return r; }));
  }
  const auto* p = h.Partition(PartitionId(0));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->first_seen, At(0));
  EXPECT_EQ(p->last_at, At(100));
  EXPECT_DOUBLE_EQ(p->PeakSince(At(40)).value(), 9000);
  EXPECT_DOUBLE_EQ(p->PeakSince(At(60)).value(), 1000);
  EXPECT_DOUBLE_EQ(p->LowSince(At(70)).value(), 200);
  EXPECT_DOUBLE_EQ(p->LowSince(At(90)).value(), 1000);
  // A window reaching back before the partition existed has no peak: it is too young.
  EXPECT_FALSE(p->PeakSince(At(-1)).has_value());
}

// PeakSince's contract: "nullopt when the history does not reach back that far". A window longer
// than the horizon reaches back past what the history kept: it must not report the peak of the
// kept part only (that would let a scale-down miss a peak inside its window).
TEST(LoadHistoryTest, PeakSinceBeyondTheHorizonIsUnknownNotTooLow) {
  LoadHistory h(seconds(20));
  const PartitionMap map = Initial(1);
  for (int64_t t = 0; t <= 40; ++t) {
    h.Add(Observe(map, t, [&](uint32_t) { return t == 5 ? 10000.0 : 1000.0; }));
  }
  const auto* p = h.Partition(PartitionId(0));
  ASSERT_NE(p, nullptr);
  const auto peak = p->PeakSince(At(1));  // t=1 is beyond the 20 s horizon at t=40
  EXPECT_TRUE(!peak.has_value() || *peak >= 10000)
      << "PeakSince(t=1) = " << *peak << " although the rate was 10,000 at t=5";
}

// A partition made by a merge carries at most what its parents carried: before it existed, its
// peaks are theirs summed bucket by bucket, so its window is known from when theirs is. Its lows
// are its own (the parents' say nothing about how low it went).
TEST(LoadHistoryTest, AMergedPartitionInheritsItsParentsSummedPeaks) {
  LoadHistory h(seconds(40));  // buckets of 2 s
  const PartitionMap two = Initial(2);
  auto merged = two.Merge(PartitionId(0), PartitionId(1));  // 2 <- 0, 1
  ASSERT_TRUE(merged.ok());
  for (int64_t t = 0; t <= 20; ++t) {
    h.Add(Observe(two, t, [&](uint32_t id) { return id == 0 && t == 10 ? 3000.0 : 1000.0; },
                  true));
  }
  for (int64_t t = 21; t <= 30; ++t) {
    h.Add(Observe(*merged, t, [](uint32_t) { return 500.0; }, true));
  }
  const auto* child = h.Partition(PartitionId(2));
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->first_seen, At(21));
  EXPECT_EQ(child->known_since, At(0));
  EXPECT_DOUBLE_EQ(child->PeakSince(At(5)).value(), 4000);   // 3,000 + 1,000 at t=10
  EXPECT_DOUBLE_EQ(child->PeakSince(At(12)).value(), 2000);  // 1,000 + 1,000
  EXPECT_DOUBLE_EQ(child->PeakSince(At(24)).value(), 500);   // its own
  EXPECT_DOUBLE_EQ(child->LowSince(At(5)).value(), 500);
  EXPECT_FALSE(child->PeakSince(At(-1)).has_value()) << "before its parents were seen";

  // Without lineage in the observations it is young: nothing known before it was seen.
  LoadHistory plain(seconds(40));
  Steady(plain, two, 0, 20, 1000);
  Steady(plain, *merged, 21, 30, 500);
  EXPECT_FALSE(plain.Partition(PartitionId(2))->PeakSince(At(5)).has_value());
}

// Window peaks are per bucket of one grid shared by all partitions, so neighbours whose peaks
// come at different times sum to what they carried together, not to the sum of their peaks.
TEST(LoadHistoryTest, WindowPeaksAreAlignedAcrossPartitions) {
  LoadHistory h(seconds(20));  // buckets of 1 s
  const PartitionMap two = Initial(2);
  for (int64_t t = 0; t <= 30; ++t) {
    h.Add(Observe(two, t, [&](uint32_t id) { return (t + id) % 2 ? 300.0 : 100.0; }));
  }
  auto a = h.WindowPeaks(*h.Partition(PartitionId(0)), At(20));
  auto b = h.WindowPeaks(*h.Partition(PartitionId(1)), At(20));
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->size(), 11u);  // t = 20..30
  ASSERT_EQ(b->size(), 11u);
  for (size_t i = 0; i < a->size(); ++i) EXPECT_DOUBLE_EQ((*a)[i] + (*b)[i], 400) << i;
  EXPECT_FALSE(h.WindowPeaks(*h.Partition(PartitionId(0)), At(-5)).has_value());
}

TEST(LoadHistoryTest, ForgetsWhatIsOlderThanTheHorizon) {
  LoadHistory h(seconds(20));
  const PartitionMap two = Initial(2);
  const PartitionMap one = Initial(1);
  Steady(h, two, 0, 10, 100);
  Steady(h, one, 11, 60, 100);  // partition 1 is not seen after t=10
  EXPECT_EQ(h.Partition(PartitionId(1)), nullptr);
  ASSERT_NE(h.Partition(PartitionId(0)), nullptr);
  EXPECT_GE(h.samples().front().at, At(60 - 21));
  EXPECT_EQ(h.samples().back().at, At(60));
  EXPECT_EQ(h.first_at(), At(0));  // the first observation ever, not the first kept
}

// ---------------------------------------------------------------------------------------------
// Decide: scale-up

TEST(DecideTest, HoldsWithinTheTolerance) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(4);
  // 4,600..5,400 ev/s per partition: within ±10% of 5,000.
  const std::vector<double> rates = {4600, 5400, 5000, 5200};
  LoadHistory h(seconds(120));
  for (int64_t t = 0; t <= 60; ++t) h.Add(Observe(map, t, [&](uint32_t id) { return rates[id]; }));
  const Decision d = Decide(spec, h, map, 1, At(60));
  EXPECT_THAT(d.kinds, ElementsAre(DecisionKind::kHold));
  EXPECT_TRUE(d.holds());
  EXPECT_THAT(d.splits, IsEmpty());
  EXPECT_THAT(d.merges, IsEmpty());
  EXPECT_EQ(d.partitions, 4u);
  EXPECT_EQ(d.replicas, 1u);
  EXPECT_THAT(d.reason, HasSubstr("hold"));
}

TEST(DecideTest, HoldsOnTheFirstObservation) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(120));
  Steady(h, map, 0, 0, 1000);  // cold, but the scale-down window has not been observed yet
  const Decision d = Decide(spec, h, map, 1, At(0));
  EXPECT_THAT(d.kinds, ElementsAre(DecisionKind::kHold));
  EXPECT_THAT(d.reason, HasSubstr("less than the scale-down window"));
}

TEST(DecideTest, SplitsAPartitionAtThreeTimesTheTargetIntoThirds) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(120));
  h.Add(Observe(map, 0, [](uint32_t id) { return id == 1 ? 15000.0 : 5000.0; }));
  const Decision d = Decide(spec, h, map, 2, At(0));
  EXPECT_THAT(d.kinds, Contains(DecisionKind::kSplit));
  ASSERT_EQ(d.splits.size(), 1u);
  const SplitDecision& s = d.splits[0];
  EXPECT_EQ(s.partition, PartitionId(1));
  EXPECT_DOUBLE_EQ(s.rate, 15000);
  const HashRange r = map.Find(PartitionId(1))->range;
  ASSERT_EQ(s.cuts.size(), 2u);
  const double w = static_cast<double>(r.Width());
  EXPECT_NEAR(static_cast<double>(s.cuts[0] - r.lo) / w, 1.0 / 3, 0.01);
  EXPECT_NEAR(static_cast<double>(s.cuts[1] - r.lo) / w, 2.0 / 3, 0.01);
  EXPECT_EQ(d.partitions, 6u);
  EXPECT_THAT(d.merges, IsEmpty());
  EXPECT_THAT(d.reason, HasSubstr("split"));
  ExpectWellFormed(d, map);
}

TEST(DecideTest, EveryPartitionAtTenTimesIsCappedAndSpreadEvenly) {
  TopicSpec spec = BaseSpec();
  spec.partitions.max = 20;
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(120));
  Steady(h, map, 0, 0, 50000);
  const Decision d = Decide(spec, h, map, 5, At(0));
  EXPECT_THAT(d.kinds, Contains(DecisionKind::kSplit));
  EXPECT_EQ(d.partitions, 20u);
  EXPECT_EQ(4 + Pieces(d), 20u);
  ASSERT_EQ(d.splits.size(), 4u);
  for (const auto& s : d.splits) EXPECT_EQ(s.cuts.size(), 4u) << s.partition.value();
  EXPECT_THAT(d.reason, HasSubstr("capped at partitions.max 20"));
  ExpectWellFormed(d, map);
}

TEST(DecideTest, TheCapGivesExtraPiecesToTheHottestFirst) {
  TopicSpec spec = BaseSpec();
  spec.partitions.max = 12;
  const PartitionMap map = Initial(4);
  const std::vector<double> rates = {80000, 40000, 20000, 10000};  // 16x, 8x, 4x, 2x
  LoadHistory h(seconds(120));
  h.Add(Observe(map, 0, [&](uint32_t id) { return rates[id]; }));
  const Decision d = Decide(spec, h, map, 3, At(0));
  EXPECT_EQ(d.partitions, 12u);
  std::vector<size_t> pieces(4, 1);
  for (const auto& s : d.splits) pieces[s.partition.value()] = s.cuts.size() + 1;
  // Hotter partitions never get fewer pieces, and the hottest piece left is as cool as it can be
  // with 12 partitions (water-filling: 80k/6, 40k/3, 20k/2, 10k/1 -> at most 13,334 ev/s).
  EXPECT_GE(pieces[0], pieces[1]);
  EXPECT_GE(pieces[1], pieces[2]);
  EXPECT_GE(pieces[2], pieces[3]);
  double hottest_piece = 0;
  for (size_t i = 0; i < 4; ++i) hottest_piece = std::max(hottest_piece, rates[i] / pieces[i]);
  EXPECT_LE(hottest_piece, 80000.0 / 6 + 1);
  ExpectWellFormed(d, map);
}

TEST(DecideTest, HonoursTheStepLimit) {
  for (uint32_t limit : {1u, 3u, 6u}) {
    SCOPED_TRACE("max_partitions_per_step " + std::to_string(limit));
    TopicSpec spec = BaseSpec();
    spec.scale_up.max_partitions_per_step = limit;
    const PartitionMap map = Initial(4);
    LoadHistory h(seconds(120));
    Steady(h, map, 0, 0, 50000);
    const Decision d = Decide(spec, h, map, 4, At(0));
    EXPECT_EQ(d.partitions, 4 + limit);
    EXPECT_EQ(Pieces(d), limit);
    EXPECT_THAT(d.reason, HasSubstr("limited to " + std::to_string(limit) + " new partitions"));
    ExpectWellFormed(d, map);
  }
}

TEST(DecideTest, AHotKeyIsIsolatedWithACutOnEachSide) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(4);
  const HashRange r = map.Find(PartitionId(2))->range;
  const uint32_t hot = static_cast<uint32_t>(r.lo + r.Width() / 2 + 777);
  LoadHistory h(seconds(120));
  Observation o = Observe(map, 0, [](uint32_t) { return 5000.0; });
  o.partitions[PartitionId(2)] = HotKey(2, 15000, r, hot, 0.6);
  h.Add(o);
  const Decision d = Decide(spec, h, map, 2, At(0));
  const SplitDecision* s = SplitOf(d, 2);
  ASSERT_NE(s, nullptr) << d.reason;
  EXPECT_THAT(s->cuts, Contains(uint64_t{hot}));
  EXPECT_THAT(s->cuts, Contains(uint64_t{hot} + 1));
  ExpectWellFormed(d, map);
}

TEST(DecideTest, APartitionThatIsOneKeyIsNotSplit) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(4);
  const HashRange r = map.Find(PartitionId(3))->range;
  const uint32_t hot = static_cast<uint32_t>(r.lo + 4242);
  LoadHistory h(seconds(120));
  Observation o = Observe(map, 0, [](uint32_t) { return 5000.0; });
  o.partitions[PartitionId(3)] = HotKey(3, 30000, r, hot, 1.0);
  h.Add(o);
  const Decision d = Decide(spec, h, map, 1, At(0));
  EXPECT_THAT(d.splits, IsEmpty());
  EXPECT_THAT(d.kinds, Not(Contains(DecisionKind::kSplit)));
  EXPECT_EQ(d.partitions, 4u);
  EXPECT_THAT(d.reason, AllOf(HasSubstr("partition 3"), HasSubstr("one key"),
                              HasSubstr("hash " + std::to_string(hot))));
  // And the decision carries it for the metrics (shoal_control_hot_key_*): by its hash.
  ASSERT_EQ(d.hot_keys.size(), 1u);
  EXPECT_EQ(d.hot_keys[0].partition, PartitionId(3));
  EXPECT_EQ(d.hot_keys[0].hash, hot);
  EXPECT_DOUBLE_EQ(d.hot_keys[0].rate, 30000);
}

struct UpWindowCase {
  const char* name;
  uint32_t window_s;
  double spike;    // rate of partition 0 at the last `samples` observations
  bool sustained;  // the spike lasts for the whole window instead
  bool splits;
  int samples = 1;
};

void PrintTo(const UpWindowCase& c, std::ostream* os) { *os << c.name; }

class DecideScaleUpWindowTest : public ::testing::TestWithParam<UpWindowCase> {};

TEST_P(DecideScaleUpWindowTest, ShortSpikesWaitSurgesDoNot) {
  const UpWindowCase& c = GetParam();
  TopicSpec spec = BaseSpec();
  spec.scale_up.stabilization_window_seconds = c.window_s;
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(300));
  const int64_t now = 200;
  for (int64_t t = 0; t <= now; ++t) {
    // "Sustained" starts a little before the window: the history keeps lows per time bucket.
    const bool high = t > now - c.samples || (c.sustained && t >= now - c.window_s - 20);
    h.Add(Observe(map, t, [&](uint32_t id) { return id == 0 && high ? c.spike : 4000.0; }));
  }
  const Decision d = Decide(spec, h, map, 1, At(now));
  if (c.splits) {
    ASSERT_NE(SplitOf(d, 0), nullptr) << d.reason;
    EXPECT_THAT(d.kinds, Contains(DecisionKind::kSplit));
    ExpectWellFormed(d, map);
  } else {
    EXPECT_THAT(d.splits, IsEmpty()) << d.reason;
    EXPECT_THAT(d.kinds, Not(Contains(DecisionKind::kSplit)));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, DecideScaleUpWindowTest,
                         ::testing::Values(
                             // Without a window, any rate above the tolerance splits at once.
                             UpWindowCase{"no_window_spike_splits", 0, 9000, false, true},
                             // With a window, a short spike below twice the target waits...
                             UpWindowCase{"window_short_spike_waits", 60, 9000, false, false},
                             UpWindowCase{"window_short_spike_at_2x_waits", 60, 10000, false,
                                          false},
                             // ... one that lasted the whole window does not...
                             UpWindowCase{"window_sustained_splits", 60, 9000, true, true},
                             // ... and a surge above twice the target for two observations
                             // takes the fast path; at its first observation it waits one more.
                             UpWindowCase{"window_surge_first_sample_waits", 60, 10500, false,
                                          false},
                             UpWindowCase{"window_surge_splits", 60, 10500, false, true, 2},
                             UpWindowCase{"window_big_surge_splits", 60, 50000, false, true, 2}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Decide: scale-down

TEST(DecideTest, ColdNeighboursMergeOnlyAfterTheScaleDownWindow) {
  const TopicSpec spec = BaseSpec();  // window 30 s
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(120));
  for (int64_t now = 0; now <= 40; ++now) {
    Steady(h, map, now, now, 1000);
    const Decision d = Decide(spec, h, map, 1, At(now));
    if (now < 30) {
      EXPECT_THAT(d.merges, IsEmpty()) << "t=" << now << ": " << d.reason;
      EXPECT_THAT(d.kinds, ElementsAre(DecisionKind::kHold)) << "t=" << now;
    } else {
      // 4 x 1,000 ev/s fit in one partition below 4,500 (target less the tolerance).
      ASSERT_EQ(d.merges.size(), 1u) << "t=" << now << ": " << d.reason;
      EXPECT_THAT(d.merges[0].run,
                  ElementsAre(PartitionId(0), PartitionId(1), PartitionId(2), PartitionId(3)));
      EXPECT_DOUBLE_EQ(d.merges[0].peak_rate, 4000);
      EXPECT_EQ(d.partitions, 1u);
      EXPECT_THAT(d.kinds, Contains(DecisionKind::kMerge));
      ExpectWellFormed(d, map);
    }
  }
}

TEST(DecideTest, MergesOnlyPartitionsWhoseLoadIsKnownForTheWholeWindow) {
  const TopicSpec spec = BaseSpec();  // window 30 s
  const PartitionMap before = Initial(2);
  const HashRange r1 = before.Find(PartitionId(1))->range;
  auto split = before.Split(PartitionId(1), r1.lo + r1.Width() / 2);  // 2, 3 <- 1
  ASSERT_TRUE(split.ok());
  const PartitionMap after = *split;
  for (bool lineage : {false, true}) {
    SCOPED_TRACE(lineage ? "with lineage" : "without lineage");
    LoadHistory h(seconds(120));
    for (int64_t t = 0; t <= 40; ++t) {
      h.Add(Observe(t < 20 ? before : after, t, [](uint32_t) { return 1000.0; }, lineage));
    }
    // At t=40 the window reaches back to t=10: partitions 2 and 3 are 20 s old. Without their
    // lineage their first 10 s of the window are unknown; with it, their parent's 1,000 ev/s
    // bounds each of them, and 3 x 1,000 fit in one partition.
    const Decision at40 = Decide(spec, h, after, 1, At(40));
    if (!lineage) {
      EXPECT_THAT(at40.merges, IsEmpty()) << at40.reason;
      EXPECT_EQ(at40.partitions, 3u);
    } else {
      ASSERT_EQ(at40.merges.size(), 1u) << at40.reason;
      EXPECT_DOUBLE_EQ(at40.merges[0].peak_rate, 3000);
      EXPECT_EQ(at40.partitions, 1u);
      ExpectWellFormed(at40, after);
    }
    // At t=55 they are 35 s old: all three cold partitions merge either way.
    for (int64_t t = 41; t <= 55; ++t) {
      h.Add(Observe(after, t, [](uint32_t) { return 1000.0; }, lineage));
    }
    const Decision old = Decide(spec, h, after, 1, At(55));
    ASSERT_FALSE(old.merges.empty()) << old.reason;
    EXPECT_EQ(old.partitions, 1u);
    ExpectWellFormed(old, after);
  }
}

// A parent's peak inside the window still bounds its young children: they stay apart.
TEST(DecideTest, AnInheritedPeakKeepsYoungPartitionsApart) {
  const TopicSpec spec = BaseSpec();  // window 30 s, merge limit 4,500
  const PartitionMap before = Initial(1);
  auto split = before.Split(PartitionId(0), kHashSpace / 2);  // 1, 2 <- 0
  ASSERT_TRUE(split.ok());
  LoadHistory h(seconds(120));
  for (int64_t t = 0; t <= 40; ++t) {
    h.Add(Observe(t < 20 ? before : *split, t,
                  [&](uint32_t) { return t == 15 ? 6000.0 : 1000.0; }, true));
  }
  const Decision d = Decide(spec, h, *split, 1, At(40));
  EXPECT_THAT(d.merges, IsEmpty()) << d.reason;
}

// A zero scale-down window asked after the latest observation still bounds the merge by the
// latest peaks (and never sizes its bucket list from a window that ends before it starts).
TEST(DecideTest, AZeroScaleDownWindowAskedLaterMergesOnTheLatestPeaks) {
  TopicSpec spec = BaseSpec();
  spec.scale_down.stabilization_window_seconds = 0;
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(20));
  Steady(h, map, 0, 10, 1000);
  const Decision d = Decide(spec, h, map, 1, At(25));
  ASSERT_EQ(d.merges.size(), 1u) << d.reason;
  EXPECT_DOUBLE_EQ(d.merges[0].peak_rate, 4000);
  auto peaks = h.WindowPeaks(*h.Partition(PartitionId(0)), At(25));
  ASSERT_TRUE(peaks.has_value());
  EXPECT_EQ(peaks->size(), 1u);
}

// Neighbours whose peaks come at different times merge on what they carried together.
TEST(DecideTest, NeighboursPeakingAtDifferentTimesMergeOnTheirSum) {
  TopicSpec spec = BaseSpec();  // merge limit 4,500
  spec.scale_down.stabilization_window_seconds = 20;
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(20));  // buckets of 1 s
  for (int64_t t = 0; t <= 40; ++t) {
    h.Add(Observe(map, t, [&](uint32_t id) { return (t + id) % 2 ? 3000.0 : 1000.0; }));
  }
  // Each peaks at 3,000 (6,000 summed), but together they never carried more than 4,000.
  const Decision d = Decide(spec, h, map, 1, At(40));
  ASSERT_EQ(d.merges.size(), 1u) << d.reason;
  EXPECT_DOUBLE_EQ(d.merges[0].peak_rate, 4000);
  ExpectWellFormed(d, map);
}

TEST(DecideTest, PeakOverTheWindowKeepsNeighboursApart) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(120));
  // 1,000 each now, but 4,000 each 20 s ago: 8,000 together is above 4,500.
  for (int64_t t = 0; t <= 60; ++t) {
    h.Add(Observe(map, t, [&](uint32_t) { return t == 40 ? 4000.0 : 1000.0; }));
  }
  const Decision d = Decide(spec, h, map, 1, At(60));
  EXPECT_THAT(d.merges, IsEmpty()) << d.reason;
  EXPECT_THAT(d.kinds, ElementsAre(DecisionKind::kHold));
  // Once the peak has left the window, they merge.
  for (int64_t t = 61; t <= 75; ++t) h.Add(Observe(map, t, [](uint32_t) { return 1000.0; }));
  const Decision later = Decide(spec, h, map, 1, At(75));
  EXPECT_EQ(later.merges.size(), 1u) << later.reason;
}

TEST(DecideTest, MissingMetricsInTheWindowBlockMergesAndPodsDown) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(4);
  for (int64_t missing_at : {25, 40, 5}) {
    SCOPED_TRACE("missing at t=" + std::to_string(missing_at));
    LoadHistory h(seconds(120));
    for (int64_t t = 0; t <= 40; ++t) {
      Observation o = Observe(map, t, [](uint32_t) { return 1000.0; });
      if (t == missing_at) {
        o.partitions.erase(PartitionId(0));
        o.missing = {"orders-0: /metrics: connection refused"};
      }
      h.Add(o);
    }
    // 4 replicas for 4 cold partitions that would merge into one: both shrink unless blocked.
    const Decision d = Decide(spec, h, map, 4, At(40));
    if (missing_at >= 10) {  // inside the window [10, 40]
      EXPECT_THAT(d.merges, IsEmpty()) << d.reason;
      EXPECT_THAT(d.kinds, ElementsAre(DecisionKind::kHold));
      EXPECT_EQ(d.replicas, 4u);
      EXPECT_EQ(d.partitions, 4u);
      EXPECT_THAT(d.reason, AllOf(HasSubstr("metrics missing"), HasSubstr("orders-0")));
    } else {
      EXPECT_EQ(d.merges.size(), 1u) << d.reason;
      EXPECT_THAT(d.kinds, Contains(DecisionKind::kMerge));
      EXPECT_THAT(d.kinds, Contains(DecisionKind::kPodsDown));
      EXPECT_EQ(d.replicas, 1u);
    }
  }
}

// A backlog blocks scale-down: the same cold partitions and idle pods shrink once the lag of the
// whole window is below its target, never while a consumer is still behind (shrinking would take
// consumers away from it; a merge would make its successors wait for the backlog too).
TEST(DecideTest, ALagAboveItsTargetInTheWindowBlocksMergesAndPodsDown) {
  TopicSpec spec = BaseSpec();  // window 30 s
  spec.scaling.consumer_lag_events = 5000;
  const PartitionMap map = Initial(4);
  for (int64_t lag_until : {40, 15, 5}) {
    SCOPED_TRACE("lag of 20,000 until t=" + std::to_string(lag_until));
    LoadHistory h(seconds(120));
    for (int64_t t = 0; t <= 40; ++t) {
      Observation o = Observe(map, t, [](uint32_t) { return 1000.0; });
      // Falling: consumers catch up, so the lag rule asks no pods of its own.
      if (t <= lag_until) o.partitions[PartitionId(0)].lag = 20000 - static_cast<uint64_t>(t);
      h.Add(o);
    }
    const Decision d = Decide(spec, h, map, 4, At(40));
    if (lag_until >= 10) {  // inside the window [10, 40]
      EXPECT_THAT(d.merges, IsEmpty()) << d.reason;
      EXPECT_EQ(d.replicas, 4u) << d.reason;
      EXPECT_THAT(d.reason, HasSubstr("above its target 5,000 within the scale-down window"));
    } else {
      EXPECT_EQ(d.merges.size(), 1u) << d.reason;
      EXPECT_EQ(d.replicas, 1u) << d.reason;
    }
  }
}

TEST(DecideTest, APartitionWithoutACurrentRateIsNeitherSplitNorMerged) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(120));
  Steady(h, map, 0, 39, 1000);
  Observation o = Observe(map, 40, [](uint32_t) { return 1000.0; });
  o.partitions.erase(PartitionId(2));  // not observed, and not reported missing either
  h.Add(o);
  const Decision d = Decide(spec, h, map, 1, At(40));
  EXPECT_THAT(d.merges, IsEmpty()) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("without a current rate"));
}

struct MinCase {
  uint32_t min;
  uint32_t expect;
};

TEST(DecideTest, MergesNeverGoBelowPartitionsMin) {
  for (const MinCase& c :
       {MinCase{1, 1}, MinCase{2, 2}, MinCase{3, 3}, MinCase{7, 7}, MinCase{8, 8}}) {
    SCOPED_TRACE("partitions.min " + std::to_string(c.min));
    TopicSpec spec = BaseSpec();
    spec.partitions.min = c.min;
    spec.partitions.max = std::max(64u, c.min);
    const PartitionMap map = Initial(8);
    LoadHistory h(seconds(120));
    Steady(h, map, 0, 40, 100);
    const Decision d = Decide(spec, h, map, 2, At(40));
    EXPECT_EQ(d.partitions, c.expect) << d.reason;
    EXPECT_THAT(d.kinds, Not(Contains(DecisionKind::kSplit)));
    if (c.expect < 8) ExpectWellFormed(d, map);
  }
}

TEST(DecideTest, MergesNeverGoBelowTheWindowsPeakRate) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(8);
  LoadHistory h(seconds(120));
  Steady(h, map, 0, 40, 2000);  // 16,000 ev/s in all: at least ceil(16000 / 4500) = 4
  const Decision d = Decide(spec, h, map, 2, At(40));
  EXPECT_GE(d.partitions, 4u) << d.reason;
  EXPECT_LT(d.partitions, 8u) << d.reason;
  for (const auto& m : d.merges) EXPECT_LE(m.peak_rate, 4500);
  ExpectWellFormed(d, map);
}

// ---------------------------------------------------------------------------------------------
// Decide: replicas

struct ReplicasUpCase {
  const char* name;
  uint32_t partitions;
  uint32_t per_replica;
  uint32_t replicas_max;
  uint32_t replicas;  // now
  double cpu;         // per pod over its request, reported by every current pod; < 0: none
  uint32_t expect;
};

void PrintTo(const ReplicasUpCase& c, std::ostream* os) { *os << c.name; }

class DecideReplicasUpTest : public ::testing::TestWithParam<ReplicasUpCase> {};

TEST_P(DecideReplicasUpTest, ScalesPodsUp) {
  const ReplicasUpCase& c = GetParam();
  TopicSpec spec = BaseSpec();
  spec.scaling.partitions_per_replica = c.per_replica;
  spec.replicas.max = c.replicas_max;
  // No merges and no splits: only replicas are under test.
  spec.partitions.min = c.partitions;
  spec.partitions.max = c.partitions;
  const PartitionMap map = Initial(c.partitions);
  LoadHistory h(seconds(120));
  for (int64_t t = 0; t <= 40; ++t) {
    Observation o = Observe(map, t, [](uint32_t) { return 5000.0; });  // at the target
    if (c.cpu >= 0) {
      for (uint32_t i = 0; i < c.replicas; ++i) {
        o.cpu_utilization["orders-" + std::to_string(i)] = c.cpu;
      }
    }
    h.Add(o);
  }
  const Decision d = Decide(spec, h, map, c.replicas, At(40));
  EXPECT_EQ(d.replicas, c.expect) << d.reason;
  EXPECT_LE(d.replicas, c.replicas_max);
  EXPECT_LE(d.replicas, d.partitions);
  if (c.expect > c.replicas) {
    EXPECT_THAT(d.kinds, Contains(DecisionKind::kPodsUp));
    EXPECT_THAT(d.reason, HasSubstr("replicas " + std::to_string(c.replicas) + " -> " +
                                    std::to_string(c.expect)));
  } else {
    EXPECT_THAT(d.kinds, Not(Contains(DecisionKind::kPodsUp)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DecideReplicasUpTest,
    ::testing::Values(ReplicasUpCase{"per_replica_4", 8, 4, 16, 1, -1, 2},
                      ReplicasUpCase{"per_replica_2", 8, 2, 16, 1, -1, 4},
                      ReplicasUpCase{"per_replica_3_rounds_up", 8, 3, 16, 1, -1, 3},
                      ReplicasUpCase{"per_replica_capped_by_max", 8, 1, 5, 1, -1, 5},
                      ReplicasUpCase{"already_enough", 8, 4, 16, 2, -1, 2},
                      // CPU at twice its 70% target on 2 pods asks for 4.
                      ReplicasUpCase{"cpu_twice_the_target", 8, 4, 16, 2, 1.4, 4},
                      ReplicasUpCase{"cpu_capped_by_max", 8, 4, 3, 2, 1.4, 3},
                      // CPU within the tolerance of its target asks for no more.
                      ReplicasUpCase{"cpu_within_tolerance", 8, 4, 16, 2, 0.74, 2},
                      // Never more replicas than partitions, however hot the consumers.
                      ReplicasUpCase{"cpu_capped_by_partitions", 4, 4, 16, 2, 2.8, 4}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(DecideTest, CpuReasonNamesTheUtilization) {
  TopicSpec spec = BaseSpec();
  spec.partitions.min = 8;
  const PartitionMap map = Initial(8);
  LoadHistory h(seconds(120));
  Observation o = Observe(map, 0, [](uint32_t) { return 5000.0; });
  o.cpu_utilization = {{"orders-0", 1.4}, {"orders-1", 1.4}};
  h.Add(o);
  const Decision d = Decide(spec, h, map, 2, At(0));
  EXPECT_EQ(d.replicas, 4u);
  EXPECT_THAT(d.reason, HasSubstr("consumer CPU 140% against 70%"));
}

// The policy's own rule (policy.cc, step 3): partitions grow to "at least one per wanted
// replica", so that consumers the CPU asks for have partitions to take. Two partitions whose
// rate is within the target, consumed by two pods at five times their CPU target: the CPU asks
// for 10 replicas, so the decision should split to 10 partitions and run 10 replicas.
TEST(DecideTest, CpuDrivenReplicasGetPartitionsToConsume) {
  TopicSpec spec = BaseSpec();
  spec.partitions.min = 2;
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(120));
  Observation o = Observe(map, 0, [](uint32_t) { return 5000.0; });
  o.cpu_utilization = {{"orders-0", 3.5}, {"orders-1", 3.5}};
  h.Add(o);
  const Decision d = Decide(spec, h, map, 2, At(0));
  EXPECT_LE(d.replicas, d.partitions);
  EXPECT_EQ(d.partitions, 10u) << d.reason;
  EXPECT_EQ(d.replicas, 10u) << d.reason;
}

TEST(DecideTest, ReplicasGoDownOnlyToTheHighestRecommendationOfTheWindow) {
  TopicSpec spec = BaseSpec();  // window 30 s, 4 partitions per replica
  spec.partitions.min = 16;
  const PartitionMap map = Initial(16);  // by partitions: 4 replicas
  LoadHistory h(seconds(120));
  // 8 pods at half their CPU target (asks for 4), but at t=20 at 75% of it (asks for 6).
  auto observe = [&](int64_t t) {
    Observation o = Observe(map, t, [](uint32_t) { return 4800.0; });
    for (int i = 0; i < 8; ++i) o.cpu_utilization["orders-" + std::to_string(i)] = 0.35;
    if (t == 20) {
      for (auto& [pod, u] : o.cpu_utilization) u = 0.525;
    }
    h.Add(o);
  };
  for (int64_t t = 0; t <= 40; ++t) observe(t);
  const Decision d = Decide(spec, h, map, 8, At(40));
  EXPECT_EQ(d.replicas, 6u) << d.reason;
  EXPECT_THAT(d.kinds, ElementsAre(DecisionKind::kPodsDown));
  EXPECT_THAT(d.reason, HasSubstr("highest recommendation"));
  // Once t=20 has left the window, down to what the partitions ask for.
  for (int64_t t = 41; t <= 60; ++t) observe(t);
  const Decision later = Decide(spec, h, map, 6, At(60));
  EXPECT_EQ(later.replicas, 4u) << later.reason;
  EXPECT_THAT(later.kinds, ElementsAre(DecisionKind::kPodsDown));
}

TEST(DecideTest, ReplicasNeverGoBelowReplicasMin) {
  TopicSpec spec = BaseSpec();
  spec.replicas.min = 3;
  spec.partitions.min = 8;
  const PartitionMap map = Initial(8);
  LoadHistory h(seconds(120));
  Steady(h, map, 0, 40, 4800);
  const Decision d = Decide(spec, h, map, 5, At(40));
  EXPECT_EQ(d.replicas, 3u) << d.reason;
  const Decision up = Decide(spec, h, map, 1, At(40));
  EXPECT_EQ(up.replicas, 3u) << up.reason;
  EXPECT_THAT(up.kinds, Contains(DecisionKind::kPodsUp));
}

}  // namespace
}  // namespace shoal::control

namespace shoal::control {
namespace {

using namespace policy_testing;

TEST(DecisionKindTest, EveryKindReadsBackFromItsTextAndOthersDoNot) {
  for (DecisionKind k : {DecisionKind::kSplit, DecisionKind::kMerge, DecisionKind::kPodsUp,
                         DecisionKind::kPodsDown, DecisionKind::kHold}) {
    auto back = ParseDecisionKind(ToString(k));
    ASSERT_TRUE(back.has_value()) << ToString(k);
    EXPECT_EQ(*back, k);
  }
  EXPECT_FALSE(ParseDecisionKind("Split").has_value());
  EXPECT_FALSE(ParseDecisionKind("").has_value());
  EXPECT_EQ(JoinKinds({DecisionKind::kSplit, DecisionKind::kPodsUp}), "split,pods_up");
  EXPECT_EQ(JoinKinds({}), "");
}

// ---------------------------------------------------------------------------------------------
// Prediction: trends, lead times, and what Decide does with them

TEST(TrendTest, ARampIsRisingWithItsSlopeLevelAndAge) {
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(300));
  // Flat at 4,000 until t=30, then 400 ev/s more every second.
  Totals(h, map, 0, 60, [](int64_t t) { return 4000.0 + (t > 30 ? 400.0 * (t - 30) : 0); });
  auto trend = RisingTrend(h, 0.1);
  ASSERT_TRUE(trend.has_value());
  EXPECT_NEAR(trend->slope, 400, 1);
  EXPECT_NEAR(trend->level, 16000, 10);
  EXPECT_GE(trend->tau, 0.99);
  // It began 30 s ago: the flat stretch before it is not part of its age.
  EXPECT_NEAR(trend->age_s, 30, 2);
}

TEST(TrendTest, NoiseAStepAFallAndACatchUpBurstAreNotRamps) {
  const PartitionMap map = Initial(4);
  {
    // +-8% noise per observation around 10,000 for ten minutes: never a rising trend.
    const uint64_t seed = 20261202;
    SCOPED_TRACE("noise seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-0.08, 0.08);
    LoadHistory h(seconds(300));
    for (int64_t t = 0; t < 600; ++t) {
      h.Add(Observe(map, t, [&](uint32_t) { return 2500 * (1 + u(rng)); }));
      EXPECT_FALSE(RisingTrend(h, 0.1).has_value()) << "t=" << t;
    }
  }
  // No trend at any t for which `when` holds.
  auto check = [&](
                   const char* what, const std::function<double(int64_t)>& total_of,
                   const std::function<bool(int64_t)>& when = [](int64_t) { return true; }) {
    SCOPED_TRACE(what);
    LoadHistory h(seconds(300));
    for (int64_t t = 0; t <= 60; ++t) {
      Totals(h, map, t, t, total_of);
      if (when(t)) {
        EXPECT_FALSE(RisingTrend(h, 0.1).has_value()) << "t=" << t;
      }
    }
  };
  check("a step 4,000 -> 20,000 at t=30", [](int64_t t) { return t < 30 ? 4000.0 : 20000.0; });
  check("a fall", [](int64_t t) { return 20000.0 - 200.0 * static_cast<double>(t); });
  // A tenfold surge that the per-second rates show over four seconds (producers warming up).
  check("a surge seen over four samples", [](int64_t t) {
    return t < 30 ? 4000.0 : t < 34 ? 4000.0 + 9000.0 * static_cast<double>(t - 29) : 40000.0;
  });
  // Producers resuming after a pause send two seconds' worth of backlog at once.
  check("a catch-up burst", [](int64_t t) { return t == 30 || t == 31 ? 24000.0 : 8000.0; });
  // The top of a sawtooth: once the rate turned, the line is not extrapolated beyond it.
  check(
      "a sawtooth's top",
      [](int64_t t) {
        const int64_t p = t % 20;
        return p <= 10 ? 4000.0 + 1600.0 * static_cast<double>(p)
                       : 20000.0 - 1600.0 * static_cast<double>(p - 10);
      },
      [](int64_t t) { return t % 20 > 10; });
}

TEST(LoadHistoryTest, LeadTimesAreTheMedianOfTheLastMeasuredAndAPriorUntilThen) {
  LoadHistory h(seconds(60));
  auto lt = h.lead_times();
  EXPECT_EQ(lt.changes, 0u);
  EXPECT_EQ(lt.pod_starts, 0u);
  EXPECT_EQ(lt.change_s, LoadHistory::kPriorChangeSeconds);
  EXPECT_EQ(lt.pod_start_s, LoadHistory::kPriorPodStartSeconds);
  for (double s : {8.0, 9.0, 30.0}) h.RecordPodStart(std::chrono::duration<double>(s));
  h.RecordChange(std::chrono::duration<double>(0.4));
  lt = h.lead_times();
  EXPECT_EQ(lt.pod_starts, 3u);
  EXPECT_EQ(lt.pod_start_s, 9.0);  // one slow start does not move the median
  EXPECT_EQ(lt.change_s, 0.4);
  // Only the last few count: the platform got slower.
  for (int i = 0; i < 20; ++i) h.RecordPodStart(std::chrono::duration<double>(40));
  EXPECT_EQ(h.lead_times().pod_start_s, 40.0);
}

// The sample one pod's consumers of a group give over an interval: saturated (more waited than
// two seconds of what they took), or from the share of the interval they were busy.
struct CapacitySampleCase {
  const char* name;
  ConsumerLoad seen;
  std::optional<double> expect;  // per pod
  bool expect_saturated = false;
};

void PrintTo(const CapacitySampleCase& c, std::ostream* os) { *os << c.name; }

class CapacitySampleTest : public ::testing::TestWithParam<CapacitySampleCase> {};

TEST_P(CapacitySampleTest, IsWhatTheyTookSaturatedOrWhatTheyTakeWhileBusy) {
  const CapacitySampleCase& c = GetParam();
  const auto sample = LoadHistory::CapacitySampleOf(c.seen);
  ASSERT_EQ(sample.has_value(), c.expect.has_value());
  if (!c.expect) return;
  EXPECT_DOUBLE_EQ(sample->per_pod, *c.expect);
  EXPECT_EQ(sample->saturated, c.expect_saturated);
}

ConsumerLoad Over(double seconds, ConsumerLoad c) {
  c.interval_s = seconds;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CapacitySampleTest,
    ::testing::Values(
        CapacitySampleCase{"saturated", Took(1000, 4000), 1000, true},
        // Saturated, what they took is what they take, however busy they say they were.
        CapacitySampleCase{"saturated_whatever_the_busy_time", Took(1000, 4000, 0.5), 1000, true},
        // Keeping up at 500 ev/s, busy half the time: 1,000 ev/s while working.
        CapacitySampleCase{"half_busy", Took(500, 50, 0.5), 1000},
        CapacitySampleCase{"busy_all_along", Took(800, 10, 1.0), 800},
        // A batch handed out before the interval and ended in it.
        CapacitySampleCase{"a_little_over_one", Took(1000, 10, 1.25), 800},
        // At the least busy share, ten times what they took.
        CapacitySampleCase{"at_the_least_busy_share", Took(100, 0, 0.1), 1000},
        CapacitySampleCase{"busy_too_little", Took(500, 0, 0.09), std::nullopt},
        // 40 events in a second: a few batches' timing, not a measurement; in two seconds, 80.
        CapacitySampleCase{"too_few_events", Took(40, 0, 0.5), std::nullopt},
        CapacitySampleCase{"enough_events_over_a_longer_interval", Over(2, Took(40, 0, 0.5)), 80},
        CapacitySampleCase{"no_interval", Over(0, Took(500, 50, 0.5)), std::nullopt},
        // Keeping up, from a sidecar without the busy counter: nothing to tell.
        CapacitySampleCase{"keeping_up_without_busy_time", Took(500, 50), std::nullopt},
        // Waiting for parents: busy or not, nothing taken is no sample.
        CapacitySampleCase{"took_nothing", Took(0, 50000, 1.0), std::nullopt}),
    [](const auto& info) { return std::string(info.param.name); });

// What one pod's consumers take, learned from observations of them over time.
struct CapacityCase {
  const char* name;
  // Per observation: (pod, group, what its consumers took), in order.
  std::vector<std::tuple<std::string, std::string, ConsumerLoad>> seen;
  std::optional<double> expect;  // per pod
  const char* expect_group = "g";
  uint32_t expect_saturated = 0;  // of the group's samples
};

void PrintTo(const CapacityCase& c, std::ostream* os) { *os << c.name; }

class ConsumerCapacityTest : public ::testing::TestWithParam<CapacityCase> {};

TEST_P(ConsumerCapacityTest, IsTheMedianOfTheSamplesOfTheSlowestGroup) {
  const CapacityCase& c = GetParam();
  LoadHistory h(seconds(30));
  int64_t t = 0;
  for (const auto& [pod, group, load] : c.seen) {
    Observation o;
    o.at = At(t);
    t += 100;  // far apart: samples outlive the horizon
    o.consumers[pod][group] = load;
    h.Add(o);
  }
  const auto capacity = h.consumer_capacity();
  ASSERT_EQ(capacity.has_value(), c.expect.has_value());
  if (!c.expect) return;
  EXPECT_DOUBLE_EQ(capacity->per_pod, *c.expect);
  EXPECT_EQ(capacity->group, c.expect_group);
  EXPECT_EQ(capacity->saturated, c.expect_saturated);
}

std::vector<std::tuple<std::string, std::string, ConsumerLoad>> Repeated(size_t n,
                                                                         double delivered) {
  return std::vector<std::tuple<std::string, std::string, ConsumerLoad>>(
      n, {"orders-0", "g", Took(delivered, 100000)});
}

std::vector<std::tuple<std::string, std::string, ConsumerLoad>> SlowThenFast() {
  auto seen = Repeated(20, 500);
  for (const auto& s : Repeated(LoadHistory::kCapacityKept, 1000)) seen.push_back(s);
  return seen;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConsumerCapacityTest,
    ::testing::Values(
        CapacityCase{"unmeasured", {}, std::nullopt},
        // 50 events waiting at 500 ev/s are in flight, not a wait.
        CapacityCase{
            "keeping_up_is_no_measurement", {{"orders-0", "g", Took(500, 50)}}, std::nullopt},
        CapacityCase{"saturated", {{"orders-0", "g", Took(1000, 4000)}}, 1000, "g", 1},
        // Pods waiting for parents-first take nothing: no sample.
        CapacityCase{"a_pod_that_takes_nothing", {{"orders-1", "g", Took(0, 50000)}}, std::nullopt},
        // 50 events are more than 2 s at 10 ev/s, but too few to tell a wait.
        CapacityCase{"a_tiny_backlog", {{"orders-0", "g", Took(10, 50)}}, std::nullopt},
        CapacityCase{"median_over_pods_and_time",
                     {{"orders-0", "g", Took(900, 5000)},
                      {"orders-1", "g", Took(1100, 5000)},
                      {"orders-2", "g", Took(3000, 7000)},
                      {"orders-0", "g", Took(1000, 5000)}},
                     1050,
                     "g",
                     4},
        CapacityCase{"the_slowest_group",
                     {{"orders-0", "g", Took(1000, 5000)}, {"orders-0", "h", Took(400, 5000)}},
                     400,
                     "h",
                     1},
        CapacityCase{"only_the_last_few", SlowThenFast(), 1000, "g", 16},
        // Keeping up, busy half the time: measured before they ever fall behind.
        CapacityCase{"from_busy_time_before_falling_behind",
                     {{"orders-0", "g", Took(500, 50, 0.5)}, {"orders-0", "g", Took(520, 50, 0.5)}},
                     1020},
        // Saturated samples, once there are any, are what counts: 1,000 and 1,200 from busy
        // time, 900 saturated (a consumer's batches grow with its backlog, and busy time at a
        // light load reads low, the lower the lighter).
        CapacityCase{"saturated_and_busy_samples",
                     {{"orders-0", "g", Took(500, 50, 0.5)},
                      {"orders-1", "g", Took(900, 5000, 1.0)},
                      {"orders-0", "g", Took(300, 0, 0.25)}},
                     900,
                     "g",
                     1},
        CapacityCase{"the_slowest_group_from_busy_time",
                     {{"orders-0", "g", Took(1000, 5000)}, {"orders-0", "h", Took(200, 0, 0.5)}},
                     400,
                     "h"}),
    [](const auto& info) { return std::string(info.param.name); });

// The targets of `shoal up`'s flash sale (examples/flash-sale.yaml): 500 ev/s per partition, up
// to 32 partitions and 10 pods.
TopicSpec FlashSaleSpec() {
  TopicSpec spec = BaseSpec();
  spec.scaling.events_per_second_per_partition = 500;
  spec.partitions.max = 32;
  spec.replicas.max = 10;
  return spec;
}

// The unannounced flash sale of `shoal up` (issue: the first decision asked for 3 pods where the
// consumers' ~1,000 ev/s per pod needed 5): 500 ev/s over 2 partitions, then 5,000 at once, one
// pod whose consumers take 1,000 ev/s and fall behind. The first decision sizes the pods from
// what they were seen to take; unmeasured, it falls back to partitions per replica.
TEST(DecideTest, AStepSizesPodsOnTheFirstDecisionFromWhatAPodsConsumersTake) {
  TopicSpec spec = FlashSaleSpec();
  spec.scale_up.stabilization_window_seconds = 5;
  const PartitionMap map = Initial(2);
  for (const bool measured : {true, false}) {
    SCOPED_TRACE(measured ? "measured" : "unmeasured");
    LoadHistory h(seconds(65));
    uint64_t backlog = 0;
    for (int64_t t = 0; t <= 32; ++t) {
      const double rate = t <= 30 ? 500 : 5000;
      Observation o = Observe(map, t, [&](uint32_t) { return rate / 2; });
      const double taken = std::min(rate, 1000.0);
      backlog += static_cast<uint64_t>(rate - taken);
      if (measured) o.consumers["orders-0"]["g"] = Took(taken, backlog + 40);
      h.Add(o);
    }
    const Decision d = Decide(spec, h, map, 1, At(32));
    ExpectWellFormed(d, map);
    EXPECT_GE(d.partitions, 10u) << d.reason;
    if (measured) {
      EXPECT_EQ(d.replicas, 5u) << d.reason;
      EXPECT_EQ(d.partitions % d.replicas, 0u) << "as many partitions on each new pod: "
                                               << d.reason;
      EXPECT_THAT(d.reason, HasSubstr("5,000 ev/s to consume: 5 pods at 1,000 ev/s per pod "
                                      "measured (2 saturated samples of group g)"));
    } else {
      EXPECT_EQ(d.replicas, CeilDivForTest(d.partitions, 4)) << d.reason;
    }
  }
}

// `shoal up`'s unannounced ramp: 500 ev/s over 2 partitions, rising by 187.5 ev/s per s from
// t=36 s, one pod whose consumers take up to 1,000 ev/s. Its first scale-up comes before they
// fall behind: with the sidecar's busy counter (busy = what they took / 1,000) it sizes the pods
// from what they take while working; without it, by partitions per replica.
TEST(DecideTest, ARampSizesPodsOnTheFirstDecisionFromTheConsumersBusyTime) {
  const TopicSpec spec = FlashSaleSpec();
  const PartitionMap map = Initial(2);
  for (const bool busy : {true, false}) {
    SCOPED_TRACE(busy ? "busy time" : "no busy counter");
    LoadHistory h(seconds(65));
    double backlog = 0;
    std::optional<Decision> first;
    for (int64_t t = 0; t <= 60 && !first; ++t) {
      const double rate = 500 + 187.5 * static_cast<double>(std::max<int64_t>(0, t - 36));
      Observation o = Observe(map, t, [&](uint32_t) { return rate / 2; });
      const double taken = std::min(rate + backlog, 1000.0);
      backlog += rate - taken;
      o.consumers["orders-0"]["g"] =
          Took(taken, static_cast<uint64_t>(backlog),
               busy ? std::optional<double>(taken / 1000) : std::nullopt);
      h.Add(o);
      if (Decision d = Decide(spec, h, map, 1, At(t)); !d.holds()) first = d;
    }
    ASSERT_TRUE(first.has_value());
    ExpectWellFormed(*first, map);
    // Before anything waited long enough to be a saturated sample.
    EXPECT_FALSE(h.consumer_capacity() && h.consumer_capacity()->saturated > 0);
    if (busy) {
      // Sized for the 3,188 ev/s predicted at 1,000 ev/s per pod: 4 pods, where 8 partitions
      // at 4 per replica give 2.
      EXPECT_EQ(first->replicas, 4u) << first->reason;
      EXPECT_THAT(first->reason, HasSubstr("3,188 ev/s to consume: 4 pods at 1,000 ev/s per pod "
                                           "measured (16 samples of group g from busy time)"));
    } else {
      EXPECT_THAT(first->reason, Not(HasSubstr("measured")));
      EXPECT_EQ(first->replicas, CeilDivForTest(first->partitions, 4)) << first->reason;
    }
  }
}

// The example: 5,000 ev/s arrive, 40,000 events wait (target 5,000) and one pod's
// consumers were seen to take 1,010 ev/s. The first decision sizes partitions and pods for the
// arrivals plus the backlog over drainSeconds, and says so; once the surge is over, a backlog
// still above its target holds every pod and partition, and asks for nothing more.
TEST(DecideTest, ABacklogIsSizedForOnTheFirstDecisionAndHoldsScaleDownWhileItWaits) {
  TopicSpec spec = FlashSaleSpec();
  spec.scaling.consumer_lag_events = 5000;
  spec.scaling.drain_seconds = 30;
  spec.scale_down.stabilization_window_seconds = 5;
  const PartitionMap map = Initial(2);
  LoadHistory h(seconds(65));
  for (int64_t t = 0; t <= 40; ++t) {
    const double rate = t < 39 ? 500 : 5000;
    Observation o = Observe(map, t, [&](uint32_t) { return rate / 2; });
    if (t >= 39) {
      o.partitions[PartitionId(0)].lag = 20000;
      o.partitions[PartitionId(1)].lag = 20000;
      o.consumers["orders-0"]["g"] = Took(1010, 40000);
    }
    h.Add(o);
  }
  const Decision d = Decide(spec, h, map, 1, At(40));
  ExpectWellFormed(d, map);
  // 5,000 + 40,000 / 30 = 6,333 ev/s: 3,167 on each partition, 7 pieces each at 500; and
  // ceil(6,333 / 1,010) = 7 pods.
  EXPECT_EQ(d.partitions, 14u) << d.reason;
  EXPECT_EQ(d.replicas, 7u) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("backlog 40,000 to drain in 30 s: +1,333 ev/s"));
  EXPECT_THAT(d.reason, HasSubstr("6,333 ev/s to consume: 7 pods at 1,010 ev/s per pod measured"));
  // Without the backlog, the arrivals alone: 10 partitions, 5 pods.
  TopicSpec patient = spec;
  patient.scaling.consumer_lag_events = 50000;
  const Decision arrivals = Decide(patient, h, map, 1, At(40));
  EXPECT_EQ(arrivals.partitions, 10u) << arrivals.reason;
  EXPECT_EQ(arrivals.replicas, 5u) << arrivals.reason;
  EXPECT_THAT(arrivals.reason, Not(HasSubstr("backlog")));

  // Later: 14 partitions on 7 pods, the surge over (500 ev/s), 20,000 still waiting.
  const PartitionMap after = [&] {
    MapChange c(map);
    for (const auto& s : d.splits) EXPECT_TRUE(c.Split(s.partition, s.cuts).ok());
    auto m = c.Build();
    EXPECT_TRUE(m.ok());
    return WithoutSealedForTest(*m);
  }();
  for (int64_t t = 41; t <= 80; ++t) {
    Observation o = Observe(after, t, [](uint32_t) { return 500.0 / 14; });
    o.partitions.begin()->second.lag = 20000;
    h.Add(o);
  }
  const Decision later = Decide(spec, h, after, 7, At(80));
  EXPECT_TRUE(later.holds()) << later.reason;
  EXPECT_THAT(later.reason, HasSubstr("nothing shrinks while a backlog waits"));
}

// Right after a split the successors have no rate yet: the arrivals read low, and the backlog
// spread over the few partitions whose rate is known would split them again for nothing (shoal
// up's unannounced sale went 11 -> 13 -> 16 on "arrival 393 ev/s"). The backlog sizes pods, not
// partitions, until every rate is known.
TEST(DecideTest, ABacklogDoesNotSplitTheFewPartitionsWhoseRateIsKnownAfterAChange) {
  TopicSpec spec = FlashSaleSpec();
  spec.scaling.consumer_lag_events = 5000;
  spec.scaling.drain_seconds = 30;
  const PartitionMap map = Initial(8);
  LoadHistory h(seconds(65));
  for (int64_t t = 0; t <= 40; ++t) {
    Observation o = Observe(map, t, [](uint32_t) { return 400.0; });
    if (t >= 30) o.consumers["orders-0"]["g"] = Took(1000, 40000);  // capacity measured
    if (t == 40) {
      for (uint32_t id = 2; id < 8; ++id) o.partitions.erase(PartitionId(id));  // no rate yet
      o.partitions[PartitionId(0)].lag = 12500;
      o.partitions[PartitionId(1)].lag = 12500;
    }
    h.Add(o);
  }
  const Decision d = Decide(spec, h, map, 8, At(40));
  EXPECT_THAT(d.splits, IsEmpty()) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("without a current rate"));
}

// Pods come down only to what the window's peak rate needs at the measured capacity (less the
// tolerance), though the partitions alone would allow fewer; and go up to it at once.
TEST(DecideTest, PodsFollowTheWindowsRateAtTheMeasuredCapacity) {
  TopicSpec spec = BaseSpec();           // 5,000 ev/s per partition, 4 per replica, window 30 s
  spec.partitions.min = 16;              // no merges: only pods are under test
  const PartitionMap map = Initial(16);  // by partitions: 4 pods
  LoadHistory h(seconds(120));
  for (int64_t t = 0; t <= 60; ++t) {
    Observation o = Observe(map, t, [](uint32_t) { return 500.0; });  // 8,000 in all
    // Early on the consumers fell behind at 1,000 ev/s per pod.
    if (t < 10) o.consumers["orders-" + std::to_string(t % 3)]["g"] = Took(1000, 20000);
    h.Add(o);
  }
  // 8,000 / (1,000 x 0.9): 9 pods.
  const Decision down = Decide(spec, h, map, 12, At(60));
  EXPECT_EQ(down.replicas, 9u) << down.reason;
  EXPECT_THAT(down.kinds, ElementsAre(DecisionKind::kPodsDown));
  // 8,000 / 1,000: 8 pods, from 3 at once.
  const Decision up = Decide(spec, h, map, 3, At(60));
  EXPECT_EQ(up.replicas, 8u) << up.reason;
  EXPECT_THAT(up.reason, HasSubstr("8,000 ev/s to consume: 8 pods at 1,000 ev/s per pod"));
}

TEST(DecideTest, OnARampPredictionSizesPartitionsAndPodsAheadAndSaysWhy) {
  TopicSpec spec = BaseSpec();  // 5,000 ev/s per partition, 4 per replica
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(300));
  for (int i = 0; i < 3; ++i) h.RecordPodStart(std::chrono::duration<double>(8));
  h.RecordChange(std::chrono::duration<double>(1));
  // 16,000 rising by 1,000 ev/s every second for 10 s: 4 x 5,000 holds it for now, but not in
  // the 9 s a change and new pods take.
  Totals(h, map, 0, 40, [](int64_t t) { return 16000.0 + (t > 30 ? 1000.0 * (t - 30) : 0); });
  const Decision reactive = [&] {
    TopicSpec off = spec;
    off.scale_up.predictive = false;
    return Decide(off, h, map, 1, At(40));
  }();
  const Decision d = Decide(spec, h, map, 1, At(40));
  ExpectWellFormed(d, map);
  // Present: 26,000 over 4 partitions is 6,500 each, two pieces each.
  EXPECT_EQ(reactive.partitions, 8u) << reactive.reason;
  EXPECT_THAT(reactive.reason, Not(HasSubstr("rising")));
  // Predicted: 26,000 + 1,000 x 2 x max(9, 10) s = 46,000, 11,500 per partition: three pieces
  // each, 12 partitions and 3 pods, in one step.
  EXPECT_EQ(d.partitions, 12u) << d.reason;
  EXPECT_EQ(d.replicas, 3u) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("rising 1,000 ev/s per s for 10 s"));
  EXPECT_THAT(d.reason, HasSubstr("change 1 s learned from 1 + pod start 8 s learned from 3"));
  EXPECT_THAT(d.reason, HasSubstr("sized for 46,000 ev/s expected in 20 s"));
}

TEST(DecideTest, PredictionActsOnlyWhenTheCapacityWillFallShortAndNeverShrinks) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(8);  // 40,000 ev/s at the target
  LoadHistory h(seconds(300));
  h.RecordChange(std::chrono::duration<double>(1));
  // Rising 300 ev/s per s from 10,000 to 16,000: 16 s out (change 1 s + pod start 15 s
  // assumed) it is still far below what 8 partitions and 2 pods hold.
  Totals(h, map, 0, 40, [](int64_t t) { return 10000.0 + (t > 20 ? 300.0 * (t - 20) : 0); });
  Decision d = Decide(spec, h, map, 2, At(40));
  EXPECT_TRUE(d.holds()) << d.reason;
  // And on a rising trend nothing shrinks, though the window's peak would allow merges.
  EXPECT_THAT(d.merges, IsEmpty());
  EXPECT_THAT(d.reason, HasSubstr("nothing shrinks on a rising trend"));
}

TEST(DecideTest, ACatchUpBurstIsSizedForWhatWasSeenNotExtrapolated) {
  const TopicSpec spec = BaseSpec();
  const PartitionMap map = Initial(4);
  LoadHistory h(seconds(300));
  Totals(h, map, 0, 39, [](int64_t) { return 16000.0; });
  Totals(h, map, 40, 41, [](int64_t) { return 48000.0; });  // two seconds of backlog at once
  const Decision d = Decide(spec, h, map, 1, At(41));
  // What the present asks (12,000 per partition, three pieces each), and no more.
  EXPECT_EQ(d.partitions, 12u) << d.reason;
  EXPECT_THAT(d.reason, Not(HasSubstr("rising")));
}

TEST(DecideTest, APodThatCanOpenNoMorePartitionsIsSplitOnlyWithinItsRoomAndPodsAreAdded) {
  const TopicSpec spec = BaseSpec();    // 5,000 ev/s per partition, 4 per replica
  const PartitionMap map = Initial(2);  // both on orders-0
  LoadHistory h(seconds(300));
  for (int64_t t = 0; t <= 40; ++t) {
    Observation o = Observe(map, t, [&](uint32_t) { return t < 40 ? 4000.0 : 20000.0; });
    // Its sidecar can hold 6 partitions (it holds 2): room for 4 more.
    o.max_partitions["orders-0"] = 6;
    h.Add(o);
  }
  TopicSpec off = spec;
  off.scale_up.predictive = false;
  const Decision d = Decide(off, h, map, 1, At(40));
  ExpectWellFormed(d, map);
  // The rate wants 4 pieces of each (8 partitions); in place the pod opens 4 more: 2 each.
  EXPECT_EQ(d.partitions, 4u) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("pod orders-0 can hold no more partitions"));
  // The rest goes to new pods: enough for the 8 wanted at 3 per pod (6, sealed parents
  // included).
  EXPECT_EQ(d.replicas, 3u) << d.reason;
  // Without a limit it splits all the way in one step.
  LoadHistory free_history(seconds(300));
  for (int64_t t = 0; t <= 40; ++t) {
    free_history.Add(Observe(map, t, [&](uint32_t) { return t < 40 ? 4000.0 : 20000.0; }));
  }
  EXPECT_EQ(Decide(off, free_history, map, 1, At(40)).partitions, 8u);
}

}  // namespace
}  // namespace shoal::control
