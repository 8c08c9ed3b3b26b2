// shoal-operator against a cluster (TestCluster, tests/support/fake_kube/test_cluster.h) made of
// the fake API server (real HTTP, resourceVersions, watches, RBAC from
// deploy/rbac/operator-rules.yaml) and the test kubelet (real shoal-sidecar and `shoal consume` processes for the StatefulSet's pods, one
// loopback address each). The operators are real processes, found by their kubeconfig, killed
// with kill -9 where a test says so. What issue 6 asks, test by test:
//   - a topic yields its StatefulSet, Service, Secret, finalizer and status conditions;
//   - a spec change is followed (observedGeneration catches up) also when the status write
//     first meets 409 Conflicts and when the watches were closed or answered 410;
//   - an invalid spec is reported as Degraded and changes nothing;
//   - a spec the CRD's schema refuses is refused with 422 (the fake API server loads the CRD);
//   - two operators elect one leader; kill -9 of the leader hands over within the lease;
//   - deleting the topic runs the finalizer's cleanup;
//   - every rule of the RBAC rules file is needed: without any one of them the operator meets
//     403 Forbidden;
//   - under load with a surge: splits, more pods, moves; the leader killed mid-plan, the other
//     operator completes the plan from the status; the verifier finds nothing lost or reordered;
//   - (issue 25) a leader's sidecar killed under load with its volume deleted: its partitions
//     fail over to copies and take writes again, the pod comes back and its copies catch up,
//     nothing lost or reordered.
// Nothing sleeps bare: waits poll the API or files with deadlines.
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/asyncrt_utils.h>
#include <cpprest/json.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/version.h"
#include "shoal/common/wire.h"
#include "shoal/control/process.h"
#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"
#include "shoal/kubeapi/kube_client.h"
#include "shoal/reconciler/kube_platform.h"
#include "support/fake_kube/rbac.h"
#include "support/fake_kube/test_cluster.h"
#include "support/http_test_client.h"
#include "support/loopback.h"
#include "support/temp_dir.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;
using web::json::value;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kAdmin = kClusterAdminToken;
constexpr const char* kTopics = kTopicsPath;
constexpr const char* kTopic = kTopicPath;
constexpr const char* kLease = kLeasePath;
constexpr char kStatefulSet[] = "/apis/apps/v1/namespaces/default/statefulsets/orders";
constexpr char kService[] = "/api/v1/namespaces/default/services/orders";
constexpr char kSecret[] = "/api/v1/namespaces/default/secrets/orders-admin";
constexpr char kEvents[] = "/apis/events.k8s.io/v1/namespaces/default/events";

using kubeapi::At;  // the value at a dotted path, or null

// A key with dots in it (labels, annotations).
value Field(const value& object, const std::string& key) {
  return object.is_object() && object.has_field(key) ? object.at(key) : value::null();
}

std::string Describe(const PolicyRule& r) {
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  };
  return "groups [" + join(r.api_groups) + "] resources [" + join(r.resources) + "] verbs [" +
         join(r.verbs) + "]";
}

int64_t Int(const value& v) { return v.is_number() ? v.as_number().to_int64() : -1; }
std::string Str(const value& v) { return v.is_string() ? v.as_string() : ""; }

