#include "support/fake_kube/test_cluster.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "shoal/kubeapi/kube_client.h"
#include "support/fake_kube/self_signed.h"

namespace shoal::testing {

using kubeapi::At;
using web::json::value;
using namespace std::chrono_literals;

namespace {

int64_t Int(const value& v) { return v.is_number() ? v.as_number().to_int64() : -1; }
std::string Str(const value& v) { return v.is_string() ? v.as_string() : ""; }

}  // namespace

TestCluster::TestCluster(TestClusterOptions options) : options_(std::move(options)) {}

TestCluster::~TestCluster() {
  StopOperators();
  if (kubelet_) kubelet_->Stop();
  kubelet_.reset();
  admin_.reset();
  api_.reset();
}

Result<std::unique_ptr<TestCluster>> TestCluster::Start(TestClusterOptions options) {
  if (options.work_dir.empty() || options.operator_binary.empty() ||
      options.sidecar_binary.empty() || options.shoal_binary.empty() || options.ip_prefix.empty()) {
    return Status::InvalidArgument(
        "TestCluster needs work_dir, ip_prefix and the operator, sidecar and shoal binaries");
  }
  std::unique_ptr<TestCluster> c(new TestCluster(std::move(options)));
  const TestClusterOptions& o = c->options_;

  FakeApiServerOptions ao;
  ao.admin_token = kClusterAdminToken;
  auto user = OperatorUser(kClusterOperatorToken, kOperatorRulesFile);
  if (!user.ok()) return user.status();
  if (o.operator_rules) user->rules = *o.operator_rules;
  ao.users.push_back(*user);
  if (!o.crd_file.empty()) ao.crd_files.push_back(o.crd_file);
  for (const auto& f : o.extra_crd_files) ao.crd_files.push_back(f);
  if (o.in_cluster && !o.serve_tls) {
    return Status::InvalidArgument("TestCluster: in_cluster needs serve_tls");
  }
  if (o.namespaces.empty()) return Status::InvalidArgument("TestCluster: no namespaces");
  if (o.serve_tls) {
    std::error_code ec;
    std::filesystem::create_directories(o.work_dir + "/tls", ec);
    if (ec) return Status::IoError("cannot create " + o.work_dir + "/tls: " + ec.message());
    ao.tls_cert_file = c->ca_file();
    ao.tls_key_file = o.work_dir + "/tls/ca.key";
    SHOAL_RETURN_IF_ERROR(WriteSelfSignedCertificate(ao.tls_cert_file, ao.tls_key_file));
  }
  auto api = FakeApiServer::Start(ao);
  if (!api.ok()) return api.status();
  c->api_ = std::move(api).value();
  c->admin_ = std::make_unique<HttpTestClient>(c->api_->base_url());
  // The namespaces every cluster starts with, labelled with their names as the API server does
  // (kubernetes.io/metadata.name, which namespace selectors and the chart's NetworkPolicy use).
  for (const char* ns : {"default", "kube-system", "kube-public"}) {
    SHOAL_RETURN_IF_ERROR(c->api_->Seed(
        "/api/v1/namespaces", std::string(R"({"metadata":{"name":")") + ns +
                                  R"(","labels":{"kubernetes.io/metadata.name":")" + ns + R"("}}})"));
  }

  // The default user-facing ClusterRoles of the bootstrap policy (plugin/pkg/auth/authorizer/
  // rbac/bootstrappolicy: ClusterRoles "admin", "edit", "view"), which aggregate every
  // ClusterRole labelled rbac.authorization.k8s.io/aggregate-to-<name>: "true". Their own rules
  // for built-in kinds are left out: the tests bind them for custom resources.
  for (const char* role : {"admin", "edit", "view"}) {
    SHOAL_RETURN_IF_ERROR(c->api_->Seed(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        std::string(R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",)") +
            R"("metadata":{"name":")" + role +
            R"(","labels":{"kubernetes.io/bootstrapping":"rbac-defaults"}},)" +
            R"("aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{)" +
            R"("rbac.authorization.k8s.io/aggregate-to-)" + role + R"(":"true"}}]},"rules":[]})"));
  }

  TestKubeletOptions ko;
  ko.api = c->api_.get();
  ko.admin_token = kClusterAdminToken;
  ko.work_dir = o.work_dir + "/node";
  ko.ip_prefix = o.ip_prefix;
  ko.images = {{"shoal-sidecar", o.sidecar_binary}, {"shoal", o.shoal_binary}};
  for (const auto& [image, binary] : o.extra_images) ko.images[image] = binary;
  ko.image_paths = o.image_paths;
  ko.namespaces = o.namespaces;
  ko.keep_ended_empty_dirs = o.keep_ended_empty_dirs;
  if (o.in_cluster) {
    ko.images["shoal-operator"] = o.operator_binary;
    const uint16_t port = static_cast<uint16_t>(
        std::stoi(c->api_->secure_url().substr(c->api_->secure_url().rfind(':') + 1)));
    ko.api_service_host = "127.0.0.1";
    ko.api_service_port = port;
    ko.api_ca_file = c->ca_file();
  }
  ko.probe_period = o.probe_period;
  ko.metrics_interval = o.metrics_interval;
  c->kubelet_ = std::make_unique<TestKubelet>(ko);
  if (Status st = c->kubelet_->Start(); !st.ok()) return st;

  // The operator finds the API server by a kubeconfig, as outside a cluster.
  c->kubeconfig_ = o.work_dir + "/kubeconfig";
  std::ofstream out(c->kubeconfig_);
  out << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
      << "clusters:\n- name: test\n  cluster:\n    server: " << c->api_->base_url() << "\n"
      << "users:\n- name: operator\n  user:\n    token: " << kClusterOperatorToken << "\n"
      << "contexts:\n- name: test\n  context:\n    cluster: test\n"
      << "    user: operator\n    namespace: " << kTestNamespace << "\n";
  out.close();
  if (!out) return Status::IoError("cannot write " + c->kubeconfig_);
  return c;
}

