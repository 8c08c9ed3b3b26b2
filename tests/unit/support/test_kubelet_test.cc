// TestKubelet against FakeApiServer: StatefulSets become real processes (the built shoal-sidecar,
// and /bin/sh for the generic parts) on loopback pod addresses, with the semantics a cluster
// gives them: pods and their status, readiness probes, scale up and down by ordinal, volume
// claims and their retention, secret volumes, $(VAR) expansion, restarts, preStop and the order
// of termination, garbage collection, PodMetrics. Every wait is on a condition with a deadline.
#include "support/fake_kube/test_kubelet.h"

// clang-format off
#include <utility>  // before cpprestsdk's headers (boost::asio needs it)
// clang-format on
#include <cpprest/asyncrt_utils.h>
#include <cpprest/json.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "shoal/control/process.h"
#include "support/fake_kube/fake_api_server.h"
#include "support/http_test_client.h"
#include "support/loopback.h"
#include "support/temp_dir.h"

namespace shoal::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using web::json::value;

constexpr char kAdminToken[] = "admin-token";
constexpr char kPods[] = "/api/v1/namespaces/default/pods";
constexpr char kSets[] = "/apis/apps/v1/namespaces/default/statefulsets";
constexpr char kSecrets[] = "/api/v1/namespaces/default/secrets";
constexpr char kPodMetrics[] = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods";
constexpr char kMergePatch[] = "application/merge-patch+json";
constexpr auto kDeadline = seconds(30);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

value Json(const std::string& text) {
  std::error_code ec;
  value v = value::parse(text, ec);
  return ec ? value::null() : v;
}

// The value at a dotted path ("status.podIP"), or null.
value At(const value& v, const std::string& dotted) {
  value cur = v;
  std::stringstream in(dotted);
  std::string seg;
  while (std::getline(in, seg, '.')) {
    if (!cur.is_object() || !cur.has_field(seg)) return value::null();
    cur = cur.at(seg);
  }
  return cur;
}

std::string S(const value& v, const std::string& dotted) {
  const value x = At(v, dotted);
  return x.is_string() ? x.as_string() : "";
}

std::string Base64(const std::string& s) {
  return utility::conversions::to_base64(std::vector<unsigned char>(s.begin(), s.end()));
}

// The environment of a running process, from /proc/<pid>/environ.
std::map<std::string, std::string> ProcessEnv(pid_t pid) {
  std::map<std::string, std::string> out;
  std::stringstream in(ReadFile("/proc/" + std::to_string(pid) + "/environ"));
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

// Whether `pid` runs `program` (its comm) with its environment in place. A container's
// `sh -c "...; exec sleep"` reads an empty /proc/PID/environ while exec builds the new
// image, which names itself before it sets up its stack, so wait for this before ProcessEnv.
bool Runs(pid_t pid, const std::string& program) {
  return ReadFile("/proc/" + std::to_string(pid) + "/comm") == program + "\n" &&
         !ProcessEnv(pid).empty();
}

// The pod's shoal-sidecar container as Helm would render it: the real sidecar on the pod's
// address, data on its volume claim, the admin token from a secret volume, /readyz on the
// metrics port as the readiness probe (the sidecar answers 200 there once it listens, also
// while --wait-for-map holds no partitions).
std::string SidecarStatefulSet(const std::string& name, int replicas) {
  std::string s = R"J({"metadata":{"name":"NAME"},"spec":{"replicas":REPLICAS,
    "serviceName":"NAME","podManagementPolicy":"Parallel",
    "selector":{"matchLabels":{"app":"NAME"}},
    "persistentVolumeClaimRetentionPolicy":{"whenScaled":"Delete","whenDeleted":"Delete"},
    "volumeClaimTemplates":[{"metadata":{"name":"data"},
      "spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}],
    "template":{"metadata":{"labels":{"app":"NAME"}},"spec":{
      "terminationGracePeriodSeconds":10,
      "volumes":[{"name":"admin-token","secret":{"secretName":"NAME-admin"}}],
      "containers":[{"name":"shoal-sidecar","image":"shoal/sidecar:test",
        "command":["shoal-sidecar","--topic","orders","--pod-name","$(POD_NAME)","--wait-for-map",
          "--data-dir","/var/lib/shoal/data","--bind","$(POD_IP)","--port","8080",
          "--admin-port","8081","--metrics-port","9090",
          "--admin-token-file","/etc/shoal/admin/token","--fsync","interval"],
        "env":[{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},
               {"name":"POD_IP","valueFrom":{"fieldRef":{"fieldPath":"status.podIP"}}}],
        "ports":[{"name":"data","containerPort":8080},{"name":"metrics","containerPort":9090}],
        "volumeMounts":[{"name":"data","mountPath":"/var/lib/shoal"},
                        {"name":"admin-token","mountPath":"/etc/shoal/admin","readOnly":true}],
        "readinessProbe":{"httpGet":{"path":"/readyz","port":"metrics"},"periodSeconds":1}}]}}}})J";
  for (size_t at; (at = s.find("NAME")) != std::string::npos;) s.replace(at, 4, name);
  s.replace(s.find("REPLICAS"), 8, std::to_string(replicas));
  return s;
}

class TestKubeletTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeApiServerOptions o;
    o.admin_token = kAdminToken;
    auto server = FakeApiServer::Start(std::move(o));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    admin_ = std::make_unique<HttpTestClient>(server_->base_url(), seconds(10));
    prefix_ = RandomLoopbackPrefix();
    kubelet_ = std::make_unique<TestKubelet>(KubeletOptions());
    ASSERT_TRUE(kubelet_->Start().ok());
  }

  TestKubeletOptions KubeletOptions() {
    TestKubeletOptions k;
    k.api = server_.get();
    k.admin_token = kAdminToken;
    k.work_dir = dir_.path() + "/node";
    k.ip_prefix = prefix_;
    k.images = {{"shoal-sidecar", SHOAL_SIDECAR_BIN}, {"shoal", SHOAL_CLI_BIN}, {"sh", "/bin/sh"}};
    k.poll_interval = milliseconds(50);
    k.metrics_interval = milliseconds(200);
    k.probe_period = milliseconds(50);
    k.default_grace = seconds(5);
    return k;
  }

  void TearDown() override {
    // On a failure, what the pods said.
    if (HasFailure()) {
      std::error_code ec;
      for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.path(), ec)) {
        if (e.path().extension() == ".log") {
          std::string text = ReadFile(e.path());
          if (text.size() > 3000) text = text.substr(text.size() - 3000);
          std::cerr << "---- " << e.path().string() << "\n" << text << "\n";
        }
      }
    }
    kubelet_.reset();
  }

  HttpResponse Admin(const std::string& method, const std::string& path,
                     const std::string& body = "", const std::string& content_type = "") {
    HttpRequestOptions o;
    o.headers["Authorization"] = std::string("Bearer ") + kAdminToken;
    if (!content_type.empty()) o.content_type = content_type;
    return admin_->Send(method, path, body, o);
  }

  value Object(const std::string& path) {
    auto o = server_->Object(path);
    return o ? Json(*o) : value::null();
  }

  bool ApiPodReady(const std::string& name) {
    const value pod = Object(std::string(kPods) + "/" + name);
    const value conds = At(pod, "status.conditions");
    if (!conds.is_array()) return false;
    for (const auto& c : conds.as_array()) {
      if (S(c, "type") == "Ready") return S(c, "status") == "True";
    }
    return false;
  }

  // Pods that the kubelet runs and the API shows Ready.
  bool AllReady(const std::vector<std::string>& names) {
    for (const auto& n : names) {
      auto p = kubelet_->Pod(n);
      if (!p || !p->ready || !ApiPodReady(n)) return false;
    }
    return true;
  }

  void CreateSecret(const std::string& name, const std::string& key, const std::string& data) {
    HttpResponse r = Admin("POST", kSecrets,
                           R"({"metadata":{"name":")" + name + R"("},"data":{")" + key + R"(":")" +
                               Base64(data) + R"("}})");
    ASSERT_EQ(r.status, 201) << r.Describe();
  }

  void Scale(const std::string& sts, int replicas) {
    HttpResponse r =
        Admin("PATCH", std::string(kSets) + "/" + sts + "/scale",
              R"({"spec":{"replicas":)" + std::to_string(replicas) + "}}", kMergePatch);
    ASSERT_EQ(r.status, 200) << r.Describe();
  }

  TempDir dir_{"test-kubelet"};
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<HttpTestClient> admin_;
  std::string prefix_;
  std::unique_ptr<TestKubelet> kubelet_;
};