// Each test starts its cluster (support/fake_kube/test_cluster.h) with the binaries this test
// was built with; the wrappers below turn the cluster's Status answers into assertions.
class KubeOperatorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::create_directories(seen_dir())); }

  std::string seen_dir() const { return dir_.path() + "/seen"; }

  // The operator's user gets `rules`, by default the rules file.
  void StartCluster(std::optional<std::vector<PolicyRule>> rules = std::nullopt) {
    TestClusterOptions o;
    o.work_dir = dir_.path();
    o.operator_binary = SHOAL_OPERATOR_BIN;
    o.sidecar_binary = SHOAL_SIDECAR_BIN;
    o.shoal_binary = SHOAL_BIN;
    o.operator_rules = std::move(rules);
    o.ip_prefix = ip_prefix_;
    auto c = TestCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status().message();
    cluster_ = std::move(c).value();
  }

  void StartOperator(const std::string& id, const std::vector<std::string>& extra = {}) {
    const Status st = cluster_->StartOperator(id, extra);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  void CreateTopic(const value& topic) {
    const Status st = cluster_->CreateTopic(topic);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  void PatchSpec(const std::string& merge_patch_json) {
    const Status st = cluster_->PatchTopic(merge_patch_json);
    ASSERT_TRUE(st.ok()) << st.message();
  }

  std::optional<value> Get(const std::string& path) const { return cluster_->Get(path); }
  HttpResponse Admin(const std::string& method, const std::string& path, const value& body) {
    return cluster_->Admin(method, path, body);
  }
  bool WaitReady(std::chrono::milliseconds timeout) const { return cluster_->WaitReady(timeout); }
  bool WaitCaughtUp(std::chrono::milliseconds timeout) const {
    return cluster_->WaitCaughtUp(timeout);
  }
  std::string LeaseHolder() const { return cluster_->LeaseHolder(); }
  int Forbidden() const { return cluster_->Forbidden(); }
  std::string OperatorLog(const std::string& id) const { return cluster_->OperatorLog(id); }
  control::ChildProcess& operator_process(const std::string& id) {
    return cluster_->operator_process(id);
  }
  FakeApiServer& api() { return cluster_->api(); }
  // The Events of the default namespace as the API server lists them (JSON).
  std::string EventsText() {
    return admin().Get(kEvents, {{{"Authorization", std::string("Bearer ") + kAdmin}}}).body;
  }
  // Once the consumers saw as many events as were acknowledged (or 60 s passed): what the
  // verifier says of acked against the consumers' seen files.
  harness::VerifyReport VerifySeen(const std::vector<harness::AckedEvent>& acked,
                                   size_t* seen_count) {
    WaitUntil([&] { return harness::CountSeenLines(seen_dir()) >= acked.size(); }, 60s);
    auto seen = harness::ReadSeenDir(seen_dir());
    EXPECT_TRUE(seen.ok()) << seen.status().message();
    *seen_count = seen.ok() ? seen->size() : 0;
    return harness::Verify(acked, seen.ok() ? *seen : std::vector<harness::SeenEvent>{});
  }
  TestKubelet& kubelet() { return cluster_->kubelet(); }
  HttpTestClient& admin() { return cluster_->http(); }
  // The verifier over what the consumers saw: nothing lost or reordered; prints `what` with
  // the counts.
  void ExpectNothingLostOrReordered(const std::vector<harness::AckedEvent>& acked,
                                    const std::string& what) {
    size_t seen = 0;
    const auto report = VerifySeen(acked, &seen);
    EXPECT_EQ(report.lost, 0u) << report.ToText();
    EXPECT_EQ(report.reordered, 0u) << report.ToText();
    std::printf("acked %zu, seen %zu, lost %llu, reordered %llu, duplicated %llu; %s\n",
                acked.size(), seen, static_cast<unsigned long long>(report.lost),
                static_cast<unsigned long long>(report.reordered),
                static_cast<unsigned long long>(report.duplicated), what.c_str());
  }
  // The test topic on exactly `pods` pods, each partition with `factor` copies (acks quorum).
  value ReplicatedTopic(int64_t max_partitions, int pods, int factor) const {
    value topic = TestTopicJson(seen_dir(), max_partitions);
    topic["spec"]["replicas"]["min"] = value::number(pods);
    topic["spec"]["replicas"]["max"] = value::number(pods);
    topic["spec"]["replication"]["factor"] = value::number(factor);
    topic["spec"]["replication"]["acks"] = value::string("quorum");
    return topic;
  }
  // Whether the pod is Ready within a minute.
  bool PodReady(const std::string& pod) {
    return kubelet().WaitFor(
        [&] {
          auto p = kubelet().Pod(pod);
          return p && p->ready;
        },
        60s);
  }

  // The cluster goes (operators, kubelet, server) before the directory it writes to.
  TempDir dir_;
  const std::string ip_prefix_ = RandomLoopbackPrefix();
  std::unique_ptr<TestCluster> cluster_;
};

TEST_F(KubeOperatorTest, ATopicGetsItsObjectsFinalizerAndReadyStatus) {
  StartCluster();
  StartOperator("a");
  CreateTopic(TestTopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");

  const auto topic = Get(kTopic);
  ASSERT_TRUE(topic);
  const std::string uid = Str(At(*topic, "metadata.uid"));
  EXPECT_EQ(At(*topic, "metadata.finalizers").serialize(), "[\"shoal.dev/cleanup\"]");
  EXPECT_EQ(Int(At(*topic, "status.observedGeneration")), Int(At(*topic, "metadata.generation")));
  EXPECT_EQ(Condition(*topic, "Degraded"), "False");
  EXPECT_FALSE(Condition(*topic, "Progressing").empty());
  EXPECT_EQ(Int(At(*topic, "status.partitions")), 2);
  EXPECT_GE(Int(At(*topic, "status.epoch")), 1);
  EXPECT_EQ(Str(At(*topic, "status.partitionMap.encoding")), "gzip+base64");
  EXPECT_EQ(Str(At(*topic, "status.selector")), "app.kubernetes.io/instance=orders,shoal.dev/topic=orders");

  // Each owned object points at the topic as its controller.
  for (const char* path : {kStatefulSet, kService, kSecret}) {
    const auto obj = Get(path);
    ASSERT_TRUE(obj) << path;
    const value owner = At(*obj, "metadata.ownerReferences");
    ASSERT_TRUE(owner.is_array() && owner.size() == 1) << path;
    EXPECT_EQ(Str(At(owner.at(0), "uid")), uid) << path;
    EXPECT_TRUE(At(owner.at(0), "controller").as_bool()) << path;
    EXPECT_EQ(Str(Field(At(*obj, "metadata.labels"), "app.kubernetes.io/managed-by")),
              "shoal-operator")
        << path;
  }
  // The StatefulSet runs the user's container and the injected sidecar.
  const auto sts = Get(kStatefulSet);
  const value containers = At(*sts, "spec.template.spec.containers");
  ASSERT_EQ(containers.size(), 2u);
  EXPECT_EQ(Str(At(containers.at(0), "name")), "app");
  EXPECT_EQ(Str(At(containers.at(1), "name")), "shoal-sidecar");
  EXPECT_EQ(Str(At(containers.at(1), "image")), "shoal:test");
  EXPECT_TRUE(At(containers.at(1), "lifecycle.preStop.exec.command").is_array());
  EXPECT_EQ(Str(At(*sts, "spec.volumeClaimTemplates").at(0).at("metadata").at("name")),
            "shoal-data");
  EXPECT_EQ(Str(At(*Get(kService), "spec.clusterIP")), "None");
  EXPECT_TRUE(At(*Get(kSecret), "data.token").is_string());
  // The pod runs and its sidecar holds the topic's partitions.
  const auto pod = kubelet().Pod("orders-0");
  ASSERT_TRUE(pod && pod->ready);
  // Events say what was done.
  const std::string events = EventsText();
  EXPECT_NE(events.find("created StatefulSet orders"), std::string::npos) << events;

  // `kubectl scale sts orders --replicas=3` by hand: the operator sets it back, says so in a
  // Warning Event, and the pods started meanwhile (owning nothing) go again.
  const int64_t replicas = Int(At(*sts, "spec.replicas"));
  ASSERT_GE(replicas, 1);
  const auto scaled = cluster_->Admin("PATCH", std::string(kStatefulSet) + "/scale",
                                      value::parse(R"({"spec":{"replicas":3}})"),
                                      "application/merge-patch+json");
  ASSERT_EQ(scaled.status, 200) << scaled.Describe();
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto now = Get(kStatefulSet);
        return now && Int(At(*now, "spec.replicas")) == replicas &&
               EventsText().find("ReplicasReverted") != std::string::npos;
      },
      30s))
      << OperatorLog("a");
  const std::string reverted = EventsText();
  EXPECT_NE(reverted.find("was scaled to 3 outside the operator; set back to " +
                          std::to_string(replicas)),
            std::string::npos)
      << reverted;
  // Again: the same Event grows a series (count 2) instead of a second object, as client-go's
  // recorder does.
  const auto again = cluster_->Admin("PATCH", std::string(kStatefulSet) + "/scale",
                                     value::parse(R"({"spec":{"replicas":4}})"),
                                     "application/merge-patch+json");
  ASSERT_EQ(again.status, 200) << again.Describe();
  auto reverted_events = [&] {
    std::vector<value> out;
    const value list = value::parse(EventsText());
    for (const auto& e : list.at("items").as_array()) {
      if (Str(At(e, "reason")) == "ReplicasReverted") out.push_back(e);
    }
    return out;
  };
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto events = reverted_events();
        return events.size() == 1 && Int(At(events[0], "series.count")) == 2;
      },
      30s))
      << EventsText() << OperatorLog("a");
  EXPECT_NE(Str(At(reverted_events()[0], "note")).find("was scaled to 4"), std::string::npos)
      << "the series carries the latest note";
  EXPECT_TRUE(kubelet().WaitFor(
      [&] { return kubelet().Pods().size() == static_cast<size_t>(replicas); }, 60s));
  EXPECT_TRUE(WaitReady(30s)) << OperatorLog("a");
}

