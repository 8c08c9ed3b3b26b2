// ComputeTopicStatus, one row per situation a topic can be in: the conditions it shows.
#include "shoal/reconciler/topic_status.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shoal::reconciler {
namespace {

using S = ConditionStatus;

struct Row {
  const char* name;
  TopicObservation in;
  // Expected (status, reason) of Degraded, Progressing, Ready.
  S degraded;
  const char* degraded_reason;
  S progressing;
  const char* progressing_reason;
  S ready;
  const char* ready_reason;
};

TopicObservation Obs(uint32_t desired, uint32_t ready, uint64_t epoch, uint32_t active,
                     uint32_t unserved, bool plan, std::string error = "") {
  TopicObservation o;
  o.desired_pods = desired;
  o.ready_pods = ready;
  o.epoch = Epoch(epoch);
  o.active = active;
  o.sealed = 1;
  o.unserved = unserved;
  o.plan_in_progress = plan;
  o.start_error = std::move(error);
  return o;
}

class TopicStatusTableTest : public ::testing::TestWithParam<Row> {};

// The shoal.dev/paused annotation shows as a Paused condition; the others stay as they are.
TEST(TopicStatusTest, APausedTopicSaysSoAndWhatItHolds) {
  TopicObservation o;
  o.desired_pods = o.ready_pods = 2;
  o.epoch = Epoch{3};
  o.active = 4;
  o.paused = true;
  const TopicStatus s = ComputeTopicStatus(o);
  ASSERT_EQ(s.conditions.size(), 4u);
  EXPECT_EQ(s.conditions[2].status, ConditionStatus::kTrue) << "a paused topic still serves";
  EXPECT_EQ(s.conditions[3].type, ConditionType::kPaused);
  EXPECT_EQ(s.conditions[3].status, ConditionStatus::kTrue);
  EXPECT_EQ(s.conditions[3].reason, "PausedByAnnotation");
  EXPECT_NE(s.conditions[3].message.find("shoal.dev/paused"), std::string::npos);
  EXPECT_STREQ(ToString(ConditionType::kPaused), "Paused");
}

TEST_P(TopicStatusTableTest, Conditions) {
  const Row& r = GetParam();
  const TopicStatus s = ComputeTopicStatus(r.in);
  ASSERT_EQ(s.conditions.size(), 4u);
  const Condition& d = s.conditions[0];
  const Condition& p = s.conditions[1];
  const Condition& y = s.conditions[2];
  EXPECT_EQ(d.type, ConditionType::kDegraded);
  EXPECT_EQ(p.type, ConditionType::kProgressing);
  EXPECT_EQ(y.type, ConditionType::kReady);
  EXPECT_EQ(s.conditions[3].type, ConditionType::kPaused);
  EXPECT_EQ(s.conditions[3].status, ConditionStatus::kFalse) << "not annotated";
  EXPECT_EQ(d.status, r.degraded);
  EXPECT_EQ(d.reason, r.degraded_reason);
  EXPECT_EQ(p.status, r.progressing);
  EXPECT_EQ(p.reason, r.progressing_reason);
  EXPECT_EQ(y.status, r.ready);
  EXPECT_EQ(y.reason, r.ready_reason);
  for (const auto& c : s.conditions) EXPECT_FALSE(c.message.empty()) << ToString(c.type);
  EXPECT_EQ(s.replicas, r.in.desired_pods);
  EXPECT_EQ(s.ready_replicas, r.in.ready_pods);
  EXPECT_EQ(s.epoch.has_value(), r.in.epoch.value() > 0);
}

INSTANTIATE_TEST_SUITE_P(
    Situations, TopicStatusTableTest,
    ::testing::Values(
        Row{"NewTopicPodsStarting", Obs(2, 0, 0, 0, 0, false), S::kFalse, "AsExpected", S::kTrue,
            "PodsStarting", S::kFalse, "Starting"},
        Row{"PodsReadyNoMapYet", Obs(2, 2, 0, 0, 0, false), S::kFalse, "AsExpected", S::kTrue,
            "PodsStarting", S::kFalse, "Starting"},
        Row{"Running", Obs(2, 2, 3, 4, 0, false), S::kFalse, "AsExpected", S::kFalse, "Stable",
            S::kTrue, "TopicReady"},
        Row{"ScalingUpNewPodsStarting", Obs(4, 2, 3, 4, 0, true), S::kFalse, "AsExpected",
            S::kTrue, "PlanInProgress", S::kTrue, "TopicReady"},
        Row{"PodsStartingWithoutAPlan", Obs(4, 2, 3, 4, 0, false), S::kFalse, "AsExpected",
            S::kTrue, "PodsStarting", S::kTrue, "TopicReady"},
        Row{"AnOwnerIsDown", Obs(2, 1, 3, 4, 2, false), S::kFalse, "AsExpected", S::kTrue,
            "PodsStarting", S::kFalse, "PartitionsUnserved"},
        Row{"ControlStateUnreadable", Obs(2, 2, 3, 4, 0, false, "status.controlState: bad JSON"),
            S::kTrue, "ControlStateUnreadable", S::kFalse, "Stable", S::kTrue, "TopicReady"},
        Row{"MapWithoutActivePartitions", Obs(1, 1, 2, 0, 0, false), S::kFalse, "AsExpected",
            S::kFalse, "Stable", S::kFalse, "PartitionsUnserved"}),
    [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });

// A pod that came back without its data: Degraded names it and the partitions it held (the
// operator counts them as unserved too).
TEST(TopicStatusTest, APodWithoutItsDataIsDegradedNamingItsPartitions) {
  TopicObservation o = Obs(2, 2, 3, 4, 2, false);
  o.pods_without_data = {{"orders-1", {PartitionId(1), PartitionId(3)}}};
  const TopicStatus s = ComputeTopicStatus(o);
  ASSERT_EQ(s.conditions.size(), 4u);
  EXPECT_EQ(s.conditions[0].status, S::kTrue);
  EXPECT_EQ(s.conditions[0].reason, "PodLostData");
  EXPECT_NE(s.conditions[0].message.find(
                "pod orders-1 came back without its data (partitions 1, 3)"),
            std::string::npos)
      << s.conditions[0].message;
  EXPECT_EQ(s.conditions[2].reason, "PartitionsUnserved");
}

// Partitions declared lost, still in the map: Degraded says which, with whose volume and how
// many events, and that their ranges take writes again.
TEST(TopicStatusTest, PartitionsDeclaredLostAreDegradedNamingThemAndTheirEvents) {
  TopicObservation o = Obs(2, 2, 3, 4, 0, false);
  o.losses.push_back({"orders-1", {PartitionId(1), PartitionId(3)}, 1234});
  const TopicStatus s = ComputeTopicStatus(o);
  ASSERT_EQ(s.conditions.size(), 4u);
  EXPECT_EQ(s.conditions[0].status, S::kTrue);
  EXPECT_EQ(s.conditions[0].reason, "PartitionsLost");
  EXPECT_NE(s.conditions[0].message.find(
                "partitions 1, 3 were declared lost with pod orders-1's volume (1234 events): "
                "their ranges took new partitions and take writes again"),
            std::string::npos)
      << s.conditions[0].message;
}

// A data volume under pressure: Degraded says which pod and how much is free.
TEST(TopicStatusTest, ADiskUnderPressureIsDegradedNamingThePod) {
  TopicObservation o = Obs(2, 2, 3, 4, 0, false);
  o.disk_pressure["orders-0"] = {100.0 * (1 << 20), 64.0 * (1 << 20), false};
  o.disk_pressure["orders-1"] = {0, 64.0 * (1 << 20), true};
  const TopicStatus s = ComputeTopicStatus(o);
  ASSERT_EQ(s.conditions.size(), 4u);
  EXPECT_EQ(s.conditions[0].status, S::kTrue);
  EXPECT_EQ(s.conditions[0].reason, "DiskPressure");
  EXPECT_NE(s.conditions[0].message.find(
                "pod orders-0's data volume has 100 MiB free, under twice its reserve of 64 MiB; "
                "pod orders-1's data volume filled up and its reserve of 64 MiB is in use"),
            std::string::npos)
      << s.conditions[0].message;
  EXPECT_EQ(s.conditions[2].reason, "TopicReady") << "its partitions are still served";
}

// What pods report that keeps them from running: the kubelet's waiting reasons no wait mends, a
// pod the scheduler cannot place, an eviction; a container still being created is no problem.
TEST(TopicStatusTest, PodsThatCannotRunAreNamedWithTheirCause) {
  const auto pod = [](const std::string& name, const std::string& status) {
    return web::json::value::parse(R"({"metadata":{"name":")" + name + R"("},"status":)" + status +
                                   "}");
  };
  const auto problems = PodProblems({
      pod("t-0",
          R"({"containerStatuses":[{"name":"app","state":{"waiting":{"reason":"ErrImagePull","message":"not found"}}}]})"),
      pod("t-1",
          R"({"containerStatuses":[{"name":"app","state":{"waiting":{"reason":"ContainerCreating"}}}]})"),
      pod("t-2",
          R"({"containerStatuses":[{"name":"shoal-sidecar","state":{"waiting":{"reason":"CrashLoopBackOff"}}}]})"),
      pod("t-3",
          R"({"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/3 nodes have enough cpu"}]})"),
      pod("t-4",
          R"({"phase":"Failed","reason":"Evicted","message":"The node was low on resource: ephemeral-storage."})"),
      pod("t-5", R"({"containerStatuses":[{"name":"app","state":{"running":{}}}]})"),
  });
  std::vector<std::string> named;
  for (const auto& p : problems) named.push_back(p.pod + " " + p.reason + ": " + p.message);
  EXPECT_EQ(named, (std::vector<std::string>{
                       "t-0 ErrImagePull: container app: not found",
                       "t-2 CrashLoopBackOff: container shoal-sidecar",
                       "t-3 Unschedulable: 0/3 nodes have enough cpu",
                       "t-4 Evicted: The node was low on resource: ephemeral-storage.",
                   }));

  TopicObservation o;
  o.desired_pods = 2;
  o.pod_problems = problems;
  const TopicStatus s = ComputeTopicStatus(o);
  EXPECT_EQ(s.conditions[0].reason, "ErrImagePull");
  EXPECT_NE(s.conditions[0].message.find("pod t-2: CrashLoopBackOff (container shoal-sidecar)"),
            std::string::npos)
      << s.conditions[0].message;
}

TEST(TopicStatusTest, CountsAreShownOnceAMapIsInstalled) {
  const TopicStatus none = ComputeTopicStatus(Obs(2, 2, 0, 0, 0, false));
  EXPECT_FALSE(none.epoch || none.partitions || none.sealed_partitions);
  const TopicStatus some = ComputeTopicStatus(Obs(2, 2, 7, 5, 0, false));
  ASSERT_TRUE(some.epoch && some.partitions && some.sealed_partitions);
  EXPECT_EQ(*some.epoch, Epoch(7));
  EXPECT_EQ(*some.partitions, 5u);
  EXPECT_EQ(*some.sealed_partitions, 1u);
}

TEST(TopicStatusTest, AnInvalidSpecIsDegradedNotReadyAndChangesNothing) {
  const auto c = InvalidConditions("spec.partitions.max: above the limit");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], (Condition{ConditionType::kDegraded, S::kTrue, "InvalidSpec",
                             "spec.partitions.max: above the limit"}));
  EXPECT_EQ(c[1].type, ConditionType::kReady);
  EXPECT_EQ(c[1].status, S::kFalse);
  EXPECT_EQ(c[2].type, ConditionType::kProgressing);
  EXPECT_EQ(c[2].status, S::kFalse);
  EXPECT_EQ(c[1].reason, "InvalidSpec");
  EXPECT_EQ(c[2].reason, "InvalidSpec");
}

TEST(TopicStatusTest, NamesAreKubernetesConditionNames) {
  EXPECT_STREQ(ToString(ConditionType::kDegraded), "Degraded");
  EXPECT_STREQ(ToString(ConditionType::kProgressing), "Progressing");
  EXPECT_STREQ(ToString(ConditionType::kReady), "Ready");
  EXPECT_STREQ(ToString(ConditionStatus::kTrue), "True");
  EXPECT_STREQ(ToString(ConditionStatus::kFalse), "False");
}

}  // namespace
}  // namespace shoal::reconciler