TEST_F(TestKubeletTest, RunsAStatefulSetOfRealSidecars) {
  CreateSecret("t-admin", "token", "s3cret\n");
  HttpResponse created = Admin("POST", kSets, SidecarStatefulSet("t", 2));
  ASSERT_EQ(created.status, 201) << created.Describe();

  // Pods t-0 and t-1, Ready, on distinct addresses, as the API shows them.
  ASSERT_TRUE(kubelet_->WaitFor([&] { return AllReady({"t-0", "t-1"}); }, kDeadline));
  const auto p0 = *kubelet_->Pod("t-0");
  const auto p1 = *kubelet_->Pod("t-1");
  EXPECT_NE(p0.ip, p1.ip);
  EXPECT_EQ(p0.ip.rfind(prefix_ + ".", 0), 0u) << p0.ip;
  const value pod0 = Object(std::string(kPods) + "/t-0");
  EXPECT_EQ(S(pod0, "status.phase"), "Running");
  EXPECT_EQ(S(pod0, "status.podIP"), p0.ip);
  EXPECT_EQ(S(At(pod0, "status.podIPs").as_array().at(0), "ip"), p0.ip);
  EXPECT_EQ(S(pod0, "spec.nodeName"), "test-node");
  EXPECT_EQ(S(pod0, "metadata.labels.app"), "t");
  EXPECT_EQ(At(pod0, "metadata.labels").at("statefulset.kubernetes.io/pod-name").as_string(),
            "t-0");
  EXPECT_EQ(At(pod0, "metadata.labels").at("apps.kubernetes.io/pod-index").as_string(), "0");
  const value ref = At(pod0, "metadata.ownerReferences").as_array().at(0);
  EXPECT_EQ(S(ref, "kind"), "StatefulSet");
  EXPECT_EQ(S(ref, "uid"), S(Json(created.body), "metadata.uid"));
  EXPECT_TRUE(At(ref, "controller").as_bool());
  const value cs0 = At(pod0, "status.containerStatuses").as_array().at(0);
  EXPECT_EQ(S(cs0, "name"), "shoal-sidecar");
  EXPECT_TRUE(At(cs0, "ready").as_bool());
  EXPECT_EQ(At(cs0, "restartCount").as_integer(), 0);
  EXPECT_FALSE(S(cs0, "state.running.startedAt").empty());

  // The real sidecar answers on the pod's address, with the admin token of the secret volume.
  HttpTestClient metrics("http://" + p0.ip + ":9090", seconds(5));
  EXPECT_EQ(metrics.Get("/readyz").status, 200);
  HttpTestClient admin_plane("http://" + p1.ip + ":8081", seconds(5));
  EXPECT_EQ(admin_plane.Get("/v1/admin/map").status, 401);
  HttpRequestOptions bearer;
  bearer.headers["Authorization"] = "Bearer s3cret";
  EXPECT_NE(admin_plane.Get("/v1/admin/map", bearer).status, 401);
  EXPECT_EQ(ReadFile(kubelet_->HostPath("t-0", "admin-token") + "/token"), "s3cret\n");

  // $(VAR) expansion and the emulated mounts, as the process sees them.
  const pid_t pid0 = p0.container("shoal-sidecar")->pid;
  const auto argv = control::ProcessCmdline(pid0);
  auto arg_after = [&](const std::string& flag) {
    auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? std::string() : *(it + 1);
  };
  EXPECT_EQ(argv.at(0), SHOAL_SIDECAR_BIN);
  EXPECT_EQ(arg_after("--pod-name"), "t-0");
  EXPECT_EQ(arg_after("--bind"), p0.ip);
  EXPECT_EQ(arg_after("--data-dir"), kubelet_->ClaimPath("data-t-0") + "/data");
  EXPECT_EQ(kubelet_->HostPath("t-0", "data"), kubelet_->ClaimPath("data-t-0"));
  EXPECT_EQ(arg_after("--admin-token-file"), kubelet_->HostPath("t-0", "admin-token") + "/token");
  EXPECT_EQ(ProcessEnv(pid0)["POD_IP"], p0.ip);

  // The StatefulSet's status.
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        const value sts = Object(std::string(kSets) + "/t");
        return At(sts, "status.readyReplicas") == value::number(2) &&
               At(sts, "status.replicas") == value::number(2) &&
               At(sts, "status.updatedReplicas") == value::number(2) &&
               At(sts, "status.observedGeneration") == value::number(1);
      },
      kDeadline))
      << Object(std::string(kSets) + "/t").serialize();

  // A Secret that changes is synced into the volume.
  value secret = Json(Admin("GET", std::string(kSecrets) + "/t-admin").body);
  secret["data"]["token"] = value::string(Base64("rotated"));
  ASSERT_EQ(Admin("PUT", std::string(kSecrets) + "/t-admin", secret.serialize()).status, 200);
  EXPECT_TRUE(kubelet_->WaitFor(
      [&] { return ReadFile(kubelet_->HostPath("t-0", "admin-token") + "/token") == "rotated"; },
      kDeadline));

  // 2 -> 3: t-2 comes; 3 -> 1: the highest ordinals go, with their processes and claims.
  Scale("t", 3);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return AllReady({"t-0", "t-1", "t-2"}); }, kDeadline));
  const auto p2 = *kubelet_->Pod("t-2");
  EXPECT_NE(p2.ip, p0.ip);
  EXPECT_NE(p2.ip, p1.ip);
  const pid_t pid1 = p1.container("shoal-sidecar")->pid;
  const pid_t pid2 = p2.container("shoal-sidecar")->pid;
  ASSERT_TRUE(std::filesystem::exists(kubelet_->ClaimPath("data-t-2")));
  Scale("t", 1);
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        return !kubelet_->Pod("t-1") && !kubelet_->Pod("t-2") &&
               !server_->Object(std::string(kPods) + "/t-1") &&
               !server_->Object(std::string(kPods) + "/t-2");
      },
      kDeadline));
  EXPECT_FALSE(control::ProcessAlive(pid1));
  EXPECT_FALSE(control::ProcessAlive(pid2));
  EXPECT_FALSE(std::filesystem::exists(kubelet_->ClaimPath("data-t-1")));
  EXPECT_FALSE(std::filesystem::exists(kubelet_->ClaimPath("data-t-2")));
  EXPECT_TRUE(std::filesystem::exists(kubelet_->ClaimPath("data-t-0")));
  ASSERT_TRUE(kubelet_->Pod("t-0").has_value());
  EXPECT_EQ(kubelet_->Pod("t-0")->container("shoal-sidecar")->pid, pid0) << "t-0 stays as it is";
  EXPECT_TRUE(kubelet_->WaitFor(
      [&] {
        const value sts = Object(std::string(kSets) + "/t");
        return At(sts, "status.replicas") == value::number(1) &&
               At(sts, "status.readyReplicas") == value::number(1);
      },
      kDeadline));

  // A killed sidecar is started again: restartCount 1, Ready again, same address and data.
  ASSERT_TRUE(kubelet_->KillContainer("t-0", "shoal-sidecar", SIGKILL).ok());
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        auto p = kubelet_->Pod("t-0");
        if (!p || !p->ready || p->container("shoal-sidecar")->restarts != 1) return false;
        const value cs =
            At(Object(std::string(kPods) + "/t-0"), "status.containerStatuses").as_array().at(0);
        return At(cs, "restartCount") == value::number(1) && At(cs, "ready").as_bool();
      },
      kDeadline));
  const auto again = *kubelet_->Pod("t-0");
  EXPECT_NE(again.container("shoal-sidecar")->pid, pid0);
  EXPECT_EQ(again.ip, p0.ip);
  EXPECT_FALSE(control::ProcessAlive(pid0));
  const value restarted = Object(std::string(kPods) + "/t-0");
  EXPECT_EQ(At(restarted, "status.containerStatuses")
                .as_array()
                .at(0)
                .at("lastState")
                .at("terminated")
                .at("exitCode")
                .as_integer(),
            128 + SIGKILL);
  EXPECT_EQ(HttpTestClient("http://" + p0.ip + ":9090", seconds(5)).Get("/readyz").status, 200);

  // metrics-server: PodMetrics of the running pod.
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] { return server_->Object(std::string(kPodMetrics) + "/t-0").has_value(); }, kDeadline));
  const value m = Object(std::string(kPodMetrics) + "/t-0");
  EXPECT_EQ(S(m, "kind"), "PodMetrics");
  EXPECT_EQ(S(m, "window"), "200ms");
  EXPECT_FALSE(S(m, "timestamp").empty());
  EXPECT_EQ(S(m, "metadata.labels.app"), "t");
  const value usage = At(m, "containers").as_array().at(0);
  EXPECT_EQ(S(usage, "name"), "shoal-sidecar");
  const std::string cpu = S(usage, "usage.cpu"), memory = S(usage, "usage.memory");
  ASSERT_GE(cpu.size(), 2u);
  EXPECT_EQ(cpu.back(), 'n');
  ASSERT_GE(memory.size(), 3u);
  EXPECT_EQ(memory.substr(memory.size() - 2), "Ki");
  EXPECT_GT(std::stoll(memory), 0);

  // The StatefulSet goes: its pods, processes, claims (whenDeleted: Delete) and metrics too.
  const pid_t last = again.container("shoal-sidecar")->pid;
  ASSERT_EQ(Admin("DELETE", std::string(kSets) + "/t").status, 200);
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        return kubelet_->Pods().empty() && !server_->Object(std::string(kPods) + "/t-0") &&
               !server_->Object(std::string(kPodMetrics) + "/t-0");
      },
      kDeadline));
  EXPECT_FALSE(control::ProcessAlive(last));
  EXPECT_FALSE(std::filesystem::exists(kubelet_->ClaimPath("data-t-0")));
}