TEST_F(KubeOperatorTest, SpecChangesAreFollowedThroughConflictsClosedWatchesAnd410) {
  StartCluster();
  StartOperator("a");
  CreateTopic(TestTopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");
  const std::string hash_before =
      Str(Field(At(*Get(kStatefulSet), "metadata.annotations"), "shoal.dev/template-hash"));

  // 1. A change whose status writes first meet two 409 Conflicts. Only the reconciler's PUTs
  // fail: the control loop in the same process reads and merge-patches the status too, and
  // would otherwise take the failures meant for the reconciler (a flake CI saw).
  const std::string status_path = std::string(kTopic) + "/status";
  const int conflicts_before = api().CountRequests("PUT", status_path, 409);
  api().FailNextWrites(status_path, 2, 409, "PUT");
  PatchSpec(R"({"spec":{"durability":{"fsync":"always"}}})");
  ASSERT_TRUE(WaitCaughtUp(30s)) << OperatorLog("a");
  EXPECT_EQ(api().CountRequests("PUT", status_path, 409) - conflicts_before, 2);
  // The StatefulSet's template followed the spec.
  const auto sts = Get(kStatefulSet);
  EXPECT_NE(At(*sts, "spec.template.spec.containers").at(1).at("args").serialize().find(
                "\"always\""),
            std::string::npos);

  // 2. Every watch closed: the informers watch again from where they were.
  api().CloseAllWatches();
  PatchSpec(R"({"spec":{"retention":{"ms":3600000}}})");
  ASSERT_TRUE(WaitCaughtUp(30s)) << OperatorLog("a");

  // 3. History compacted past every RV the operator holds and watches closed: the re-watch gets
  // 410 Expired, the informers list again, and the change made meanwhile is not missed.
  auto topic_lists = [&] {
    int n = 0;
    for (const auto& r : api().Requests()) {
      n += r.method == "GET" && r.path == kTopics && r.query.find("watch") == std::string::npos &&
           r.user == kOperatorUser && r.code == 200;
    }
    return n;
  };
  const int lists_before = topic_lists();
  api().CompactHistory(/*including_current=*/true);
  api().CloseAllWatches();
  PatchSpec(R"({"spec":{"retention":{"ms":7200000}}})");
  ASSERT_TRUE(WaitCaughtUp(30s)) << OperatorLog("a");
  EXPECT_GT(topic_lists(), lists_before) << "the topics informer did not list again after 410";
  const auto after = Get(kStatefulSet);
  EXPECT_NE(Str(Field(At(*after, "metadata.annotations"), "shoal.dev/template-hash")), hash_before);
  EXPECT_NE(At(*after, "spec.template.spec.containers").at(1).at("args").serialize().find(
                "\"7200000\""),
            std::string::npos);
}

TEST_F(KubeOperatorTest, InvalidSpecsAreDegradedAndChangeNothing) {
  StartCluster();
  StartOperator("a", {"--max-partitions", "16"});
  // A cap above the operator's limit: the schema allows it, the operator refuses it.
  CreateTopic(TestTopicJson(seen_dir(), /*max_partitions=*/32));
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        return t && Condition(*t, "Degraded") == "True";
      },
      30s))
      << OperatorLog("a");
  std::string reason, message;
  Condition(*Get(kTopic), "Degraded", &reason, &message);
  EXPECT_EQ(reason, "InvalidSpec");
  EXPECT_NE(message.find("operator's limit of 16"), std::string::npos) << message;
  EXPECT_FALSE(Get(kStatefulSet)) << "nothing may be created for an invalid topic";
  EXPECT_FALSE(Get(kSecret));

  // Fixed: the topic starts.
  PatchSpec(R"({"spec":{"partitions":{"max":16}}})");
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");
  EXPECT_EQ(Condition(*Get(kTopic), "Degraded"), "False");
  // Its spec, not its resourceVersion: the StatefulSet controller may still write its status.
  const std::string sts_spec = At(*Get(kStatefulSet), "spec").serialize();

  // A malformed pod template the schema cannot see (a container named like the injected
  // sidecar; the schema refuses an empty or nameless list itself): Degraded, and the running
  // topic is left alone.
  PatchSpec(R"({"spec":{"consumer":{"template":{"spec":{"containers":[
               {"name":"shoal-sidecar","image":"example/app:1"}]}}}}})");
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        return t && Condition(*t, "Degraded", &reason, &message) == "True" &&
               Int(At(*t, "status.observedGeneration")) == Int(At(*t, "metadata.generation"));
      },
      30s))
      << OperatorLog("a");
  EXPECT_NE(message.find("spec.consumer.template.spec.containers[0].name"), std::string::npos)
      << message;
  // min > max (the CRD's CEL rule refuses it in a cluster; the fake runs no CEL, so the operator's
  // own check is what shows here).
  PatchSpec(R"({"spec":{"consumer":{"template":{"spec":{"containers":[{"name":"app","image":"x"}]}}},
               "partitions":{"min":8,"max":4,"initial":8}}})");
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        return t && Condition(*t, "Degraded", &reason, &message) == "True" &&
               message.find("min") != std::string::npos &&
               Int(At(*t, "status.observedGeneration")) == Int(At(*t, "metadata.generation"));
      },
      30s))
      << OperatorLog("a") << message;
  EXPECT_EQ(At(*Get(kStatefulSet), "spec").serialize(), sts_spec)
      << "an invalid spec changed the StatefulSet";
  EXPECT_EQ(Condition(*Get(kTopic), "Ready"), "False") << "what was asked for does not run";
  EXPECT_NE(EventsText().find("InvalidSpec"), std::string::npos);

  // The operator dies while the spec is invalid: the next one runs the topic's loop on the spec
  // the StatefulSet records as last applied (a plan in progress would be finished), still
  // reporting Degraded and still changing nothing.
  operator_process("a").Signal(SIGKILL);
  ASSERT_TRUE(operator_process("a").Wait(10s).has_value());
  StartOperator("b", {"--max-partitions", "16"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        return OperatorLog("b").find("running its loop on the last applied spec") !=
               std::string::npos;
      },
      30s))
      << OperatorLog("b");
  EXPECT_EQ(Condition(*Get(kTopic), "Degraded"), "True");
  EXPECT_EQ(At(*Get(kStatefulSet), "spec").serialize(), sts_spec);
}

// Objects that have the names the topic's would have, but are not the topic's (a user's Secret
// and Service): the operator neither takes nor changes nor deletes them, and says so (Degraded,
// ObjectNotOwned, an Event); once the user moves one away it goes on to the next.
TEST_F(KubeOperatorTest, TheOperatorTakesChangesAndDeletesNothingItDoesNotOwn) {
  StartCluster();
  const value secret = value::parse(R"({"apiVersion":"v1","kind":"Secret",
      "metadata":{"name":"orders-admin","namespace":"default"},"data":{"token":"bXktdG9rZW4="}})");
  const value service = value::parse(R"({"apiVersion":"v1","kind":"Service",
      "metadata":{"name":"orders","namespace":"default"},
      "spec":{"selector":{"app":"billing"},"ports":[{"port":80}]}})");
  ASSERT_EQ(Admin("POST", "/api/v1/namespaces/default/secrets", secret).status, 201);
  ASSERT_EQ(Admin("POST", "/api/v1/namespaces/default/services", service).status, 201);
  StartOperator("a");
  CreateTopic(TestTopicJson(seen_dir()));
  std::string reason, message;
  auto blocked_by = [&](const std::string& object) {
    auto t = Get(kTopic);
    return t && Condition(*t, "Degraded", &reason, &message) == "True" &&
           reason == "ObjectNotOwned" && message.find(object) != std::string::npos;
  };
  ASSERT_TRUE(WaitUntil([&] { return blocked_by("Secret default/orders-admin"); }, 30s))
      << reason << ": " << message << "\n"
      << OperatorLog("a");
  EXPECT_EQ(Str(At(*Get(kSecret), "data.token")), "bXktdG9rZW4=") << "the user's Secret changed";
  EXPECT_FALSE(Get(kStatefulSet)) << "nothing may be created past an object in the way";
  EXPECT_EQ(Condition(*Get(kTopic), "Ready"), "False");
  EXPECT_NE(EventsText().find("ObjectNotOwned"), std::string::npos);

  // The user deletes their Secret: the operator makes its own, and stops at the Service.
  ASSERT_EQ(Admin("DELETE", kSecret, value::null()).status, 200);
  ASSERT_TRUE(WaitUntil([&] { return blocked_by("Service default/orders"); }, 60s))
      << reason << ": " << message << "\n"
      << OperatorLog("a");
  EXPECT_EQ(At(*Get(kService), "spec.selector").serialize(), R"({"app":"billing"})")
      << "the user's Service was rewritten";
  EXPECT_FALSE(Get(kStatefulSet));

  // The topic goes: its own Secret with it, the user's Service stays.
  ASSERT_EQ(Admin("DELETE", kTopic, value::null()).status, 200);
  ASSERT_TRUE(WaitUntil([&] { return !Get(kTopic); }, 30s)) << OperatorLog("a");
  EXPECT_FALSE(Get(kSecret));
  ASSERT_TRUE(Get(kService)) << "the user's Service was deleted";
  EXPECT_EQ(At(*Get(kService), "spec.selector").serialize(), R"({"app":"billing"})");
}

// The CRD's schema holds end to end (TestCluster loads crds/shoal.dev_partitionedtopics.yaml into
// the API server): a topic whose spec.partitions.max is over the schema's maximum is refused with
// 422 at create, so no operator ever sees it. The positive control: a valid topic created after it
// is reconciled (StatefulSet, status caught up), and nothing exists or was asked for the refused one.
TEST_F(KubeOperatorTest, ATopicTheSchemaRefusesIsNeverCreated) {
  StartCluster();
  StartOperator("a");
  value huge = TestTopicJson(seen_dir(), /*max_partitions=*/70000);
  huge["metadata"]["name"] = value::string("huge");
  const HttpResponse r = Admin("POST", kTopics, huge);
  ASSERT_EQ(r.status, 422) << r.Describe();
  const value s = value::parse(r.body);
  EXPECT_EQ(Str(At(s, "reason")), "Invalid");
  EXPECT_EQ(Str(At(s, "message")),
            "PartitionedTopic.shoal.dev \"huge\" is invalid: spec.partitions.max: Invalid value: "
            "70000: spec.partitions.max in body should be less than or equal to 65536");
  EXPECT_EQ(Str(At(s, "details.causes").at(0).at("field")), "spec.partitions.max");
  EXPECT_FALSE(Get(std::string(kTopics) + "/huge"));

  CreateTopic(TestTopicJson(seen_dir()));
  ASSERT_TRUE(WaitUntil([&] { return Get(kStatefulSet).has_value(); }, 60s)) << OperatorLog("a");
  ASSERT_TRUE(WaitCaughtUp(30s)) << OperatorLog("a");
  EXPECT_FALSE(Get("/apis/apps/v1/namespaces/default/statefulsets/huge"));
  EXPECT_FALSE(Get("/api/v1/namespaces/default/services/huge"));
  EXPECT_FALSE(Get("/api/v1/namespaces/default/secrets/huge-admin"));
  for (const auto& req : api().Requests()) {
    EXPECT_FALSE(req.user == kOperatorUser && req.path.find("huge") != std::string::npos)
        << req.method << " " << req.path;
  }
}

