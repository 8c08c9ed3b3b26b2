// FakeApiServer: a Kubernetes API server for tests, over real HTTP on 127.0.0.1, that keeps the
// rules of the real API server for every resource type it is told about, so that
// the operator's Kubernetes client cannot tell it from a real one:
//   - resourceVersion from one global counter; 409 Conflict on a stale one; no-op writes are not
//     persisted; PUT of a missing object is 404; custom resources need an RV on PUT (422);
//   - metadata.generation, the status and scale subresources, finalizers and deletion;
//   - PATCH as merge patch or JSON patch (strategic merge patch: 415 on custom resources, merge
//     patch on built-ins); an RV in a patch is a precondition;
//   - list (`<Kind>List`) and watch (chunked, one event per line, bookmarks, timeoutSeconds, a
//     bounded history with 410 Expired for too-old RVs), label and field selectors;
//   - bearer-token authentication and RBAC from PolicyRule lists (403 Forbidden), with the
//     OwnerReferencesPermissionEnforcement admission rule (blockOwnerDeletion on a reference
//     needs `update` on the owner's `finalizers`);
//   - ServiceAccount tokens from the TokenRequest API (POST .../serviceaccounts/NAME/token;
//     404 for a missing account), authenticated as system:serviceaccount:NS:NAME with its
//     groups and authorized by the STORED ClusterRoles, Roles and their bindings (aggregated
//     ClusterRoles included), as the RBAC authorizer does;
//   - pods/binding (the scheduler's assignment; 409 once a pod has a node) and stored CRDs
//     marked NamesAccepted and Established (the apiextensions controllers' part);
//   - every error as a `Status` body with reason, code and details.
// Test hooks close watches, send bookmarks, forget history and inject failures.
//
// Lifecycle: Start() listens and serves until the object is destroyed (the destructor ends every
// open watch, then stops listening). Thread-safe: requests run on cpprestsdk's pool, the hooks
// from any thread; one mutex orders all state, so a watch sees writes in RV order. Owned by the
// test that started it. Not copyable.
//
// The store holds JSON (cpprestsdk's web::json::value). Custom resources whose CRD is loaded
// (FakeApiServerOptions::crd_files, crd_yaml) are defaulted, pruned and validated against the
// CRD's structural schema on create, update, patch and /status writes, as apiextensions-apiserver
// does (openapi_schema.h): 422 Invalid with the real field errors; unknown fields dropped, or 400
// with ?fieldValidation=Strict, or a Warning header by default. CEL rules
// (x-kubernetes-validations) are NOT evaluated: there is no CEL evaluator here. Built-in kinds
// are pruned and validated the same way against their OpenAPI schemas
// (FakeApiServerOptions::builtin_schemas_file); ?dryRun=All admits without storing. Nothing is
// garbage-collected (no kube-controller-manager).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/clock.h"
#include "shoal/common/status.h"
#include "support/fake_kube/rbac.h"
#include "support/fake_kube/table.h"