TEST_F(TestKubeletTest, ExpandsVariablesRewritesMountsAndWaitsOnUnknownImages) {
  CreateSecret("creds", "password", "hunter2");
  const std::string host_dir = dir_.path() + "/host";
  std::filesystem::create_directories(host_dir);
  const std::string sts = R"({"metadata":{"name":"env"},"spec":{"replicas":1,
    "selector":{"matchLabels":{"app":"env"}},
    "volumeClaimTemplates":[{"metadata":{"name":"state"}}],
    "template":{"metadata":{"labels":{"app":"env"}},"spec":{
      "volumes":[{"name":"scratch","emptyDir":{}},
                 {"name":"host","hostPath":{"path":")" +
                          host_dir + R"J("}}],
      "containers":[
        {"name":"main","command":["sh","-c","sleep 3600 & wait","$(POD_NAME)","$(NOPE)",
           "$$(POD_NAME)","/scratch/x","/scratchy","$(GREETING)","/var/state/db"],
         "env":[{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},
                {"name":"POD_NS","valueFrom":{"fieldRef":{"fieldPath":"metadata.namespace"}}},
                {"name":"NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}},
                {"name":"GREETING","value":"hello-$(POD_NAME)"},
                {"name":"PASSWORD","valueFrom":{"secretKeyRef":{"name":"creds","key":"password"}}},
                {"name":"OUT","value":"/host/out"}],
         "volumeMounts":[{"name":"scratch","mountPath":"/scratch"},
                         {"name":"host","mountPath":"/host"},
                         {"name":"state","mountPath":"/var/state"}]},
        {"name":"ghost","command":["no-such-image","--serve"]}]}}}})J";
  ASSERT_EQ(Admin("POST", kSets, sts).status, 201);
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        auto p = kubelet_->Pod("env-0");
        return p && p->container("main")->pid > 0 &&
               At(Object(std::string(kPods) + "/env-0"), "status.containerStatuses").is_array();
      },
      kDeadline));
  const auto pod = *kubelet_->Pod("env-0");
  const pid_t pid = pod.container("main")->pid;
  const std::string scratch = kubelet_->HostPath("env-0", "scratch");
  EXPECT_FALSE(scratch.empty());
  EXPECT_EQ(kubelet_->HostPath("env-0", "host"), host_dir);
  EXPECT_EQ(control::ProcessCmdline(pid),
            (std::vector<std::string>{"/bin/sh", "-c", "sleep 3600 & wait", "env-0", "$(NOPE)",
                                      "$(POD_NAME)", scratch + "/x", "/scratchy", "hello-env-0",
                                      kubelet_->ClaimPath("state-env-0") + "/db"}));
  auto env = ProcessEnv(pid);
  EXPECT_EQ(env["POD_NAME"], "env-0");
  EXPECT_EQ(env["POD_NS"], "default");
  EXPECT_EQ(env["NODE"], "test-node");
  EXPECT_EQ(env["GREETING"], "hello-env-0");
  EXPECT_EQ(env["PASSWORD"], "hunter2");
  EXPECT_EQ(env["OUT"], host_dir + "/out");
  EXPECT_EQ(env["HOSTNAME"], "env-0");

  // The container whose image is not in the map waits with ErrImagePull; the pod is never
  // Ready, however many syncs pass.
  const uint64_t syncs = kubelet_->syncs();
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->syncs() >= syncs + 10; }, kDeadline));
  const auto still = *kubelet_->Pod("env-0");
  EXPECT_FALSE(still.ready);
  EXPECT_TRUE(still.container("main")->ready);
  EXPECT_EQ(still.container("ghost")->pid, -1);
  EXPECT_EQ(still.container("ghost")->waiting_reason, "ErrImagePull");
  const value api = Object(std::string(kPods) + "/env-0");
  EXPECT_FALSE(ApiPodReady("env-0"));
  EXPECT_EQ(S(api, "status.phase"), "Pending");
  bool saw_ghost = false;
  const value statuses = At(api, "status.containerStatuses");
  ASSERT_TRUE(statuses.is_array()) << api.serialize();
  for (const auto& cs : statuses.as_array()) {
    if (S(cs, "name") != "ghost") continue;
    saw_ghost = true;
    EXPECT_EQ(S(cs, "state.waiting.reason"), "ErrImagePull");
    EXPECT_FALSE(At(cs, "ready").as_bool());
  }
  EXPECT_TRUE(saw_ghost);
  const value sts_obj = Object(std::string(kSets) + "/env");
  EXPECT_EQ(At(sts_obj, "status.readyReplicas"), value::number(0)) << sts_obj.serialize();

  // Retain (the default): the claim outlives the StatefulSet.
  ASSERT_EQ(Admin("DELETE", std::string(kSets) + "/env").status, 200);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->Pods().empty(); }, kDeadline));
  EXPECT_FALSE(control::ProcessAlive(pid));
  EXPECT_TRUE(std::filesystem::exists(kubelet_->ClaimPath("state-env-0")));
  EXPECT_FALSE(std::filesystem::exists(scratch)) << "an emptyDir ends with its pod";
}