TEST_F(KubeOperatorTest, TwoOperatorsElectOneLeaderAndFailOverWhenItIsKilled) {
  StartCluster();
  StartOperator("a");
  StartOperator("b");
  CreateTopic(TestTopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a") << OperatorLog("b");
  const std::string leader = LeaseHolder();
  ASSERT_TRUE(leader == "a" || leader == "b") << leader;
  const std::string other = leader == "a" ? "b" : "a";
  // Only the leader writes: every status write is the leader's (both use one token, so look at
  // the logs: the follower never starts a control loop).
  EXPECT_EQ(OperatorLog(other).find("control loop started"), std::string::npos);

  operator_process(leader).Signal(SIGKILL);
  ASSERT_TRUE(operator_process(leader).Wait(10s).has_value());
  const auto killed_at = SteadyClock::now();
  ASSERT_TRUE(WaitUntil([&] { return LeaseHolder() == other; }, 10s)) << OperatorLog(other);
  const auto took = SteadyClock::now() - killed_at;
  // Within the lease duration (3 s) plus one retry period (0.5 s) and polling slack.
  EXPECT_LT(took, 4500ms) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  // The new leader acts: a spec change is followed.
  PatchSpec(R"({"spec":{"retention":{"ms":3600000}}})");
  ASSERT_TRUE(WaitCaughtUp(30s)) << OperatorLog(other);
  EXPECT_GE(Int(At(*Get(kLease), "spec.leaseTransitions")), 1);
}

// --namespaces limits what the operator touches; its HTTP port serves health and metrics.
TEST_F(KubeOperatorTest, WatchesOnlyItsNamespacesAndServesHealthAndMetrics) {
  StartCluster();
  StartOperator("a");  // --namespaces default
  value elsewhere = TestTopicJson(seen_dir());
  elsewhere["metadata"]["namespace"] = value::string("other");
  const auto r = Admin("POST", "/apis/shoal.dev/v1alpha1/namespaces/other/partitionedtopics",
                       elsewhere);
  ASSERT_EQ(r.status, 201) << r.Describe();
  CreateTopic(TestTopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");
  // By then the operator had listed, watched and reconciled for a while: the topic in "other"
  // is untouched, and the operator never asked the API server about anything in "other".
  const auto other = Get("/apis/shoal.dev/v1alpha1/namespaces/other/partitionedtopics/orders");
  ASSERT_TRUE(other);
  EXPECT_TRUE(At(*other, "metadata.finalizers").is_null());
  EXPECT_TRUE(At(*other, "status").is_null());
  EXPECT_FALSE(Get("/apis/apps/v1/namespaces/other/statefulsets/orders"));
  int in_other = 0;
  for (const auto& req : api().Requests()) {
    in_other += req.user == kOperatorUser &&
                req.path.find("/namespaces/other/") != std::string::npos;
  }
  EXPECT_EQ(in_other, 0);

  HttpTestClient op("http://127.0.0.1:" + std::to_string(cluster_->operator_http_port("a")));
  EXPECT_EQ(op.Get("/healthz").status, 200);
  EXPECT_EQ(op.Get("/readyz").status, 200);
  const auto metrics = op.Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("shoal_operator_leader 1"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("shoal_operator_reconcile_duration_seconds_count"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("shoal_build_info{component=\"operator\",version=\"" + Version() +
                              "\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("shoal_control_partitions{"), std::string::npos);
  EXPECT_NE(metrics.body.find("namespace=\"default\""), std::string::npos);
  const auto unknown = op.Get("/nope");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("\"reason\""), std::string::npos);
}

TEST_F(KubeOperatorTest, DeletingTheTopicRunsTheFinalizerCleanup) {
  StartCluster();
  StartOperator("a");
  CreateTopic(TestTopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");
  const auto r = Admin("DELETE", kTopic, value::null());
  ASSERT_EQ(r.status, 200) << r.Describe();
  ASSERT_TRUE(WaitUntil([&] { return !Get(kTopic); }, 30s)) << OperatorLog("a");
  EXPECT_FALSE(Get(kStatefulSet));
  EXPECT_FALSE(Get(kService));
  EXPECT_FALSE(Get(kSecret));
  // Without its StatefulSet the pods go (the kubelet plays the garbage collector).
  EXPECT_TRUE(kubelet().WaitFor([&] { return kubelet().Pods().empty(); }, 30s));
}

// Without any one rule of deploy/rbac/operator-rules.yaml the operator meets 403 Forbidden in
// the life of a topic (create, change, delete); with all of them it never does.
TEST_F(KubeOperatorTest, EveryRbacRuleIsNeeded) {
  auto all = LoadPolicyRules(std::string(SHOAL_SOURCE_DIR) + "/" + kOperatorRulesFile);
  ASSERT_TRUE(all.ok()) << all.status().message();
  const size_t n = all->size();
  for (size_t skip = 0; skip <= n; ++skip) {
    SCOPED_TRACE(skip == n ? std::string("all rules") : "without rule " + std::to_string(skip));
    std::vector<PolicyRule> rules;
    for (size_t i = 0; i < n; ++i) {
      if (i != skip) rules.push_back((*all)[i]);
    }
    StartCluster(rules);
    StartOperator("a");
    CreateTopic(TestTopicJson(seen_dir()));
    // The topic's life: ready, a spec change, deletion. Stop at the first 403.
    const bool ready = WaitUntil([&] { return Forbidden() > 0 || (Get(kTopic) &&
                                            Condition(*Get(kTopic), "Ready") == "True"); },
                                 60s);
    if (ready && Forbidden() == 0) {
      PatchSpec(R"({"spec":{"durability":{"fsync":"always"}}})");
      WaitUntil([&] { return Forbidden() > 0 || WaitCaughtUp(0ms); }, 30s);
    }
    if (Forbidden() == 0) {
      // Metrics are read every few seconds: give the platform a few turns.
      WaitUntil([&] { return Forbidden() > 0 || api().CountRequests("GET",
          "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods") >= 2; }, 20s);
    }
    if (Forbidden() == 0) {
      Admin("DELETE", kTopic, value::null());
      WaitUntil([&] { return Forbidden() > 0 || !Get(kTopic); }, 30s);
    }
    if (skip == n) {
      EXPECT_EQ(Forbidden(), 0) << OperatorLog("a");
      EXPECT_FALSE(Get(kTopic)) << "the full rules did not complete the topic's life";
    } else {
      EXPECT_GT(Forbidden(), 0) << "rule " << skip << " (" << Describe((*all)[skip])
                                << ") is not needed by anything the operator did";
    }
    cluster_.reset();
  }
}

// Issue 6's last line: real sidecars under a surge; the leader is killed in the middle of a plan
// and the other operator completes it from the topic's status; nothing is lost or reordered.
TEST_F(KubeOperatorTest, SurgeSplitsAddsPodsAndTheNextLeaderFinishesTheKilledLeadersPlan) {
  StartCluster();
  StartOperator("a");
  StartOperator("b");
  CreateTopic(TestTopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a") << OperatorLog("b");
  const auto pod0 = kubelet().Pod("orders-0");
  ASSERT_TRUE(pod0);

  // 500 events/s, ten times that in the middle of 30 s, into pod 0 (it forwards).
  harness::LoadGenerator load(SurgeLoad(pod0->ip, 30, 0.2, 0.7));
  load.Start();

  // Watch the status: kill -9 the leader once a plan has done a step and has more to do.
  int64_t max_partitions = 0, max_replicas = 0, killed_plan = -1;
  size_t max_owners = 0;  // pods that own active partitions: partitions moved onto new pods
  auto observe = [&](const value& t) {
    max_partitions = std::max(max_partitions, Int(At(t, "status.partitions")));
    max_replicas = std::max(max_replicas, Int(At(t, "status.replicas")));
    auto state = reconciler::KubePlatform::StatusToState(At(t, "status"), "orders");
    if (!state.ok()) return;
    auto map = PartitionMap::FromJson(value::parse(*state).at("map").serialize());
    if (!map.ok()) return;
    std::set<std::string> owners;
    for (const auto& p : map->partitions()) {
      if (p.state == PartitionState::kActive) owners.insert(p.owner.value());
    }
    max_owners = std::max(max_owners, owners.size());
  };
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        if (!t) return false;
        observe(*t);
        const value plan = At(*t, "status.plan");
        const int64_t next = Int(At(plan, "next"));
        const value steps = At(plan, "steps");
        if (plan.is_object() && steps.is_array() && next >= 1 &&
            next < static_cast<int64_t>(steps.size())) {
          killed_plan = Int(At(plan, "id"));
          return true;
        }
        return false;
      },
      60s))
      << "no plan in progress seen during the surge\n"
      << OperatorLog("a") << OperatorLog("b");
  const std::string leader = LeaseHolder();
  const std::string other = leader == "a" ? "b" : "a";
  operator_process(leader).Signal(SIGKILL);
  ASSERT_TRUE(operator_process(leader).Wait(10s).has_value());
  ASSERT_TRUE(WaitUntil([&] { return LeaseHolder() == other; }, 10s)) << OperatorLog(other);
  // The new leader completes that very plan (found in the status).
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        if (!t) return false;
        observe(*t);
        const value plan = At(*t, "status.plan");
        return !plan.is_object() || Int(At(plan, "id")) > killed_plan;
      },
      90s))
      << "plan " << killed_plan << " was not completed by " << other << "\n"
      << OperatorLog(other);
  EXPECT_NE(OperatorLog(other).find("control loop started"), std::string::npos);

  // Scale-up happened: more partitions, more pods, partitions on several pods.
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        if (t) observe(*t);
        return max_partitions >= 8 && max_replicas >= 2 && max_owners >= 2;
      },
      30s))
      << "max partitions " << max_partitions << ", max pods " << max_replicas
      << ", max owners " << max_owners;
  // Each decision is an Event with its reason.
  const std::string events = EventsText();
  EXPECT_NE(events.find("\"reason\":\"Scaled\""), std::string::npos) << events;
  // Neither leader took the loop's own scaling for a change by hand.
  EXPECT_EQ(events.find("ReplicasReverted"), std::string::npos) << events;
  load.Stop();
  const auto acked = load.TakeAcked();
  ASSERT_GT(acked.size(), 10000u);

  // Every acknowledged event reaches a consumer.
  size_t seen = 0;
  const auto report = VerifySeen(acked, &seen);
  EXPECT_EQ(report.lost, 0u) << report.ToText();
  EXPECT_EQ(report.reordered, 0u) << report.ToText();
  std::printf("acked %zu, seen %zu, lost %llu, reordered %llu, duplicated %llu; max partitions "
              "%lld, max pods %lld, max owners %zu; leader %s killed mid-plan %lld, completed by %s\n",
              acked.size(), seen, static_cast<unsigned long long>(report.lost),
              static_cast<unsigned long long>(report.reordered),
              static_cast<unsigned long long>(report.duplicated),
              static_cast<long long>(max_partitions), static_cast<long long>(max_replicas), max_owners,
              leader.c_str(), static_cast<long long>(killed_plan), other.c_str());
}

