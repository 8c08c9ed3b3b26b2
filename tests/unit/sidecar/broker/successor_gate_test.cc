// Tests of SuccessorGate (sidecar/src/broker/successor_gate.cc), the parents-first rule per hash
// point, over maps with lost partitions: a lost partition has nothing to read, but its own
// parents may still hold a key's earlier events, so the gate walks past it and never stops at
// it.
#include "broker/successor_gate.h"

#include <gtest/gtest.h>

#include <map>

namespace shoal::broker {
namespace {

PartitionMap Must(Result<PartitionMap> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : PartitionMap();
}

class SuccessorGateTest : public ::testing::Test {
 protected:
  // p0 on a is moved to b (p1, sealed p0 at end 10); then b's volume is emptied: p1 is declared
  // lost and p2 takes its range on b. p2's lineage: p1 (lost), then p0 (10 events on a).
  void SetUp() override {
    PartitionMap m = Must(PartitionMap::Initial("orders", 1, PodName("a")));
    m = Must(Must(m.Move(PartitionId(0), PodName("b"))).WithEndOffset(PartitionId(0), 10));
    map_ = Must(m.DeclareLost(PodName("b")));
    ASSERT_TRUE(map_.Find(PartitionId(1))->lost);
    s_ = *map_.Find(PartitionId(2));
  }
  SuccessorGate::Standing Standing() {
    return [this](PartitionId id, const std::string&, const HashRange&) -> std::optional<uint64_t> {
      ++asked_[id.value()];
      auto it = stands_.find(id.value());
      if (it == stands_.end()) return std::nullopt;
      return it->second;
    };
  }
  SuccessorGate::End End() {
    return [](const PartitionInfo& p) { return p.end_offset; };
  }

  PartitionMap map_;
  PartitionInfo s_;
  std::map<uint32_t, uint64_t> stands_;
  std::map<uint32_t, int> asked_;
  SuccessorGate gate_;
};

TEST_F(SuccessorGateTest, ALostParentIsWalkedPastToTheEventsBeforeIt) {
  // p0 unread: the successor waits, and its consumers read p0 over its range, not p1.
  stands_[0] = 0;
  EXPECT_FALSE(gate_.Released(map_, s_, "g", Standing(), End()));
  const auto frontier = gate_.Frontier(map_, s_, "g", Standing(), End());
  ASSERT_EQ(frontier.size(), 1u);
  EXPECT_EQ(frontier[0].partition->id, PartitionId(0));
  EXPECT_EQ(frontier[0].range, s_.range);
  EXPECT_EQ(asked_.count(1), 0u) << "nobody holds a lost partition's commits to ask for";
  // p0 consumed: released, without ever asking where the group stands in p1.
  stands_[0] = 10;
  EXPECT_TRUE(gate_.Frontier(map_, s_, "g", Standing(), End()).empty());
  EXPECT_TRUE(gate_.Released(map_, s_, "g", Standing(), End()));
  EXPECT_EQ(asked_.count(1), 0u);
}

TEST_F(SuccessorGateTest, ALostParentWhoseParentsRetiredReleasesAtOnce) {
  // p0 retired (every group consumed it): p2's lineage is only the lost p1.
  const PartitionMap without_p0 = Must(map_.WithoutRetired(PartitionId(0)));
  EXPECT_TRUE(gate_.Released(without_p0, *without_p0.Find(PartitionId(2)), "g", Standing(), End()));
  EXPECT_TRUE(asked_.empty());
}

}  // namespace
}  // namespace shoal::broker
