// Tests of the leader's quorum tracker (sidecar/src/broker/quorum_tracker.h): the mark a quorum
// of copies holds, and what moves it.
#include "broker/quorum_tracker.h"

#include <gtest/gtest.h>

namespace shoal::broker {
namespace {

const auto kSoon = std::chrono::steady_clock::now() + std::chrono::hours(1);

TEST(QuorumTrackerTest, TheMarkIsWhatAQuorumWithTheLeaderHolds) {
  QuorumTracker q;
  EXPECT_FALSE(q.replicated());
  EXPECT_EQ(q.followers_mark(), UINT64_MAX);
  q.SetFollowers({PodName("b"), PodName("c")}, 0);
  EXPECT_TRUE(q.replicated());
  EXPECT_EQ(q.followers_mark(), 0u);
  EXPECT_TRUE(q.Holds("b", 5, 10, 1));
  EXPECT_EQ(q.followers_mark(), 5u);  // the leader and b: 2 of 3
  EXPECT_TRUE(q.Holds("c", 8, 10, 2));
  EXPECT_EQ(q.followers_mark(), 8u);
  EXPECT_FALSE(q.Holds("d", 9, 10, 3));  // not a follower the map names
}

TEST(QuorumTrackerTest, ACopyThatHoldsLessThanItSaidLowersTheMark) {
  // A follower whose volume was emptied fetches from 0 again: what it said it held before no
  // longer counts towards the quorum (invariant 9).
  QuorumTracker q;
  q.SetFollowers({PodName("b"), PodName("c")}, 0);
  q.Holds("b", 6, 6, 1);
  ASSERT_EQ(q.followers_mark(), 6u);
  EXPECT_TRUE(q.Holds("b", 0, 6, 2));
  EXPECT_EQ(q.followers_mark(), 0u);
  Status answered = Status::Internal("not answered");
  q.OnReached(3, kSoon, [&](Status st) { answered = st; });
  EXPECT_EQ(answered.code(), Status::Code::kInternal);  // waits
  q.Holds("c", 3, 6, 3);
  EXPECT_TRUE(answered.ok());
}

TEST(QuorumTrackerTest, TheEndOfASealedPartitionIsAFloorARestartedLeaderKeeps) {
  // A leader restarts: its followers start at 0. The map records the partition sealed at 7,
  // which a quorum held when the seal was answered; its followers, holding 7, fetch no more.
  QuorumTracker q;
  q.SetFollowers({PodName("b"), PodName("c")}, 0);
  ASSERT_EQ(q.followers_mark(), 0u);
  EXPECT_TRUE(q.HeldByQuorum(7));
  EXPECT_EQ(q.followers_mark(), 7u);
  EXPECT_FALSE(q.HeldByQuorum(7));
  EXPECT_FALSE(q.HeldByQuorum(3));  // a floor never falls
  q.Holds("b", 0, 7, 1);
  EXPECT_EQ(q.followers_mark(), 7u);
  EXPECT_TRUE(q.Await(7, std::chrono::milliseconds(0)).ok());
  EXPECT_FALSE(q.Await(8, std::chrono::milliseconds(0)).ok());
}

}  // namespace
}  // namespace shoal::broker