// After the surge the topic shrinks back: merges, partitions moved off the highest pods, the
// StatefulSet scaled down; each removed pod's preStop (`shoal wait-drained`) finds its sidecar
// empty, and its volume claim goes. Nothing is lost or reordered on the way down either.
TEST_F(KubeOperatorTest, AfterTheSurgePodsAreDrainedAndRemovedAndNothingIsLost) {
  StartCluster();
  StartOperator("a");
  value topic = TestTopicJson(seen_dir());
  topic["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = value::number(5);
  CreateTopic(topic);
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");
  const auto pod0 = kubelet().Pod("orders-0");
  ASSERT_TRUE(pod0);

  harness::LoadGenerator load(SurgeLoad(pod0->ip, 40, 0.05, 0.3));
  load.Start();

  int64_t max_replicas = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        if (t) max_replicas = std::max(max_replicas, Int(At(*t, "status.replicas")));
        return max_replicas >= 2;
      },
      60s))
      << OperatorLog("a");
  // Down again: one pod, no plan, the StatefulSet and the kubelet agree.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        auto sts = Get(kStatefulSet);
        return t && sts && Int(At(*t, "status.replicas")) == 1 &&
               !At(*t, "status.plan").is_object() && Int(At(*sts, "spec.replicas")) == 1 &&
               kubelet().Pods().size() == 1;
      },
      120s))
      << OperatorLog("a");
  // The kubelet deletes a removed pod's claim after the pod (whenScaled: Delete).
  auto claims_gone = [&] {
    for (int64_t i = 1; i < max_replicas; ++i) {
      if (std::filesystem::exists(kubelet().ClaimPath("shoal-data-orders-" + std::to_string(i)))) {
        return false;
      }
    }
    return true;
  };
  if (!kubelet().WaitFor(claims_gone, 30s)) {
    // What the kubelet did with the pods whose claims stayed (a race of the scale down with the
    // admission of a pod was one cause: claims_of_removed_ in test_kubelet.cc).
    std::string left, lines;
    for (int64_t i = 1; i < max_replicas; ++i) {
      const std::string claim = "shoal-data-orders-" + std::to_string(i);
      if (std::filesystem::exists(kubelet().ClaimPath(claim))) left += " " + claim;
    }
    std::ifstream log(dir_.path() + "/node/kubelet.log");
    std::string line;
    while (std::getline(log, line)) {
      if (line.find("orders-") != std::string::npos &&
          line.find("orders-0") == std::string::npos) {
        lines += line + "\n";
      }
    }
    ADD_FAILURE() << "the volume claims were not deleted:" << left << "\nkubelet:\n"
                  << lines.substr(lines.size() > 6000 ? lines.size() - 6000 : 0);
  }
  for (int64_t i = 1; i < max_replicas; ++i) {
    const std::string name = "orders-" + std::to_string(i);
    // The sidecar's preStop hook found it drained.
    std::ifstream log(dir_.path() + "/node/pods/" + name + "/shoal-sidecar.log");
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_NE(text.str().find("holds no active partition"), std::string::npos)
        << name << "'s preStop did not see it drained:\n" << text.str().substr(0, 2000);
  }
  // The loop's own scaling, up and down, is never taken for a change by hand.
  const std::string events = EventsText();
  EXPECT_EQ(events.find("ReplicasReverted"), std::string::npos) << events;
  load.Stop();
  const auto acked = load.TakeAcked();
  ASSERT_GT(acked.size(), 5000u);
  ExpectNothingLostOrReordered(acked,
                               "pods up to " + std::to_string(max_replicas) + " and back to 1");
}

