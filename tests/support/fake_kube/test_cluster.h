// TestCluster: a whole test cluster for shoal-operator in one object: the fake API server with
// the operator's user (token and RBAC rules), the test kubelet running the real binaries for the
// pods, a kubeconfig file that points at the server as the operator's user, and the operator
// processes started against it (each with its log file and HTTP port). The admin requests and
// the small JSON helpers that tests of a PartitionedTopic need are here too, together with the
// test topic ("orders" in "default"), whose consumers are real `shoal consume` processes.
//
// The binaries come in as options: each test gets their paths from its CMake compile
// definitions (SHOAL_OPERATOR_BIN, ...), which this library cannot know.
//
// Lifecycle: Start() brings up the server and the kubelet; StartOperator() adds operators; the
// destructor stops the operators (SIGTERM, then SIGKILL), then the kubelet (its processes), then
// the server. Files stay in options.work_dir, which the test owns (a TempDir). Not thread-safe:
// one test thread drives it (the server and the kubelet have threads of their own). Owned by the
// test. Not copyable.
#pragma once

#include <cpprest/json.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/status.h"
#include "shoal/control/process.h"
#include "shoal/harness/workload.h"
#include "support/fake_kube/fake_api_server.h"
#include "support/fake_kube/rbac.h"
#include "support/fake_kube/test_kubelet.h"
#include "support/http_test_client.h"