TEST_F(TestKubeletTest, StopsAPodWithPreStopThenTheSidecarLastAndRecreatesIt) {
  const std::string host_dir = dir_.path() + "/host";
  std::filesystem::create_directories(host_dir);
  // Each container notes its preStop hook and its SIGTERM in one file; the sidecar must hear of
  // both only after the app has gone. The hook reads POD_NAME from its environment: a kubelet
  // does not expand $(VAR) in hook commands.
  auto container = [](const std::string& name) {
    return R"({"name":")" + name + R"(","command":["sh","-c",
        "trap 'echo )" +
           name + R"(-term >> /host/order; exit 0' TERM; sleep 3600 & wait"],
      "lifecycle":{"preStop":{"exec":{"command":["sh","-c","echo )" +
           name +
           R"J(-prestop-${POD_NAME} >> /host/order"]}}},
      "env":[{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
      "volumeMounts":[{"name":"host","mountPath":"/host"}]})J";
  };
  const std::string sts = R"({"metadata":{"name":"ord"},"spec":{"replicas":1,
    "selector":{"matchLabels":{"app":"ord"}},
    "template":{"metadata":{"labels":{"app":"ord"}},"spec":{
      "terminationGracePeriodSeconds":20,
      "volumes":[{"name":"host","hostPath":{"path":")" +
                          host_dir + R"("}}],
      "containers":[)" + container("shoal-sidecar") +
                          "," + container("app") + "]}}}}";
  ASSERT_EQ(Admin("POST", kSets, sts).status, 201);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return AllReady({"ord-0"}); }, kDeadline));
  const auto before = *kubelet_->Pod("ord-0");
  const std::string uid = S(Object(std::string(kPods) + "/ord-0"), "metadata.uid");

  // Someone deletes the Pod object: the kubelet stops it, the controller creates it again
  // with a new uid and the same address.
  ASSERT_EQ(Admin("DELETE", std::string(kPods) + "/ord-0").status, 200);
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        auto p = kubelet_->Pod("ord-0");
        return p && p->uid != uid && p->ready && ApiPodReady("ord-0");
      },
      kDeadline));
  EXPECT_EQ(ReadFile(host_dir + "/order"),
            "app-prestop-ord-0\napp-term\nshoal-sidecar-prestop-ord-0\nshoal-sidecar-term\n");
  for (const auto& c : before.containers) EXPECT_FALSE(control::ProcessAlive(c.pid)) << c.name;
  EXPECT_EQ(kubelet_->Pod("ord-0")->ip, before.ip);
  EXPECT_NE(S(Object(std::string(kPods) + "/ord-0"), "metadata.uid"), uid);
}

