// shoal-operator against a cluster made of the fake API server (tests/support/fake_kube: real
// HTTP, resourceVersions, watches, RBAC from deploy/rbac/operator-rules.yaml) and the test
// kubelet (real shoal-sidecar and `shoal consume` processes for the StatefulSet's pods, one
// loopback address each). The operators are real processes, found by their kubeconfig, killed
// with kill -9 where a test says so. What issue 6 asks, test by test:
//   - a topic yields its StatefulSet, Service, Secret, finalizer and status conditions;
//   - a spec change is followed (observedGeneration catches up) also when the status write
//     first meets 409 Conflicts and when the watches were closed or answered 410;
//   - an invalid spec is reported as Degraded and changes nothing;
//   - two operators elect one leader; kill -9 of the leader hands over within the lease;
//   - deleting the topic runs the finalizer's cleanup;
//   - every rule of the RBAC rules file is needed: without any one of them the operator meets
//     403 Forbidden;
//   - under load with a surge: splits, more pods, moves; the leader killed mid-plan, the other
//     operator completes the plan from the status; the verifier finds nothing lost or reordered.
// Nothing sleeps bare: waits poll the API or files with deadlines.
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/json.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/process.h"
#include "shoal/client/verifier.h"
#include "shoal/client/workload.h"
#include "shoal/common/partition_map.h"
#include "shoal/k8s/kube_platform.h"
#include "shoal/kube/kube_client.h"
#include "support/fake_kube/fake_api_server.h"
#include "support/fake_kube/rbac.h"
#include "support/fake_kube/test_kubelet.h"
#include "support/http_test_client.h"
#include "support/loopback.h"
#include "support/temp_dir.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;
using web::json::value;
using SteadyClock = std::chrono::steady_clock;

constexpr char kAdmin[] = "admin-token";
constexpr char kOperatorToken[] = "operator-token";
constexpr char kNs[] = "default";
constexpr char kTopics[] = "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics";
constexpr char kTopic[] = "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics/orders";
constexpr char kStatefulSet[] = "/apis/apps/v1/namespaces/default/statefulsets/orders";
constexpr char kService[] = "/api/v1/namespaces/default/services/orders";
constexpr char kSecret[] = "/api/v1/namespaces/default/secrets/orders-admin";
constexpr char kLease[] = "/apis/coordination.k8s.io/v1/namespaces/default/leases/shoal-operator";
constexpr char kEvents[] = "/apis/events.k8s.io/v1/namespaces/default/events";

using kube::At;  // the value at a dotted path, or null

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

std::string Condition(const value& topic, const std::string& type, std::string* reason = nullptr,
                      std::string* message = nullptr) {
  const value list = At(topic, "status.conditions");
  if (!list.is_array()) return "";
  for (const auto& c : list.as_array()) {
    if (Str(At(c, "type")) == type) {
      if (reason) *reason = Str(At(c, "reason"));
      if (message) *message = Str(At(c, "message"));
      return Str(At(c, "status"));
    }
  }
  return "";
}

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!pred()) {
    if (SteadyClock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);  // polling the API and files of other processes
  }
  return true;
}

// The test topic: its consumer container is the real `shoal consume`, recording what it sees
// in a hostPath directory (kept when pods go) for the verifier.
value TopicJson(const std::string& seen_dir, int64_t max_partitions = 32) {
  const std::string text = R"json({
    "apiVersion": "shoal.dev/v1alpha1", "kind": "PartitionedTopic",
    "metadata": {"name": "orders", "namespace": "default"},
    "spec": {
      "partitions": {"min": 2, "max": )json" + std::to_string(max_partitions) + R"json(, "initial": 2},
      "replicas": {"min": 1, "max": 4},
      "scaling": {"targetEventsPerSecondPerPartition": 400, "targetCPUUtilizationPercent": 90,
                  "targetConsumerLag": 5000, "targetPartitionsPerReplica": 4},
      "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "tolerance": 0.1},
                   "scaleDown": {"stabilizationWindowSeconds": 300, "tolerance": 0.1}},
      "durability": {"fsync": "interval"},
      "retention": {"bytes": 0, "ms": 86400000},
      "consumer": {"template": {"spec": {
        "terminationGracePeriodSeconds": 5,
        "containers": [{
          "name": "app", "image": "example/order-processor:1.0", "command": ["shoal"],
          "args": ["consume", "--target", "$(SHOAL_URL)", "--topic", "orders", "--group", "app",
                   "--out", "/seen/$(POD_NAME).jsonl", "--append", "--idle-exit", "0",
                   "--max-seconds", "0"],
          "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
          "resources": {"requests": {"cpu": "500m"}},
          "volumeMounts": [{"name": "seen", "mountPath": "/seen"}]}],
        "volumes": [{"name": "seen", "hostPath": {"path": ")json" + seen_dir + R"json("}}]}}},
      "sidecar": {"image": "shoal:test"}
    }})json";
  return value::parse(text);
}

class KubeOperatorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::create_directories(seen_dir())); }

  void TearDown() override {
    for (auto& [id, p] : operators_) p.Stop(5s);
    if (kubelet_) kubelet_->Stop();
  }

  std::string seen_dir() const { return dir_.path() + "/seen"; }

  // The fake API server (the operator's user gets `rules`, by default the rules file) and the
  // kubelet beside it.
  void StartCluster(std::optional<std::vector<PolicyRule>> rules = std::nullopt) {
    FakeApiServerOptions o;
    o.admin_token = kAdmin;
    auto user = OperatorUser(kOperatorToken, kOperatorRulesFile);
    ASSERT_TRUE(user.ok()) << user.status().message();
    if (rules) user->rules = *rules;
    o.users.push_back(*user);
    auto api = FakeApiServer::Start(o);
    ASSERT_TRUE(api.ok()) << api.status().message();
    api_ = std::move(api).value();
    admin_ = std::make_unique<HttpTestClient>(api_->base_url());
    TestKubeletOptions ko;
    ko.api = api_.get();
    ko.admin_token = kAdmin;
    ko.work_dir = dir_.path() + "/node";
    ko.ip_prefix = ip_prefix_;
    ko.images = {{"shoal-sidecar", SHOAL_SIDECAR_BIN}, {"shoal", SHOAL_BIN}};
    ko.probe_period = 200ms;
    ko.metrics_interval = 1000ms;
    kubelet_ = std::make_unique<TestKubelet>(ko);
    ASSERT_TRUE(kubelet_->Start().ok());
    // The operator finds the API server by a kubeconfig, as outside a cluster.
    kubeconfig_ = dir_.path() + "/kubeconfig";
    std::ofstream(kubeconfig_) << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                               << "clusters:\n- name: test\n  cluster:\n    server: "
                               << api_->base_url() << "\n"
                               << "users:\n- name: operator\n  user:\n    token: "
                               << kOperatorToken << "\n"
                               << "contexts:\n- name: test\n  context:\n    cluster: test\n"
                               << "    user: operator\n    namespace: default\n";
  }

  void StartOperator(const std::string& id, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {SHOAL_OPERATOR_BIN,
                                     "--kubeconfig", kubeconfig_,
                                     "--identity", id,
                                     "--namespaces", kNs,
                                     "--bind", "127.0.0.1",
                                     "--http-port", std::to_string(*client::FreePort()),
                                     "--lease-duration-ms", "3000",
                                     "--renew-deadline-ms", "2000",
                                     "--retry-period-ms", "500",
                                     "--interval-ms", "500",
                                     "--resync-ms", "500",
                                     "--watch-timeout-s", "60",
                                     "--log-level", "debug"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = client::ChildProcess::Spawn(argv, dir_.path() + "/operator-" + id + ".log");
    ASSERT_TRUE(p.ok()) << p.status().message();
    operators_[id] = std::move(p).value();
  }

  std::string OperatorLog(const std::string& id) const {
    std::ifstream in(dir_.path() + "/operator-" + id + ".log");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string s = ss.str();
    return s.size() > 6000 ? s.substr(s.size() - 6000) : s;
  }

  std::optional<value> Get(const std::string& path) const {
    auto text = api_->Object(path);
    if (!text) return std::nullopt;
    return value::parse(*text);
  }

  HttpResponse Admin(const std::string& method, const std::string& path, const value& body,
                     const std::string& content_type = "application/json") {
    HttpRequestOptions o;
    o.headers["Authorization"] = std::string("Bearer ") + kAdmin;
    o.content_type = content_type;
    return admin_->Send(method, path, body.is_null() ? "" : body.serialize(), o);
  }

  void CreateTopic(const value& topic) {
    const auto r = Admin("POST", kTopics, topic);
    ASSERT_EQ(r.status, 201) << r.Describe();
  }

  void PatchSpec(const std::string& merge_patch_json) {
    const auto r = Admin("PATCH", kTopic, value::parse(merge_patch_json),
                         "application/merge-patch+json");
    ASSERT_EQ(r.status, 200) << r.Describe();
  }

  bool WaitCaughtUp(std::chrono::milliseconds timeout) {
    return WaitUntil(
        [&] {
          auto t = Get(kTopic);
          return t && Int(At(*t, "status.observedGeneration")) == Int(At(*t, "metadata.generation"));
        },
        timeout);
  }

  bool WaitReady(std::chrono::milliseconds timeout) {
    return WaitUntil(
        [&] {
          auto t = Get(kTopic);
          return t && Condition(*t, "Ready") == "True";
        },
        timeout);
  }

  std::string LeaseHolder() const {
    auto l = Get(kLease);
    return l ? Str(At(*l, "spec.holderIdentity")) : "";
  }

  int Forbidden() const {
    int n = 0;
    for (const auto& r : api_->Requests()) n += (r.code == 403 && r.user == kOperatorUser) ? 1 : 0;
    return n;
  }

  TempDir dir_;
  const std::string ip_prefix_ = RandomLoopbackPrefix();
  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<HttpTestClient> admin_;
  std::unique_ptr<TestKubelet> kubelet_;
  std::string kubeconfig_;
  std::map<std::string, client::ChildProcess> operators_;
};