namespace shoal::testing {

// Tokens and paths of the test cluster and of its test topic.
inline constexpr char kClusterAdminToken[] = "admin-token";
inline constexpr char kClusterOperatorToken[] = "operator-token";
inline constexpr char kTestNamespace[] = "default";
inline constexpr char kTestTopicName[] = "orders";
inline constexpr char kTopicsPath[] =
    "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics";
inline constexpr char kTopicPath[] =
    "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics/orders";
inline constexpr char kLeasePath[] =
    "/apis/coordination.k8s.io/v1/namespaces/default/leases/shoal-operator";

struct TestClusterOptions {
  // Where the kubeconfig, the operators' logs and the kubelet's node directory (node/) go. Must
  // exist.
  std::string work_dir;
  // The binaries: the operator, and the images the kubelet runs ("shoal-sidecar", "shoal").
  std::string operator_binary;
  std::string sidecar_binary;
  std::string shoal_binary;
  // The operator user's RBAC rules; nullopt: deploy/rbac/operator-rules.yaml (kOperatorRulesFile).
  std::optional<std::vector<PolicyRule>> operator_rules;
  // Pods get ip_prefix.2, .3, ...; tests pass RandomLoopbackPrefix() (support/loopback.h).
  std::string ip_prefix;
  // The kubelet's readiness probe period and metrics-server interval.
  std::chrono::milliseconds probe_period{200};
  std::chrono::milliseconds metrics_interval{1000};
  // The CRD the API server validates, defaults and prunes PartitionedTopics with (relative: from
  // the source tree); "" serves them without a schema.
  std::string crd_file = kPartitionedTopicCrdFile;
  // Serve the API over TLS too (a self-signed certificate in work_dir/tls/), for real kubectl and
  // Helm, which send credentials only over TLS: secure_url() and ca_file().
  bool serve_tls = false;
  // Pods run in-cluster (needs serve_tls): the kubelet gives them the TLS address as the
  // kubernetes Service, the CA and their ServiceAccount's token (TestKubeletOptions), and runs
  // "shoal-operator" as an image, so the operator can run from the Helm chart's Deployment,
  // authorized by the RBAC objects the chart created.
  bool in_cluster = false;
  // The namespaces the kubelet runs pods of and StartOperator's operators watch (the first
  // holds the test topic).
  std::vector<std::string> namespaces = {kTestNamespace};
  // More images for the kubelet (a container's command[0] -> host binary), e.g. "wget".
  std::map<std::string, std::string> extra_images;
  // Paths inside the images -> host directories (TestKubeletOptions::image_paths).
  std::map<std::string, std::string> image_paths;
  // TestKubeletOptions::keep_ended_empty_dirs.
  bool keep_ended_empty_dirs = false;
  // More CRDs served from the start (relative: from the source tree), as a cluster that has
  // them installed: e.g. prometheus-operator's for the chart's monitors and rules.
  std::vector<std::string> extra_crd_files;
};

class TestCluster {
 public:
  // Starts the API server and the kubelet and writes the kubeconfig.
  static Result<std::unique_ptr<TestCluster>> Start(TestClusterOptions options);
  // Stops every operator, then the kubelet, then the API server.
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  FakeApiServer& api() { return *api_; }
  TestKubelet& kubelet() { return *kubelet_; }
  // A client of the API server with no credentials of its own; Admin() adds the admin token.
  HttpTestClient& http() { return *admin_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  // With TestClusterOptions::serve_tls: the TLS address and the certificate that signs it.
  std::string secure_url() const { return api_->secure_url(); }
  std::string ca_file() const { return options_.work_dir + "/tls/ca.crt"; }

  // Starts a shoal-operator with identity `id` (leader election with a 3 s lease, 500 ms loop and
  // resync, debug logs) on 127.0.0.1 and a free HTTP port (/metrics, /healthz, /readyz), plus
  // `extra` arguments. Its log is work_dir/operator-<id>.log (appended).
  Status StartOperator(const std::string& id, const std::vector<std::string>& extra = {});
  // The process of an operator started before (default-constructed when unknown).
  control::ChildProcess& operator_process(const std::string& id) { return operators_[id].process; }
  // The HTTP port of an operator started before (0 when unknown).
  uint16_t operator_http_port(const std::string& id) const;
  // The last 6000 bytes of an operator's log.
  std::string OperatorLog(const std::string& id) const;
  // Stops every operator (SIGTERM, up to 5 s, then SIGKILL) and forgets them.
  void StopOperators();

  // The stored object at `path`, parsed, or nullopt.
  std::optional<web::json::value> Get(const std::string& path) const;
  // A request with the admin token (RBAC does not apply); a null body sends none.
  HttpResponse Admin(const std::string& method, const std::string& path,
                     const web::json::value& body,
                     const std::string& content_type = "application/json");
  // Creates a topic (201 expected) / merge-patches the test topic (200 expected).
  Status CreateTopic(const web::json::value& topic);
  Status PatchTopic(const std::string& merge_patch_json);

  // Waits for the test topic's status.observedGeneration to equal its metadata.generation.
  bool WaitCaughtUp(std::chrono::milliseconds timeout) const;
  // Waits for the test topic's Ready condition to be True.
  bool WaitReady(std::chrono::milliseconds timeout) const;
  // spec.holderIdentity of the operators' Lease ("" when there is none).
  std::string LeaseHolder() const;
  // Requests of the operator's user answered 403 Forbidden so far.
  int Forbidden() const;

 private:
  explicit TestCluster(TestClusterOptions options);

  struct Operator {
    control::ChildProcess process;
    uint16_t http_port = 0;
  };

  const TestClusterOptions options_;
  std::unique_ptr<FakeApiServer> api_;
  std::unique_ptr<HttpTestClient> admin_;
  std::unique_ptr<TestKubelet> kubelet_;
  std::string kubeconfig_;
  std::map<std::string, Operator> operators_;
};

// The test topic "orders" (2 initial partitions, up to `max_partitions`; 1..4 pods; scale-up at
// once, scale-down after 300 s): its consumer container is the real `shoal consume` (group
// "app"), recording what it sees in the hostPath directory `seen_dir` (kept when pods go) for
// the verifier.
web::json::value TestTopicJson(const std::string& seen_dir, int64_t max_partitions = 32);

// The keyed load the cluster tests put on the test topic through one pod's sidecar (it
// forwards): 500 events/s over 2,000 keys from 4 producers in batches of 25, ten times that
// between the fractions surge_from and surge_until of duration_s.
harness::LoadOptions SurgeLoad(const std::string& pod_ip, int duration_s, double surge_from,
                               double surge_until);

// The status of condition `type` of a topic ("" when absent); its reason and message if asked.
std::string Condition(const web::json::value& topic, const std::string& type,
                      std::string* reason = nullptr, std::string* message = nullptr);

// Polls `pred` every 50 ms until it holds (true) or `timeout` passes (false). For conditions on
// other processes (the API, files, HTTP endpoints), which offer nothing to block on.
bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

}  // namespace shoal::testing