Status TestCluster::StartOperator(const std::string& id, const std::vector<std::string>& extra) {
  auto port = control::FreePort();
  if (!port.ok()) return port.status();
  std::string namespaces;
  for (const auto& ns : options_.namespaces) namespaces += (namespaces.empty() ? "" : ",") + ns;
  // clang-format off
  std::vector<std::string> argv = {options_.operator_binary,
                                   "--kubeconfig", kubeconfig_,
                                   "--identity", id,
                                   "--namespaces", namespaces,
                                   "--bind", "127.0.0.1",
                                   "--http-port", std::to_string(*port),
                                   "--lease-duration-ms", "3000",
                                   "--renew-deadline-ms", "2000",
                                   "--retry-period-ms", "500",
                                   "--interval-ms", "500",
                                   "--resync-ms", "500",
                                   "--watch-timeout-s", "60",
                                   "--log-level", "debug"};
  // clang-format on
  argv.insert(argv.end(), extra.begin(), extra.end());
  // The operator dies with the test (SIGKILL when the thread that started it ends), as the
  // kubelet's containers do: a test that crashes leaves no operator behind. util-linux's setpriv
  // sets the parent-death signal and execs the operator, so the pid is the operator's.
  if (::access("/usr/bin/setpriv", X_OK) == 0) {
    argv.insert(argv.begin(), {"/usr/bin/setpriv", "--pdeathsig", "SIGKILL", "--"});
  }
  auto p = control::ChildProcess::Spawn(argv, options_.work_dir + "/operator-" + id + ".log");
  if (!p.ok()) return p.status();
  Operator& op = operators_[id];
  op.process = std::move(p).value();
  op.http_port = *port;
  return Status::Ok();
}

uint16_t TestCluster::operator_http_port(const std::string& id) const {
  const auto it = operators_.find(id);
  return it == operators_.end() ? 0 : it->second.http_port;
}

std::string TestCluster::OperatorLog(const std::string& id) const {
  std::ifstream in(options_.work_dir + "/operator-" + id + ".log");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > 6000 ? s.substr(s.size() - 6000) : s;
}

void TestCluster::StopOperators() {
  for (auto& [id, op] : operators_) op.process.Stop(5s);
  operators_.clear();
}

std::optional<value> TestCluster::Get(const std::string& path) const {
  auto text = api_->Object(path);
  if (!text) return std::nullopt;
  return value::parse(*text);
}

HttpResponse TestCluster::Admin(const std::string& method, const std::string& path,
                                const value& body, const std::string& content_type) {
  HttpRequestOptions o;
  o.headers["Authorization"] = std::string("Bearer ") + kClusterAdminToken;
  o.content_type = content_type;
  return admin_->Send(method, path, body.is_null() ? "" : body.serialize(), o);
}

Status TestCluster::CreateTopic(const value& topic) {
  const auto r = Admin("POST", kTopicsPath, topic);
  if (r.status != 201) return Status::Unavailable("creating the topic: " + r.Describe());
  return Status::Ok();
}

Status TestCluster::PatchTopic(const std::string& merge_patch_json) {
  const auto r =
      Admin("PATCH", kTopicPath, value::parse(merge_patch_json), "application/merge-patch+json");
  if (r.status != 200) return Status::Unavailable("patching the topic: " + r.Describe());
  return Status::Ok();
}

bool TestCluster::WaitCaughtUp(std::chrono::milliseconds timeout) const {
  return WaitUntil(
      [&] {
        auto t = Get(kTopicPath);
        return t && Int(At(*t, "status.observedGeneration")) == Int(At(*t, "metadata.generation"));
      },
      timeout);
}

bool TestCluster::WaitReady(std::chrono::milliseconds timeout) const {
  return WaitUntil(
      [&] {
        auto t = Get(kTopicPath);
        return t && Condition(*t, "Ready") == "True";
      },
      timeout);
}

std::string TestCluster::LeaseHolder() const {
  auto l = Get(kLeasePath);
  return l ? Str(At(*l, "spec.holderIdentity")) : "";
}

int TestCluster::Forbidden() const {
  int n = 0;
  for (const auto& r : api_->Requests()) n += (r.code == 403 && r.user == kOperatorUser) ? 1 : 0;
  return n;
}

value TestTopicJson(const std::string& seen_dir, int64_t max_partitions) {
  // clang-format off
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
  // clang-format on
  return value::parse(text);
}

std::string Condition(const value& topic, const std::string& type, std::string* reason,
                      std::string* message) {
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
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);  // polling the API and files of other processes
  }
  return true;
}

harness::LoadOptions SurgeLoad(const std::string& pod_ip, int duration_s, double surge_from,
                               double surge_until) {
  harness::LoadOptions lo;
  lo.targets = {"http://" + pod_ip + ":8080"};
  lo.rate = 500;
  lo.profile = "surge";
  lo.duration_s = duration_s;
  lo.surge_from = surge_from;
  lo.surge_until = surge_until;
  lo.keys = 2000;
  lo.producers = 4;
  lo.batch = 25;
  return lo;
}

}  // namespace shoal::testing