TEST_F(KubeOperatorTest, ATopicGetsItsObjectsFinalizerAndReadyStatus) {
  StartCluster();
  StartOperator("a");
  CreateTopic(TopicJson(seen_dir()));
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
  const auto pod = kubelet_->Pod("orders-0");
  ASSERT_TRUE(pod && pod->ready);
  // Events say what was done.
  const auto events = admin_->Get(kEvents, {{{"Authorization", std::string("Bearer ") + kAdmin}}});
  EXPECT_NE(events.body.find("created StatefulSet orders"), std::string::npos) << events.body;
}

TEST_F(KubeOperatorTest, SpecChangesAreFollowedThroughConflictsClosedWatchesAnd410) {
  StartCluster();
  StartOperator("a");
  CreateTopic(TopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");
  const std::string hash_before =
      Str(Field(At(*Get(kStatefulSet), "metadata.annotations"), "shoal.dev/template-hash"));

  // 1. A change whose status writes first meet two 409 Conflicts.
  const std::string status_path = std::string(kTopic) + "/status";
  const int conflicts_before = api_->CountRequests("PUT", status_path, 409);
  api_->FailNextWrites(status_path, 2, 409);
  PatchSpec(R"({"spec":{"durability":{"fsync":"always"}}})");
  ASSERT_TRUE(WaitCaughtUp(30s)) << OperatorLog("a");
  EXPECT_EQ(api_->CountRequests("PUT", status_path, 409) - conflicts_before, 2);
  // The StatefulSet's template followed the spec.
  const auto sts = Get(kStatefulSet);
  EXPECT_NE(At(*sts, "spec.template.spec.containers").at(1).at("args").serialize().find(
                "\"always\""),
            std::string::npos);

  // 2. Every watch closed: the informers watch again from where they were.
  api_->CloseAllWatches();
  PatchSpec(R"({"spec":{"retention":{"ms":3600000}}})");
  ASSERT_TRUE(WaitCaughtUp(30s)) << OperatorLog("a");

  // 3. History compacted and watches closed: the re-watch gets 410 Expired, the informers list
  // again, and the change made meanwhile is not missed.
  auto topic_lists = [&] {
    int n = 0;
    for (const auto& r : api_->Requests()) {
      n += r.method == "GET" && r.path == kTopics && r.query.find("watch") == std::string::npos &&
           r.user == kOperatorUser && r.code == 200;
    }
    return n;
  };
  const int lists_before = topic_lists();
  api_->CompactHistory();
  api_->CloseAllWatches();
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
  CreateTopic(TopicJson(seen_dir(), /*max_partitions=*/32));
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
  const std::string sts_rv = Str(At(*Get(kStatefulSet), "metadata.resourceVersion"));

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
  EXPECT_EQ(Str(At(*Get(kStatefulSet), "metadata.resourceVersion")), sts_rv)
      << "an invalid spec changed the StatefulSet";
  const auto events = admin_->Get(kEvents, {{{"Authorization", std::string("Bearer ") + kAdmin}}});
  EXPECT_NE(events.body.find("InvalidSpec"), std::string::npos);
}

TEST_F(KubeOperatorTest, TwoOperatorsElectOneLeaderAndFailOverWhenItIsKilled) {
  StartCluster();
  StartOperator("a");
  StartOperator("b");
  CreateTopic(TopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a") << OperatorLog("b");
  const std::string leader = LeaseHolder();
  ASSERT_TRUE(leader == "a" || leader == "b") << leader;
  const std::string other = leader == "a" ? "b" : "a";
  // Only the leader writes: every status write is the leader's (both use one token, so look at
  // the logs: the follower never starts a control loop).
  EXPECT_EQ(OperatorLog(other).find("control loop started"), std::string::npos);

  operators_[leader].Signal(SIGKILL);
  ASSERT_TRUE(operators_[leader].Wait(10s).has_value());
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

TEST_F(KubeOperatorTest, DeletingTheTopicRunsTheFinalizerCleanup) {
  StartCluster();
  StartOperator("a");
  CreateTopic(TopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a");
  const auto r = Admin("DELETE", kTopic, value::null());
  ASSERT_EQ(r.status, 200) << r.Describe();
  ASSERT_TRUE(WaitUntil([&] { return !Get(kTopic); }, 30s)) << OperatorLog("a");
  EXPECT_FALSE(Get(kStatefulSet));
  EXPECT_FALSE(Get(kService));
  EXPECT_FALSE(Get(kSecret));
  // Without its StatefulSet the pods go (the kubelet plays the garbage collector).
  EXPECT_TRUE(kubelet_->WaitFor([&] { return kubelet_->Pods().empty(); }, 30s));
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
    CreateTopic(TopicJson(seen_dir()));
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
      WaitUntil([&] { return Forbidden() > 0 || api_->CountRequests("GET",
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
    operators_["a"].Stop(5s);
    operators_.clear();
    kubelet_->Stop();
    kubelet_.reset();
    api_.reset();
  }
}

size_t CountLines(const std::string& dir) {
  size_t lines = 0;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(f.path());
    std::string line;
    while (std::getline(in, line)) ++lines;
  }
  return lines;
}

// Issue 6's last line: real sidecars under a surge; the leader is killed in the middle of a plan
// and the other operator completes it from the topic's status; nothing is lost or reordered.
TEST_F(KubeOperatorTest, SurgeSplitsAddsPodsAndTheNextLeaderFinishesTheKilledLeadersPlan) {
  StartCluster();
  StartOperator("a");
  StartOperator("b");
  CreateTopic(TopicJson(seen_dir()));
  ASSERT_TRUE(WaitReady(60s)) << OperatorLog("a") << OperatorLog("b");
  const auto pod0 = kubelet_->Pod("orders-0");
  ASSERT_TRUE(pod0);

  // 500 events/s, ten times that in the middle of 30 s, into pod 0 (it forwards).
  client::LoadOptions lo;
  lo.targets = {"http://" + pod0->ip + ":8080"};
  lo.rate = 500;
  lo.profile = "surge";
  lo.duration_s = 30;
  lo.surge_from = 0.2;
  lo.surge_until = 0.7;
  lo.keys = 2000;
  lo.producers = 4;
  lo.batch = 25;
  client::LoadGenerator load(lo);
  load.Start();

  // Watch the status: kill -9 the leader once a plan has done a step and has more to do.
  int64_t max_partitions = 0, max_replicas = 0, killed_plan = -1;
  size_t max_owners = 0;  // pods that own active partitions: partitions moved onto new pods
  auto observe = [&](const value& t) {
    max_partitions = std::max(max_partitions, Int(At(t, "status.partitions")));
    max_replicas = std::max(max_replicas, Int(At(t, "status.replicas")));
    auto state = k8s::KubePlatform::StatusToState(At(t, "status"), "orders");
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
  operators_[leader].Signal(SIGKILL);
  ASSERT_TRUE(operators_[leader].Wait(10s).has_value());
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
  load.Stop();
  const auto acked = load.TakeAcked();
  ASSERT_GT(acked.size(), 10000u);

  // Every acknowledged event reaches a consumer.
  WaitUntil([&] { return CountLines(seen_dir()) >= acked.size(); }, 60s);
  std::vector<client::SeenEvent> seen;
  for (const auto& f : std::filesystem::directory_iterator(seen_dir())) {
    auto part = client::ReadSeenFile(f.path().string());
    ASSERT_TRUE(part.ok()) << part.status().message();
    seen.insert(seen.end(), part->begin(), part->end());
  }
  const auto report = client::Verify(acked, seen);
  EXPECT_EQ(report.lost, 0u) << report.ToText();
  EXPECT_EQ(report.reordered, 0u) << report.ToText();
  std::printf("acked %zu, seen %zu, lost %llu, reordered %llu, duplicated %llu; max partitions "
              "%lld, max pods %lld, max owners %zu; leader %s killed mid-plan %lld, completed by %s\n",
              acked.size(), seen.size(), static_cast<unsigned long long>(report.lost),
              static_cast<unsigned long long>(report.reordered),
              static_cast<unsigned long long>(report.duplicated),
              static_cast<long long>(max_partitions), static_cast<long long>(max_replicas), max_owners,
              leader.c_str(), static_cast<long long>(killed_plan), other.c_str());
}

}  // namespace
}  // namespace shoal::testing
