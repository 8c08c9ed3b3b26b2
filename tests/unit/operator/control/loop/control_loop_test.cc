// ControlLoop against the fake admin plane, a platform of pods in memory and an observer that
// reports the load the test sets: bootstrap, a change driven by the policy, and each outcome a
// sidecar can answer (installed, already held, conflict, stale epoch, unreachable). The
// multi-process tests (tests/integration/operator) run the same loop against real sidecars.
#include "shoal/control/control_loop.h"

#include <gtest/gtest.h>

#include <functional>
#include <regex>

#include "support/fake_admin_plane.h"
#include "support/manual_clock.h"

namespace shoal::control {
namespace {

using shoal::testing::FakeAdminPlane;
using shoal::testing::ManualClock;
using Kind = FakeAdminPlane::Kind;

std::string AdminOf(uint32_t ordinal) { return "t-" + std::to_string(ordinal) + ":admin"; }

// Pods t-0 .. t-(n-1), ready as soon as they are asked for; the state in memory.
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
      p.ready = true;
      pods.push_back(p);
    }
    return pods;
  }
  Status DrainPod(const PodName&) override { return Status::Ok(); }
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
  Result<AdminPartitionsReport> PartitionsOf(const PodInfo& pod) override {
    return Status::Unavailable(pod.name.value() + ": not observed in this test");
  }
  double rate = 0;
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
  void Make() {
    loop_ = std::make_unique<ControlLoop>(Spec(), platform_, observer_, admin_, clock_, Options());
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

// Paused (shoal.dev/paused): a surge changes nothing, whatever the ticks; resumed, the same
// surge is split at once.
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

}  // namespace
}  // namespace shoal::control