// The value of `metric` for partition `id` in a Prometheus text answer (nullopt: absent).
std::optional<double> PartitionGauge(const std::string& text, const std::string& metric,
                                     PartitionId id) {
  std::istringstream lines(text);
  std::string line;
  const std::string label = "partition=\"" + std::to_string(id.value()) + "\"";
  while (std::getline(lines, line)) {
    if (line.rfind(metric + "{", 0) != 0 || line.find(label) == std::string::npos) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

// Issue 25: a pod killed under load with its volume deleted. Three pods, three partitions, three
// copies each (acks quorum). The sidecar of a pod that leads a partition is stopped, its volume
// emptied, then killed; the kubelet starts it again on the empty volume. The operator's loop
// fails its partitions over to copies (writes to them resume), the pod comes back and its copies
// fetch what they lost from the new leaders, and the consumers find every acknowledged event.
TEST_F(KubeOperatorTest, ALeaderKilledWithItsVolumeDeletedIsFailedOverAndCaughtUpAndNothingIsLost) {
  StartCluster();
  StartOperator("a");
  value topic = ReplicatedTopic(3, 3, 3);
  topic["spec"]["partitions"]["min"] = value::number(3);
  topic["spec"]["partitions"]["initial"] = value::number(3);
  CreateTopic(topic);
  ASSERT_TRUE(WaitReady(90s)) << OperatorLog("a");

  // The map the operator records, once every partition has its three copies on the three pods.
  auto status_map = [&]() -> std::optional<PartitionMap> {
    auto t = Get(kTopic);
    if (!t) return std::nullopt;
    auto state = reconciler::KubePlatform::StatusToState(At(*t, "status"), "orders");
    if (!state.ok()) return std::nullopt;
    auto map = PartitionMap::FromJson(value::parse(*state).at("map").serialize());
    if (!map.ok()) return std::nullopt;
    return std::move(map).value();
  };
  // The victim: a pod other than orders-0 (the producers' way in) that leads a partition.
  std::string victim;
  std::vector<PartitionInfo> led;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto map = status_map();
        if (!map || kubelet().Pods().size() < 3) return false;
        for (const auto& p : map->partitions()) {
          if (!p.active() || p.replicas.size() != 2) return false;
        }
        for (const auto& p : map->partitions()) {
          if (p.active() && p.owner.value() != "orders-0") {
            victim = p.owner.value();
            break;
          }
        }
        led.clear();
        for (const auto& p : map->partitions()) {
          if (p.active() && p.owner.value() == victim) led.push_back(p);
        }
        return !victim.empty();
      },
      90s))
      << "no partition with three copies led by orders-1 or orders-2\n"
      << OperatorLog("a");
  for (const char* pod : {"orders-0", "orders-1", "orders-2"}) {
    ASSERT_TRUE(PodReady(pod)) << pod << " is not ready";
  }
  const auto pod0 = kubelet().Pod("orders-0");
  const auto victim_pod = kubelet().Pod(victim);
  ASSERT_TRUE(pod0 && victim_pod);

  harness::LoadOptions lo = SurgeLoad(pod0->ip, 0, 0, 0);
  lo.profile = "steady";
  harness::LoadGenerator load(lo);
  load.Start();
  ASSERT_TRUE(WaitUntil([&] { return load.acked() >= 2000; }, 30s));

  // Stopped first, so that it writes nothing more to the volume it is about to lose.
  ASSERT_TRUE(kubelet().KillContainer(victim, "shoal-sidecar", SIGSTOP).ok());
  const std::string volume = kubelet().ClaimPath("shoal-data-" + victim);
  ASSERT_FALSE(volume.empty());
  for (const auto& entry : std::filesystem::directory_iterator(volume)) {
    std::filesystem::remove_all(entry.path());
  }
  const auto fault = SteadyClock::now();
  ASSERT_TRUE(kubelet().KillContainer(victim, "shoal-sidecar", SIGKILL).ok());

  // Each range it led takes writes again: one key of each, through orders-0, until acked.
  client::ShoalClient probe("http://" + pod0->ip + ":8080", "orders", 1s);
  for (const auto& p : led) {
    std::string key;
    for (int n = 0; key.empty(); ++n) {
      const std::string k = "probe-" + std::to_string(n);
      if (p.range.Contains(KeyHash(k))) key = k;
    }
    bool acked = false;
    while (!acked && SteadyClock::now() - fault < 60s) {
      acked = probe.Produce({{key, "1", "", std::nullopt}}).ok();
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - fault).count();
    ASSERT_TRUE(acked) << "partition " << p.id.value() << " took no write within 60 s\n"
                       << OperatorLog("a");
    std::printf("partition %u of %s takes writes again %lld ms after the kill\n", p.id.value(),
                victim.c_str(), static_cast<long long>(ms));
    // The issue's 3 s is measured by bench/failover.sh; a loaded test machine gets slack.
    EXPECT_LT(ms, 20000) << "partition " << p.id.value();
  }
  // Failed over: the operator's map names other leaders for them.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto map = status_map();
        if (!map) return false;
        for (const auto& p : led) {
          const PartitionInfo* now = map->Find(p.id);
          if (!now || now->owner.value() == victim) return false;
        }
        return true;
      },
      30s))
      << OperatorLog("a");
  // The pod is back and ready.
  ASSERT_TRUE(PodReady(victim)) << victim << " did not come back";
  ASSERT_TRUE(WaitUntil([&] { return load.acked() >= 8000; }, 60s));
  load.Stop();
  const auto acked = load.TakeAcked();

  // Its copies fetch everything their leaders hold.
  auto map = status_map();
  ASSERT_TRUE(map);
  HttpTestClient victim_metrics("http://" + victim_pod->ip + ":9090");
  std::string why;
  const bool caught_up = WaitUntil(
      [&] {
        const std::string mine = victim_metrics.Get("/metrics").body;
        for (const auto& p : map->partitions()) {
          if (!p.active() || !p.FollowedBy(PodName(victim))) continue;
          const auto leader = kubelet().Pod(p.owner.value());
          if (!leader) return false;
          HttpTestClient leader_metrics("http://" + leader->ip + ":9090");
          const auto end = PartitionGauge(leader_metrics.Get("/metrics").body,
                                          "shoal_partition_end_offset", p.id);
          const auto copy = PartitionGauge(mine, "shoal_followed_partition_end_offset", p.id);
          why = "partition " + std::to_string(p.id.value()) + ": leader " + p.owner.value() +
                " ends at " + (end ? std::to_string(*end) : "?") + ", the copy on " + victim +
                " at " + (copy ? std::to_string(*copy) : "?");
          if (!end || !copy || *copy < *end || *end == 0) return false;
        }
        return true;
      },
      60s);
  EXPECT_TRUE(caught_up) << why;

  ExpectNothingLostOrReordered(acked, victim + " killed with its volume deleted, " +
                                          std::to_string(led.size()) + " partitions failed over");
}

