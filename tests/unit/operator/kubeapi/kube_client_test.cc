// KubeClient against the fake API server (tests/support/fake_kube), over real HTTP:
//  - create, get, list, update, merge patch and delete of a custom resource and of core kinds,
//    with the paths the server saw; the status and scale subresources;
//  - every error body decoded into ApiError: 404, 409 AlreadyExists, 409 Conflict (stale RV),
//    422 (PUT without an RV), 403 (the operator's RBAC rules), 401 (a wrong token), transport;
//  - UpdateWithRetry through injected and real conflicts, its limits, and errors it must not
//    retry; delete with finalizers;
//  - watches: ADDED/MODIFIED/DELETED in order and a BOOKMARK, 410 Expired from a compacted RV,
//    `stop` ending a quiet watch, a server-closed stream ending normally, label selectors;
//  - a rotating token file re-read after token_reload.
// Requests run as the admin (RBAC is the server's business, not the client's), except where a
// test needs the operator's ServiceAccount and its rules (403). Waits are on conditions with
// deadlines; nothing sleeps.
#include "shoal/kubeapi/kube_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_kube/fake_api_server.h"
#include "support/temp_dir.h"

namespace shoal::kubeapi {
namespace {

using namespace std::chrono_literals;
using shoal::testing::FakeApiServer;
using shoal::testing::FakeApiServerOptions;
using shoal::testing::FakeApiUser;

constexpr char kAdmin[] = "admin-token";
constexpr char kOperator[] = "operator-token";
constexpr char kTopicPath[] = "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics";

Json J(const std::string& text) { return Json::parse(text); }

Json Topic(const std::string& name, int min_replicas = 1, const std::string& extra_meta = "") {
  return J(R"({"metadata":{"name":")" + name + R"(","labels":{"app":"shoal"})" + extra_meta +
           R"(},"spec":{"partitions":4,"replicas":{"min":)" + std::to_string(min_replicas) +
           R"(,"max":8}}})");
}

Json Service(const std::string& name, const std::string& labels = R"({"app":"shoal"})") {
  return J(R"({"metadata":{"name":")" + name + R"(","labels":)" + labels +
           R"(},"spec":{"clusterIP":"None","ports":[{"name":"http","port":8080}]}})");
}

std::string Str(const Json& object, const std::string& dotted) {
  const Json v = At(object, dotted);
  return v.is_string() ? v.as_string() : "";
}
int64_t Int(const Json& object, const std::string& dotted) {
  const Json v = At(object, dotted);
  return v.is_number() ? v.as_number().to_int64() : -1;
}

// Runs one KubeClient::Watch on its own thread and records what it delivers.
class WatchRunner {
 public:
  WatchRunner(KubeClient& client, const ResourceKind& kind, const std::string& ns,
              const WatchOptions& options)
      : thread_([this, &client, kind, ns, options] {
          const ApiError result = client.Watch(
              kind, ns, options,
              [this](const WatchEvent& ev) {
                std::lock_guard<std::mutex> lock(mu_);
                events_.push_back(ev);
                cv_.notify_all();
              },
              stop_);
          std::lock_guard<std::mutex> lock(mu_);
          result_ = result;
          cv_.notify_all();
        }) {}
  ~WatchRunner() {
    stop_ = true;
    thread_.join();
  }
  WatchRunner(const WatchRunner&) = delete;
  WatchRunner& operator=(const WatchRunner&) = delete;

  void Stop() { stop_ = true; }
  bool WaitForEvents(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return events_.size() >= n; });
  }
  // What Watch returned, or nullopt if it is still running at the deadline.
  std::optional<ApiError> WaitForEnd(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return result_.has_value(); });
    return result_;
  }
  std::vector<WatchEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WatchEvent> events_;  // guarded by mu_
  std::optional<ApiError> result_;  // guarded by mu_
  std::thread thread_;              // last: starts once the members above exist
};

bool IsOk(const ApiError& e) { return e.code == 0 && e.reason.empty(); }

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeApiServerOptions options;
    options.admin_token = kAdmin;
    auto op = shoal::testing::OperatorUser(kOperator, shoal::testing::kOperatorRulesFile);
    ASSERT_TRUE(op.ok()) << op.status().ToString();
    options.users.push_back(*op);
    for (const auto& u : extra_users_) options.users.push_back(u);
    auto server = FakeApiServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server.value());
    admin_ = NewClient(kAdmin);
    op_ = NewClient(kOperator);
    ASSERT_TRUE(admin_ && op_);
  }

  std::unique_ptr<KubeClient> NewClient(const std::string& token, KubeClientOptions o = {}) {
    KubeConfig config;
    config.server = server_->base_url();
    config.token = token;
    auto client = KubeClient::Create(config, o);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client.value()) : nullptr;
  }

  // A topic created as admin (the operator may not create topics).
  Json CreateTopic(const std::string& name, const std::string& extra_meta = "") {
    auto created = admin_->Create(PartitionedTopics(), "default", Topic(name, 1, extra_meta));
    EXPECT_TRUE(created.ok()) << created.error().ToString();
    return created.ok() ? created.value() : Json::null();
  }

  std::vector<FakeApiUser> extra_users_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<KubeClient> admin_;
  std::unique_ptr<KubeClient> op_;
};

