// The control state's form in a PartitionedTopic's status (KubePlatform::StateToStatus and
// StatusToState): the map gzip+base64, the plan as written, the last decision with an RFC 3339
// time; and back, so that the next leader loads what the last one saved.
#include "shoal/reconciler/kube_platform.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include <atomic>

#include "shoal/common/partition_map.h"
#include "shoal/kubeapi/informer.h"
#include "shoal/kubeapi/kube_client.h"
#include "support/fake_kube/fake_api_client.h"

namespace shoal::reconciler {
namespace {

using web::json::value;

TEST(GzipBase64Test, RoundTripsAndRefusesGarbage) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "{\"id\":" + std::to_string(i) + "},";
  const std::string packed = GzipBase64(text);
  EXPECT_LT(packed.size(), text.size() / 3);
  auto back = GunzipBase64(packed);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
  EXPECT_FALSE(GunzipBase64("bm90IGd6aXA=").ok());
  EXPECT_FALSE(GunzipBase64("***").ok());
}

TEST(KubePlatformStateTest, ControlStateSurvivesTheStatus) {
  const PartitionMap map = PartitionMap::Initial("orders", 4, PodName("orders-0")).value();
  const std::string state =
      R"({"version":1,"topic":"orders","map":)" + map.ToJson() +
      R"(,"plan":{"id":7,"reason":"surge","next":1,"steps":[{"kind":"change","state":"done"},
         {"kind":"set_pods","pods":3,"state":"pending"}]},"next_plan_id":8,
         "last_decision":{"at_ms":1764400000123,"kinds":["split","pods_up"],"partitions":8,
                          "replicas":3,"reason":"arrival 4000/s over 4 partitions"}})";
  auto status = KubePlatform::StateToStatus(state);
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_EQ(status->at("partitionMap").at("encoding").as_string(), "gzip+base64");
  EXPECT_EQ(status->at("partitionMap").at("epoch").as_integer(), 1);
  EXPECT_EQ(status->at("plan").at("id").as_integer(), 7);
  EXPECT_EQ(status->at("nextPlanId").as_integer(), 8);
  EXPECT_EQ(status->at("lastDecision").at("time").as_string(), "2025-11-29T07:06:40.123Z");
  EXPECT_EQ(status->at("lastDecision").at("kinds").size(), 2u);

  auto back = KubePlatform::StatusToState(*status, "orders");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const value again = value::parse(*back);
  EXPECT_EQ(again.at("map"), value::parse(map.ToJson()));
  EXPECT_EQ(again.at("plan"), status->at("plan"));
  EXPECT_EQ(again.at("next_plan_id").as_integer(), 8);
  EXPECT_EQ(again.at("last_decision").at("at_ms").as_number().to_int64(), 1764400000123);
  EXPECT_EQ(again.at("last_decision").at("reason").as_string(), "arrival 4000/s over 4 partitions");
}

TEST(KubePlatformStateTest, NoPlanRemovesItAndAnEmptyStatusIsNotFound) {
  const PartitionMap map = PartitionMap::Initial("orders", 2, PodName("orders-0")).value();
  auto status = KubePlatform::StateToStatus(R"({"version":1,"topic":"orders","map":)" +
                                            map.ToJson() +
                                            R"(,"plan":null,"next_plan_id":3,"last_decision":{"at_ms":0,"kinds":[],"partitions":0,"replicas":0,"reason":""}})");
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(status->at("plan").is_null()) << "null deletes status.plan in a merge patch";
  EXPECT_FALSE(status->has_field("lastDecision"));
  auto none = KubePlatform::StatusToState(value::object(), "orders");
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  value broken = value::object();
  broken["partitionMap"]["encoding"] = value::string("gzip+base64");
  broken["partitionMap"]["data"] = value::string("!!");
  EXPECT_EQ(KubePlatform::StatusToState(broken, "orders").status().code(),
            Status::Code::kInvalidArgument);
}