// A spec change that changes the pod template (the sidecar's fsync flag) reaches the running pods
// through the operator, one pod at a time, each restarted only once it owns no partition: the
// StatefulSet updates OnDelete. Its preStop finds it drained (never the grace period), at most one
// pod is down at any moment, producers (over both pods) and consumers go on, and nothing is lost
// or reordered.
TEST_F(KubeOperatorTest, ANewTemplateIsRolledOnePodAtATimeEachEmptiedFirst) {
  StartCluster();
  StartOperator("a");
  value topic = TestTopicJson(seen_dir());
  topic["spec"]["partitions"]["initial"] = value::number(4);
  topic["spec"]["replicas"]["min"] = value::number(2);
  topic["spec"]["replicas"]["max"] = value::number(2);
  CreateTopic(topic);
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");
  // Settled: both pods own partitions, no plan.
  auto owners = [&] {
    std::set<std::string> out;
    auto t = Get(kTopic);
    if (!t) return out;
    auto state = reconciler::KubePlatform::StatusToState(At(*t, "status"), "orders");
    if (!state.ok()) return out;
    auto map = PartitionMap::FromJson(value::parse(*state).at("map").serialize());
    if (!map.ok()) return out;
    for (const auto& p : map->partitions()) {
      if (p.state == PartitionState::kActive) out.insert(p.owner.value());
    }
    return out;
  };
  auto no_plan = [&] { auto t = Get(kTopic); return t && !At(*t, "status.plan").is_object(); };
  ASSERT_TRUE(WaitUntil([&] { return owners().size() == 2 && no_plan(); }, 60s))
      << OperatorLog("a");
  auto sidecar_pid = [&](const std::string& pod) -> pid_t {
    auto p = kubelet().Pod(pod);
    auto c = p ? p->container("shoal-sidecar") : nullptr;
    return c ? c->pid : -1;
  };
  const pid_t before0 = sidecar_pid("orders-0"), before1 = sidecar_pid("orders-1");
  ASSERT_GT(before0, 0);
  ASSERT_GT(before1, 0);

  harness::LoadOptions lo;
  lo.targets = {"http://" + kubelet().Pod("orders-0")->ip + ":8080",
                "http://" + kubelet().Pod("orders-1")->ip + ":8080"};
  lo.rate = 400;
  lo.keys = 500;
  lo.producers = 4;
  lo.batch = 10;
  harness::LoadGenerator load(lo);
  load.Start();
  ASSERT_TRUE(WaitUntil([&] { return load.acked() > 1000; }, 30s)) << load.last_error();

  PatchSpec(R"({"spec":{"durability":{"fsync":"always"}}})");
  auto runs_new = [&](const std::string& pod) {
    auto p = kubelet().Pod(pod);
    auto c = p ? p->container("shoal-sidecar") : nullptr;
    if (!c || c->pid <= 0 || !p->ready) return false;
    const auto argv = control::ProcessCmdline(c->pid);
    return std::find(argv.begin(), argv.end(), "always") != argv.end();
  };
  size_t most_down = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        size_t down = 0;
        for (const char* pod : {"orders-0", "orders-1"}) {
          auto p = kubelet().Pod(pod);
          down += p && p->ready ? 0 : 1;
        }
        most_down = std::max(most_down, down);
        return runs_new("orders-0") && runs_new("orders-1") && no_plan() && owners().size() == 2;
      },
      120s))
      << OperatorLog("a");
  EXPECT_LE(most_down, 1u) << "two pods of the topic were down at once";
  EXPECT_NE(sidecar_pid("orders-0"), before0);
  EXPECT_NE(sidecar_pid("orders-1"), before1);
  EXPECT_EQ(Int(At(*Get(kStatefulSet), "spec.replicas")), 2) << "the borrowed pods stayed";
  for (const char* pod : {"orders-0", "orders-1"}) {
    std::ifstream log(dir_.path() + "/node/pods/" + pod + "/shoal-sidecar.log");
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_NE(text.str().find("holds no active partition"), std::string::npos)
        << pod << " was stopped owning partitions:\n" << text.str().substr(0, 3000);
    EXPECT_EQ(text.str().find("not drained after"), std::string::npos) << text.str().substr(0, 3000);
  }
  ASSERT_TRUE(WaitUntil([&] { return load.acked() > 4000; }, 30s)) << load.last_error();
  load.Stop();
  const auto acked = load.TakeAcked();
  size_t seen = 0;
  const auto report = VerifySeen(acked, &seen);
  EXPECT_EQ(report.lost, 0u) << report.ToText();
  EXPECT_EQ(report.reordered, 0u) << report.ToText();
  std::printf("rolled 2 pods: acked %zu, seen %zu, lost %llu, reordered %llu, producer retries "
              "%llu, most pods down at once %zu\n",
              acked.size(), seen, static_cast<unsigned long long>(report.lost),
              static_cast<unsigned long long>(report.reordered),
              static_cast<unsigned long long>(load.retries()), most_down);
}

// A topic with TLS on (the chart's default; given in the spec here, the operator's own default
// being off): the operator makes the topic's CA, the pods' certificate and a principal's client
// certificate. Every call between the pods (forwarding, replication with quorum acks, the admin
// plane) and from the operator is TLS: a plain request to a pod's data or admin port is refused.
// The producers come from outside the pods with the principal's certificate; the consumers, the
// pods' own containers, use the plain port on the pod's loopback. Under that load the pods'
// certificate is rotated (the topic's shoal.dev/rotate-certificates annotation): the sidecars
// serve the new one without a restart, and nothing is lost or reordered.
TEST_F(KubeOperatorTest, WithTlsPodsSpeakOnlyTlsAndACertificateRotatesUnderLoadLosingNothing) {
  StartCluster();
  StartOperator("a");
  value topic = ReplicatedTopic(4, 2, 2);
  topic["spec"]["security"] =
      value::parse(R"({"tls":true,"principals":[{"name":"loadgen","produce":true}]})");
  CreateTopic(topic);
  ASSERT_TRUE(WaitReady(90s)) << OperatorLog("a");
  for (const char* pod : {"orders-0", "orders-1"}) ASSERT_TRUE(PodReady(pod)) << pod;
  const auto pod0 = kubelet().Pod("orders-0");
  const auto pod1 = kubelet().Pod("orders-1");
  ASSERT_TRUE(pod0 && pod1);

  // The principal's certificate, as a user takes it out of its Secret.
  auto secret_data = [&](const std::string& name) {
    std::map<std::string, std::string> out;
    auto s = Get("/api/v1/namespaces/default/secrets/" + name);
    const value data = s ? At(*s, "data") : value::null();
    if (!data.is_object()) return out;
    for (const auto& [k, v] : data.as_object()) {
      const auto bytes = utility::conversions::from_base64(v.as_string());
      out[k] = std::string(bytes.begin(), bytes.end());
    }
    return out;
  };
  std::map<std::string, std::string> loadgen;
  ASSERT_TRUE(WaitUntil(
      [&] {
        loadgen = secret_data("orders-client-loadgen");
        return loadgen.count("tls.crt") > 0;
      },
      30s));
  EXPECT_EQ(secret_data("orders-ca").count("ca.key"), 1u);
  const std::string certs = dir_.path() + "/loadgen";
  std::filesystem::create_directories(certs);
  for (const char* f : {"ca.crt", "tls.crt", "tls.key"}) {
    std::ofstream(certs + "/" + f) << loadgen[f];
  }

  // Plain HTTP to a pod's data and admin ports: refused, with the reason.
  for (const char* port : {":8080", ":8081"}) {
    HttpResponse plain = HttpTestClient("http://" + pod1->ip + port).Get("/v1/topics/orders");
    EXPECT_EQ(plain.status, 403) << port << ": " << plain.Describe();
    EXPECT_NE(plain.body.find("tls_required"), std::string::npos) << plain.body;
  }

  harness::LoadOptions lo = SurgeLoad(pod0->ip, 0, 0, 0);
  lo.profile = "steady";
  lo.targets = {"https://" + pod0->ip + ":8080"};
  lo.tls = {certs + "/ca.crt", certs + "/tls.crt", certs + "/tls.key", "shoal-peer.orders"};
  harness::LoadGenerator load(lo);
  load.Start();
  ASSERT_TRUE(WaitUntil([&] { return load.acked() >= 2000; }, 60s)) << load.last_error();

  // Rotation under load: a new certificate in the pods' Secret, served by both sidecars.
  const std::string before = secret_data("orders-admin")["tls.crt"];
  ASSERT_FALSE(before.empty());
  PatchSpec(R"({"metadata":{"annotations":{"shoal.dev/rotate-certificates":"1"}}})");
  std::string after;
  ASSERT_TRUE(WaitUntil(
      [&] {
        after = secret_data("orders-admin")["tls.crt"];
        return !after.empty() && after != before;
      },
      30s))
      << OperatorLog("a");
  std::ofstream(dir_.path() + "/new.crt") << after;
  for (const auto& pod : {pod0, pod1}) {
    const std::string fingerprint_of_new =
        "openssl x509 -noout -fingerprint -in " + dir_.path() + "/new.crt";
    const std::string served = "openssl s_client -connect " + pod->ip +
                               ":8080 -servername shoal-peer.orders -cert " + certs +
                               "/tls.crt -key " + certs +
                               "/tls.key </dev/null 2>/dev/null | "
                               "openssl x509 -noout -fingerprint";
    EXPECT_TRUE(WaitUntil(
        [&] {
          std::string a, b;
          FILE* f = ::popen(fingerprint_of_new.c_str(), "r");
          FILE* g = ::popen(served.c_str(), "r");
          char buf[256];
          while (f && std::fgets(buf, sizeof buf, f)) a += buf;
          while (g && std::fgets(buf, sizeof buf, g)) b += buf;
          if (f) ::pclose(f);
          if (g) ::pclose(g);
          return !a.empty() && a == b;
        },
        30s))
        << pod->name << " does not serve the new certificate";
  }
  const uint64_t at_rotation = load.acked();
  ASSERT_TRUE(WaitUntil([&] { return load.acked() >= at_rotation + 2000; }, 60s))
      << load.last_error();
  load.Stop();
  const auto acked = load.TakeAcked();
  ExpectNothingLostOrReordered(
      acked, "TLS, " + std::to_string(acked.size() - at_rotation) + " acked after the rotation");
}