TEST(KubeClientPathsTest, KindsLiveWhereTheApiServesThem) {
  EXPECT_EQ(PartitionedTopics().ObjectPath("ns", "t", "scale"),
            "/apis/shoal.dev/v1alpha1/namespaces/ns/partitionedtopics/t/scale");
  EXPECT_EQ(PartitionedTopics().api_version(), "shoal.dev/v1alpha1");
  EXPECT_EQ(StatefulSets().CollectionPath("ns"), "/apis/apps/v1/namespaces/ns/statefulsets");
  EXPECT_EQ(Services().CollectionPath("ns"), "/api/v1/namespaces/ns/services");
  EXPECT_EQ(Services().api_version(), "v1");
  EXPECT_EQ(Secrets().ObjectPath("ns", "s"), "/api/v1/namespaces/ns/secrets/s");
  EXPECT_EQ(Pods().ObjectPath("ns", "p", "status"), "/api/v1/namespaces/ns/pods/p/status");
  EXPECT_EQ(Pods().CollectionPath(""), "/api/v1/pods");
  EXPECT_EQ(Leases().CollectionPath("ns"), "/apis/coordination.k8s.io/v1/namespaces/ns/leases");
  EXPECT_EQ(Events().CollectionPath("ns"), "/apis/events.k8s.io/v1/namespaces/ns/events");
  EXPECT_EQ(Events().kind, "Event");
  EXPECT_EQ(PodMetrics().CollectionPath("ns"), "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods");
  EXPECT_EQ(PodMetrics().kind, "PodMetrics");
}

TEST(KubeClientValuesTest, ApiErrorAndAccessors) {
  const ApiError conflict{409, "Conflict", "the object has been modified"};
  EXPECT_TRUE(conflict.IsConflict());
  EXPECT_FALSE(conflict.IsAlreadyExists());
  EXPECT_EQ(conflict.ToString(), "409 Conflict: the object has been modified");
  EXPECT_EQ(conflict.ToStatus().code(), Status::Code::kFailedPrecondition);
  EXPECT_TRUE((ApiError{0, "Transport", "refused"}).IsRetryable());
  EXPECT_TRUE((ApiError{503, "ServiceUnavailable", ""}).IsRetryable());
  EXPECT_TRUE((ApiError{429, "TooManyRequests", ""}).IsRetryable());
  EXPECT_FALSE(conflict.IsRetryable());
  EXPECT_FALSE(ApiError{}.IsRetryable());
  EXPECT_TRUE(ApiError{}.ToStatus().ok());
  EXPECT_EQ((ApiError{404, "NotFound", "x"}).ToStatus().code(), Status::Code::kNotFound);
  EXPECT_EQ((ApiError{503, "ServiceUnavailable", ""}).ToStatus().code(),
            Status::Code::kUnavailable);

  const Json obj = J(R"({"metadata":{"name":"a","namespace":"b","resourceVersion":"7",
      "uid":"u-1","generation":3},"status":{"observedGeneration":2}})");
  EXPECT_EQ(Name(obj), "a");
  EXPECT_EQ(Namespace(obj), "b");
  EXPECT_EQ(ResourceVersion(obj), "7");
  EXPECT_EQ(Uid(obj), "u-1");
  EXPECT_EQ(Generation(obj), 3);
  EXPECT_EQ(At(obj, "status.observedGeneration").as_number().to_int64(), 2);
  EXPECT_TRUE(At(obj, "status.missing.deeper").is_null());
  EXPECT_EQ(Name(Json::null()), "");
  EXPECT_EQ(Generation(J("{}")), 0);
}