namespace shoal::testing {

// A CRD's scale subresource: where the replicas and the selector live in the object. Paths are
// dotted (".spec.replicas"). label_selector_path may name a string (a custom resource's
// `.status.selector`) or a LabelSelector object (a StatefulSet's `.spec.selector`), which the
// Scale shows as `a=b,c=d`; empty leaves status.selector out.
struct ScaleSubresource {
  std::string spec_replicas_path = ".spec.replicas";
  std::string status_replicas_path = ".status.replicas";
  std::string label_selector_path;
};

// One resource type the server serves, as discovery would describe it.
struct ResourceType {
  std::string group = "";    // "" for the core group (served under /api/v1)
  std::string version = "";  // "v1", "v1alpha1"
  std::string plural = "";   // "partitionedtopics": the path segment and the RBAC resource
  std::string kind = "";     // "PartitionedTopic"
  bool namespaced = true;
  // What discovery lists beside the plural (kubectl resolves `ptopic` and `shoal` with them).
  std::string singular = "";                 // "partitionedtopic"; empty: the lowercased kind
  std::vector<std::string> short_names = {};  // {"ptopic"}
  std::vector<std::string> categories = {};   // {"shoal"}; built-ins of `all` have {"all"}
  // The columns of server-side printing (a CRD's additionalPrinterColumns); empty: Name, Age.
  std::vector<PrinterColumn> printer_columns = {};
  // A custom resource (CRD): PUT without an RV is 422 and strategic merge patch 415.
  bool custom = false;
  bool status_subresource = false;
  std::optional<ScaleSubresource> scale = std::nullopt;
  // Keeps metadata.generation (custom resources, workloads, pods; not secrets, leases, events).
  bool tracks_generation = false;
  // get and list only (metrics.k8s.io): tests fill it with FakeApiServer::Seed.
  bool read_only = false;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  // "partitionedtopics.shoal.dev", or "services" in the core group.
  std::string qualified() const { return group.empty() ? plural : plural + "." + group; }
};

// shoal.dev/v1alpha1 partitionedtopics (status and scale subresources; selector at
// .status.selector), as crds/shoal.dev_partitionedtopics.yaml declares it (a test checks that
// they agree). A loaded CRD replaces it (FakeApiServerOptions::crd_files).
ResourceType PartitionedTopicType();
// What the operator uses: partitionedtopics, apps/v1 statefulsets (status, scale), v1 services,
// secrets, pods (status), events, coordination.k8s.io/v1 leases, events.k8s.io/v1 events and
// metrics.k8s.io/v1beta1 pods (read-only).
std::vector<ResourceType> DefaultResourceTypes();

// The operator's identity in tests: its ServiceAccount's user name, as the real API server
// spells it, and the rules file the Helm chart renders into its ClusterRole.
inline constexpr const char* kOperatorUser = "system:serviceaccount:shoal-system:shoal-operator";
inline constexpr const char* kOperatorRulesFile = "deploy/rbac/operator-rules.yaml";
// The PartitionedTopic CRD, relative to the source tree.
inline constexpr const char* kPartitionedTopicCrdFile = "crds/shoal.dev_partitionedtopics.yaml";
inline constexpr const char* kBuiltinSchemasFile = "tests/support/fake_kube/schemas/builtin.json";

// A user whose requests RBAC checks against `rules`.
struct FakeApiUser {
  std::string token;
  std::string name;
  std::vector<PolicyRule> rules;
};

struct FakeApiServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: a free port
  // Authentication is on when admin_token or users is set: a request without a known bearer
  // token gets 401. The admin token bypasses RBAC (tests' own setup); users are checked.
  std::string admin_token;
  std::vector<FakeApiUser> users;
  std::vector<ResourceType> types = DefaultResourceTypes();
  // How many events the watch history keeps; a watch from an RV older than its oldest gets
  // 410 Expired (a real server keeps about 5 minutes).
  size_t watch_history = 1000;
  // Wall time of creationTimestamp and deletionTimestamp (default: the system clock). Watch
  // timeouts run on the steady clock.
  const Clock* clock = nullptr;
  // Seeds uids and generateName suffixes.
  uint64_t seed = 1;
  // CustomResourceDefinitions (apiextensions.k8s.io/v1 YAML) to serve with their structural
  // schema: files (a relative path is taken from the root of the source tree, e.g.
  // kPartitionedTopicCrdFile) and texts. Each CRD's storage version replaces the type of the same
  // group and plural in `types`, or is added. Empty (the default): no schema, nothing validated.
  std::vector<std::string> crd_files;
  std::vector<std::string> crd_yaml;
  // The built-in kinds' schemas (kBuiltinSchemasFile, generated from the Kubernetes OpenAPI by
  // schemas/generate.py; relative: from the source tree): objects of a built-in kind it names
  // are pruned of unknown fields (a Warning header, or 400 with ?fieldValidation=Strict, as the
  // real server's decoder does) and validated (types, required fields) like custom resources,
  // with 422 Invalid and the field (the real server answers a wrong JSON type with 400 and a
  // decoding error, and checks much more of a built-in kind in Go: not emulated). "": nothing.
  std::string builtin_schemas_file = kBuiltinSchemasFile;
  // A certificate chain and its key (PEM files): when both are set the same API is served over
  // HTTPS too, on a port of its own (secure_url()), as kube-apiserver's secure port. kubectl
  // and Helm send credentials only over TLS (client-go clientcmd reads a user's auth info
  // only "if we are secure"); the tests' own clients and the kubelet keep the plain port.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// The schemas of a built-in schemas file (FakeApiServerOptions::builtin_schemas_file) by
// "apiVersion Kind" ("apps/v1 StatefulSet"), each expanded into one OpenAPI v3 schema.
Result<std::map<std::string, web::json::value>> LoadBuiltinSchemas(std::string path);

// One answered request, for tests that check what a client did (retries, verbs).
struct FakeApiRequest {
  std::string method;
  std::string path;   // without the query
  std::string query;  // raw, without '?'
  std::string user;   // "" when authentication is off or failed; "admin" for the admin token
  int code = 0;
};

class FakeApiServer {
 public:
  static Result<std::unique_ptr<FakeApiServer>> Start(FakeApiServerOptions options);
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // "http://127.0.0.1:PORT".
  std::string base_url() const;
  // "https://127.0.0.1:PORT" of the TLS port, "" without FakeApiServerOptions::tls_cert_file.
  std::string secure_url() const;
  uint16_t port() const;