// HoldReplicas against a fake API server: a StatefulSet scaled by hand is set back to the loop's
// count, a cache that trails the loop's own scale changes nothing, the count never goes below the
// pods that own partitions, and nothing is written when this operator does not lead.
class KubePlatformScaleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = shoal::testing::StartFakeApiWithClient();
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    server_ = std::move(api->server);
    client_ = std::move(api->client);
    pods_ = std::make_unique<kubeapi::Informer>(*client_, kubeapi::Pods(), kubeapi::InformerOptions{},
                                             [](const std::string&, const kubeapi::Json&) {});
    sets_ = std::make_unique<kubeapi::Informer>(*client_, kubeapi::StatefulSets(),
                                             kubeapi::InformerOptions{},
                                             [](const std::string&, const kubeapi::Json&) {});
    auto sts = client_->Create(kubeapi::StatefulSets(), "default",
                               value::parse(R"({"metadata":{"name":"orders"},"spec":{"replicas":2,
                                  "selector":{"matchLabels":{"app":"orders"}},
                                  "template":{"metadata":{"labels":{"app":"orders"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}})"));
    ASSERT_TRUE(sts.ok()) << sts.error().ToString();
  }

  std::unique_ptr<KubePlatform> Platform(uint32_t desired) {
    KubePlatformOptions o;
    o.ns = "default";
    o.topic = "orders";
    o.may_act = [this] { return leading_.load(); };
    return std::make_unique<KubePlatform>(*client_, *pods_, *sets_, o, desired);
  }
  void ScaleByHand(int64_t n) {
    auto r = client_->MergePatch(kubeapi::StatefulSets(), "default", "orders",
                                 value::parse(R"({"spec":{"replicas":)" + std::to_string(n) + "}}"),
                                 "scale");
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  }
  int64_t Replicas() {
    auto sts = client_->Get(kubeapi::StatefulSets(), "default", "orders");
    EXPECT_TRUE(sts.ok());
    return sts.ok() ? kubeapi::At(sts.value(), "spec.replicas").as_number().to_int64() : -1;
  }
  int ScaleWrites() {
    return server_->CountRequests("PATCH", "/apis/apps/v1/namespaces/default/statefulsets/orders/scale");
  }

  std::atomic<bool> leading_{true};
  std::unique_ptr<shoal::testing::FakeApiServer> server_;
  std::unique_ptr<kubeapi::KubeClient> client_;
  std::unique_ptr<kubeapi::Informer> pods_;
  std::unique_ptr<kubeapi::Informer> sets_;
};

TEST_F(KubePlatformScaleTest, AScaleByHandIsSetBackAndATrailingCacheIsNot) {
  auto platform = Platform(2);
  auto same = platform->HoldReplicas(2, 0);
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->has_value());

  ScaleByHand(5);
  const int writes = ScaleWrites();
  auto held = platform->HoldReplicas(5, 0);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(*held, std::optional<uint32_t>(5));
  EXPECT_EQ(Replicas(), 2);
  EXPECT_EQ(ScaleWrites(), writes + 1);

  // The loop scales to 3; a cache that still shows 2 is no reason to write.
  ASSERT_TRUE(platform->SetDesiredPods(3).ok());
  auto trailing = platform->HoldReplicas(2, 0);
  ASSERT_TRUE(trailing.ok());
  EXPECT_FALSE(trailing->has_value());
  EXPECT_EQ(Replicas(), 3);
  EXPECT_EQ(ScaleWrites(), writes + 2);  // only the loop's own

  // Not leading: nothing is written.
  ScaleByHand(7);
  leading_ = false;
  EXPECT_FALSE(platform->HoldReplicas(7, 0).ok());
  EXPECT_EQ(Replicas(), 7);
}

TEST_F(KubePlatformScaleTest, TheCountNeverGoesBelowThePodsThatOwnPartitions) {
  // Scaled down to 1 by hand while no operator ran; the loop starts from 1, but its map has
  // partitions on pods 0..2.
  ScaleByHand(1);
  auto platform = Platform(1);
  auto held = platform->HoldReplicas(1, 3);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(*held, std::optional<uint32_t>(1));
  EXPECT_EQ(platform->DesiredPods(), 3u);
  EXPECT_EQ(Replicas(), 3);
  // Scaled up by hand beyond them: set back to the count, not lower.
  ScaleByHand(6);
  held = platform->HoldReplicas(6, 3);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(Replicas(), 3);
}

