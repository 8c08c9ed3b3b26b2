// Tests of RangeStanding (common/src/range_standing.cc): a group's standing per hash point.
#include "shoal/common/range_standing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

namespace shoal {
namespace {

TEST(RangeStandingTest, StartsAtItsBaseEverywhere) {
  RangeStanding s({100, 200}, 7);
  EXPECT_EQ(s.Low(), 7u);
  EXPECT_EQ(s.At(150), 7u);
  EXPECT_EQ(s.MinOver({0, kHashSpace}), 7u);
  EXPECT_TRUE(s.raised().empty());
  EXPECT_EQ(s.Pieces(), (std::vector<RangeOffset>{{100, 200, 7}}));
}

TEST(RangeStandingTest, RaisingASubRangeLeavesTheRestAndTheLow) {
  RangeStanding s({0, 100}, 0);
  EXPECT_TRUE(s.Raise({20, 40}, 10));
  EXPECT_EQ(s.Low(), 0u);
  EXPECT_EQ(s.At(19), 0u);
  EXPECT_EQ(s.At(20), 10u);
  EXPECT_EQ(s.At(39), 10u);
  EXPECT_EQ(s.At(40), 0u);
  EXPECT_EQ(s.MinOver({20, 40}), 10u);
  EXPECT_EQ(s.MinOver({25, 30}), 10u);
  EXPECT_EQ(s.MinOver({19, 30}), 0u);
  EXPECT_FALSE(s.Raise({20, 40}, 5)) << "a lower commit changes nothing";
  EXPECT_FALSE(s.Raise({20, 40}, 10));
  EXPECT_EQ(s.Pieces(), (std::vector<RangeOffset>{{0, 20, 0}, {20, 40, 10}, {40, 100, 0}}));
}

TEST(RangeStandingTest, CoveringTheDomainRaisesTheBase) {
  RangeStanding s({0, 100}, 0);
  s.Raise({0, 50}, 10);
  s.Raise({50, 100}, 12);
  EXPECT_EQ(s.Low(), 10u);
  EXPECT_EQ(s.base(), 10u);
  EXPECT_EQ(s.raised(), (std::vector<RangeOffset>{{50, 100, 12}}));
  s.Raise({0, 50}, 12);
  EXPECT_EQ(s.base(), 12u);
  EXPECT_TRUE(s.raised().empty()) << "neighbours of one offset merge, and the base takes them";
}

TEST(RangeStandingTest, RaiseAllOnlyRaises) {
  RangeStanding s({0, 100}, 5);
  s.Raise({10, 20}, 30);
  EXPECT_TRUE(s.RaiseAll(20));
  EXPECT_EQ(s.At(15), 30u) << "a point beyond the new base keeps its standing";
  EXPECT_EQ(s.At(50), 20u);
  EXPECT_FALSE(s.RaiseAll(10));
}

TEST(RangeStandingTest, RangesOutsideTheDomainAreIgnored) {
  RangeStanding s({100, 200}, 0);
  EXPECT_FALSE(s.Raise({0, 100}, 9));
  EXPECT_FALSE(s.Raise({200, 300}, 9));
  EXPECT_TRUE(s.Raise({150, 300}, 9));
  EXPECT_EQ(s.raised(), (std::vector<RangeOffset>{{150, 200, 9}}));
}

TEST(RangeStandingTest, ClampBringsEveryPointDown) {
  RangeStanding s({0, 100}, 40);
  s.Raise({0, 30}, 90);
  EXPECT_TRUE(s.ClampTo(50));
  EXPECT_EQ(s.At(10), 50u);
  EXPECT_EQ(s.At(60), 40u);
}

TEST(RangeStandingTest, LagEstimateWeighsByWidth) {
  RangeStanding s({0, 100}, 0);
  EXPECT_DOUBLE_EQ(s.LagEstimate(80), 80);
  s.Raise({0, 50}, 80);
  EXPECT_DOUBLE_EQ(s.LagEstimate(80), 40);
}

TEST(RangeStandingTest, RebuildsFromItsPieces) {
  RangeStanding s({0, 1000}, 3);
  s.Raise({10, 20}, 5);
  s.Raise({500, 900}, 7);
  RangeStanding t({0, 1000}, s.base(), s.raised());
  EXPECT_EQ(s, t);
}

TEST(RangeSetsTest, NormalizeAndSubtract) {
  EXPECT_EQ(NormalizeRanges({{50, 60}, {0, 10}, {10, 20}, {55, 70}, {30, 30}}),
            (std::vector<HashRange>{{0, 20}, {50, 70}}));
  EXPECT_EQ(SubtractRanges({{0, 100}}, {{10, 20}, {50, 60}}),
            (std::vector<HashRange>{{0, 10}, {20, 50}, {60, 100}}));
  EXPECT_EQ(SubtractRanges({{0, 10}, {20, 30}}, {{5, 25}}),
            (std::vector<HashRange>{{0, 5}, {25, 30}}));
  EXPECT_TRUE(SubtractRanges({{0, 10}}, {{0, 10}}).empty());
}

// Against a per-point oracle over a small domain: every operation agrees with an array of
// standings, one per hash point.
TEST(RangeStandingTest, AgreesWithAPerPointOracle) {
  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    const uint64_t lo = rng() % 8, hi = lo + 1 + rng() % 40;
    std::vector<uint64_t> oracle(hi - lo, 0);
    RangeStanding s({lo, hi}, 0);
    for (int op = 0; op < 30; ++op) {
      const uint64_t a = rng() % 56, b = a + rng() % 20, off = rng() % 50;
      if (rng() % 6 == 0) {
        s.RaiseAll(off);
        for (auto& o : oracle) o = std::max(o, off);
      } else {
        s.Raise({a, b}, off);
        for (uint64_t h = std::max(a, lo); h < std::min(b, hi); ++h) {
          oracle[h - lo] = std::max(oracle[h - lo], off);
        }
      }
      for (uint64_t h = lo; h < hi; ++h) {
        ASSERT_EQ(s.At(static_cast<uint32_t>(h)), oracle[h - lo]) << "seed " << seed;
      }
      ASSERT_EQ(s.Low(), *std::min_element(oracle.begin(), oracle.end())) << "seed " << seed;
      const uint64_t qa = lo + rng() % (hi - lo), qb = qa + 1 + rng() % (hi - qa);
      ASSERT_EQ(s.MinOver({qa, qb}),
                *std::min_element(oracle.begin() + (qa - lo), oracle.begin() + (qb - lo)))
          << "seed " << seed;
      ASSERT_LE(s.raised().size(), oracle.size());
    }
  }
}

}  // namespace
}  // namespace shoal
