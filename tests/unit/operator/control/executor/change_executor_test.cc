// ChangeExecutor against FakeAdminPlane: each outcome a sidecar can answer (installed, already
// held, conflict, stale epoch, unreachable) and the order of the protocol's steps.
#include "shoal/control/change_executor.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/fake_admin_plane.h"

namespace shoal::control {
namespace {

using shoal::testing::FakeAdminPlane;
using Kind = FakeAdminPlane::Kind;

// Two pods, a and b; partitions 0 (at a) and 1 (at b).
PartitionMap TwoPods() {
  auto m = PartitionMap::Initial("t", 2, std::vector<PodName>{PodName("a"), PodName("b")});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m->WithPeer(PodName("a"), PeerAddress{"a:data", "a:admin"})
      .WithPeer(PodName("b"), PeerAddress{"b:data", "b:admin"});
}

ChangeExecutor::Options Fast() {
  ChangeExecutor::Options o;
  o.step_timeout = std::chrono::milliseconds(30);
  o.backoff_start = std::chrono::milliseconds(1);
  o.backoff_max = std::chrono::milliseconds(2);
  return o;
}

size_t IndexOf(const std::vector<std::string>& calls, const std::string& call) {
  auto it = std::find(calls.begin(), calls.end(), call);
  EXPECT_NE(it, calls.end()) << "no call \"" << call << "\"";
  return static_cast<size_t>(it - calls.begin());
}

class ChangeExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    current_ = TwoPods();
    admin_.Hold("a:admin", current_);
    admin_.Hold("b:admin", current_);
    auto split = current_.Split(PartitionId(0), uint64_t{1} << 30);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    target_ = *split;
  }
  FakeAdminPlane admin_;
  PartitionMap current_, target_;
};

TEST_F(ChangeExecutorTest, InstalledEverywhereWithTheSealedEndRecorded) {
  admin_.SetEnd("a:admin", PartitionId(0), 42);
  ChangeExecutor exec(admin_, Fast());
  ChangeTiming timing;
  auto applied = exec.Apply(current_, target_, &timing);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->Find(PartitionId(0))->end_offset, 42u);
  for (const char* pod : {"a:admin", "b:admin"}) {
    ASSERT_TRUE(admin_.Held(pod).has_value());
    EXPECT_EQ(*admin_.Held(pod), *applied) << pod;
  }
  EXPECT_EQ(timing.retries, 0);
  // Seal before any install: no pod sees the new map before the parent is sealed.
  const auto calls = admin_.Calls();
  EXPECT_LT(IndexOf(calls, "seal a:admin p0 e2"), IndexOf(calls, "install a:admin e2"));
  EXPECT_LT(IndexOf(calls, "seal a:admin p0 e2"), IndexOf(calls, "install b:admin e2"));
  // The successors' owner (a) before the pod that only routes (b).
  EXPECT_LT(IndexOf(calls, "install a:admin e2"), IndexOf(calls, "install b:admin e2"));
}

TEST_F(ChangeExecutorTest, AMapAlreadyHeldCountsAsDoneAndTheChangeCompletes) {
  // An earlier attempt sealed p0 and installed at b, then the coordinator died.
  ChangeExecutor first(admin_, Fast());
  ASSERT_TRUE(first.Apply(current_, target_, nullptr).ok());
  const int installs_before = admin_.Attempts("b:admin", Kind::kInstall);
  ChangeExecutor again(admin_, Fast());
  auto applied = again.Apply(current_, target_, nullptr);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(admin_.Attempts("b:admin", Kind::kInstall), installs_before + 1);
  EXPECT_EQ(admin_.Held("b:admin")->epoch(), Epoch(2));
}

TEST_F(ChangeExecutorTest, InstallOnAPodHoldingTheMapIsDone) {
  ChangeExecutor exec(admin_, Fast());
  EXPECT_TRUE(exec.InstallOn(PodName("a"), current_).ok());
  EXPECT_EQ(admin_.Attempts("a:admin", Kind::kInstall), 1);
}