TEST_F(TestKubeletTest, OrderedReadyWaitsForEachOrdinalAndRemovesTheHighestFirst) {
  // No podManagementPolicy: OrderedReady. Pod 0 waits in ContainerCreating for its Secret, so
  // pod 1 is not created until the Secret comes and pod 0 is Ready.
  const std::string sts = R"J({"metadata":{"name":"seq"},"spec":{"replicas":2,
    "selector":{"matchLabels":{"app":"seq"}},
    "template":{"metadata":{"labels":{"app":"seq"}},"spec":{
      "terminationGracePeriodSeconds":5,
      "volumes":[{"name":"conf","secret":{"secretName":"late"}}],
      "containers":[{"name":"main","command":["sh","-c","sleep 3600 & wait"],
        "volumeMounts":[{"name":"conf","mountPath":"/etc/conf"}]}]}}}})J";
  ASSERT_EQ(Admin("POST", kSets, sts).status, 201);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->Pod("seq-0").has_value(); }, kDeadline));
  const uint64_t syncs = kubelet_->syncs();
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->syncs() >= syncs + 10; }, kDeadline));
  const auto waiting = *kubelet_->Pod("seq-0");
  EXPECT_EQ(waiting.container("main")->pid, -1);
  EXPECT_EQ(waiting.container("main")->waiting_reason, "ContainerCreating");
  EXPECT_FALSE(server_->Object(std::string(kPods) + "/seq-1").has_value());

  CreateSecret("late", "app.conf", "x=1\n");
  ASSERT_TRUE(kubelet_->WaitFor([&] { return AllReady({"seq-0", "seq-1"}); }, kDeadline));
  EXPECT_EQ(ReadFile(kubelet_->HostPath("seq-1", "conf") + "/app.conf"), "x=1\n");

  // 2 -> 0: seq-1 is gone before seq-0 is deleted.
  Scale("seq", 0);
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] { return kubelet_->Pods().empty() && !server_->Object(std::string(kPods) + "/seq-0"); },
      kDeadline));
  std::vector<std::string> deleted;
  for (const auto& r : server_->Requests()) {
    if (r.method == "DELETE" && r.path.rfind(std::string(kPods) + "/seq-", 0) == 0) {
      deleted.push_back(r.path.substr(std::string(kPods).size() + 1));
    }
  }
  EXPECT_EQ(deleted, (std::vector<std::string>{"seq-1", "seq-0"}));
}

}  // namespace
}  // namespace shoal::testing