  // --- Test hooks -------------------------------------------------------------------------

  // Ends every open watch stream (as a real server does at its timeout); clients re-watch.
  void CloseAllWatches();
  // Sends a BOOKMARK with the current RV to every watch that asked for bookmarks.
  void SendBookmark();
  // Forgets the watch history: a watch from any RV older than the current one gets 410. With
  // `including_current`, a watch from the current RV gets 410 too, as for a client that was
  // away while the history moved past it: whatever RV a client holds now is too old, so its
  // next watch must relist (a deterministic 410 for tests).
  void CompactHistory(bool including_current = false);
  // The next `count` writes (POST, PUT, PATCH, DELETE; only `method`'s when it is given) to
  // exactly `path` (no query) fail with `code` (409 Conflict, 500 InternalError, 429, 503, ...)
  // after authentication and RBAC, and change nothing. Reads are never failed.
  void FailNextWrites(const std::string& path, int count, int code,
                      const std::string& method = "");
  // Stores an object as given under `collection_path` (".../namespaces/NS/PLURAL"), bypassing
  // authentication, RBAC, read-only types and the create rules except that it sets name,
  // namespace, uid, creationTimestamp and a new RV: how tests fill metrics.k8s.io or act as
  // a controller. Replaces an existing object of that name (MODIFIED).
  Status Seed(const std::string& collection_path, const std::string& object_json);
  // Removes the object at ".../PLURAL/NAME" (DELETED), bypassing authentication, RBAC,
  // read-only types and finalizers: how a test's metrics-server forgets a pod that is gone.
  // NotFound when there is no such object.
  Status Unseed(const std::string& object_path);
  // The stored object at ".../PLURAL/NAME" as JSON, or nullopt.
  std::optional<std::string> Object(const std::string& path) const;
  // The current global resourceVersion.
  uint64_t resource_version() const;
  // Watch streams open now.
  size_t open_watches() const;
  // Waits until at least `n` watch streams are open; false at the deadline.
  bool WaitForWatches(size_t n, std::chrono::milliseconds timeout) const;
  // Every request answered so far, in order (a watch once it started streaming).
  std::vector<FakeApiRequest> Requests() const;
  // How many requests with this method and path (no query) were answered with `code` (any
  // code when 0).
  int CountRequests(const std::string& method, const std::string& path, int code = 0) const;

 private:
  class Impl;
  explicit FakeApiServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// The operator's user (kOperatorUser) with `token` and the rules read from `rules_path`; a
// relative path is taken from the root of the source tree (kOperatorRulesFile).
Result<FakeApiUser> OperatorUser(const std::string& token, const std::string& rules_path);

}  // namespace shoal::testing
