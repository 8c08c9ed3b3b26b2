// The rules of replication (common/replication.h): quorum, high watermark, placement, leader
// choice and truncation point.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "shoal/common/replication.h"

namespace shoal::replication {
namespace {

std::vector<PodName> Pods(std::initializer_list<const char*> names) {
  std::vector<PodName> out;
  for (const char* n : names) out.push_back(PodName(n));
  return out;
}

TEST(ReplicationRulesTest, AQuorumIsAMajorityOfTheCopies) {
  EXPECT_EQ(QuorumOf(1), 1u);
  EXPECT_EQ(QuorumOf(2), 2u);
  EXPECT_EQ(QuorumOf(3), 2u);
  EXPECT_EQ(QuorumOf(4), 3u);
  EXPECT_EQ(QuorumOf(5), 3u);
}

TEST(ReplicationRulesTest, TheHighWatermarkIsWhatAQuorumHolds) {
  EXPECT_EQ(HighWatermark(10, {}), 10u);                  // factor 1: the leader's end
  const uint64_t two[] = {4, 7};
  EXPECT_EQ(HighWatermark(10, two), 7u);                  // leader and the faster follower
  const uint64_t lagging[] = {0, 0};
  EXPECT_EQ(HighWatermark(10, lagging), 0u);              // no follower reported: nothing
  const uint64_t ahead[] = {12, 11};                      // followers ahead of the leader's
  EXPECT_EQ(HighWatermark(10, ahead), 11u);               // durable end (fsync in flight)
  const uint64_t four[] = {9, 3, 5, 8};
  EXPECT_EQ(HighWatermark(10, four), 8u);                 // 3 of 5 hold below 8
  const uint64_t one[] = {3};
  EXPECT_EQ(HighWatermark(10, one), 3u);                  // factor 2: both copies
}

// Six pods in three zones, two per zone: the three copies of every partition are in three zones,
// so losing a zone loses one copy of each.
TEST(ReplicationRulesTest, CopiesGoToDistinctZonesFirst) {
  const auto pods = Pods({"a", "b", "c", "d", "e", "f"});
  auto map = PartitionMap::Initial("t", 6, pods).value();
  const std::map<std::string, PodPlace> places = {{"a", {"n1", "z1"}}, {"b", {"n2", "z1"}},
                                                  {"c", {"n3", "z2"}}, {"d", {"n4", "z2"}},
                                                  {"e", {"n5", "z3"}}, {"f", {"n6", "z3"}}};
  auto placed = PlaceReplicas(map, pods, 3, places).value();
  for (const auto& p : placed.partitions()) {
    std::set<std::string> zones = {places.at(p.owner.value()).zone};
    for (const auto& r : p.replicas) zones.insert(places.at(r.value()).zone);
    EXPECT_EQ(zones.size(), 3u) << p.id;
  }
}

TEST(ReplicationRulesTest, FollowersGoOnOtherPodsSpreadEvenlyAndStay) {
  auto map = PartitionMap::Initial("t", 6, Pods({"a", "b", "c"})).value();
  auto placed = PlaceReplicas(map, Pods({"a", "b", "c"}), 3).value();
  std::map<std::string, size_t> follows;
  for (const auto& p : placed.partitions()) {
    ASSERT_EQ(p.replicas.size(), 2u) << p.id;
    for (const auto& r : p.replicas) {
      EXPECT_NE(r, p.owner);
      ++follows[r.value()];
    }
  }
  EXPECT_EQ(follows["a"], 4u);
  EXPECT_EQ(follows["b"], 4u);
  EXPECT_EQ(follows["c"], 4u);
  EXPECT_EQ(placed.epoch(), map.epoch());
  // Placing again changes nothing; a split's successors get followers, the others keep theirs.
  EXPECT_EQ(PlaceReplicas(placed, Pods({"a", "b", "c"}), 3).value(), placed);
  auto split = placed.Split(PartitionId(0), kHashSpace / 12).value();
  auto again = PlaceReplicas(split, Pods({"a", "b", "c"}), 3).value();
  for (const auto& p : again.partitions()) {
    if (p.active()) {
      EXPECT_EQ(p.replicas.size(), 2u) << p.id;
    }
    if (const auto* before = placed.Find(p.id)) {
      EXPECT_EQ(p.replicas, before->replicas) << p.id;
    }
  }
}

TEST(ReplicationRulesTest, AGonePodIsReplacedAndFewerPodsMeanFewerCopies) {
  auto map = PartitionMap::Initial("t", 4, Pods({"a", "b", "c"})).value();
  auto placed = PlaceReplicas(map, Pods({"a", "b", "c", "d"}), 3).value();
  auto without_d = PlaceReplicas(placed, Pods({"a", "b", "c"}), 3).value();
  for (const auto& p : without_d.partitions()) {
    ASSERT_EQ(p.replicas.size(), 2u);
    for (const auto& r : p.replicas) EXPECT_NE(r.value(), "d");
    // Followers that stayed are kept in their place.
    const auto& before = placed.Find(p.id)->replicas;
    if (before[0].value() != "d") {
      EXPECT_EQ(p.replicas[0], before[0]);
    }
  }
  auto two_pods = PlaceReplicas(map, Pods({"a", "b"}), 3).value();
  for (const auto& p : two_pods.partitions()) {
    EXPECT_EQ(p.replicas.size(), 1u) << p.id;  // two pods: two copies
  }
  auto factor_one = PlaceReplicas(placed, Pods({"a", "b", "c"}), 1).value();
  for (const auto& p : factor_one.partitions()) EXPECT_TRUE(p.replicas.empty());
  EXPECT_FALSE(PlaceReplicas(map, Pods({"a"}), 0).ok());
  EXPECT_FALSE(PlaceReplicas(map, Pods({"a"}), 6).ok());
}

// A scale-down from four pods to three moves d's copies as Kafka reassigns a replica: each gets
// a replacement on a pod that stays (joining), d's copy stays beside it, and only a placement
// without d among the leaving pods drops it.
TEST(ReplicationRulesTest, ALeavingPodsCopiesStayBesideTheirReplacementsUntilDropped) {
  auto map = PartitionMap::Initial("t", 4, Pods({"a", "b", "c"})).value();
  auto placed = PlaceReplicas(map, Pods({"a", "b", "c", "d"}), 3).value();
  placed = placed.WithEpoch(Epoch(placed.epoch().value() + 1));
  // One partition sealed (its owner stays, a copy is on d), as a scale-down leaves parents.
  PartitionId sealed_id(0);
  for (const auto& p : placed.partitions()) {
    if (p.FollowedBy(PodName("d"))) sealed_id = p.id;
  }
  auto split = placed.Split(sealed_id, placed.Find(sealed_id)->range.lo + 1).value();
  split = PlaceReplicas(split, Pods({"a", "b", "c", "d"}), 3).value();
  // The scale-down's change, a map later (here a split of another partition).
  for (const auto& p : split.partitions()) {
    if (p.active() && !p.FollowedBy(PodName("d"))) {
      split = split.Split(p.id, p.range.lo + 1).value();
      break;
    }
  }
  const std::set<PodName> leaving = {PodName("d")};
  auto moving = PlaceReplicas(split, Pods({"a", "b", "c"}), 3, {}, leaving).value();
  size_t moved = 0;
  for (const auto& p : moving.partitions()) {
    const auto& before = split.Find(p.id)->replicas;
    if (std::find(before.begin(), before.end(), PodName("d")) == before.end()) {
      if (!before.empty()) {
        EXPECT_EQ(p.replicas, before) << p.id;  // nothing on d: unchanged
      }
      continue;
    }
    ++moved;
    ASSERT_EQ(p.replicas.size(), before.size() + 1) << p.id;
    EXPECT_EQ(p.replicas.back(), PodName("d")) << p.id;  // the leaving copy, last
    // Its replacement is on a pod that stays, joining the partition at this map.
    size_t joining = 0;
    for (const auto& r : p.replicas) {
      EXPECT_NE(r, p.owner);
      if (const JoinedCopy* j = p.JoinedBy(r)) {
        EXPECT_NE(r, PodName("d"));
        EXPECT_EQ(j->at, moving.epoch());
        ++joining;
      }
    }
    EXPECT_EQ(joining, 1u) << p.id;
  }
  EXPECT_GE(moved, 2u);  // the sealed parent and an active partition
  EXPECT_TRUE(moving.Find(sealed_id)->FollowedBy(PodName("d")));
  // Placing again while d still leaves changes nothing; without d, its copies go.
  EXPECT_EQ(PlaceReplicas(moving, Pods({"a", "b", "c"}), 3, {}, leaving).value(), moving);
  auto dropped = PlaceReplicas(moving, Pods({"a", "b", "c"}), 3).value();
  for (const auto& p : dropped.partitions()) {
    EXPECT_FALSE(p.FollowedBy(PodName("d"))) << p.id;
    if (p.active()) {
      EXPECT_EQ(p.replicas.size(), 2u) << p.id;
    }
    for (const auto& r : moving.Find(p.id)->replicas) {
      if (r != PodName("d")) {
        EXPECT_TRUE(p.FollowedBy(r)) << p.id;  // the replacements stay
      }
    }
  }
}

TEST(ReplicationRulesTest, CopiesGoToOtherZonesThenOtherNodesFirst) {
  auto map = PartitionMap::Initial("t", 1, PodName("a")).value();
  std::map<std::string, PodPlace> places{{"a", {"n1", "z1"}}, {"b", {"n1", "z1"}},
                                         {"c", {"n2", "z1"}}, {"d", {"n3", "z2"}}};
  auto placed = PlaceReplicas(map, Pods({"a", "b", "c", "d"}), 3, places).value();
  EXPECT_EQ(placed.partitions()[0].replicas, Pods({"d", "c"}));
}

TEST(ReplicationRulesTest, ReplicasTravelInTheMapsJsonAndAreValidated) {
  auto map = PartitionMap::Initial("t", 2, Pods({"a", "b"})).value();
  auto placed = PlaceReplicas(map, Pods({"a", "b"}), 2).value();
  auto back = PartitionMap::FromJson(placed.ToJson()).value();
  EXPECT_EQ(back, placed);
  EXPECT_NE(placed.Digest(), map.Digest());
  // Factor 1 writes no field: its maps are what they were before replication.
  EXPECT_EQ(map.ToJson().find("replicas"), std::string::npos);
  EXPECT_FALSE(map.WithReplicas(PartitionId(0), Pods({"a"})).ok());       // its owner
  EXPECT_FALSE(map.WithReplicas(PartitionId(0), Pods({"b", "b"})).ok());  // twice
  EXPECT_FALSE(map.WithReplicas(PartitionId(0), Pods({"b", "c", "d", "e", "f"})).ok());
  EXPECT_FALSE(map.WithReplicas(PartitionId(7), Pods({"b"})).ok());
  std::string json = placed.ToJson();
  json.replace(json.find("\"replicas\":["), 12, "\"replicas\":[\"a\",");
  EXPECT_FALSE(PartitionMap::FromJson(json).ok());
}

TEST(ReplicationRulesTest, TheNewLeaderIsTheMostCompleteOfAQuorum) {
  std::vector<ReplicaState> one{{PodName("b"), Epoch(3), 100}};
  EXPECT_EQ(ChooseLeader(one, 3).status().code(), Status::Code::kUnavailable);
  std::vector<ReplicaState> two{{PodName("b"), Epoch(3), 100}, {PodName("c"), Epoch(3), 120}};
  EXPECT_EQ(ChooseLeader(two, 3).value(), PodName("c"));
  // A later epoch wins over a longer log: the longer one holds a tail no quorum acknowledged.
  std::vector<ReplicaState> epochs{{PodName("b"), Epoch(4), 90}, {PodName("c"), Epoch(3), 120}};
  EXPECT_EQ(ChooseLeader(epochs, 3).value(), PodName("b"));
  // Ties keep the map's order.
  std::vector<ReplicaState> tie{{PodName("c"), Epoch(3), 100}, {PodName("b"), Epoch(3), 100}};
  EXPECT_EQ(ChooseLeader(tie, 3).value(), PodName("c"));
}

// A sealed partition's new leader holds its sealed end: a copy refetching after its volume was
// wiped (a later epoch, a short log) counts toward the quorum of answers but never leads it.
TEST(ReplicationRulesTest, ASealedPartitionIsLedOnlyByACopyThatHoldsItsSealedEnd) {
  std::vector<ReplicaState> both{{PodName("b"), Epoch(5), 10}, {PodName("c"), Epoch(3), 120}};
  EXPECT_EQ(ChooseLeader(both, 3).value(), PodName("b"));
  EXPECT_EQ(ChooseLeader(both, 3, 120).value(), PodName("c"));
  std::vector<ReplicaState> short_ones{{PodName("b"), Epoch(5), 10}, {PodName("c"), Epoch(0), 0}};
  auto none = ChooseLeader(short_ones, 3, 120);
  EXPECT_EQ(none.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(none.status().message().find("sealed end 120"), std::string::npos);
}

// A sidecar marks the empty copies its first map lists alike on a first start and after a wipe;
// the mark stands only on another volume than the one the coordinator first saw the pod on.
TEST(ReplicationRulesTest, ARefetchingMarkCountsOnlyOnAVolumeOtherThanThePodsFirst) {
  ReplicaState copy{PodName("c"), Epoch(0), 0, /*refetching=*/true, /*volume=*/7};
  EXPECT_FALSE(RefetchingCounts(copy, std::nullopt)) << "a pod never seen with a map";
  EXPECT_FALSE(RefetchingCounts(copy, 7)) << "a first start";
  EXPECT_TRUE(RefetchingCounts(copy, 3)) << "the volume it had was emptied or replaced";
  copy.refetching = false;
  EXPECT_FALSE(RefetchingCounts(copy, 3)) << "caught up since";
}

// A copy a map adds to a partition made before it was in none of the quorums that acknowledged
// what the partition holds: it is joining, and counts for a failover only once caught up.
TEST(ReplicationRulesTest, ACopyAddedToAPartitionMadeBeforeItsMapJoinsIt) {
  auto held = PlaceReplicas(PartitionMap::Initial("t", 3, Pods({"a", "b", "c"})).value(),
                            Pods({"a", "b", "c"}), 3)
                  .value();
  ASSERT_EQ(held.Find(PartitionId(0))->replicas, Pods({"b", "c"}));
  for (const auto& p : held.partitions()) EXPECT_TRUE(p.joined.empty()) << "copies from the start";
  // A change splits partition 1; pod c leaves and d takes its copies.
  const HashRange r1 = held.Find(PartitionId(1))->range;
  auto split =
      held.Split(PartitionId(1), r1.lo + r1.Width() / 2).value().WithPeer(PodName("d"), {});
  auto next = PlaceReplicas(split, Pods({"a", "b", "d"}), 3).value();
  const PartitionInfo& p0 = *next.Find(PartitionId(0));
  EXPECT_EQ(p0.replicas, Pods({"b", "d"}));
  const std::vector<JoinedCopy> d_joined{{PodName("d"), next.epoch()}};
  EXPECT_EQ(p0.joined, d_joined);
  std::vector<PartitionId> joins;
  for (const auto& p : next.partitions()) {
    if (p.FollowedBy(PodName("d")) && p.born < next.epoch()) joins.push_back(p.id);
    if (p.born == next.epoch()) {
      EXPECT_TRUE(p.joined.empty()) << "a successor made by the change";
    }
  }
  EXPECT_EQ(JoiningCopies(held, next, PodName("d")), joins);
  EXPECT_TRUE(JoiningCopies(held, next, PodName("b")).empty()) << "b held its copies already";
  // The map travels with the list; a failover that makes d the leader takes d off it.
  EXPECT_EQ(PartitionMap::FromJson(next.ToJson()).value(), next);
  EXPECT_TRUE(
      next.FailOver(PartitionId(0), PodName("d")).value().Find(PartitionId(0))->joined.empty());
  // A pod that missed maps (here, every one) joins only where it was added.
  EXPECT_EQ(JoiningCopies(PartitionMap(), next, PodName("d")), joins);
  EXPECT_TRUE(JoiningCopies(PartitionMap(), next, PodName("b")).empty());
  // A copy placed off the partition and added again joins again, also on a pod that missed the
  // maps between (it holds one that lists it among the copies from before).
  auto away =
      PlaceReplicas(next.WithEpoch(Epoch(next.epoch().value() + 1)), Pods({"a", "c", "d"}), 3)
          .value();
  ASSERT_FALSE(away.Find(PartitionId(0))->FollowedBy(PodName("b")));
  auto back =
      PlaceReplicas(away.WithEpoch(Epoch(away.epoch().value() + 1)), Pods({"a", "b", "d"}), 3)
          .value();
  ASSERT_TRUE(back.Find(PartitionId(0))->JoinedBy(PodName("b")));
  EXPECT_EQ(JoiningCopies(next, back, PodName("b")).size(), 1u)
      << "b held a copy at " << next.epoch().value();
  EXPECT_TRUE(JoiningCopies(back, back, PodName("b")).empty()) << "marked when it took the map";
  // A pod whose map does not know the partition yet answers as absent: it counts where it was a
  // copy from the start, not where the map added it.
  ReplicaState absent{PodName("b"), Epoch(0), 0};
  absent.absent = true;
  EXPECT_TRUE(RefetchingCounts(absent, std::nullopt, back.Find(PartitionId(0))));
  absent.pod = PodName("a");
  EXPECT_FALSE(RefetchingCounts(absent, std::nullopt, back.Find(PartitionId(0))));
  // A joining copy does not count on any volume.
  ReplicaState joining{PodName("d"), Epoch(1), 0};
  joining.joining = true;
  EXPECT_TRUE(RefetchingCounts(joining, std::nullopt));
  std::vector<ReplicaState> answered{{PodName("b"), Epoch(1), 10}, joining};
  EXPECT_EQ(ChooseLeader(answered, 3).status().code(), Status::Code::kUnavailable);
}

TEST(ReplicationRulesTest, ACopyRefetchingAfterItsVolumeWasEmptiedNeitherCountsNorLeads) {
  // b holds 10 and c, back with an empty volume, refetched 50 of it: a failover of three copies
  // whose leader is down has one answer that counts, not a quorum.
  ReplicaState refetching{PodName("c"), Epoch(5), 50};
  refetching.refetching = true;
  std::vector<ReplicaState> answered{{PodName("b"), Epoch(5), 10}, refetching};
  auto none = ChooseLeader(answered, 3);
  EXPECT_EQ(none.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(none.status().message().find("refetching"), std::string::npos)
      << none.status().ToString();
  // With the old leader answering too there is a quorum, and the refetching copy never leads
  // even when it holds the most.
  answered.push_back({PodName("a"), Epoch(5), 40});
  EXPECT_EQ(ChooseLeader(answered, 3).value(), PodName("a"));
}

TEST(ReplicationRulesTest, AReturningReplicaIsCutWhereItsLogLeftTheLeaders) {
  // The leader led epoch 2 from 0, epoch 5 from 40, epoch 7 from 90; it holds 130.
  std::vector<EpochStart> history{{2, 0}, {5, 40}, {7, 90}};
  EXPECT_EQ(TruncationPoint(history, 130, 7, 120), 120u);  // same epoch, behind: nothing cut
  EXPECT_EQ(TruncationPoint(history, 130, 5, 100), 90u);   // its epoch-5 tail past 90 diverged
  EXPECT_EQ(TruncationPoint(history, 130, 5, 60), 60u);
  EXPECT_EQ(TruncationPoint(history, 130, 6, 100), 90u);   // epoch 6 the leader never had
  EXPECT_EQ(TruncationPoint(history, 130, 2, 45), 40u);
  EXPECT_EQ(TruncationPoint(history, 130, 1, 45), 0u);     // before anything the leader had
  EXPECT_EQ(TruncationPoint({}, 0, 3, 45), 0u);
}

// A follower whose last entries are of an epoch the leader never had is told `diverged` even
// where the leader's point is its end, and cuts where its own entries of that epoch begin: the
// leader cannot see that (protocol sim seed 3396: a replaced leader's epoch-2 entries at 0 and 1,
// a new leader that led epoch 1 over 0 and 1 and epoch 3 from 2, the copy kept its entries and
// took the leader's epochs for them).
TEST(ReplicationRulesTest, AReplicaWithAnEpochTheLeaderNeverHadIsCutWhereThatEpochBegins) {
  std::vector<EpochStart> history{{2, 0}, {5, 40}, {7, 90}};
  EXPECT_FALSE(ForeignEpoch(history, 7));
  EXPECT_FALSE(ForeignEpoch(history, 0));  // no entries
  EXPECT_TRUE(ForeignEpoch(history, 6));
  // It led epoch 6 from 60: the leader's epoch 5 ran to 90, but the follower's only to 60.
  std::vector<EpochStart> own{{2, 0}, {5, 40}, {6, 60}};
  EXPECT_EQ(FollowerTruncationPoint(history, TruncationPoint(history, 130, 6, 100), own, 100), 60u);
  // An epoch-5 tail past the leader's: the leader's point.
  std::vector<EpochStart> shared{{2, 0}, {5, 40}};
  EXPECT_EQ(FollowerTruncationPoint(history, TruncationPoint(history, 130, 5, 100), shared, 100),
            90u);
  // Seed 3396.
  std::vector<EpochStart> leader{{1, 0}, {3, 2}};
  std::vector<EpochStart> replaced{{2, 0}};
  EXPECT_EQ(TruncationPoint(leader, 2, 2, 2), 2u);
  EXPECT_TRUE(ForeignEpoch(leader, 2));
  EXPECT_EQ(FollowerTruncationPoint(leader, 2, replaced, 2), 0u);
  // Nothing of its own: nothing more than the leader's point.
  EXPECT_EQ(FollowerTruncationPoint(leader, 1, {}, 2), 1u);
}

}  // namespace
}  // namespace shoal::replication
