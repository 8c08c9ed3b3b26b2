// Tests of the map transition rule (common/src/map_transition.cc): what a sidecar holding some
// partitions may move to. The same rule runs in the sidecar (Topic::CheckAgainstHeld) and so in
// the protocol simulation; these are its cases one by one.
#include "shoal/common/map_transition.h"

#include <gtest/gtest.h>

namespace shoal {
namespace {

PartitionMap Must(Result<PartitionMap> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : PartitionMap();
}

const PodName kA("a");

class MapTransitionTest : public ::testing::Test {
 protected:
  // p0 and p1 on a; the next map splits p0 at the middle of its range into p2, p3.
  void SetUp() override {
    held_map_ = Must(PartitionMap::Initial("orders", 2, kA));
    p0_ = *held_map_.Find(PartitionId(0));
    next_ = Must(Must(held_map_.Split(PartitionId(0), p0_.range.lo + p0_.range.Width() / 2))
                     .WithEndOffset(PartitionId(0), 40));
    intent_.epoch = next_.epoch();
    intent_.digest = next_.Digest();
    intent_.successors = SuccessorRefs(next_, PartitionId(0));
  }
  HeldPartitionState Held(PartitionId id, std::optional<SealRecord> seal = std::nullopt) {
    return {id, held_map_.Find(id)->range, std::move(seal)};
  }
  Status Check(const std::vector<HeldPartitionState>& held, const PartitionMap& next) {
    dropped_.clear();
    return CheckMapTransition(kA, held, next, &dropped_);
  }