TEST_F(KubeClientTest, CustomResourceLifecycle) {
  auto created = admin_->Create(PartitionedTopics(), "default", Topic("orders"));
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  EXPECT_EQ(Str(created.value(), "kind"), "PartitionedTopic");  // filled in by the client
  EXPECT_EQ(Generation(created.value()), 1);
  EXPECT_FALSE(Uid(created.value()).empty());
  EXPECT_EQ(server_->CountRequests("POST", kTopicPath, 201), 1);

  auto got = admin_->Get(PartitionedTopics(), "default", "orders");
  ASSERT_TRUE(got.ok()) << got.error().ToString();
  EXPECT_EQ(ResourceVersion(got.value()), ResourceVersion(created.value()));
  EXPECT_EQ(Int(got.value(), "spec.partitions"), 4);

  ASSERT_TRUE(admin_->Create(PartitionedTopics(), "other", Topic("payments")).ok());
  auto list = admin_->List(PartitionedTopics(), "default");
  ASSERT_TRUE(list.ok()) << list.error().ToString();
  EXPECT_EQ(Str(list.value(), "kind"), "PartitionedTopicList");
  EXPECT_FALSE(Str(list.value(), "metadata.resourceVersion").empty());
  ASSERT_EQ(At(list.value(), "items").as_array().size(), 1u);
  auto all = admin_->List(PartitionedTopics(), "");
  ASSERT_TRUE(all.ok()) << all.error().ToString();
  EXPECT_EQ(At(all.value(), "items").as_array().size(), 2u);

  Json changed = got.value();
  changed["spec"]["partitions"] = Json::number(8);
  auto updated = admin_->Update(PartitionedTopics(), "default", "orders", changed);
  ASSERT_TRUE(updated.ok()) << updated.error().ToString();
  EXPECT_EQ(Int(updated.value(), "spec.partitions"), 8);
  EXPECT_EQ(Generation(updated.value()), 2);
  EXPECT_NE(ResourceVersion(updated.value()), ResourceVersion(got.value()));

  auto patched = admin_->MergePatch(PartitionedTopics(), "default", "orders",
                                    J(R"({"metadata":{"labels":{"team":"payments"}}})"));
  ASSERT_TRUE(patched.ok()) << patched.error().ToString();
  EXPECT_EQ(Str(patched.value(), "metadata.labels.team"), "payments");
  EXPECT_EQ(Str(patched.value(), "metadata.labels.app"), "shoal");
  EXPECT_EQ(Generation(patched.value()), 2);  // metadata only

  auto deleted = admin_->Delete(PartitionedTopics(), "default", "orders");
  ASSERT_TRUE(deleted.ok()) << deleted.error().ToString();
  EXPECT_EQ(Str(deleted.value(), "kind"), "Status");
  EXPECT_EQ(Str(deleted.value(), "status"), "Success");
  auto gone = admin_->Get(PartitionedTopics(), "default", "orders");
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(gone.error().IsNotFound());
}

TEST_F(KubeClientTest, CoreKindsLifecycle) {
  auto svc = admin_->Create(Services(), "default", Service("orders-pods"));
  ASSERT_TRUE(svc.ok()) << svc.error().ToString();
  EXPECT_EQ(Str(svc.value(), "apiVersion"), "v1");
  EXPECT_EQ(server_->CountRequests("POST", "/api/v1/namespaces/default/services", 201), 1);

  Json changed = svc.value();
  changed["spec"]["ports"][0]["port"] = Json::number(9090);
  auto updated = admin_->Update(Services(), "default", "orders-pods", changed);
  ASSERT_TRUE(updated.ok()) << updated.error().ToString();
  EXPECT_EQ(At(updated.value(), "spec.ports").as_array().at(0).at("port").as_integer(), 9090);

  auto secret =
      admin_->Create(Secrets(), "default",
                     J(R"({"metadata":{"name":"orders-admin"},"data":{"token":"c2VjcmV0"}})"));
  ASSERT_TRUE(secret.ok()) << secret.error().ToString();
  auto patched =
      admin_->MergePatch(Secrets(), "default", "orders-admin", J(R"({"data":{"token":"bmV3"}})"));
  ASSERT_TRUE(patched.ok()) << patched.error().ToString();
  EXPECT_EQ(Str(patched.value(), "data.token"), "bmV3");

  auto list = admin_->List(Services(), "");
  ASSERT_TRUE(list.ok()) << list.error().ToString();
  EXPECT_EQ(Str(list.value(), "kind"), "ServiceList");
  EXPECT_EQ(At(list.value(), "items").as_array().size(), 1u);

  ASSERT_TRUE(admin_->Delete(Services(), "default", "orders-pods").ok());
  ASSERT_TRUE(admin_->Delete(Secrets(), "default", "orders-admin").ok());
  EXPECT_TRUE(admin_->Get(Secrets(), "default", "orders-admin").error().IsNotFound());

  // Leases, events and pod metrics.
  auto lease = admin_->Create(Leases(), "default", J(R"({"metadata":{"name":"shoal-operator"},
                                 "spec":{"holderIdentity":"a","leaseDurationSeconds":15}})"));
  ASSERT_TRUE(lease.ok()) << lease.error().ToString();
  EXPECT_EQ(Str(lease.value(), "apiVersion"), "coordination.k8s.io/v1");
  auto event = admin_->Create(
      Events(), "default", J(R"({"metadata":{"name":"orders.1"},"reason":"Scaled","type":"Normal",
                                 "eventTime":"2024-01-01T00:00:00.000000Z","note":"n"})"));
  ASSERT_TRUE(event.ok()) << event.error().ToString();
  EXPECT_EQ(Str(event.value(), "apiVersion"), "events.k8s.io/v1");
  ASSERT_TRUE(server_
                  ->Seed("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
                         R"({"metadata":{"name":"orders-0"},"containers":[{"name":"sidecar",
                             "usage":{"cpu":"250m","memory":"64Mi"}}]})")
                  .ok());
  auto metrics = admin_->Get(PodMetrics(), "default", "orders-0");
  ASSERT_TRUE(metrics.ok()) << metrics.error().ToString();
  EXPECT_EQ(Str(metrics.value(), "kind"), "PodMetrics");
}