// A pod runs an old template when its controller-revision-hash is not the StatefulSet's
// updateRevision, known only once the controller observed the set's generation; RestartPod
// deletes that incarnation only (a pod recreated meanwhile under the same name stays).
TEST_F(KubePlatformScaleTest, OutdatedPodsAreTheOldRevisionsAndARestartDeletesOnlyThatIncarnation) {
  for (const char* pod : {R"({"metadata":{"name":"orders-0","labels":{"shoal.dev/topic":"orders","controller-revision-hash":"orders-new"}}})",
                          R"({"metadata":{"name":"orders-1","labels":{"shoal.dev/topic":"orders","controller-revision-hash":"orders-old"}}})"}) {
    auto r = client_->Create(kubeapi::Pods(), "default", value::parse(pod));
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  }
  auto set_status = [&](int64_t observed) {
    auto r = client_->UpdateWithRetry(kubeapi::StatefulSets(), "default", "orders", [&](kubeapi::Json& o) {
      o["status"]["observedGeneration"] = value::number(observed);
      o["status"]["replicas"] = value::number(2);
      o["status"]["updateRevision"] = value::string("orders-new");
      return true;
    }, "status");
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  };
  std::atomic<bool> stop{false};
  std::thread pods_watch([&] { pods_->Run(stop); });
  std::thread sets_watch([&] { sets_->Run(stop); });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& a;
    std::thread& b;
    ~Join() {
      stop = true;
      a.join();
      b.join();
    }
  } join{stop, pods_watch, sets_watch};
  auto platform = Platform(2);
  // Lists until `want` holds of the listing (or 10 s passed).
  auto list_until = [&](const std::function<bool(const std::vector<control::PodInfo>&)>& want) {
    std::vector<control::PodInfo> listed;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      auto l = platform->ListPods();
      if (l.ok() && want(*l)) return *l;
      if (l.ok()) listed = *l;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return listed;
  };
  set_status(0);  // the controller has not seen generation 1 yet: nothing is known to be old
  auto listed = list_until([](const auto& l) { return l.size() == 2; });
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_FALSE(listed[0].outdated);
  EXPECT_FALSE(listed[1].outdated);
  set_status(1);
  listed = list_until([](const auto& l) { return l.size() == 2 && l[1].outdated; });
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_FALSE(listed[0].outdated);
  EXPECT_TRUE(listed[1].outdated);
  ASSERT_FALSE(listed[1].uid.empty());

  // Recreated meanwhile (another uid): the restart of the old incarnation deletes nothing.
  const control::PodInfo old = listed[1];
  ASSERT_TRUE(client_->Delete(kubeapi::Pods(), "default", "orders-1").ok());
  ASSERT_TRUE(client_->Create(kubeapi::Pods(), "default", value::parse(
      R"({"metadata":{"name":"orders-1","labels":{"shoal.dev/topic":"orders","controller-revision-hash":"orders-new"}}})")).ok());
  EXPECT_TRUE(platform->RestartPod(old).ok());
  EXPECT_TRUE(client_->Get(kubeapi::Pods(), "default", "orders-1").ok());
  // The current incarnation goes.
  listed = list_until([](const auto& l) { return l.size() == 2 && !l[1].outdated; });
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_TRUE(platform->RestartPod(listed[1]).ok());
  EXPECT_TRUE(client_->Get(kubeapi::Pods(), "default", "orders-1").error().IsNotFound());
  // Not leading: nothing is deleted.
  leading_ = false;
  EXPECT_EQ(platform->RestartPod(listed[0]).code(), Status::Code::kUnavailable);
  EXPECT_TRUE(client_->Get(kubeapi::Pods(), "default", "orders-0").ok());
}

// Each pod's zone is its node's topology.kubernetes.io/zone label (none: empty), so that the
// control loop puts a partition's copies in distinct zones first.
TEST_F(KubePlatformScaleTest, APodsZoneIsItsNodesZoneLabel) {
  for (const char* node :
       {R"({"metadata":{"name":"n1","labels":{"topology.kubernetes.io/zone":"zone-a"}}})",
        R"({"metadata":{"name":"n2","labels":{"topology.kubernetes.io/zone":"zone-b"}}})",
        R"({"metadata":{"name":"n3"}})"}) {
    auto r = client_->Create(kubeapi::Nodes(), "", value::parse(node));
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  }
  int i = 0;
  for (const char* node : {"n1", "n2", "n3"}) {
    const std::string pod = R"({"metadata":{"name":"orders-)" + std::to_string(i++) +
                            R"(","labels":{"shoal.dev/topic":"orders"}},"spec":{"nodeName":")" +
                            node + R"(","containers":[{"name":"c","image":"x"}]}})";
    auto r = client_->Create(kubeapi::Pods(), "default", value::parse(pod));
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  }
  std::atomic<bool> stop{false};
  std::thread pods_watch([&] { pods_->Run(stop); });
  std::vector<control::PodInfo> listed;
  auto platform = Platform(3);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline && listed.size() < 3) {
    auto l = platform->ListPods();
    if (l.ok()) listed = *l;
    if (listed.size() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  pods_watch.join();
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].node, "n1");
  EXPECT_EQ(listed[0].zone, "zone-a");
  EXPECT_EQ(listed[1].zone, "zone-b");
  EXPECT_EQ(listed[2].node, "n3");
  EXPECT_EQ(listed[2].zone, "");
  // Read once per node within zones_every, not at every listing.
  ASSERT_TRUE(platform->ListPods().ok());
  EXPECT_EQ(server_->CountRequests("GET", "/api/v1/nodes/n1"), 1);
}

}  // namespace
}  // namespace shoal::reconciler
