// KubeClient: the operator's Kubernetes API client over cpprestsdk. It speaks the REST API as
// Kubernetes' API concepts describe it: objects are JSON (web::json::value), every
// error body is a `Status` decoded into an ApiError value, writes carry the resourceVersion they
// read (409 Conflict settles races), and watches are chunked streams of one event per line.
//
// Configuration (KubeConfig) comes from inside a pod (service account token, re-read because it
// rotates; CA; KUBERNETES_SERVICE_HOST/PORT) or from a kubeconfig file (clusters, token and
// client-certificate users, contexts). Plain http:// servers (the tests' fake) need no TLS.
//
// Thread-safe: one client serves every thread of the operator (cpprestsdk keeps a connection
// pool). Owned by main (or the test); outlives the informers and electors that use it.
#pragma once

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/json.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "shoal/common/status.h"

namespace shoal::kubeapi {

// --- Configuration ---------------------------------------------------------------------------

struct KubeConfig {
  std::string server = "";  // "https://10.96.0.1:443", "http://127.0.0.1:40123"
  // Bearer token: a fixed one, or a file re-read every token_reload (in-cluster).
  std::string token = "";
  std::string token_file = "";
  std::chrono::seconds token_reload{60};
  // The server's CA, PEM (from ca.crt or certificate-authority[-data]); empty: system roots.
  std::string ca_pem = "";
  // Client certificate and key, PEM (client-certificate[-data], client-key[-data]).
  std::string client_cert_pem = "";
  std::string client_key_pem = "";
  bool insecure_skip_tls_verify = false;
  // The default namespace (in-cluster: the service account's; kubeconfig: the context's or
  // "default").
  std::string ns = "default";
};

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

// Inside a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (an IPv6 host goes in
// brackets), token, ca.crt and namespace from `sa_dir`. Errors name what is missing.
Result<KubeConfig> InClusterConfig(const std::string& sa_dir = kServiceAccountDir);
// A kubeconfig file: the named context or current-context; users with token, tokenFile or
// client certificate and key (files or -data); exec plugins are refused with a clear message.
Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");
// What the operator uses: `kubeconfig` if given; else in-cluster when KUBERNETES_SERVICE_HOST is
// set; else $KUBECONFIG, else ~/.kube/config.
Result<KubeConfig> ResolveConfig(const std::string& kubeconfig, const std::string& context);

// --- Resources and errors --------------------------------------------------------------------

// A resource type: where its objects live.
struct ResourceKind {
  std::string group = "";    // "" for the core group (/api/v1)
  std::string version = "";  // "v1"
  std::string plural = "";   // "statefulsets"
  std::string kind = "";     // "StatefulSet"
  bool namespaced = true;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  // "/apis/apps/v1/namespaces/NS/statefulsets"; ns "" lists across namespaces.
  std::string CollectionPath(const std::string& ns) const;
  // CollectionPath(ns) + "/NAME" [+ "/status" | "/scale"].
  std::string ObjectPath(const std::string& ns, const std::string& name,
                         const std::string& subresource = "") const;
};

// The kinds the operator uses.
const ResourceKind& PartitionedTopics();  // shoal.dev/v1alpha1
const ResourceKind& StatefulSets();       // apps/v1
const ResourceKind& Services();           // v1
const ResourceKind& PodDisruptionBudgets();  // policy/v1
const ResourceKind& Secrets();            // v1
const ResourceKind& Pods();               // v1
const ResourceKind& Nodes();              // v1, cluster-scoped
const ResourceKind& Leases();             // coordination.k8s.io/v1
const ResourceKind& Events();             // events.k8s.io/v1
const ResourceKind& PodMetrics();         // metrics.k8s.io/v1beta1

// An API error decoded from the `Status` body (code, reason, message), or a transport failure
// (code 0, reason "Transport"), or an undecodable answer (the HTTP code, reason "Unknown").
struct ApiError {
  int code = 0;
  std::string reason = "";
  std::string message = "";

