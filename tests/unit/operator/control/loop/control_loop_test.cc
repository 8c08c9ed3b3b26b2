// ControlLoop against the fake admin plane, a platform of pods in memory and an observer that
// reports the load the test sets: bootstrap, a change driven by the policy, and each outcome a
// sidecar can answer (installed, already held, conflict, stale epoch, unreachable). The
// multi-process tests (tests/integration/operator) run the same loop against real sidecars.
#include "shoal/control/control_loop.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <regex>
#include <set>

#include "support/fake_admin_plane.h"
#include "support/manual_clock.h"

namespace shoal::control {
namespace {

using shoal::testing::FakeAdminPlane;
using shoal::testing::ManualClock;
using Kind = FakeAdminPlane::Kind;

std::string AdminOf(uint32_t ordinal) { return "t-" + std::to_string(ordinal) + ":admin"; }

// Pods t-0 .. t-(n-1), ready as soon as they are asked for; the state in memory. A pod can be
// marked as running an old template; RestartPod gives it a new incarnation (uid), on the new
// template, which is not ready for the next `restart_ticks` listings.
class MemPlatform final : public Platform {
 public:
  Status SetDesiredPods(uint32_t n) override {
    desired_ = n;
    return Status::Ok();
  }
  uint32_t DesiredPods() const override { return desired_; }
  Result<std::vector<PodInfo>> ListPods() override {
    std::vector<PodInfo> pods;
    for (uint32_t i = 0; i < desired_; ++i) {
      PodInfo p;
      p.name = PodName("t-" + std::to_string(i));
      p.ordinal = i;
      p.address = PeerAddress{"t-" + std::to_string(i) + ":data", AdminOf(i)};
      p.metrics = "t-" + std::to_string(i) + ":metrics";
      p.uid = "t-" + std::to_string(i) + "-" + std::to_string(incarnation_[i]);
      p.outdated = outdated_.count(i) > 0;
      p.ready = true;
      if (auto it = restarting_.find(i); it != restarting_.end()) {
        p.ready = false;
        if (--it->second <= 0) restarting_.erase(it);
      }
      pods.push_back(p);
    }
    return pods;
  }
  Status DrainPod(const PodName&) override { return Status::Ok(); }
  Status RestartPod(const PodInfo& pod) override {
    restarts_.push_back(pod);
    if (on_restart_) on_restart_(pod);
    if (pod.uid != "t-" + std::to_string(pod.ordinal) + "-" +
                       std::to_string(incarnation_[pod.ordinal])) {
      return Status::Ok();  // restarted already
    }
    ++incarnation_[pod.ordinal];
    outdated_.erase(pod.ordinal);
    restarting_[pod.ordinal] = restart_ticks_;
    return Status::Ok();
  }

  std::set<uint32_t> outdated_;
  std::vector<PodInfo> restarts_;
  std::function<void(const PodInfo&)> on_restart_;
  int restart_ticks_ = 3;
  std::map<uint32_t, int> incarnation_;
  std::map<uint32_t, int> restarting_;
  Status SaveState(const std::string& json) override {
    state_ = json;
    ++saves_;
    return Status::Ok();
  }
  Result<std::string> LoadState() override {
    if (state_.empty()) return Status::NotFound("no control state");
    return state_;
  }
  std::string AdminToken() const override { return "token"; }

  std::string state_;
  int saves_ = 0;

 private:
  uint32_t desired_ = 0;
};

// Every active partition of the map at `rate` events/s, complete; every sealed one consumed.
class SetLoadObserver final : public Observer {
 public:
  Observation Observe(const PartitionMap& map, const std::vector<PodInfo>&) override {
    last_ = map;
    Observation o;
    o.epoch = map.epoch();
    for (const auto& p : map.partitions()) {
      PartitionLoad l;
      l.id = p.id;
      l.active = p.active();
      l.rate = p.active() ? rate : 0;
      for (PartitionId parent : p.parents) l.parents.push_back(parent);
      o.partitions[p.id] = l;
    }
    return o;
  }
  // With `report`: what the pod holds of the map last observed, every sealed partition empty
  // (nothing to read: retirable) and every producer state durable.
  Result<AdminPartitionsReport> PartitionsOf(const PodInfo& pod) override {
    if (!report || !last_) return Status::Unavailable(pod.name.value() + ": not observed in this test");
    AdminPartitionsReport r;
    r.topic = last_->topic();
    r.pod = pod.name.value();
    r.epoch = last_->epoch();
    for (const auto& p : last_->partitions()) {
      if (p.owner != pod.name) continue;
      AdminPartition a;
      a.id = p.id;
      a.state = p.active() ? PartitionState::kActive : PartitionState::kSealed;
      a.range = p.range;
      a.producers_durable = true;
      r.partitions.push_back(a);
    }
    return r;
  }
  double rate = 0;
  bool report = false;