TEST_F(KubeClientTest, StatusAndScaleSubresources) {
  CreateTopic("orders");
  auto got = admin_->Get(PartitionedTopics(), "default", "orders");
  ASSERT_TRUE(got.ok());
  Json with_status = got.value();
  with_status["status"] = J(R"({"observedGeneration":1,"replicas":3,"selector":"app=orders"})");
  with_status["spec"]["partitions"] = Json::number(99);  // dropped by /status
  auto status = admin_->Update(PartitionedTopics(), "default", "orders", with_status, "status");
  ASSERT_TRUE(status.ok()) << status.error().ToString();
  EXPECT_EQ(Int(status.value(), "status.replicas"), 3);
  EXPECT_EQ(Int(status.value(), "spec.partitions"), 4);
  EXPECT_EQ(Generation(status.value()), 1);
  EXPECT_EQ(server_->CountRequests("PUT", std::string(kTopicPath) + "/orders/status", 200), 1);

  auto patched = admin_->MergePatch(PartitionedTopics(), "default", "orders",
                                    J(R"({"status":{"replicas":4}})"), "status");
  ASSERT_TRUE(patched.ok()) << patched.error().ToString();
  EXPECT_EQ(Int(patched.value(), "status.replicas"), 4);

  auto scale = admin_->Get(PartitionedTopics(), "default", "orders", "scale");
  ASSERT_TRUE(scale.ok()) << scale.error().ToString();
  EXPECT_EQ(Str(scale.value(), "kind"), "Scale");
  EXPECT_EQ(Int(scale.value(), "spec.replicas"), 1);
  EXPECT_EQ(Int(scale.value(), "status.replicas"), 4);
  EXPECT_EQ(Str(scale.value(), "status.selector"), "app=orders");

  // `kubectl scale --replicas=5`.
  auto scaled = admin_->MergePatch(PartitionedTopics(), "default", "orders",
                                   J(R"({"spec":{"replicas":5}})"), "scale");
  ASSERT_TRUE(scaled.ok()) << scaled.error().ToString();
  auto topic = admin_->Get(PartitionedTopics(), "default", "orders");
  EXPECT_EQ(Int(topic.value(), "spec.replicas.min"), 5);

  // A StatefulSet's scale (the operator's pod count).
  auto sts = admin_->Create(StatefulSets(), "default",
                            J(R"({"metadata":{"name":"orders"},"spec":{"replicas":2,
                               "selector":{"matchLabels":{"app":"orders"}},
                                  "template":{"metadata":{"labels":{"app":"orders"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}})"));
  ASSERT_TRUE(sts.ok()) << sts.error().ToString();
  auto sts_scale = admin_->Get(StatefulSets(), "default", "orders", "scale");
  ASSERT_TRUE(sts_scale.ok()) << sts_scale.error().ToString();
  Json more = sts_scale.value();
  more["spec"]["replicas"] = Json::number(6);
  auto rescaled = admin_->Update(StatefulSets(), "default", "orders", more, "scale");
  ASSERT_TRUE(rescaled.ok()) << rescaled.error().ToString();
  EXPECT_EQ(Int(admin_->Get(StatefulSets(), "default", "orders").value(), "spec.replicas"), 6);
}

TEST_F(KubeClientTest, StatusErrorsAreDecoded) {
  auto missing = admin_->Get(PartitionedTopics(), "default", "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, 404);
  EXPECT_EQ(missing.error().reason, "NotFound");
  EXPECT_EQ(missing.error().message, "partitionedtopics.shoal.dev \"nope\" not found");
  EXPECT_TRUE(missing.error().IsNotFound());

  const Json first = CreateTopic("orders");
  auto again = admin_->Create(PartitionedTopics(), "default", Topic("orders"));
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(again.error().IsAlreadyExists()) << again.error().ToString();
  EXPECT_FALSE(again.error().IsConflict());

  // A write with the RV of `first` after someone else wrote.
  ASSERT_TRUE(admin_
                  ->MergePatch(PartitionedTopics(), "default", "orders",
                               J(R"({"metadata":{"labels":{"x":"y"}}})"))
                  .ok());
  auto stale = admin_->Update(PartitionedTopics(), "default", "orders", first);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(stale.error().IsConflict()) << stale.error().ToString();
  EXPECT_NE(stale.error().message.find("the object has been modified"), std::string::npos);

  Json no_rv = first;
  no_rv["metadata"].erase("resourceVersion");
  auto invalid = admin_->Update(PartitionedTopics(), "default", "orders", no_rv);
  ASSERT_FALSE(invalid.ok());
  EXPECT_TRUE(invalid.error().IsInvalid()) << invalid.error().ToString();
  EXPECT_EQ(invalid.error().reason, "Invalid");

  // The operator's RBAC rules (deploy/rbac/operator-rules.yaml) never let it delete a topic.
  auto forbidden = op_->Delete(PartitionedTopics(), "default", "orders");
  ASSERT_FALSE(forbidden.ok());
  EXPECT_TRUE(forbidden.error().IsForbidden()) << forbidden.error().ToString();
  EXPECT_EQ(forbidden.error().reason, "Forbidden");
  EXPECT_NE(forbidden.error().message.find(shoal::testing::kOperatorUser), std::string::npos);
  EXPECT_NE(forbidden.error().message.find("delete"), std::string::npos);
  EXPECT_TRUE(server_->Object(std::string(kTopicPath) + "/orders").has_value());

  auto stranger = NewClient("wrong-token");
  auto unauthorized = stranger->Get(PartitionedTopics(), "default", "orders");
  ASSERT_FALSE(unauthorized.ok());
  EXPECT_EQ(unauthorized.error().code, 401);
  EXPECT_EQ(unauthorized.error().reason, "Unauthorized");

  server_->FailNextWrites(std::string(kTopicPath) + "/orders", 1, 503);
  auto unavailable = admin_->MergePatch(PartitionedTopics(), "default", "orders", J("{}"));
  ASSERT_FALSE(unavailable.ok());
  EXPECT_EQ(unavailable.error().reason, "ServiceUnavailable");
  EXPECT_TRUE(unavailable.error().IsRetryable());
}

TEST_F(KubeClientTest, TransportFailureIsCodeZero) {
  KubeConfig config;
  config.server = "http://127.0.0.1:1";  // nothing listens on a privileged port here
  auto client = KubeClient::Create(config, KubeClientOptions{.request_timeout = 5s});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto got = (*client)->Get(Pods(), "default", "p");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, 0);
  EXPECT_EQ(got.error().reason, "Transport");
  EXPECT_FALSE(got.error().message.empty());
  EXPECT_TRUE(got.error().IsRetryable());

  const std::atomic<bool> stop{false};
  const ApiError watch = (*client)->Watch(
      Pods(), "default", {}, [](const WatchEvent&) {}, stop);
  EXPECT_EQ(watch.reason, "Transport");
}

TEST_F(KubeClientTest, CreateChecksTheTlsMaterial) {
  constexpr char kCert[] = R"(-----BEGIN CERTIFICATE-----
MIIBgTCCASegAwIBAgIUOvuK2U5Ou6W2LCNV6W7PGPT/jEcwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKc2hvYWwtdGVzdDAgFw0yNjExMjkxNzE0NTRaGA8yMTI2MTEw
NTE3MTQ1NFowFTETMBEGA1UEAwwKc2hvYWwtdGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABLVcExpxeqrZDvNiwj/py9KjhZZPHZX+6mPmKu3WJRW18qG+iQsN
I4FyQjCdWrZkwdD/D+TS3nqBFK8tUGTmaRqjUzBRMB0GA1UdDgQWBBQojsnnJ8aO
lHcaDgA6BO1hxngIYDAfBgNVHSMEGDAWgBQojsnnJ8aOlHcaDgA6BO1hxngIYDAP
BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIQD6TBW3SwlesyBKG3W/
C8Bv8P7CxiKzbUXvgyw2YErYXwIgcPGjdIu5QHaTG8HMjqsSti+HXZahwtI0wJh5
T7Qg7qY=
-----END CERTIFICATE-----
)";
  constexpr char kKey[] = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgwOF3YaQgDfBuP3MR
t8x77MbRYSgMZ4CPPQyAAtSqZMChRANCAAS1XBMacXqq2Q7zYsI/6cvSo4WWTx2V
/upj5irt1iUVtfKhvokLDSOBckIwnVq2ZMHQ/w/k0t56gRSvLVBk5mka
-----END PRIVATE KEY-----
)";
  KubeConfig config;
  config.server = "https://127.0.0.1:6443";
  config.ca_pem = kCert;
  config.client_cert_pem = kCert;
  config.client_key_pem = kKey;
  auto good = KubeClient::Create(config);
  ASSERT_TRUE(good.ok()) << good.status().ToString();

  config.ca_pem = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n";
  auto bad_ca = KubeClient::Create(config);
  EXPECT_FALSE(bad_ca.ok());

  config.ca_pem = kCert;
  config.client_key_pem = "not a key";
  auto bad_key = KubeClient::Create(config);
  EXPECT_FALSE(bad_key.ok());

  config.server = "ftp://127.0.0.1";
  EXPECT_FALSE(KubeClient::Create(config).ok());
}

