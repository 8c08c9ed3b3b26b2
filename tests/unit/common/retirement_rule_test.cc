// Tests of the retirement rule (common/src/retirement_rule.cc), which the sidecar, the planner
// and the protocol simulation share: a sealed partition is consumed when every group the topic
// knows stands at its end; retirement goes parents first and one pod's partitions at a time.
#include "shoal/common/retirement_rule.h"

#include <gtest/gtest.h>

namespace shoal {
namespace {

PartitionMap Must(Result<PartitionMap> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : PartitionMap();
}

TEST(FirstNotConsumedTest, EveryGroupTheTopicKnowsMustStandAtTheEnd) {
  const HeldPartition p{0, 100, true, {{"billing", 100}, {"audit", 60}}};
  auto n = FirstNotConsumed(p, {"audit", "billing"});
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->group, "audit");
  EXPECT_EQ(n->stands, 60u);
  EXPECT_EQ(NotConsumedMessage(PartitionId(3), *n),
            "the map retires partition 3, which group audit has consumed to 60 of 100");
  EXPECT_FALSE(FirstNotConsumed(p, {"billing"}).has_value());
}

TEST(FirstNotConsumedTest, AGroupThatNeverCommittedHereStandsAtTheOldestEvent) {
  // search knows the topic but never read this partition: it holds every event back, not none.
  const HeldPartition p{0, 100, true, {{"billing", 100}}};
  auto n = FirstNotConsumed(p, {"billing", "search"});
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->group, "search");
  EXPECT_EQ(n->stands, 0u);
  // Retention removed everything below 100: nothing is left for it to read.
  EXPECT_FALSE(FirstNotConsumed(HeldPartition{100, 100, true, {}}, {"search"}).has_value());
}

TEST(FirstNotConsumedTest, WithoutAnyGroupOnlyAnEmptyPartitionIsConsumed) {
  EXPECT_FALSE(FirstNotConsumed(HeldPartition{5, 5, true, {}}, {}).has_value());
  auto n = FirstNotConsumed(HeldPartition{0, 7, true, {}}, {});
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->group, "");
  EXPECT_EQ(NotConsumedMessage(PartitionId(2), *n),
            "the map retires partition 2, which holds 7 events and the topic has no consumer "
            "group yet to read them");
}

TEST(FirstNotConsumedTest, AnActivePartitionIsNeverConsumed) {
  EXPECT_TRUE(FirstNotConsumed(HeldPartition{0, 10, false, {{"g", 10}}}, {"g"}).has_value());
  EXPECT_TRUE(FirstNotConsumed(HeldPartition{0, 0, false, {}}, {}).has_value());
}

TEST(CheckRetirementShapeTest, ParentsFirstAndOnePodsPartitionsAtATime) {
  // p0 on a, p1 on b; p0 splits into p2, p3 (on a); p2 splits into p4, p5.
  PartitionMap m = Must(PartitionMap::Initial("orders", 2, {PodName("a"), PodName("b")}));
  m = Must(m.Split(PartitionId(0), uint64_t{1} << 30));
  m = Must(m.WithEndOffset(PartitionId(0), 10));
  m = Must(m.Split(PartitionId(2), uint64_t{1} << 29));
  m = Must(m.WithEndOffset(PartitionId(2), 5));
  EXPECT_TRUE(CheckRetirementShape(m, m).ok());

  const Status early = CheckRetirementShape(m, Must(m.WithoutRetired(PartitionId(2))));
  EXPECT_EQ(early.code(), Status::Code::kConflict);
  EXPECT_EQ(early.message(), "the map retires partition 2 before its parent 0");

  const PartitionMap both = Must(Must(m.WithoutRetired(PartitionId(0))).WithoutRetired(PartitionId(2)));
  EXPECT_TRUE(CheckRetirementShape(m, both).ok()) << "a parent and its child together";

  // Partitions of two pods in one map.
  PartitionMap two = Must(m.Split(PartitionId(1), uint64_t{3} << 30));
  two = Must(two.WithEndOffset(PartitionId(1), 4));
  const PartitionMap retire_both =
      Must(Must(two.WithoutRetired(PartitionId(0))).WithoutRetired(PartitionId(1)));
  const Status pods = CheckRetirementShape(two, retire_both);
  EXPECT_EQ(pods.code(), Status::Code::kConflict);
  EXPECT_EQ(pods.message(), "the map retires partitions of 2 pods; one pod's at a time");
}

}  // namespace
}  // namespace shoal