  bool IsNotFound() const { return code == 404; }
  bool IsConflict() const { return code == 409 && reason == "Conflict"; }
  bool IsAlreadyExists() const { return code == 409 && reason == "AlreadyExists"; }
  bool IsGone() const { return code == 410; }  // Expired / Gone: relist
  bool IsForbidden() const { return code == 403; }
  bool IsInvalid() const { return code == 422; }
  // 0 (transport), 429, 500, 503, 504: worth retrying later.
  bool IsRetryable() const;
  std::string ToString() const;  // "409 Conflict: Operation cannot be fulfilled on ..."
  Status ToStatus() const;       // for code paths that speak shoal::Status
};

// A value or an ApiError.
template <typename T>
class ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  ApiResult(ApiError error) : v_(std::move(error)) {}  // NOLINT: implicit by design
  bool ok() const { return std::holds_alternative<T>(v_); }
  const ApiError& error() const {
    static const ApiError kNone;
    return ok() ? kNone : std::get<ApiError>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, ApiError> v_;
};

using Json = web::json::value;

struct ListOptions {
  std::string label_selector = "";  // "app.kubernetes.io/instance=orders"
  std::string field_selector = "";  // "metadata.name=orders"
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  Json object;
};

struct WatchOptions {
  std::string resource_version = "";  // from the list; "" or "0": synthetic ADDED first
  std::string label_selector = "";
  std::string field_selector = "";
  bool bookmarks = true;
  // Asked of the server (timeoutSeconds); the stream ends then and the caller watches again.
  std::chrono::seconds timeout{300};
};

struct KubeClientOptions {
  std::chrono::seconds request_timeout{30};
  int conflict_retries = 5;  // UpdateWithRetry: attempts after the first 409
  std::string user_agent = "shoal-operator/0.1";
  // Client-side rate limit of requests (not of open watches), a token bucket: qps tokens per
  // second up to `burst`; a request waits for a token. qps 0: unlimited.
  double qps = 0;
  int burst = 100;
};

class KubeClient {
 public:
  static Result<std::unique_ptr<KubeClient>> Create(KubeConfig config,
                                                    KubeClientOptions options = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  const KubeConfig& config() const;

  // GET one object (or its "status" / "scale" subresource).
  ApiResult<Json> Get(const ResourceKind& kind, const std::string& ns, const std::string& name,
                      const std::string& subresource = "");
  // GET the collection: {"kind":"<Kind>List","metadata":{"resourceVersion":..},"items":[..]};
  // ns "" lists across namespaces.
  ApiResult<Json> List(const ResourceKind& kind, const std::string& ns,
                       const ListOptions& options = {});
  // POST: the created object (201).
  ApiResult<Json> Create(const ResourceKind& kind, const std::string& ns, const Json& object);
  // PUT: `object` must carry metadata.resourceVersion (409 Conflict when stale).
  ApiResult<Json> Update(const ResourceKind& kind, const std::string& ns, const std::string& name,
                         const Json& object, const std::string& subresource = "");
  // PATCH application/merge-patch+json (an RV in the patch is a precondition).
  ApiResult<Json> MergePatch(const ResourceKind& kind, const std::string& ns,
                             const std::string& name, const Json& patch,
                             const std::string& subresource = "");
  // Read-modify-write: GET, `mutate` the object (return false to write nothing), PUT; a 409
  // Conflict reads again and retries (options.conflict_retries times). The object written, or
  // the one read when mutate declined.
  ApiResult<Json> UpdateWithRetry(const ResourceKind& kind, const std::string& ns,
                                  const std::string& name, const std::function<bool(Json&)>& mutate,
                                  const std::string& subresource = "");
  // DELETE: the object still there with deletionTimestamp set (it has finalizers), or the
  // Success Status once it is gone. NotFound when it did not exist. With `precondition_uid`,
  // only that incarnation of the object (DeleteOptions.preconditions.uid): Conflict when the
  // name now holds another.
  ApiResult<Json> Delete(const ResourceKind& kind, const std::string& ns, const std::string& name,
                         const std::string& precondition_uid = "");

  // One watch request: calls `on_event` for every event as it arrives, until the server ends
  // the stream (timeout, restart) or `stop` becomes true (checked at least every second).
  // Returns ok (an empty ApiError: code 0 and reason "") when the stream ended normally; the
  // ApiError of an ERROR event (410 Expired: relist) or of a failed request otherwise.
  ApiError Watch(const ResourceKind& kind, const std::string& ns, const WatchOptions& options,
                 const std::function<void(const WatchEvent&)>& on_event,
                 const std::atomic<bool>& stop);

 private:
  class Impl;
  explicit KubeClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Small accessors of object JSON, for the reconciler and tests. Missing fields read as "" / 0.
std::string Name(const Json& object);
std::string Namespace(const Json& object);
std::string ResourceVersion(const Json& object);
std::string Uid(const Json& object);
int64_t Generation(const Json& object);
// The value at a dotted path ("status.observedGeneration"), or null.
Json At(const Json& object, const std::string& dotted);

// Unix milliseconds as the API writes times, UTC: fraction_digits 0 for metav1.Time
// ("2006-01-02T15:04:05Z"), 6 for MicroTime ("...05.000000Z"), 3 for milliseconds.
std::string FormatTime(int64_t unix_ms, int fraction_digits);
// The inverse (fractions beyond milliseconds dropped); 0 when `text` is not such a time.
int64_t ParseTime(const std::string& text);

}  // namespace shoal::kubeapi