TEST_F(KubeClientTest, UpdateWithRetrySucceedsAfterInjectedConflicts) {
  CreateTopic("orders");
  const std::string path = std::string(kTopicPath) + "/orders";
  server_->FailNextWrites(path, 2, 409);
  int calls = 0;
  auto written = admin_->UpdateWithRetry(PartitionedTopics(), "default", "orders", [&](Json& t) {
    ++calls;
    t["spec"]["partitions"] = Json::number(16);
    return true;
  });
  ASSERT_TRUE(written.ok()) << written.error().ToString();
  EXPECT_EQ(Int(written.value(), "spec.partitions"), 16);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(server_->CountRequests("PUT", path), 3);
  EXPECT_EQ(server_->CountRequests("PUT", path, 409), 2);
  EXPECT_EQ(server_->CountRequests("GET", path), 3);
}

TEST_F(KubeClientTest, UpdateWithRetryRereadsAfterAConcurrentWrite) {
  CreateTopic("orders");
  int calls = 0;
  std::vector<std::string> seen_team;
  auto written = admin_->UpdateWithRetry(PartitionedTopics(), "default", "orders", [&](Json& t) {
    ++calls;
    seen_team.push_back(Str(t, "metadata.labels.team"));
    if (calls == 1) {
      // Another writer gets in between our read and our write.
      EXPECT_TRUE(admin_
                      ->MergePatch(PartitionedTopics(), "default", "orders",
                                   J(R"({"metadata":{"labels":{"team":"payments"}}})"))
                      .ok());
    }
    t["spec"]["partitions"] = Json::number(12);
    return true;
  });
  ASSERT_TRUE(written.ok()) << written.error().ToString();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(seen_team, (std::vector<std::string>{"", "payments"}));
  EXPECT_EQ(Str(written.value(), "metadata.labels.team"), "payments");  // not overwritten
  EXPECT_EQ(Int(written.value(), "spec.partitions"), 12);
}