TEST_F(ChangeExecutorTest, AConflictStopsTheChangeAndIsNeverCountedAsDone) {
  // Another coordinator's map of epoch 2 is held at a: every further install must stop.
  auto other = current_.Split(PartitionId(1), uint64_t{3} << 30);
  ASSERT_TRUE(other.ok());
  admin_.Hold("a:admin", *other);
  ChangeExecutor exec(admin_, Fast());
  auto applied = exec.Apply(current_, target_, nullptr);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), Status::Code::kConflict) << applied.status().ToString();
  EXPECT_EQ(admin_.Attempts("b:admin", Kind::kInstall), 0) << "went on past a conflict";
  EXPECT_EQ(admin_.Held("b:admin")->epoch(), Epoch(1));
}

TEST_F(ChangeExecutorTest, AConflictingSealStopsBeforeAnyInstall) {
  admin_.Fail("a:admin", Kind::kSeal, Status::Conflict("partition 0 is sealed for another change"));
  ChangeExecutor exec(admin_, Fast());
  auto applied = exec.Apply(current_, target_, nullptr);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), Status::Code::kConflict);
  EXPECT_EQ(admin_.Attempts("a:admin", Kind::kInstall), 0);
  EXPECT_EQ(admin_.Attempts("b:admin", Kind::kInstall), 0);
}

TEST_F(ChangeExecutorTest, AStaleEpochStopsTheChange) {
  // b moved on to epoch 3 under another coordinator.
  auto newer = target_.WithEpoch(Epoch(3));
  admin_.Hold("b:admin", newer);
  ChangeExecutor exec(admin_, Fast());
  auto applied = exec.Apply(current_, target_, nullptr);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), Status::Code::kStaleEpoch) << applied.status().ToString();
  EXPECT_EQ(admin_.Held("b:admin")->epoch(), Epoch(3)) << "b was moved back";
}

TEST_F(ChangeExecutorTest, AnUnreachablePodIsRetriedUntilItAnswers) {
  admin_.Fail("b:admin", Kind::kInstall, Status::Unavailable("connection refused"), 3);
  ChangeExecutor exec(admin_, Fast());
  ChangeTiming timing;
  auto applied = exec.Apply(current_, target_, &timing);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(timing.retries, 3);
  EXPECT_EQ(admin_.Attempts("b:admin", Kind::kInstall), 4);
  EXPECT_EQ(admin_.Held("b:admin")->epoch(), Epoch(2));
}

TEST_F(ChangeExecutorTest, APodUnreachablePastTheStepTimeoutIsReportedAndResumable) {
  admin_.SetReachable("b:admin", false);
  ChangeExecutor exec(admin_, Fast());
  auto applied = exec.Apply(current_, target_, nullptr);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(applied.status().message().find("gave up"), std::string::npos)
      << applied.status().ToString();
  EXPECT_GT(admin_.Attempts("b:admin", Kind::kInstall), 1);
  // a holds the change already; once b answers, applying the same change again completes it.
  EXPECT_EQ(admin_.Held("a:admin")->epoch(), Epoch(2));
  admin_.SetReachable("b:admin", true);
  auto resumed = exec.Apply(current_, target_, nullptr);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(admin_.Held("b:admin")->epoch(), Epoch(2));
}

TEST_F(ChangeExecutorTest, AnUnsealableParentIsReportedAndNothingInstalled) {
  admin_.SetReachable("a:admin", false);
  ChangeExecutor exec(admin_, Fast());
  auto applied = exec.Apply(current_, target_, nullptr);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(admin_.Attempts("b:admin", Kind::kInstall), 0);
  EXPECT_EQ(admin_.Held("b:admin")->epoch(), Epoch(1));
}

TEST_F(ChangeExecutorTest, NoRequestOnceNotAllowedToAct) {
  auto o = Fast();
  o.may_act = [] { return false; };
  ChangeExecutor exec(admin_, o);
  auto applied = exec.Apply(current_, target_, nullptr);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), Status::Code::kUnavailable);
  EXPECT_TRUE(admin_.Calls().empty()) << admin_.Calls().front();
}

TEST_F(ChangeExecutorTest, AnOlderTargetIsRefusedWithoutARequest) {
  ChangeExecutor exec(admin_, Fast());
  auto applied = exec.Apply(target_, current_, nullptr);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(admin_.Calls().empty());
}

}  // namespace
}  // namespace shoal::control