// An operator upgraded to a TLS default (as the chart's is) does not turn a running plain topic
// into TLS: while its pods rolled one at a time, plain and TLS pods could not call each other.
// A topic that does not say keeps what it runs; a new topic takes the default.
TEST_F(KubeOperatorTest, AnOperatorWithATlsDefaultKeepsARunningPlainTopicPlain) {
  StartCluster();
  StartOperator("a");
  CreateTopic(TestTopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(90s)) << OperatorLog("a");
  auto sidecar_args = [&] {
    auto sts = Get(kStatefulSet);
    return sts ? At(*sts, "spec.template.spec.containers").serialize() : std::string();
  };
  ASSERT_EQ(sidecar_args().find("--tls-client-ca"), std::string::npos);
  operator_process("a").Signal(SIGKILL);
  ASSERT_TRUE(operator_process("a").Wait(10s).has_value());
  StartOperator("b", {"--tls-default=true"});
  // A spec change the new operator applies: the template changes, TLS stays off.
  PatchSpec(R"({"spec":{"durability":{"fsync":"always"}}})");
  ASSERT_TRUE(WaitUntil(
      [&] { return sidecar_args().find(R"("--fsync","always")") != std::string::npos; }, 60s))
      << OperatorLog("b");
  EXPECT_TRUE(WaitCaughtUp(30s)) << OperatorLog("b");
  EXPECT_EQ(sidecar_args().find("--tls-client-ca"), std::string::npos) << sidecar_args();
  EXPECT_FALSE(Get("/api/v1/namespaces/default/secrets/orders-ca").has_value());
}

// Issue 27: a topic whose consumer image cannot be pulled said only Starting / PodsStarting for as
// long as one waited, like a slow start. Now the pods' cause is the topic's Degraded condition
// (its reason and the kubelet's message, naming the pod and the container) and a Warning Event,
// within 30 s.
// The operator serves each topic's console (docs/console.md): its API behind the topic's admin
// token, reading the sidecars over TLS with the operator's own certificate (the admin plane of a
// TLS topic admits only its pods and the operator), and browsing without consuming.
TEST_F(KubeOperatorTest, TheOperatorServesATlsTopicsConsoleBehindItsAdminToken) {
  StartCluster();
  auto port = control::FreePort();
  ASSERT_TRUE(port.ok()) << port.status().message();
  StartOperator("a", {"--console-port", std::to_string(*port)});
  value topic = ReplicatedTopic(4, 1, 1);
  topic["spec"]["security"] = value::parse(R"({"tls":true})");
  CreateTopic(topic);
  ASSERT_TRUE(WaitReady(90s)) << OperatorLog("a");
  HttpTestClient consoles("http://127.0.0.1:" + std::to_string(*port));

  // The list of topics links each one's console.
  HttpResponse list = consoles.Get("/");
  ASSERT_EQ(list.status, 200) << list.Describe();
  EXPECT_NE(list.body.find("href=\"t/default/orders/\""), std::string::npos) << list.body;
  HttpResponse page = consoles.Get("/t/default/orders/");
  ASSERT_EQ(page.status, 200) << page.Describe();
  EXPECT_NE(page.body.find("console.js"), std::string::npos);
  EXPECT_EQ(consoles.Get("/t/default/orders/console.js").status, 200);
  EXPECT_EQ(consoles.Get("/t/default/nothing/").status, 404);

  // The API needs the topic's admin token, as a user takes it from the Secret.
  EXPECT_EQ(consoles.Get("/t/default/orders/api/state").status, 401);
  auto secret = Get("/api/v1/namespaces/default/secrets/orders-admin");
  ASSERT_TRUE(secret.has_value());
  const auto bytes = utility::conversions::from_base64(At(*secret, "data")["token"].as_string());
  HttpRequestOptions bearer;
  bearer.headers["Authorization"] = "Bearer " + std::string(bytes.begin(), bytes.end());
  EXPECT_EQ(consoles
                .Get("/t/default/orders/api/state",
                     [] {
                       HttpRequestOptions wrong;
                       wrong.headers["Authorization"] = "Bearer not-the-token";
                       return wrong;
                     }())
                .status,
            401);

  // Events produced over the pod's local port show in the console: the state carries what the
  // pods report (read over TLS) and the browser finds a key's events.
  const auto pod0 = kubelet().Pod("orders-0");
  ASSERT_TRUE(pod0.has_value());
  std::vector<client::OutgoingEvent> batch;
  for (int i = 0; i < 50; ++i) {  // numbered: a retry stores each event once
    batch.push_back({"k" + std::to_string(i % 5), "1", "console-test", static_cast<uint64_t>(i)});
  }
  // The pod's own plain port (SHOAL_URL: localhost, the pod's IP here); a 503 while the pod
  // takes its first map is retried, as an application does.
  client::ShoalClient local("http://" + pod0->ip + ":8082", "orders");
  Status produced = Status::Unavailable("not tried");
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = local.Produce(batch);
        produced = r.ok() ? Status::Ok() : r.status();
        return r.ok();
      },
      30s))
      << produced.ToString();
  std::string state;
  ASSERT_TRUE(WaitUntil(
      [&] {
        HttpResponse r = consoles.Get("/t/default/orders/api/state", bearer);
        state = r.body;
        return r.status == 200 && state.find("\"appended\":") != std::string::npos &&
               state.find("\"epoch\":0") == std::string::npos;
      },
      30s))
      << state << "\n"
      << OperatorLog("a");
  HttpResponse key = consoles.Get("/t/default/orders/api/events?key=k3", bearer);
  ASSERT_EQ(key.status, 200) << key.Describe();
  auto events = wire::ParseConsumeResponse(key.body);
  ASSERT_TRUE(events.ok()) << key.body;
  EXPECT_EQ(events->size(), 10u) << key.body;
  for (const auto& e : *events) EXPECT_EQ(e.key, "k3");
}

TEST_F(KubeOperatorTest, ATopicWhosePodsCannotPullTheirImageSaysWhy) {
  StartCluster();
  StartOperator("a");
  value topic = TestTopicJson(seen_dir());
  value& app = topic["spec"]["consumer"]["template"]["spec"]["containers"][0];
  app["image"] = value::string("registry.example/no-such-app:1.0");
  app["command"][0] = value::string("no-such-app");
  const auto created = SteadyClock::now();
  CreateTopic(topic);
  std::string reason, message;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = Get(kTopic);
        return t && Condition(*t, "Degraded", &reason, &message) == "True" &&
               reason == "ErrImagePull";
      },
      30s))
      << "Degraded: " << reason << ": " << message << "\n"
      << OperatorLog("a");
  EXPECT_NE(message.find("pod orders-0"), std::string::npos) << message;
  EXPECT_NE(message.find("container app"), std::string::npos) << message;
  EXPECT_NE(message.find("no-such-app"), std::string::npos) << message;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string events = EventsText();
        return events.find("\"Warning\"") != std::string::npos &&
               events.find("ErrImagePull") != std::string::npos;
      },
      30s))
      << EventsText();
  std::printf(
      "the pull failure is the topic's condition and a Warning Event %lld ms after the "
      "topic was created\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - created)
              .count()));
  EXPECT_EQ(Condition(*Get(kTopic), "Ready"), "False");
}

}  // namespace
}  // namespace shoal::testing