 private:
  std::optional<PartitionMap> last_;
};

TopicSpec Spec() {
  TopicSpec s;
  s.name = "t";
  s.partitions.initial = 1;
  s.partitions.max = 8;
  s.replicas.min = 1;
  s.replicas.max = 1;
  s.scaling.events_per_second_per_partition = 1000;
  s.scaling.partitions_per_replica = 16;
  s.scale_up.stabilization_window_seconds = 0;
  return s;
}

class ControlLoopTest : public ::testing::Test {
 protected:
  ControlLoopOptions Options() {
    ControlLoopOptions o;
    o.interval = std::chrono::milliseconds(1000);
    o.backoff_start = std::chrono::milliseconds(0);
    o.backoff_max = std::chrono::milliseconds(0);
    o.executor.step_timeout = std::chrono::milliseconds(20);
    o.executor.backoff_start = std::chrono::milliseconds(1);
    o.executor.backoff_max = std::chrono::milliseconds(2);
    return o;
  }
  void Make(TopicSpec spec = Spec()) {
    loop_ = std::make_unique<ControlLoop>(spec, platform_, observer_, admin_, clock_, Options());
    ASSERT_TRUE(loop_->Start().ok());
  }
  // Ticks (a second apart on the clock) until `done` or `ticks` ran out; the last status.
  Status TickUntil(const std::function<bool()>& done, int ticks = 30) {
    Status st;
    for (int i = 0; i < ticks && !done(); ++i) {
      clock_.AdvanceMs(1000);
      st = loop_->Tick();
    }
    return st;
  }
  Status Bootstrap() {
    Status st = TickUntil([&] { return admin_.Held(AdminOf(0)).has_value(); });
    EXPECT_EQ(loop_->map().epoch(), Epoch(1));
    return st;
  }
  // The surge: ten times what one partition takes.
  void Surge() { observer_.rate = 10000; }
  // Three partitions (up to `max_partitions`) with two copies each, on three pods.
  static TopicSpec ThreeCopiesOnThreePods(uint32_t max_partitions) {
    TopicSpec spec = Spec();
    spec.partitions.min = spec.partitions.initial = 3;
    spec.partitions.max = max_partitions;
    spec.replicas.min = spec.replicas.max = 3;
    spec.replication.factor = 3;
    return spec;
  }
  // Made and bootstrapped, with its copies placed.
  void MakeReplicated(const TopicSpec& spec) {
    Make(spec);
    ASSERT_TRUE(TickUntil([&] {
                  return admin_.Held(AdminOf(0)).has_value() &&
                         !loop_->map().Find(PartitionId(0))->replicas.empty();
                }).ok());
  }
  // Three copies on three pods, a surge whose split is sealed while its installs are refused
  // for a while: `*change` is the change's map, saved and still in progress.
  void ChangeInProgress(std::optional<PartitionMap>* change);
  // Copies of the partitions `down` leads in `change` answer the fence with nothing held; the
  // ids of those partitions (the active ones only, when `active_only`).
  std::vector<PartitionId> CopiesAnswerFor(const PartitionMap& change, const PodName& down,
                                           bool active_only);
  // The map after the change: `led` failed over away from `down` at a newer leader epoch, and
  // every partition of the change in it, active or sealed as the change made it.
  void ExpectFailedOverInsideTheChange(const PartitionMap& change,
                                       const std::vector<PartitionId>& led, const PodName& down);