  PartitionMap held_map_, next_;
  PartitionInfo p0_;
  SealIntent intent_;
  std::vector<std::pair<PartitionId, uint64_t>> dropped_;
};

TEST_F(MapTransitionTest, ASplitSealedHereFirstAtTheRecordedEndIsTaken) {
  EXPECT_TRUE(Check({Held(PartitionId(0), SealRecord{40, intent_, {}}), Held(PartitionId(1))},
                    next_)
                  .ok());
  // Sealed elsewhere than the map records, or not at all: refused.
  Status at = Check({Held(PartitionId(0), SealRecord{41, intent_, {}})}, next_);
  EXPECT_EQ(at.code(), Status::Code::kConflict);
  EXPECT_EQ(at.message(), "the map records end offset 40 for partition 0, sealed here at 41");
  Status unsealed = Check({Held(PartitionId(0))}, next_);
  EXPECT_EQ(unsealed.message(),
            "the map seals partition 0, which is not sealed here: seal it first "
            "(POST /v1/admin/seal)");
}

// A failover gives p0 back to a, its old leader, after another copy sealed it at 40 for the
// split (a missed both maps): a takes the seal when its log ends there, and only then.
TEST_F(MapTransitionTest, APartitionGivenBackSealedIsTakenWhereItsLogEndsAtTheSeal) {
  std::vector<PartitionInfo> parts = next_.partitions();
  for (auto& p : parts) {
    if (p.id == PartitionId(0)) {
      p.leader_epoch = Epoch(next_.epoch().value() + 1);
      p.end_known = false;  // first, an end not known as a seal's answer
    }
    if (!p.parents.empty()) p.owner = PodName("b");  // the successors' leader
  }
  const PartitionMap given_back("orders", Epoch(next_.epoch().value() + 1), parts);
  HeldPartitionState a0 = Held(PartitionId(0));
  a0.leader_epoch = held_map_.epoch();
  a0.end = 40;
  EXPECT_TRUE(TakesSealGivenBack(kA, a0, *given_back.Find(PartitionId(0))));
  EXPECT_TRUE(Check({a0, Held(PartitionId(1))}, given_back).ok());
  // Holding more (an unacknowledged tail) or less: refused, the seal must come first.
  for (uint64_t end : {39u, 41u}) {
    a0.end = end;
    EXPECT_FALSE(TakesSealGivenBack(kA, a0, *given_back.Find(PartitionId(0))));
    EXPECT_NE(Check({a0}, given_back).message().find("seal it first"), std::string::npos);
  }
  // Not given back (the map of the split itself, no newer leader epoch): the seal comes first.
  a0.end = 40;
  a0.leader_epoch = next_.Find(PartitionId(0))->LeaderEpoch();
  EXPECT_FALSE(TakesSealGivenBack(kA, a0, *next_.Find(PartitionId(0))));
  a0.leader_epoch = held_map_.epoch();
  // An end the map knows as a seal's answer (end_known): a longer log takes it, its
  // unacknowledged tail cut; a shorter one still cannot.
  for (auto& p : parts) {
    if (p.id == PartitionId(0)) p.end_known = true;
  }
  const PartitionMap known("orders", given_back.epoch(), parts);
  a0.end = 41;
  EXPECT_TRUE(TakesSealGivenBack(kA, a0, *known.Find(PartitionId(0))));
  a0.end = 39;
  EXPECT_FALSE(TakesSealGivenBack(kA, a0, *known.Find(PartitionId(0))));
}

TEST_F(MapTransitionTest, ASealForOtherSuccessorsIsRefused) {
  SealIntent other = intent_;
  other.successors.pop_back();
  Status st = Check({Held(PartitionId(0), SealRecord{40, other, {}})}, next_);
  EXPECT_EQ(st.code(), Status::Code::kConflict);
  EXPECT_NE(st.message().find("whose successors differ from this map's"), std::string::npos);
}

TEST_F(MapTransitionTest, OwnerAndRangeOfAnIdAreFixed) {
  // A move makes a successor; a map that gives p1 itself to b speaks of another partition.
  std::vector<PartitionInfo> parts = held_map_.partitions();
  parts[1].owner = PodName("b");
  const PartitionMap hand_made("orders", Epoch(5), parts);
  Status st = Check({Held(PartitionId(1))}, hand_made);
  EXPECT_EQ(st.message(), "the map gives partition 1, held here, to b");
  HeldPartitionState wrong = Held(PartitionId(1));
  wrong.range.lo += 1;
  EXPECT_NE(Check({wrong}, held_map_).message().find("the range ["), std::string::npos);
}

// A copy this pod follows of a partition the next map does not know at all (made after the
// map's last partition, by a change the map does not have: a coordinator re-made its map without
// an installed change) refuses the map; one the map retired (an id below its next) does not.
TEST_F(MapTransitionTest, ACopyOfAPartitionTheMapNeverMadeRefusesIt) {
  // Pod c leads nothing and follows p3, which next_ made.
  const PodName c("c");
  HeldPartitionState copy_of_p3{PartitionId(3), next_.Find(PartitionId(3))->range, {}};
  copy_of_p3.follower = true;
  // A map re-made from held_map_ (partitions 0 and 1) at a later epoch never made p3.
  const PartitionMap remade = held_map_.WithEpoch(Epoch(next_.epoch().value() + 1));
  Status st = CheckMapTransition(c, {copy_of_p3}, remade, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kConflict);
  EXPECT_NE(st.message().find("does not know partition 3"), std::string::npos) << st.message();
  // The map that made it, and one that retired another partition: taken.
  EXPECT_TRUE(CheckMapTransition(c, {copy_of_p3}, next_, nullptr).ok());
  HeldPartitionState copy_of_p0{PartitionId(0), p0_.range, {}};
  copy_of_p0.follower = true;
  EXPECT_TRUE(
      CheckMapTransition(c, {copy_of_p0}, Must(next_.WithoutRetired(PartitionId(0))), nullptr)
          .ok());
}

TEST_F(MapTransitionTest, OnlySealedPartitionsAreDroppedAndTheirEndsGoToTheRetirementRule) {
  const PartitionMap retired = Must(next_.WithoutRetired(PartitionId(0)));
  EXPECT_TRUE(
      Check({Held(PartitionId(0), SealRecord{40, intent_, {2, 3}}), Held(PartitionId(1))}, retired)
          .ok());
  ASSERT_EQ(dropped_.size(), 1u);
  EXPECT_EQ(dropped_[0], std::make_pair(PartitionId(0), uint64_t{40}));
  std::vector<PartitionInfo> parts = held_map_.partitions();
  parts.erase(parts.begin() + 1);
  Status st = Check({Held(PartitionId(1))}, PartitionMap("orders", Epoch(9), parts));
  EXPECT_EQ(st.message(),
            "the map drops partition 1, which is active here; only sealed partitions retire");
}

TEST_F(MapTransitionTest, ASealThatLostItsRaceIsVoidAndALaterOneIsFine) {
  // The map of the seal's epoch (or later) still has p0 active: that change lost; its seal is
  // void unless a successor confirmed it.
  std::vector<PartitionInfo> parts = held_map_.partitions();
  const PartitionMap rival("orders", next_.epoch(), parts);
  const SealRecord lost{40, intent_, {}};
  EXPECT_TRUE(SealVoid(lost, *rival.Find(PartitionId(0)), rival.epoch()));
  EXPECT_TRUE(Check({Held(PartitionId(0), lost), Held(PartitionId(1))}, rival).ok());
  const SealRecord confirmed{40, intent_, {2}};
  EXPECT_FALSE(SealVoid(confirmed, *rival.Find(PartitionId(0)), rival.epoch()));
  Status st = Check({Held(PartitionId(0), confirmed)}, rival);
  EXPECT_NE(st.message().find("active, but it is sealed here for the change of epoch"),
            std::string::npos)
      << st.message();
  // Sealed ahead of its own, later map: an older map with p0 active is still fine.
  EXPECT_TRUE(Check({Held(PartitionId(0), confirmed)}, held_map_).ok());
  // A seal that names no change cannot be judged: refused.
  EXPECT_EQ(Check({Held(PartitionId(0), SealRecord{40, std::nullopt, {}})}, held_map_).message(),
            "the map has partition 0 active, but it is sealed here");
}

TEST_F(MapTransitionTest, AMapThatDeclaresLostWhatIsHeldHereIsRefused) {
  // The coordinator declares a pod's partitions lost when the pod came back holding no map; a
  // pod that holds them did not lose them, and taking the map would give their ranges a second
  // writer.
  const PartitionMap lost = Must(held_map_.DeclareLost(kA));
  Status st = Check({Held(PartitionId(0)), Held(PartitionId(1))}, lost);
  EXPECT_EQ(st.code(), Status::Code::kConflict);
  EXPECT_EQ(st.message(),
            "the map declares partition 0 lost, but it is held here: this pod did not lose its "
            "data");
  // The emptied pod itself holds nothing, and takes it.
  EXPECT_TRUE(Check({}, lost).ok());
}

TEST_F(MapTransitionTest, APodThatHoldsNothingOfWhatItHadIsToldItsDataIsLost) {
  // p0 and p1 were made at epoch 1 and installed here then; an emptied pod asked to take the
  // split of epoch 2 (which seals p0 and keeps p1 here) holds nothing of them: their data is
  // gone, and taking the map would start p1 again at offset 0.
  Status st = Check({}, next_);
  EXPECT_EQ(st.code(), Status::Code::kDataLost);
  EXPECT_EQ(st.message(),
            "the map of epoch 2 gives partition 0 (made at epoch 1) to this pod, which holds "
            "nothing of it: its data is gone; the coordinator must declare it lost");
  // The successors made by this very map are new here, not lost.
  EXPECT_TRUE(CheckNothingLost(kA, {PartitionId(0), PartitionId(1)}, next_).ok());
  // A map of unknown birth (written before maps said it) is not checked.
  PartitionInfo hand = *next_.Find(PartitionId(1));
  hand.born = Epoch(0);
  EXPECT_TRUE(CheckNothingLost(kA, {}, PartitionMap("orders", Epoch(5), {hand})).ok());
  // The epoch-1 map itself, on a fresh pod: everything in it is new.
  EXPECT_TRUE(CheckNothingLost(kA, {}, held_map_).ok());
}

TEST_F(MapTransitionTest, APartitionFencedHereWhileAbsentStartsEmptyWhenAFailoverMakesItsLeader) {
  // p5, made at epoch 2 by a change whose map never reached a; its leader b went down and a
  // failover of epoch 3 gives it to a, which answered the fence holding nothing of it.
  PartitionInfo p5;
  p5.id = PartitionId(5);
  p5.range = HashRange{0, 100};
  p5.owner = kA;
  p5.replicas = {PodName("b")};
  p5.born = Epoch(2);
  p5.leader_epoch = Epoch(3);
  const PartitionMap failed_over("orders", Epoch(3), {p5});
  EXPECT_EQ(CheckNothingLost(kA, {}, failed_over).code(), Status::Code::kDataLost);
  EXPECT_TRUE(CheckNothingLost(kA, {}, failed_over, {{PartitionId(5), Epoch(3)}}).ok());
  // A fence above the map's leader epoch, or for another partition, is no answer for this one.
  EXPECT_EQ(CheckNothingLost(kA, {}, failed_over, {{PartitionId(5), Epoch(4)}}).code(),
            Status::Code::kDataLost);
  EXPECT_EQ(CheckNothingLost(kA, {}, failed_over, {{PartitionId(6), Epoch(3)}}).code(),
            Status::Code::kDataLost);
  // Not moved by a failover, the partition was this pod's from its birth: it held it, and it
  // is gone.
  p5.leader_epoch = Epoch(0);
  EXPECT_EQ(
      CheckNothingLost(kA, {}, PartitionMap("orders", Epoch(3), {p5}), {{PartitionId(5), Epoch(3)}})
          .code(),
      Status::Code::kDataLost);
}

}  // namespace
}  // namespace shoal