TEST_F(KubeClientTest, UpdateWithRetryKnowsWhenToStop) {
  CreateTopic("orders");
  const std::string path = std::string(kTopicPath) + "/orders";
  auto limited = NewClient(kAdmin, KubeClientOptions{.conflict_retries = 2});
  auto bump = [](Json& t) {
    t["spec"]["partitions"] = Json::number(5);
    return true;
  };

  server_->FailNextWrites(path, 10, 409);
  auto exhausted = limited->UpdateWithRetry(PartitionedTopics(), "default", "orders", bump);
  ASSERT_FALSE(exhausted.ok());
  EXPECT_TRUE(exhausted.error().IsConflict());
  EXPECT_EQ(server_->CountRequests("PUT", path), 3);

  server_->FailNextWrites(path, 1, 500);
  auto failed = limited->UpdateWithRetry(PartitionedTopics(), "default", "orders", bump);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, 500);
  EXPECT_EQ(server_->CountRequests("PUT", path), 4);  // not retried

  server_->FailNextWrites(path, 0, 0);
  auto declined = limited->UpdateWithRetry(PartitionedTopics(), "default", "orders",
                                           [](Json&) { return false; });
  ASSERT_TRUE(declined.ok());
  EXPECT_EQ(Int(declined.value(), "spec.partitions"), 4);  // the object read
  EXPECT_EQ(server_->CountRequests("PUT", path), 4);

  auto absent = limited->UpdateWithRetry(PartitionedTopics(), "default", "nope", bump);
  EXPECT_TRUE(absent.error().IsNotFound());
}