  MemPlatform platform_;
  SetLoadObserver observer_;
  FakeAdminPlane admin_;
  ManualClock clock_;
  std::unique_ptr<ControlLoop> loop_;
};

TEST_F(ControlLoopTest, BootstrapInstallsTheFirstMapSavedBeforeItIsSent) {
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  auto held = admin_.Held(AdminOf(0));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->epoch(), Epoch(1));
  EXPECT_EQ(held->active_count(), 1u);
  EXPECT_NE(platform_.state_.find("\"epoch\":1"), std::string::npos) << platform_.state_;
}

TEST_F(ControlLoopTest, AMapTheSidecarHoldsAlreadyCountsAsInstalled) {
  // A first loop bootstrapped and died before it knew; its successor sends the same map.
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  const PartitionMap first = *admin_.Held(AdminOf(0));
  ASSERT_EQ(admin_.Attempts(AdminOf(0), Kind::kInstall), 1);
  loop_.reset();
  Make();
  observer_.rate = 500;  // steady: nothing to change
  EXPECT_TRUE(TickUntil([] { return false; }, 3).ok());
  EXPECT_EQ(loop_->map(), first);
  EXPECT_FALSE(loop_->plan_in_progress());
}

TEST_F(ControlLoopTest, ASurgeIsSplitSealedThenInstalled) {
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  Surge();
  Status st = TickUntil([&] { return loop_->map().active_count() > 1 && !loop_->plan_in_progress(); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_GT(loop_->map().active_count(), 1u) << loop_->StatusJson();
  auto held = admin_.Held(AdminOf(0));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(*held, loop_->map());
  const auto calls = admin_.Calls();
  const std::string seal = "seal " + AdminOf(0) + " p0 e2";
  const std::string install = "install " + AdminOf(0) + " e2";
  auto at = [&](const std::string& c) { return std::find(calls.begin(), calls.end(), c); };
  ASSERT_NE(at(seal), calls.end());
  ASSERT_NE(at(install), calls.end());
  EXPECT_LT(at(seal), at(install));
}

// A pod that comes back without its data (its volume emptied) holds no map while the map gives
// it partitions: the loop says so (status, metric) within a retirement check and does not
// install the map on it, which would start its partitions again at offset 0 as if nothing had
// been lost; a restarted loop still knows it (the control state keeps the pods seen with a map).
TEST_F(ControlLoopTest, APodThatCameBackWithoutItsDataHasItsPartitionsDeclaredLost) {
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  observer_.rate = 500;
  ASSERT_TRUE(TickUntil([] { return false; }, 6).ok());  // a retirement check saw it hold epoch 1
  EXPECT_TRUE(loop_->pods_without_data().empty());
  const PartitionMap before = loop_->map();
  admin_.Wipe(AdminOf(0));
  // Named, then its partitions declared lost in a new map that gives their ranges successors:
  // the map it held before is never installed on it again.
  ASSERT_TRUE(TickUntil([&] { return !loop_->losses().empty(); }, 12).ok()) << loop_->StatusJson();
  const auto losses = loop_->losses();
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0].partitions, std::vector<PartitionId>{PartitionId(0)});
  ASSERT_EQ(losses[0].successors.size(), 1u);
  const auto held = admin_.Held(AdminOf(0));
  ASSERT_TRUE(held.has_value()) << "the recovery map was not installed on the emptied pod";
  EXPECT_EQ(*held, loop_->map());
  EXPECT_GT(held->epoch(), before.epoch());
  EXPECT_TRUE(held->Find(PartitionId(0))->lost);
  EXPECT_TRUE(held->Find(losses[0].successors[0])->active());
  EXPECT_TRUE(loop_->pods_without_data().empty());
  EXPECT_NE(loop_->StatusJson().find("\"losses\":[{\"pod\":\"" + losses[0].pod + "\""),
            std::string::npos)
      << loop_->StatusJson();

  // The pods seen with a map and the losses are in the control state: a restarted loop still
  // knows both.
  EXPECT_NE(platform_.state_.find("\"pods_seen_with_map\":[\"" + losses[0].pod + "\"]"),
            std::string::npos)
      << platform_.state_;
  loop_.reset();
  Make();
  ASSERT_TRUE(TickUntil([] { return false; }, 2).ok());
  EXPECT_EQ(loop_->losses().size(), 1u);
}

// Paused (shoal.dev/paused): a surge changes nothing, whatever the ticks; resumed, the same
// surge is split at once.
// A loop that restarted between fencing copies for a failover and saving its map reads the
// fences back from the copies (GET /v1/admin/replica) and finishes the failover, though the
// old leader answers again: its copies would otherwise refuse it for ever.
TEST_F(ControlLoopTest, AFailoverLeftHalfDoneByARestartedLoopIsFinished) {
  const TopicSpec spec = ThreeCopiesOnThreePods(3);
  ASSERT_NO_FATAL_FAILURE(MakeReplicated(spec));
  const PartitionMap before = loop_->map();
  const PartitionInfo& p0 = *before.Find(PartitionId(0));
  ASSERT_EQ(p0.replicas.size(), 2u) << before.ToJson();
  const Epoch fence(before.epoch().value() + 3);
  for (const auto& f : p0.replicas) {
    const std::string admin = before.Peer(f)->admin;
    admin_.SetGetAnswer(admin, "/v1/admin/replica",
                        "{\"followed\":[{\"id\":0,\"leader\":\"" + p0.owner.value() +
                            "\",\"start\":0,\"end\":7,\"last_epoch\":1,\"fenced\":" +
                            std::to_string(fence.value()) + "}]}");
  }
  const PodName most = p0.replicas.back();
  admin_.SetCopy(before.Peer(p0.replicas.front())->admin, PartitionId(0), {PodName(), Epoch(1), 5});
  admin_.SetCopy(before.Peer(most)->admin, PartitionId(0), {PodName(), Epoch(1), 7});
  // A new loop on the saved state: every pod ready, the old leader too.
  loop_ = std::make_unique<ControlLoop>(spec, platform_, observer_, admin_, clock_, Options());
  ASSERT_TRUE(loop_->Start().ok());
  TickUntil([&] { return loop_->map().Find(PartitionId(0))->owner != p0.owner; }, 5);
  const PartitionInfo& now = *loop_->map().Find(PartitionId(0));
  EXPECT_EQ(now.owner, most) << loop_->map().ToJson();
  EXPECT_GE(now.LeaderEpoch(), fence);
  bool fenced_at_or_above = false;
  for (const auto& c : admin_.Calls()) fenced_at_or_above |= c.rfind("fence ", 0) == 0;
  EXPECT_TRUE(fenced_at_or_above);
  // The failover is recorded for `shoal up`'s report: the old leader, the map's epoch.
  const auto failovers = loop_->failovers();
  ASSERT_EQ(failovers.size(), 1u);
  EXPECT_EQ(failovers[0].pods, std::vector<std::string>{p0.owner.value()});
  EXPECT_GE(failovers[0].partitions, 1u);
  EXPECT_EQ(failovers[0].epoch, loop_->map().epoch());
  EXPECT_GE(failovers[0].seconds, 0);
}

// A copy marks itself refetching alike on a first start and after its volume was emptied; the
// loop remembers the volume it first saw each pod hold a map on, and counts the mark only on
// another one (replication::RefetchingCounts). A copy on a new volume that has not caught up
// does not make the quorum of a failover; once caught up it does.
TEST_F(ControlLoopTest, ACopyRefetchingOnANewVolumeCountsForAFailoverOnlyOnceCaughtUp) {
  ASSERT_NO_FATAL_FAILURE(MakeReplicated(ThreeCopiesOnThreePods(3)));
  ASSERT_TRUE(TickUntil([] { return false; }, 2).ok());  // the pods' volumes are recorded
  EXPECT_NE(platform_.state_.find("\"pod_volumes\":{\"t-0\":1,"), std::string::npos)
      << platform_.state_;
  const PartitionMap before = loop_->map();
  const PartitionInfo p0 = *before.Find(PartitionId(0));
  ASSERT_EQ(p0.replicas.size(), 2u) << before.ToJson();
  const std::string kept = before.Peer(p0.replicas[0])->admin;
  const std::string emptied = before.Peer(p0.replicas[1])->admin;
  // One follower's volume was emptied; it holds the map again and refetches partition 0.
  admin_.Wipe(emptied);
  admin_.Hold(emptied, before);
  replication::ReplicaState refetching{PodName(), Epoch(0), 0};
  refetching.refetching = true;
  admin_.SetCopy(emptied, PartitionId(0), refetching);
  admin_.SetCopy(kept, PartitionId(0), {PodName(), Epoch(1), 5});
  // The leader stops answering: one copy of three counts, not a quorum.
  const uint32_t down = static_cast<uint32_t>(std::stoul(p0.owner.value().substr(2)));
  platform_.restarting_[down] = 1 << 20;
  admin_.SetReachable(AdminOf(down), false);
  ASSERT_TRUE(TickUntil([] { return false; }, 15).ok());
  EXPECT_EQ(loop_->map().Find(PartitionId(0))->owner, p0.owner) << loop_->map().ToJson();
  // Caught up with the leader's high watermark (5): it counts, and the failover goes through.
  admin_.SetCopy(emptied, PartitionId(0), {PodName(), Epoch(1), 5});
  TickUntil([&] { return loop_->map().Find(PartitionId(0))->owner != p0.owner; }, 15);
  EXPECT_NE(loop_->map().Find(PartitionId(0))->owner, p0.owner) << loop_->map().ToJson();
}

// The change a loop saved in its state and has not carried out yet (its plan's step target).
std::optional<PartitionMap> SavedTarget(const std::string& state) {
  const size_t at = state.find("\"target\":{");
  if (at == std::string::npos) return std::nullopt;
  const size_t from = at + 9;
  int depth = 0;
  for (size_t i = from; i < state.size(); ++i) {
    if (state[i] == '{') ++depth;
    if (state[i] == '}' && --depth == 0) {
      auto map = PartitionMap::FromJson(state.substr(from, i + 1 - from));
      if (map.ok()) return std::move(map).value();
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void ControlLoopTest::ChangeInProgress(std::optional<PartitionMap>* change) {
  ASSERT_NO_FATAL_FAILURE(MakeReplicated(ThreeCopiesOnThreePods(4)));
  const PartitionMap before = loop_->map();
  ASSERT_EQ(before.peers().size(), 3u) << before.ToJson();
  for (const auto& [pod, addr] : before.peers()) {
    admin_.Fail(addr.admin, Kind::kInstall, Status::Unavailable("busy"), 40);
  }
  Surge();
  TickUntil([&] {
    *change = SavedTarget(platform_.state_);
    return change->has_value() && loop_->map().epoch() == before.epoch();
  });
  ASSERT_TRUE(change->has_value()) << platform_.state_;
  ASSERT_EQ(loop_->map().epoch(), before.epoch()) << "the change went through at once";
}

std::vector<PartitionId> ControlLoopTest::CopiesAnswerFor(const PartitionMap& change,
                                                          const PodName& down, bool active_only) {
  std::vector<PartitionId> led;
  for (const auto& p : change.partitions()) {
    if ((active_only && !p.active()) || p.owner != down) continue;
    led.push_back(p.id);
    for (const auto& f : p.replicas) {
      admin_.SetCopy(change.Peer(f)->admin, p.id, {PodName(), Epoch(0), 0});
    }
  }
  return led;
}

void ControlLoopTest::ExpectFailedOverInsideTheChange(const PartitionMap& change,
                                                      const std::vector<PartitionId>& led,
                                                      const PodName& down) {
  const PartitionMap after = loop_->map();
  for (PartitionId id : led) {
    const PartitionInfo* p = after.Find(id);
    ASSERT_NE(p, nullptr) << after.ToJson();
    EXPECT_NE(p->owner, down) << after.ToJson();
    EXPECT_GT(p->LeaderEpoch(), change.epoch()) << after.ToJson();
  }
  // The change went on as one: its parent sealed, every partition of it in the map.
  for (const auto& p : change.partitions()) {
    const PartitionInfo* now = after.Find(p.id);
    ASSERT_NE(now, nullptr) << "partition " << p.id.value() << ": " << after.ToJson();
    EXPECT_EQ(now->active(), p.active()) << after.ToJson();
  }
}

TEST_F(ControlLoopTest, ALeaderThatStopsAnsweringDuringAChangeIsFailedOverInsideTheChange) {
  // Three partitions with two copies each on three pods; a surge splits one. The split's seal
  // goes through and its installs are refused for a while, so the change stays in progress.
  // Then a pod other than the parent's owner stops answering for good: its partitions are
  // failed over inside the change's map (the parent's seal stands: a successor that took over
  // confirms it, and a map with the parent active would be refused), not into the current map.
  std::optional<PartitionMap> change;
  ASSERT_NO_FATAL_FAILURE(ChangeInProgress(&change));
  PodName parent_owner;
  for (const auto& p : change->partitions()) {
    if (!p.active()) parent_owner = p.owner;
  }
  ASSERT_FALSE(parent_owner.value().empty()) << change->ToJson();
  // The pod after the parent's owner goes down; its copies answer the fence with what they
  // hold (nothing yet, in this test).
  const uint32_t parent_ordinal = static_cast<uint32_t>(std::stoul(parent_owner.value().substr(2)));
  const uint32_t down_ordinal = (parent_ordinal + 1) % 3;
  const PodName down("t-" + std::to_string(down_ordinal));
  platform_.restarting_[down_ordinal] = 1 << 20;
  admin_.SetReachable(AdminOf(down_ordinal), false);
  const std::vector<PartitionId> led = CopiesAnswerFor(*change, down, /*active_only=*/true);
  ASSERT_FALSE(led.empty()) << change->ToJson();
  TickUntil([&] {
    const PartitionMap now = loop_->map();
    return now.epoch() > change->epoch() &&
           std::all_of(led.begin(), led.end(),
                       [&](PartitionId id) { return now.Find(id) && now.Find(id)->owner != down; });
  });
  ExpectFailedOverInsideTheChange(*change, led, down);
}

// A change's parent is sealed, then its owner comes back without its data: the seal is asked
// again and refused (data_lost). Every partition that pod leads has copies, so there is nothing
// to declare lost, and the change is not dropped either (a successor may have confirmed the
// seal, and a map with the parent active again would be refused for ever): the loop keeps the
// change and fails the pod's partitions over inside it, then carries it out as one.
TEST_F(ControlLoopTest, AChangeWhoseParentsOwnerLostItsDataWaitsForTheFailoverInsideIt) {
  std::optional<PartitionMap> change;
  ASSERT_NO_FATAL_FAILURE(ChangeInProgress(&change));
  const PartitionInfo* parent = nullptr;
  for (const auto& p : change->partitions()) {
    if (!p.active()) parent = &p;
  }
  ASSERT_NE(parent, nullptr) << change->ToJson();
  const PodName owner = parent->owner;
  const std::string owner_admin = change->Peer(owner)->admin;
  const std::string sealed = "seal " + owner_admin + " p" + std::to_string(parent->id.value()) +
                             " e" + std::to_string(change->epoch().value());
  const auto calls = admin_.Calls();
  ASSERT_NE(std::find(calls.begin(), calls.end(), sealed), calls.end()) << "not sealed yet";
  // Its volume emptied: it holds no map, and refuses to seal what it should hold. Its copies
  // answer the fence with what they hold.
  admin_.Wipe(owner_admin);
  admin_.Fail(owner_admin, Kind::kSeal,
              Status::DataLost("asked to seal partition " + std::to_string(parent->id.value()) +
                               ", which this pod should hold and does not"),
              1000);
  for (const auto& p : change->partitions()) {
    if (p.owner == owner) {
      ASSERT_FALSE(p.replicas.empty()) << change->ToJson();
    }
  }
  const std::vector<PartitionId> led = CopiesAnswerFor(*change, owner, /*active_only=*/false);
  // Until the change is carried out, it stays saved: never dropped to be planned again.
  bool dropped = false;
  TickUntil([&] {
    const PartitionMap now = loop_->map();
    if (now.epoch() < change->epoch() && !SavedTarget(platform_.state_)) dropped = true;
    return dropped || (now.epoch() > change->epoch() &&
                       std::all_of(led.begin(), led.end(), [&](PartitionId id) {
                         return now.Find(id) && now.Find(id)->owner != owner;
                       }));
  });
  ASSERT_FALSE(dropped) << "the change was dropped: " << loop_->StatusJson();
  ExpectFailedOverInsideTheChange(*change, led, owner);
  const PartitionMap after = loop_->map();
  for (const auto& p : change->partitions()) {
    const PartitionInfo* now = after.Find(p.id);
    if (now) {
      EXPECT_EQ(now->range, p.range) << after.ToJson();
    }
  }
}

TEST_F(ControlLoopTest, APausedLoopMakesNoDecisionUntilResumed) {
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  loop_->SetPaused(true);
  EXPECT_TRUE(loop_->paused());
  Surge();
  const PartitionMap before = loop_->map();
  (void)TickUntil([] { return false; }, 10);
  EXPECT_EQ(loop_->map(), before);
  EXPECT_FALSE(loop_->plan_in_progress());
  EXPECT_EQ(admin_.Attempts(AdminOf(0), Kind::kInstall), 1) << "only the bootstrap";
  loop_->SetPaused(false);
  Status st = TickUntil([&] { return loop_->map().active_count() > 1 && !loop_->plan_in_progress(); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(loop_->map().active_count(), 1u) << loop_->StatusJson();
}

TEST_F(ControlLoopTest, AConflictIsNotCountedAsDoneAndTheChangeIsTriedAtALaterEpoch) {
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  admin_.Fail(AdminOf(0), Kind::kInstall, Status::Conflict("another map of epoch 2 is held"));
  Surge();
  Status refused = TickUntil([&] { return admin_.Attempts(AdminOf(0), Kind::kInstall) >= 2; });
  EXPECT_EQ(refused.code(), Status::Code::kConflict) << refused.ToString();
  EXPECT_EQ(loop_->map().epoch(), Epoch(1)) << "a refused change was counted as done";
  Status st = TickUntil([&] { return loop_->map().active_count() > 1; });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GE(loop_->map().epoch(), Epoch(3)) << "retried at the refused epoch";
  EXPECT_EQ(*admin_.Held(AdminOf(0)), loop_->map());
}

TEST_F(ControlLoopTest, AStaleEpochTakesOverTheNewerMapTheSidecarsHold) {
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  // Another coordinator moved the sidecar to epoch 5 (a split of its own).
  auto theirs = admin_.Held(AdminOf(0))->Split(PartitionId(0), uint64_t{1} << 31);
  ASSERT_TRUE(theirs.ok());
  const PartitionMap newer = theirs->WithEpoch(Epoch(5));
  admin_.Hold(AdminOf(0), newer);
  Surge();
  Status refused = TickUntil([&] { return loop_->map().epoch() >= Epoch(5); });
  EXPECT_EQ(refused.code(), Status::Code::kConflict) << refused.ToString();
  EXPECT_EQ(loop_->map(), newer);
  EXPECT_NE(platform_.state_.find("\"epoch\":5"), std::string::npos)
      << "the newer map was not saved as the record";
}

TEST_F(ControlLoopTest, AConflictAfterAnotherCoordinatorSavedItsRecordTakesThatRecordOver) {
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  Surge();
  // The change's target is saved; while it is being installed, another coordinator saves a
  // record of its own (no plan, a later plan id) and its map is what the sidecar holds.
  std::string theirs;
  admin_.OnCall([&](const std::string& call) {
    if (call != "install " + AdminOf(0) + " e2" || !theirs.empty()) return;
    theirs = std::regex_replace(platform_.state_,
                                std::regex(R"re("plan":\{.*\},"next_plan_id":[0-9]+)re"),
                                R"("plan":null,"next_plan_id":77)");
    platform_.state_ = theirs;
  });
  admin_.Fail(AdminOf(0), Kind::kInstall, Status::Conflict("another map of epoch 2 is held"));
  Status refused = TickUntil([&] { return !theirs.empty() && !loop_->plan_in_progress(); });
  EXPECT_EQ(refused.code(), Status::Code::kConflict) << refused.ToString();
  EXPECT_NE(refused.message().find("took over the control state"), std::string::npos)
      << refused.ToString();
  ASSERT_FALSE(theirs.empty());
  EXPECT_NE(theirs.find("\"next_plan_id\":77"), std::string::npos) << theirs;
  EXPECT_EQ(platform_.state_, theirs) << "the taken-over record was written over";
  EXPECT_EQ(loop_->map().epoch(), Epoch(1));
}

TEST_F(ControlLoopTest, AnUnreachablePodFailsTheStepWhichResumesWhenItAnswers) {
  Make();
  ASSERT_TRUE(Bootstrap().ok());
  admin_.SetReachable(AdminOf(0), false);
  Surge();
  Status down = TickUntil([&] { return admin_.Attempts(AdminOf(0), Kind::kSeal) > 0; });
  EXPECT_EQ(down.code(), Status::Code::kUnavailable) << down.ToString();
  EXPECT_TRUE(loop_->plan_in_progress());
  EXPECT_EQ(loop_->map().epoch(), Epoch(1));
  EXPECT_NE(loop_->StatusJson().find("connection refused"), std::string::npos)
      << loop_->StatusJson();
  admin_.SetReachable(AdminOf(0), true);
  Status st = TickUntil([&] { return loop_->map().active_count() > 1; });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*admin_.Held(AdminOf(0)), loop_->map());
}


// The roll of a new pod template: pods that run an old one are restarted one at a time, each only
// once it owns no partition and its sealed ones were retired, and the partitions are spread over
// every pod again at the end.
class RollTest : public ControlLoopTest {
 protected:
  static TopicSpec Pods(uint32_t pods, uint32_t partitions) {
    TopicSpec s = Spec();
    s.partitions.initial = partitions;
    s.replicas.min = pods;
    s.replicas.max = pods;
    s.scaling.partitions_per_replica = partitions;
    return s;
  }
  // Pod `ordinal`'s active partitions in the map its sidecar holds and in the loop's.
  size_t Owned(uint32_t ordinal, const PartitionMap& map) const {
    size_t n = 0;
    for (const auto& p : map.partitions()) {
      n += p.active() && p.owner == PodName("t-" + std::to_string(ordinal)) ? 1 : 0;
    }
    return n;
  }
  void SetUp() override {
    observer_.rate = 950;  // steady just below the target: nothing to split or merge
    observer_.report = true;
    // At each restart: the pod owns nothing anywhere, holds no sealed partition in the loop's
    // map, and no other pod is restarting.
    platform_.on_restart_ = [&](const PodInfo& pod) {
      const PartitionMap map = loop_->map();
      EXPECT_EQ(Owned(pod.ordinal, map), 0u) << pod.name.value() << " restarted owning partitions";
      for (const auto& p : map.partitions()) {
        EXPECT_FALSE(p.owner == pod.name) << pod.name.value() << " restarted holding partition "
                                          << p.id.value();
      }
      for (uint32_t i = 0; i < platform_.DesiredPods(); ++i) {
        if (auto held = admin_.Held(AdminOf(i))) {
          EXPECT_EQ(Owned(pod.ordinal, *held), 0u) << "pod " << i << "'s map";
        }
      }
      EXPECT_TRUE(platform_.restarting_.empty()) << "two pods restarting at once";
    };
  }
  bool Settled() {
    return platform_.outdated_.empty() && platform_.restarting_.empty() &&
           !loop_->plan_in_progress();
  }
};

TEST_F(RollTest, OutdatedPodsAreEmptiedRestartedOneAtATimeAndBalancedAgain) {
  Make(Pods(3, 6));
  ASSERT_TRUE(TickUntil([&] { return admin_.Held(AdminOf(2)).has_value(); }).ok());
  ASSERT_EQ(loop_->map().active_count(), 6u);
  platform_.outdated_ = {0, 1, 2};
  Status st = TickUntil([&] { return Settled(); }, 200);
  ASSERT_TRUE(st.ok()) << st.ToString() << loop_->StatusJson();
  ASSERT_TRUE(Settled()) << loop_->StatusJson();
  ASSERT_EQ(platform_.restarts_.size(), 3u);
  // Highest ordinal first, each once.
  EXPECT_EQ(platform_.restarts_[0].ordinal, 2u);
  EXPECT_EQ(platform_.restarts_[1].ordinal, 1u);
  EXPECT_EQ(platform_.restarts_[2].ordinal, 0u);
  EXPECT_EQ(platform_.DesiredPods(), 3u);
  const PartitionMap map = loop_->map();
  EXPECT_EQ(map.active_count(), 6u) << "a roll neither splits nor merges";
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(Owned(i, map), 2u) << "pod " << i;
  // The final balance sealed what it moved: retired by the loop's periodic check.
  ASSERT_TRUE(TickUntil([&] { return loop_->map().active_count() ==
                                     loop_->map().partitions().size(); }).ok());
  EXPECT_EQ(loop_->map().active_count(), loop_->map().partitions().size());
}

// A scale-down with copies (factor 3, four pods to three) moves the leaving pod's copies as
// Kafka reassigns replicas: each gets a replacement that joins the partition, the leaving copy
// stays a follower beside it, and the pod and its copies leave the map only once the
// replacements' pods say they caught up (GET /v1/admin/replica): until then the events a quorum
// acknowledged with the leaving copy may be held by one copy that stays.
TEST_F(RollTest, AScaleDownDropsALeavingPodsCopiesOnlyOnceTheirReplacementsCaughtUp) {
  TopicSpec spec = Pods(4, 8);
  spec.replication.factor = 3;
  spec.scale_down.stabilization_window_seconds = 0;
  Make(spec);
  const PodName leaving("t-3");
  ASSERT_TRUE(TickUntil([&] {
                return admin_.Held(AdminOf(3)).has_value() &&
                       loop_->map().Find(PartitionId(0))->replicas.size() == 2;
              }).ok());
  size_t followed = 0;
  const PartitionMap placed = loop_->map();
  for (const auto& p : placed.partitions()) followed += p.FollowedBy(leaving) ? 1 : 0;
  ASSERT_GT(followed, 0u);

  spec.replicas.min = spec.replicas.max = 3;
  loop_->UpdateSpec(spec);
  (void)TickUntil([] { return false; }, 40);
  // Moved off and waiting: t-3 is still in the map, its copies beside their replacements.
  PartitionMap map = loop_->map();
  EXPECT_TRUE(loop_->plan_in_progress()) << loop_->StatusJson();
  EXPECT_EQ(platform_.DesiredPods(), 4u);
  ASSERT_NE(map.Peer(leaving), nullptr);
  std::vector<std::pair<uint32_t, PartitionId>> joining;  // (pod ordinal, partition)
  for (const auto& p : map.partitions()) {
    EXPECT_TRUE(!p.active() || p.owner != leaving) << p.id;  // its partitions moved
    if (!p.FollowedBy(leaving)) continue;
    size_t replacements = 0;
    for (const auto& j : p.joined) {
      if (j.pod == leaving) continue;
      joining.emplace_back(static_cast<uint32_t>(j.pod.value().back() - '0'), p.id);
      ++replacements;
    }
    EXPECT_EQ(replacements, 1u) << p.id;
    EXPECT_EQ(p.replicas.size(), p.active() ? 3u : p.replicas.size()) << p.id;
  }
  ASSERT_FALSE(joining.empty()) << map.ToJson();

  // One replacement caught up is not enough.
  admin_.SetCopy(AdminOf(joining[0].first), joining[0].second, replication::ReplicaState{});
  (void)TickUntil([] { return false; }, 10);
  EXPECT_NE(loop_->map().Peer(leaving), nullptr);
  EXPECT_TRUE(loop_->plan_in_progress());
  EXPECT_EQ(platform_.DesiredPods(), 4u);
  // All of them: the retirement drops t-3 with its copies, and the pod goes.
  for (const auto& [ordinal, id] : joining) {
    admin_.SetCopy(AdminOf(ordinal), id, replication::ReplicaState{});
  }
  Status st = TickUntil([&] { return !loop_->plan_in_progress(); }, 100);
  ASSERT_TRUE(st.ok()) << st.ToString() << loop_->StatusJson();
  EXPECT_EQ(platform_.DesiredPods(), 3u);
  map = loop_->map();
  EXPECT_EQ(map.Peer(leaving), nullptr);
  for (const auto& p : map.partitions()) {
    EXPECT_FALSE(p.FollowedBy(leaving)) << p.id;
    if (p.active()) {
      EXPECT_EQ(p.replicas.size(), 2u) << p.id;
    }
  }
}

TEST_F(RollTest, ATopicOfOnePodBorrowsASecondWhileItRestartsAndGivesItBack) {
  Make(Pods(1, 4));
  ASSERT_TRUE(Bootstrap().ok());
  platform_.outdated_ = {0};
  uint32_t most = 0;
  Status st = TickUntil(
      [&] {
        most = std::max(most, platform_.DesiredPods());
        return Settled();
      },
      200);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(Settled()) << loop_->StatusJson();
  EXPECT_EQ(most, 2u);
  ASSERT_EQ(platform_.restarts_.size(), 1u);
  EXPECT_EQ(platform_.DesiredPods(), 1u);
  const PartitionMap map = loop_->map();
  EXPECT_EQ(Owned(0, map), 4u);
  EXPECT_EQ(map.peers().size(), 1u) << "the borrowed pod's address stayed in the map";
}

TEST_F(RollTest, APausedTopicRollsNothingAndARestartIsAskedOncePerIncarnation) {
  Make(Pods(2, 4));
  ASSERT_TRUE(TickUntil([&] { return admin_.Held(AdminOf(1)).has_value(); }).ok());
  loop_->SetPaused(true);
  platform_.outdated_ = {1};
  (void)TickUntil([] { return false; }, 10);
  EXPECT_FALSE(loop_->plan_in_progress());
  EXPECT_TRUE(platform_.restarts_.empty());
  loop_->SetPaused(false);
  platform_.restart_ticks_ = 6;  // a slow restart: the step waits without asking again
  Status st = TickUntil([&] { return Settled(); }, 200);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(Settled()) << loop_->StatusJson();
  EXPECT_EQ(platform_.restarts_.size(), 1u);
  EXPECT_EQ(Owned(0, loop_->map()), 2u);
  EXPECT_EQ(Owned(1, loop_->map()), 2u);
}

}  // namespace
}  // namespace shoal::control