namespace shoal {
namespace {

// Three pods, partition 0 led by a and followed by b and c.
PartitionMap Replicated() {
  auto m = PartitionMap::Initial("orders", 1, PodName("a")).value();
  return m.WithReplicas(PartitionId(0), {PodName("b"), PodName("c")}).value();
}

TEST(FailOverTest, AFollowerLeadsFromANewLeaderEpochAndTheOldLeaderFollowsLast) {
  const PartitionMap held = Replicated();
  auto next = held.FailOver(PartitionId(0), PodName("c"));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  const PartitionInfo& p = *next->Find(PartitionId(0));
  EXPECT_EQ(next->epoch(), Epoch(2));
  EXPECT_EQ(p.owner, PodName("c"));
  EXPECT_EQ(p.replicas, (std::vector<PodName>{PodName("b"), PodName("a")}));
  EXPECT_EQ(p.LeaderEpoch(), Epoch(2));
  EXPECT_TRUE(p.active());
  // Moved past a refused epoch, the leader epoch moves with it.
  EXPECT_EQ(next->WithEpoch(Epoch(7)).Find(PartitionId(0))->LeaderEpoch(), Epoch(7));
  EXPECT_EQ(held.FailOver(PartitionId(0), PodName("d")).status().code(),
            Status::Code::kInvalidArgument);
  // The old leader itself, fenced with its copies and the most complete: it leads again from a
  // new leader epoch, its followers as they were.
  auto again = held.FailOver(PartitionId(0), PodName("a"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->Find(PartitionId(0))->owner, PodName("a"));
  EXPECT_EQ(again->Find(PartitionId(0))->replicas, (std::vector<PodName>{PodName("b"), PodName("c")}));
  EXPECT_EQ(again->Find(PartitionId(0))->LeaderEpoch(), Epoch(2));
  EXPECT_TRUE(CheckMapTransition(PodName("a"),
                                 {{PartitionId(0), held.Find(PartitionId(0))->range, {},
                                   held.Find(PartitionId(0))->LeaderEpoch(), false}},
                                 *again, nullptr)
                  .ok());
}

TEST(FailOverTest, TheOldLeaderTakesTheMapAndAFollowerMadeTheLeaderHoldsThePartition) {
  const PartitionMap held = Replicated();
  const PartitionMap next = held.FailOver(PartitionId(0), PodName("b")).value();
  const PartitionInfo& p0 = *held.Find(PartitionId(0));
  // The old leader: its partition went to a follower at a newer leader epoch; it follows.
  EXPECT_TRUE(
      CheckMapTransition(PodName("a"), {{p0.id, p0.range, {}, p0.LeaderEpoch(), false}}, next,
                         nullptr)
          .ok());
  // The old leader placed off the partition since (its pod leaves): its copy goes.
  std::vector<PodName> others;
  for (const auto& r : next.Find(PartitionId(0))->replicas) {
    if (r != PodName("a")) others.push_back(r);
  }
  const PartitionMap without_a = next.WithReplicas(PartitionId(0), others).value();
  EXPECT_TRUE(CheckMapTransition(PodName("a"), {{p0.id, p0.range, {}, p0.LeaderEpoch(), false}},
                                 without_a, nullptr)
                  .ok());
  // Not a failover: a copy already at the new leader epoch is refused.
  EXPECT_EQ(CheckMapTransition(PodName("a"), {{p0.id, p0.range, {}, next.epoch(), false}}, next,
                               nullptr)
                .code(),
            Status::Code::kConflict);
  // The new leader held a copy: it holds the partition (nothing lost), though made before.
  EXPECT_TRUE(
      CheckMapTransition(PodName("b"), {{p0.id, p0.range, {}, Epoch(0), true}}, next, nullptr)
          .ok());
  EXPECT_EQ(CheckMapTransition(PodName("b"), {}, next, nullptr).code(),
            Status::Code::kDataLost);
}

TEST(FailOverTest, AFailoverCarriedIntoAChangeMakesItsUntouchedSuccessorsNewAtItsEpoch) {
  // The change of epoch 2 splits p0 into p1 and p2 (led by a, followed by b and c); a goes down
  // before the change completes and p1 fails over to b inside it, at epoch 5.
  const PartitionMap held = Replicated();
  const PartitionInfo& p0 = *held.Find(PartitionId(0));
  PartitionMap change = held.Split(PartitionId(0), p0.range.lo + p0.range.Width() / 2).value();
  change = change.WithReplicas(PartitionId(1), {PodName("b"), PodName("c")}).value();
  change = change.WithReplicas(PartitionId(2), {PodName("b"), PodName("c")}).value();
  ASSERT_EQ(change.epoch(), Epoch(2));
  const PartitionMap carried = change.FailOver(PartitionId(1), PodName("b"))
                                   .value()
                                   .WithEpoch(Epoch(5))
                                   .CarryingChange(change.epoch());
  EXPECT_EQ(carried.epoch(), Epoch(5));
  // p2 was never held by a pod that installed no map of the change: new at epoch 5.
  EXPECT_EQ(carried.Find(PartitionId(2))->born, Epoch(5));
  EXPECT_TRUE(CheckNothingLost(PodName("a"), {PartitionId(0)}, carried).ok());
  EXPECT_FALSE(
      CheckNothingLost(PodName("a"), {PartitionId(0)},
                       change.FailOver(PartitionId(1), PodName("b")).value().WithEpoch(Epoch(5)))
          .ok());
  // p1 keeps its birth: its copies may hold what its first leader took.
  EXPECT_EQ(carried.Find(PartitionId(1))->born, Epoch(2));
  EXPECT_EQ(carried.Find(PartitionId(1))->LeaderEpoch(), Epoch(5));
  EXPECT_EQ(carried.Find(PartitionId(1))->owner, PodName("b"));
}

TEST(FailOverTest, ASealStillNamesItsSuccessorsAfterOneOfThemFailedOver) {
  // p0 led by a, followed by b and c, split into p1 and p2 (each led by a, same copies); the seal
  // at a names a as their owner. p1 then fails over to b: the parent's seal still holds.
  PartitionMap held = Replicated();
  const HashRange r0 = held.Find(PartitionId(0))->range;
  PartitionMap split = held.Split(PartitionId(0), r0.lo + r0.Width() / 2).value();
  split = split.WithEndOffset(PartitionId(0), 10).value();
  for (PartitionId id : {PartitionId(1), PartitionId(2)}) {
    split = split.WithReplicas(id, {PodName("b"), PodName("c")}).value();
  }
  const std::vector<SuccessorRef> sealed = SuccessorRefs(split, PartitionId(0));
  ASSERT_EQ(sealed.size(), 2u);
  const PartitionMap over = split.FailOver(PartitionId(1), PodName("b")).value();
  EXPECT_TRUE(SameSuccessors(sealed, over, PartitionId(0)));
  const SealIntent intent{split.epoch(), split.Digest(), sealed, r0};
  const PartitionInfo& p1 = *split.Find(PartitionId(1));
  const PartitionInfo& p2 = *split.Find(PartitionId(2));
  Status st = CheckMapTransition(PodName("a"),
                                 {{PartitionId(0), r0, SealRecord{10, intent, {}}, Epoch(0), false},
                                  {p1.id, p1.range, {}, p1.LeaderEpoch(), false},
                                  {p2.id, p2.range, {}, p2.LeaderEpoch(), false}},
                                 over, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  // Not failed over, another owner is another successor: refused.
  EXPECT_FALSE(SameSuccessors(
      {sealed[0], {sealed[1].id, PodName("c"), sealed[1].range}}, split, PartitionId(0)));
  EXPECT_FALSE(SameSuccessors({sealed[0]}, split, PartitionId(0)));
}

}  // namespace
}  // namespace shoal