TEST_F(KubeClientTest, DeleteWithFinalizersKeepsTheObject) {
  CreateTopic("orders", R"(,"finalizers":["shoal.dev/cleanup"])");
  auto deleting = admin_->Delete(PartitionedTopics(), "default", "orders");
  ASSERT_TRUE(deleting.ok()) << deleting.error().ToString();
  EXPECT_EQ(Str(deleting.value(), "kind"), "PartitionedTopic");
  EXPECT_FALSE(Str(deleting.value(), "metadata.deletionTimestamp").empty());
  EXPECT_EQ(Generation(deleting.value()), 2);

  // The operator finalizes: removing the last finalizer (with the RV) deletes the object.
  Json patch = J(R"({"metadata":{"finalizers":[]}})");
  patch["metadata"]["resourceVersion"] = Json::string(ResourceVersion(deleting.value()));
  ASSERT_TRUE(admin_->MergePatch(PartitionedTopics(), "default", "orders", patch).ok());
  EXPECT_TRUE(admin_->Get(PartitionedTopics(), "default", "orders").error().IsNotFound());
  EXPECT_TRUE(admin_->Delete(PartitionedTopics(), "default", "orders").error().IsNotFound());
}

TEST_F(KubeClientTest, WatchDeliversChangesInOrderAndBookmarks) {
  auto list = admin_->List(PartitionedTopics(), "default");
  ASSERT_TRUE(list.ok());
  WatchOptions options;
  options.resource_version = Str(list.value(), "metadata.resourceVersion");
  WatchRunner watch(*admin_, PartitionedTopics(), "default", options);
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));

  CreateTopic("orders");
  ASSERT_TRUE(
      admin_
          ->MergePatch(PartitionedTopics(), "default", "orders", J(R"({"spec":{"partitions":8}})"))
          .ok());
  ASSERT_TRUE(admin_->Delete(PartitionedTopics(), "default", "orders").ok());
  server_->SendBookmark();
  ASSERT_TRUE(watch.WaitForEvents(4, 5s));

  const auto events = watch.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].type, "ADDED");
  EXPECT_EQ(events[1].type, "MODIFIED");
  EXPECT_EQ(Int(events[1].object, "spec.partitions"), 8);
  EXPECT_EQ(events[2].type, "DELETED");
  EXPECT_EQ(Name(events[2].object), "orders");
  EXPECT_EQ(events[3].type, "BOOKMARK");
  EXPECT_EQ(ResourceVersion(events[3].object), std::to_string(server_->resource_version()));

  const auto requests = server_->Requests();
  std::string query;
  for (const auto& r : requests) {
    if (r.method == "GET" && r.query.find("watch=1") != std::string::npos) query = r.query;
  }
  EXPECT_NE(query.find("allowWatchBookmarks=true"), std::string::npos) << query;
  EXPECT_NE(query.find("timeoutSeconds=300"), std::string::npos) << query;
  EXPECT_NE(query.find("resourceVersion=" + options.resource_version), std::string::npos);

  watch.Stop();
  auto end = watch.WaitForEnd(5s);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(IsOk(*end)) << end->ToString();
}

TEST_F(KubeClientTest, WatchFromCompactedVersionIsGone) {
  CreateTopic("a");
  CreateTopic("b");
  server_->CompactHistory();
  WatchOptions options;
  options.resource_version = "1";
  WatchRunner watch(*admin_, PartitionedTopics(), "default", options);
  auto end = watch.WaitForEnd(5s);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->IsGone()) << end->ToString();
  EXPECT_EQ(end->reason, "Expired");
  EXPECT_NE(end->message.find("too old resource version"), std::string::npos);
  EXPECT_TRUE(watch.events().empty());
}