namespace shoal::testing {
namespace {

constexpr char kDeployments[] = "/apis/apps/v1/namespaces/default/deployments";
constexpr char kReplicaSets[] = "/apis/apps/v1/namespaces/default/replicasets";

// The items of a list at `path`, through the API.
std::vector<value> Items(HttpTestClient& http, const std::string& path) {
  HttpRequestOptions o;
  o.headers["Authorization"] = std::string("Bearer ") + kAdminToken;
  HttpResponse r = http.Send("GET", path, "", o);
  std::vector<value> out;
  const value list = Json(r.body);
  if (list.is_object() && list.has_field("items")) {
    for (const auto& i : list.at("items").as_array()) out.push_back(i);
  }
  return out;
}

std::string Condition(const value& obj, const std::string& type) {
  const value conds = At(obj, "status.conditions");
  if (!conds.is_array()) return "";
  for (const auto& c : conds.as_array()) {
    if (S(c, "type") == type) return S(c, "status");
  }
  return "";
}

TEST_F(TestKubeletTest, ADeploymentRollsANewTemplateThroughReplicaSetsAndItsPodsGoWithIt) {
  const std::string deployment = R"J({"metadata":{"name":"web"},"spec":{"replicas":2,
    "selector":{"matchLabels":{"app":"web"}},
    "template":{"metadata":{"labels":{"app":"web"}},"spec":{"terminationGracePeriodSeconds":1,
      "containers":[{"name":"web","command":["sh","-c","exec sleep 600"],
                     "env":[{"name":"VERSION","value":"1"}]}]}}}})J";
  ASSERT_EQ(Admin("POST", kDeployments, deployment).status, 201);
  auto pods_of = [&](const std::string& version) {
    std::vector<std::string> names;
    for (const auto& p : kubelet_->Pods()) {
      if (p.name.rfind("web-", 0) != 0 || p.terminating || !p.ready) continue;
      const auto* c = p.container("web");
      if (c != nullptr && c->pid > 0 && ProcessEnv(c->pid)["VERSION"] == version) {
        names.push_back(p.name);
      }
    }
    return names;
  };
  ASSERT_TRUE(kubelet_->WaitFor([&] { return pods_of("1").size() == 2; }, kDeadline));
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        const value d = Object(std::string(kDeployments) + "/web");
        return At(d, "status.readyReplicas") == value::number(2) &&
               At(d, "status.updatedReplicas") == value::number(2) &&
               Condition(d, "Available") == "True";
      },
      kDeadline));
  auto sets = Items(*admin_, kReplicaSets);
  ASSERT_EQ(sets.size(), 1u);
  const std::string first_set = S(sets[0], "metadata.name");
  EXPECT_EQ(S(sets[0].at("metadata").at("ownerReferences").at(0), "kind"), "Deployment");
  for (const auto& name : pods_of("1")) {
    const value pod = Object(std::string(kPods) + "/" + name);
    EXPECT_EQ(S(pod.at("metadata").at("ownerReferences").at(0), "name"), first_set);
    EXPECT_EQ(name.rfind(first_set + "-", 0), 0u) << name;
  }

  // A new template: a second ReplicaSet's pods, then the first one at 0 and its pods gone.
  ASSERT_EQ(Admin("PATCH", std::string(kDeployments) + "/web",
                  R"({"spec":{"template":{"spec":{"containers":[{"name":"web",
                      "command":["sh","-c","exec sleep 600"],"env":[{"name":"VERSION","value":"2"}]}]}}}})",
                  kMergePatch)
                .status,
            200);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return pods_of("2").size() == 2 && pods_of("1").empty(); },
                                kDeadline));
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        int zero = 0, two = 0;
        for (const auto& rs : Items(*admin_, kReplicaSets)) {
          if (At(rs, "spec.replicas") == value::number(0)) ++zero;
          if (At(rs, "spec.replicas") == value::number(2) &&
              At(rs, "status.readyReplicas") == value::number(2)) {
            ++two;
          }
        }
        return zero == 1 && two == 1;
      },
      kDeadline));

  // The Deployment deleted: its ReplicaSets and then their pods go (the garbage collector).
  ASSERT_EQ(Admin("DELETE", std::string(kDeployments) + "/web").status, 200);
  EXPECT_TRUE(kubelet_->WaitFor(
      [&] {
        for (const auto& p : kubelet_->Pods()) {
          if (p.name.rfind("web-", 0) == 0) return false;
        }
        return Items(*admin_, kReplicaSets).empty() && Items(*admin_, kPods).empty();
      },
      kDeadline));
}

TEST_F(TestKubeletTest, APodNobodyPlacedIsScheduledAndEndsSucceededOrFailed) {
  for (const auto& [name, code] : {std::pair<std::string, int>{"ok", 0}, {"bad", 3}}) {
    ASSERT_EQ(Admin("POST", kPods,
                    R"({"metadata":{"name":")" + name + R"("},"spec":{"restartPolicy":"Never",
                        "containers":[{"name":"main","command":["sh","-c","exit )" +
                        std::to_string(code) + R"("]}]}})")
                  .status,
              201);
  }
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] {
        return S(Object(std::string(kPods) + "/ok"), "status.phase") == "Succeeded" &&
               S(Object(std::string(kPods) + "/bad"), "status.phase") == "Failed";
      },
      kDeadline));
  const value bad = Object(std::string(kPods) + "/bad");
  EXPECT_EQ(S(bad, "spec.nodeName"), "test-node");
  EXPECT_EQ(At(bad.at("status").at("containerStatuses").at(0), "state.terminated.exitCode"),
            value::number(3));
  // A second binding of a placed pod is refused, as the scheduler's race loser's is.
  HttpResponse again = Admin("POST", std::string(kPods) + "/ok/binding",
                             R"({"metadata":{"name":"ok"},"target":{"kind":"Node","name":"n2"}})");
  EXPECT_EQ(again.status, 409) << again.Describe();
  EXPECT_NE(again.body.find("already assigned to node"), std::string::npos) << again.body;
}

TEST_F(TestKubeletTest, AServiceNameBecomesAReadyEndpointAndItsTargetPort) {
  ASSERT_EQ(Admin("POST", "/api/v1/namespaces/default/services",
                  R"({"metadata":{"name":"web"},"spec":{"selector":{"app":"web"},
                      "ports":[{"name":"http","port":80,"targetPort":"http"}]}})")
                .status,
            201);
  ASSERT_EQ(Admin("POST", kPods, R"({"metadata":{"name":"web","labels":{"app":"web"}},"spec":{
                      "containers":[{"name":"web","command":["sh","-c","exec sleep 600"],
                                     "ports":[{"name":"http","containerPort":8080}]}]}})")
                .status,
            201);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return AllReady({"web"}); }, kDeadline));
  const std::string web_ip = kubelet_->Pod("web")->ip;
  ASSERT_EQ(Admin("POST", kPods, R"({"metadata":{"name":"client"},"spec":{
                      "containers":[{"name":"client","command":["sh","-c","exec sleep 600"],
                        "env":[{"name":"URL","value":"http://web.default.svc.cluster.local:80/x"},
                               {"name":"NAME","value":"web.default"}]}]}})")
                .status,
            201);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return AllReady({"client"}); }, kDeadline));
  const pid_t pid = kubelet_->Pod("client")->container("client")->pid;
  ASSERT_TRUE(kubelet_->WaitFor([&] { return Runs(pid, "sleep"); }, kDeadline));
  const auto env = ProcessEnv(pid);
  EXPECT_EQ(env.at("URL"), "http://" + web_ip + ":8080/x");
  EXPECT_EQ(env.at("NAME"), "web.default");  // not a Service's DNS name: left as written
}