TEST_F(KubeClientTest, StopEndsAQuietWatchQuickly) {
  WatchOptions options;
  options.resource_version = std::to_string(server_->resource_version());
  options.timeout = 300s;
  WatchRunner watch(*admin_, PartitionedTopics(), "default", options);
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  const auto start = std::chrono::steady_clock::now();
  watch.Stop();
  auto end = watch.WaitForEnd(2s);
  ASSERT_TRUE(end.has_value()) << "the watch did not end within 2 s of stop";
  EXPECT_TRUE(IsOk(*end)) << end->ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST_F(KubeClientTest, WatchClosedByTheServerEndsNormally) {
  WatchOptions options;
  options.resource_version = std::to_string(server_->resource_version());
  WatchRunner watch(*admin_, PartitionedTopics(), "default", options);
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  CreateTopic("orders");
  ASSERT_TRUE(watch.WaitForEvents(1, 5s));
  server_->CloseAllWatches();
  auto end = watch.WaitForEnd(5s);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(IsOk(*end)) << end->ToString();
  EXPECT_EQ(watch.events().size(), 1u);
}

TEST_F(KubeClientTest, WatchAndListFilterByLabel) {
  ASSERT_TRUE(
      admin_->Create(Services(), "default", Service("a", R"({"app":"shoal","team":"x"})")).ok());
  ASSERT_TRUE(
      admin_->Create(Services(), "default", Service("b", R"({"app":"shoal","team":"y"})")).ok());
  ASSERT_TRUE(
      admin_->Create(Services(), "default", Service("c", R"({"app":"other","team":"x"})")).ok());
  auto list =
      admin_->List(Services(), "default", ListOptions{.label_selector = "app=shoal,team=x"});
  ASSERT_TRUE(list.ok()) << list.error().ToString();
  ASSERT_EQ(At(list.value(), "items").as_array().size(), 1u);
  EXPECT_EQ(Name(At(list.value(), "items").as_array().at(0)), "a");
  const auto requests = server_->Requests();
  EXPECT_EQ(requests.back().query, "labelSelector=app%3Dshoal%2Cteam%3Dx");

  WatchOptions options;
  options.resource_version = Str(list.value(), "metadata.resourceVersion");
  options.label_selector = "team=x";
  WatchRunner watch(*admin_, Services(), "default", options);
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  ASSERT_TRUE(admin_->Create(Services(), "default", Service("d", R"({"team":"y"})")).ok());
  ASSERT_TRUE(admin_->Create(Services(), "default", Service("e", R"({"team":"x"})")).ok());
  ASSERT_TRUE(watch.WaitForEvents(1, 5s));
  const auto events = watch.events();
  ASSERT_EQ(events.size(), 1u);  // "d" came first and did not match
  EXPECT_EQ(Name(events[0].object), "e");
}

class KubeClientTokenTest : public KubeClientTest {
 protected:
  void SetUp() override {
    auto a = shoal::testing::OperatorUser("token-a", shoal::testing::kOperatorRulesFile);
    auto b = shoal::testing::OperatorUser("token-b", shoal::testing::kOperatorRulesFile);
    ASSERT_TRUE(a.ok() && b.ok());
    a->name = "user-a";
    b->name = "user-b";
    extra_users_ = {*a, *b};
    KubeClientTest::SetUp();
  }
  void WriteToken(const std::string& token) {
    std::ofstream out(dir_.path() + "/token", std::ios::trunc);
    out << token << "\n";
    ASSERT_TRUE(out.good());
  }
  std::string LastUser() { return server_->Requests().back().user; }
  shoal::testing::TempDir dir_{"kube-token"};
};

TEST_F(KubeClientTokenTest, RotatedTokenFileIsReadAgain) {
  WriteToken("token-a");
  KubeConfig config;
  config.server = server_->base_url();
  config.token_file = dir_.path() + "/token";
  config.token_reload = 0s;
  auto client = KubeClient::Create(config);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  // Whatever RBAC answers (users a and b have the operator's rules), the server names the user.
  EXPECT_NE((*client)->List(Pods(), "default").error().code, 401);
  EXPECT_EQ(LastUser(), "user-a");

  WriteToken("token-b");
  EXPECT_NE((*client)->List(Pods(), "default").error().code, 401);
  EXPECT_EQ(LastUser(), "user-b");

  // With a long reload period the token read first stays in use.
  config.token_reload = 3600s;
  auto cached = KubeClient::Create(config);
  ASSERT_TRUE(cached.ok());
  WriteToken("token-a");
  EXPECT_NE((*cached)->List(Pods(), "default").error().code, 401);
  EXPECT_EQ(LastUser(), "user-b");

  config.token_file = dir_.path() + "/absent";
  EXPECT_FALSE(KubeClient::Create(config).ok());
}

}  // namespace
// The client-side rate limit: a burst goes at once, the rest at qps. Only a lower bound on the
// time is checked (the requests cannot be faster than the limit; slower is the machine's doing).
TEST_F(KubeClientTest, RequestsBeyondTheBurstWaitForTheirShareOfTheRate) {
  KubeClientOptions o;
  o.qps = 20;
  o.burst = 2;
  auto limited = NewClient(kAdmin, o);
  ASSERT_TRUE(limited);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 7; ++i) {
    auto r = limited->List(PartitionedTopics(), "default");
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  }
  // 2 at once, then 5 more at 20/s: at least 250 ms.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 240ms);
  EXPECT_EQ(server_->CountRequests("GET", "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics", 200), 7);
}

}  // namespace shoal::kubeapi