TEST_F(TestKubeletTest, InClusterPodsGetTheirServiceAccountsTokenWhichStoredRbacAuthorizes) {
  kubelet_.reset();
  TestKubeletOptions k = KubeletOptions();
  k.api_service_host = "127.0.0.1";
  k.api_service_port = server_->port();
  k.api_ca_file = dir_.path() + "/ca.crt";
  {
    std::ofstream(k.api_ca_file) << "-----BEGIN CERTIFICATE-----\n";
  }
  kubelet_ = std::make_unique<TestKubelet>(std::move(k));
  ASSERT_TRUE(kubelet_->Start().ok());
  // The pod names an account that does not exist yet: it waits, then runs once it does.
  ASSERT_EQ(Admin("POST", kPods, R"({"metadata":{"name":"app"},"spec":{"serviceAccountName":"app",
                      "containers":[{"name":"app","command":["sh","-c",
                        "cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; hostname; exec sleep 600"]}]}})")
                .status,
            201);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return Object("/api/v1/namespaces/default/serviceaccounts/default")
                                                 .is_object(); },
                                kDeadline))
      << "the ServiceAccount controller's default account";
  EXPECT_FALSE(AllReady({"app"}));
  ASSERT_EQ(Admin("POST", "/api/v1/namespaces/default/serviceaccounts",
                  R"({"metadata":{"name":"app"}})")
                .status,
            201);
  ASSERT_TRUE(kubelet_->WaitFor([&] { return AllReady({"app"}); }, kDeadline));
  const std::string log = dir_.path() + "/node/pods/app/app.log";
  ASSERT_TRUE(kubelet_->WaitFor([&] { return ReadFile(log) == "default\napp\n"; }, kDeadline))
      << ReadFile(log);
  const pid_t pid = kubelet_->Pod("app")->container("app")->pid;
  ASSERT_TRUE(kubelet_->WaitFor([&] { return Runs(pid, "sleep"); }, kDeadline));
  const auto env = ProcessEnv(pid);
  EXPECT_EQ(env.at("KUBERNETES_SERVICE_HOST"), "127.0.0.1");
  EXPECT_EQ(env.at("KUBERNETES_SERVICE_PORT"), std::to_string(server_->port()));
  // Nothing of the pod's mount leaks to the host.
  EXPECT_FALSE(std::filesystem::exists("/var/run/secrets/kubernetes.io/serviceaccount/token"));

  // The token is the ServiceAccount's user, authorized only by what the stored RBAC grants.
  const std::string token = ReadFile(dir_.path() + "/node/pods/app/serviceaccount/token");
  ASSERT_FALSE(token.empty());
  HttpRequestOptions as_app;
  as_app.headers["Authorization"] = "Bearer " + token;
  HttpResponse denied = admin_->Send("GET", kSecrets, "", as_app);
  EXPECT_EQ(denied.status, 403) << denied.Describe();
  EXPECT_NE(denied.body.find("User \\\"system:serviceaccount:default:app\\\" cannot list resource "
                             "\\\"secrets\\\""),
            std::string::npos)
      << denied.body;
  // An aggregated ClusterRole, bound in the namespace by a RoleBinding to the account.
  const char* rbac = "/apis/rbac.authorization.k8s.io/v1";
  ASSERT_EQ(Admin("POST", std::string(rbac) + "/clusterroles",
                  R"({"metadata":{"name":"read-secrets","labels":{"agg":"yes"}},
                      "rules":[{"apiGroups":[""],"resources":["secrets"],"verbs":["list"]}]})")
                .status,
            201);
  ASSERT_EQ(Admin("POST", std::string(rbac) + "/clusterroles",
                  R"({"metadata":{"name":"aggregate"},
                      "aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"agg":"yes"}}]}})")
                .status,
            201);
  ASSERT_EQ(Admin("POST", std::string(rbac) + "/namespaces/default/rolebindings",
                  R"({"metadata":{"name":"app"},
                      "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"aggregate"},
                      "subjects":[{"kind":"ServiceAccount","name":"app"}]})")
                .status,
            201);
  EXPECT_EQ(admin_->Send("GET", kSecrets, "", as_app).status, 200);
  // Only there, and only that verb.
  EXPECT_EQ(admin_->Send("GET", "/api/v1/namespaces/other/secrets", "", as_app).status, 403);
  EXPECT_EQ(admin_->Send("GET", kPods, "", as_app).status, 403);
  // A token for an account that does not exist: 404.
  EXPECT_EQ(Admin("POST", "/api/v1/namespaces/default/serviceaccounts/nobody/token", "{}").status,
            404);
}

}  // namespace
}  // namespace shoal::testing
