#include "support/fake_kube/fake_api_server.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <boost/asio/ssl.hpp>
#include <cpprest/http_listener.h>
#include <yaml-cpp/yaml.h>
#include <cpprest/producerconsumerstream.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "shoal/control/process.h"
#include "support/fake_kube/discovery.h"
#include "support/fake_kube/json_patch.h"
#include "support/fake_kube/label_selector.h"
#include "support/fake_kube/openapi_schema.h"
#include "support/fake_kube/pod_security.h"
#include "support/fake_kube/protobuf.h"
#include "support/fake_kube/server_side_apply.h"

namespace shoal::testing {

using web::http::http_request;
using web::json::value;

// ------------------------------------------------------------------------------------------
// Resource types

ResourceType PartitionedTopicType() {
  ResourceType t{.group = "shoal.dev",
                 .version = "v1alpha1",
                 .plural = "partitionedtopics",
                 .kind = "PartitionedTopic"};
  t.singular = "partitionedtopic";
  t.short_names = {"ptopic"};
  t.categories = {"shoal"};
  t.custom = true;
  t.status_subresource = true;
  t.tracks_generation = true;
  // As in crds/shoal.dev_partitionedtopics.yaml: `kubectl scale` sets the floor of consumer pods.
  t.scale = ScaleSubresource{.spec_replicas_path = ".spec.replicas.min",
                             .status_replicas_path = ".status.replicas",
                             .label_selector_path = ".status.selector"};
  return t;
}

std::vector<ResourceType> DefaultResourceTypes() {
  std::vector<ResourceType> out{PartitionedTopicType()};
  ResourceType sts{
      .group = "apps", .version = "v1", .plural = "statefulsets", .kind = "StatefulSet"};
  sts.status_subresource = true;
  sts.tracks_generation = true;
  sts.short_names = {"sts"};
  sts.categories = {"all"};
  sts.scale = ScaleSubresource{.spec_replicas_path = ".spec.replicas",
                               .status_replicas_path = ".status.replicas",
                               .label_selector_path = ".spec.selector"};
  out.push_back(sts);
  ResourceType services{.group = "", .version = "v1", .plural = "services", .kind = "Service"};
  services.status_subresource = true;
  services.short_names = {"svc"};
  services.categories = {"all"};
  out.push_back(services);
  out.push_back({.group = "", .version = "v1", .plural = "secrets", .kind = "Secret"});
  ResourceType pods{.group = "", .version = "v1", .plural = "pods", .kind = "Pod"};
  pods.status_subresource = true;
  pods.short_names = {"po"};
  pods.categories = {"all"};
  out.push_back(pods);
  out.push_back({.group = "",
                 .version = "v1",
                 .plural = "events",
                 .kind = "Event",
                 .short_names = {"ev"}});
  out.push_back(
      {.group = "coordination.k8s.io", .version = "v1", .plural = "leases", .kind = "Lease"});
  out.push_back({.group = "events.k8s.io",
                 .version = "v1",
                 .plural = "events",
                 .kind = "Event",
                 .short_names = {"ev"}});
  // What the Helm chart renders besides (stored and served, no controller behind them except
  // TestKubelet's): the operator's Deployment, its ServiceAccount and RBAC, the dashboard's
  // ConfigMap, network policies, the CRD.
  out.push_back({.group = "",
                 .version = "v1",
                 .plural = "serviceaccounts",
                 .kind = "ServiceAccount",
                 .short_names = {"sa"}});
  out.push_back({.group = "",
                 .version = "v1",
                 .plural = "configmaps",
                 .kind = "ConfigMap",
                 .short_names = {"cm"}});
  ResourceType deployments{.group = "apps",
                           .version = "v1",
                           .plural = "deployments",
                           .kind = "Deployment",
                           .short_names = {"deploy"},
                           .categories = {"all"}};
  deployments.status_subresource = true;
  deployments.tracks_generation = true;
  deployments.scale = ScaleSubresource{.spec_replicas_path = ".spec.replicas",
                                       .status_replicas_path = ".status.replicas",
                                       .label_selector_path = ".spec.selector"};
  out.push_back(deployments);
  ResourceType replicasets{.group = "apps",
                           .version = "v1",
                           .plural = "replicasets",
                           .kind = "ReplicaSet",
                           .short_names = {"rs"},
                           .categories = {"all"}};
  replicasets.status_subresource = true;
  replicasets.tracks_generation = true;
  replicasets.scale = ScaleSubresource{.spec_replicas_path = ".spec.replicas",
                                       .status_replicas_path = ".status.replicas",
                                       .label_selector_path = ".spec.selector"};
  out.push_back(replicasets);
  for (const char* kind : {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}) {
    std::string plural = kind;
    std::transform(plural.begin(), plural.end(), plural.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    out.push_back({.group = "rbac.authorization.k8s.io",
                   .version = "v1",
                   .plural = plural + "s",
                   .kind = kind,
                   .namespaced = std::string(kind).rfind("Cluster", 0) != 0});
  }
  out.push_back({.group = "policy",
                 .version = "v1",
                 .plural = "poddisruptionbudgets",
                 .kind = "PodDisruptionBudget",
                 .short_names = {"pdb"}});
  out.push_back({.group = "networking.k8s.io",
                 .version = "v1",
                 .plural = "networkpolicies",
                 .kind = "NetworkPolicy",
                 .short_names = {"netpol"}});
  ResourceType crds{.group = "apiextensions.k8s.io",
                    .version = "v1",
                    .plural = "customresourcedefinitions",
                    .kind = "CustomResourceDefinition",
                    .namespaced = false,
                    .short_names = {"crd", "crds"}};
  crds.status_subresource = true;
  crds.tracks_generation = true;
  out.push_back(crds);
  // Cluster-scoped; the operator reads a node's topology.kubernetes.io/zone label.
  out.push_back({.group = "",
                 .version = "v1",
                 .plural = "nodes",
                 .kind = "Node",
                 .namespaced = false,
                 .short_names = {"no"}});
  // Cluster-scoped; their labels select the Pod Security level of the pods in them.
  out.push_back({.group = "",
                 .version = "v1",
                 .plural = "namespaces",
                 .kind = "Namespace",
                 .namespaced = false,
                 .short_names = {"ns"}});
  ResourceType metrics{
      .group = "metrics.k8s.io", .version = "v1beta1", .plural = "pods", .kind = "PodMetrics"};
  metrics.read_only = true;
  out.push_back(metrics);
  return out;
}

Result<FakeApiUser> OperatorUser(const std::string& token, const std::string& rules_path) {
  std::string path = rules_path;
#ifdef SHOAL_SOURCE_DIR
  if (!path.empty() && path[0] != '/') path = std::string(SHOAL_SOURCE_DIR) + "/" + path;
#endif
  auto rules = LoadPolicyRules(path);
  if (!rules.ok()) return rules.status();
  return FakeApiUser{.token = token, .name = kOperatorUser, .rules = std::move(*rules)};
}

namespace {

// ------------------------------------------------------------------------------------------
// JSON helpers

const value* Field(const value& v, const std::string& key) {
  if (!v.is_object()) return nullptr;
  auto& obj = v.as_object();
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &it->second;
}

std::string StringField(const value& v, const std::string& key) {
  const value* f = Field(v, key);
  return f != nullptr && f->is_string() ? f->as_string() : "";
}

std::string Meta(const value& obj, const std::string& key) {
  const value* m = Field(obj, "metadata");
  return m == nullptr ? "" : StringField(*m, key);
}

value& MetaObject(value& obj) {
  if (!obj.has_field("metadata") || !obj.at("metadata").is_object()) {
    obj["metadata"] = value::object();
  }
  return obj["metadata"];
}

// Sets or (when `v` is null) removes metadata.<key>.
void SetMeta(value& obj, const std::string& key, const value& v) {
  value& m = MetaObject(obj);
  if (v.is_null()) {
    if (m.has_field(key)) m.erase(key);
  } else {
    m[key] = v;
  }
}

value MetaValue(const value& obj, const std::string& key) {
  const value* m = Field(obj, "metadata");
  const value* f = m == nullptr ? nullptr : Field(*m, key);
  return f == nullptr ? value::null() : *f;
}

void SetOrErase(value& obj, const std::string& key, const value* v) {
  if (v != nullptr) {
    obj[key] = *v;
  } else if (obj.is_object() && obj.has_field(key)) {
    obj.erase(key);
  }
}

std::map<std::string, std::string> Labels(const value& obj) {
  std::map<std::string, std::string> out;
  const value* m = Field(obj, "metadata");
  const value* l = m == nullptr ? nullptr : Field(*m, "labels");
  if (l == nullptr || !l->is_object()) return out;
  for (const auto& [k, v] : l->as_object()) {
    if (v.is_string()) out[k] = v.as_string();
  }
  return out;
}

std::vector<std::string> Finalizers(const value& obj) {
  std::vector<std::string> out;
  const value f = MetaValue(obj, "finalizers");
  if (!f.is_array()) return out;
  for (const auto& v : f.as_array()) {
    if (v.is_string()) out.push_back(v.as_string());
  }
  return out;
}

std::vector<std::string> DottedPath(const std::string& path) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : path) {
    if (c == '.') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

const value* AtPath(const value& root, const std::string& dotted) {
  const value* node = &root;
  for (const auto& seg : DottedPath(dotted)) {
    node = Field(*node, seg);
    if (node == nullptr) return nullptr;
  }
  return node;
}

void SetAtPath(value& root, const std::string& dotted, const value& v) {
  value* node = &root;
  for (const auto& seg : DottedPath(dotted)) {
    if (!node->is_object()) *node = value::object();
    node = &(*node)[seg];
  }
  *node = v;
}

int64_t IntAt(const value& root, const std::string& dotted) {
  const value* v = AtPath(root, dotted);
  return v != nullptr && v->is_number() && v->as_number().is_int64() ? v->as_number().to_int64()
                                                                     : 0;
}

// A LabelSelector object as its string form ("a=b,c=d"; matchLabels only).
std::string SelectorString(const value& v) {
  if (v.is_string()) return v.as_string();
  const value* ml = Field(v, "matchLabels");
  if (ml == nullptr || !ml->is_object()) return "";
  std::map<std::string, std::string> sorted;
  for (const auto& [k, x] : ml->as_object()) sorted[k] = x.is_string() ? x.as_string() : "";
  std::string out;
  for (const auto& [k, x] : sorted) out += (out.empty() ? "" : ",") + k + "=" + x;
  return out;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ------------------------------------------------------------------------------------------
// Status bodies (k8s.io/apimachinery/pkg/api/errors)

struct Reply {
  Reply() = default;
  Reply(int c, value b, std::vector<std::string> w = {})
      : code(c), body(std::move(b)), warnings(std::move(w)) {}
  int code = 200;
  value body;
  std::vector<std::string> warnings;  // sent as `Warning: 299 - "..."` headers
};

value Details(const std::string& name, const std::string& group, const std::string& kind) {
  value d = value::object();
  if (!name.empty()) d["name"] = value::string(name);
  if (!group.empty()) d["group"] = value::string(group);
  if (!kind.empty()) d["kind"] = value::string(kind);
  return d;
}

Reply Failure(int code, const std::string& reason, const std::string& message,
              const value& details = value::null()) {
  value s = value::object();
  s["kind"] = value::string("Status");
  s["apiVersion"] = value::string("v1");
  s["metadata"] = value::object();
  s["status"] = value::string("Failure");
  s["message"] = value::string(message);
  s["reason"] = value::string(reason);
  if (!details.is_null()) s["details"] = details;
  s["code"] = value::number(code);
  return {code, s};
}

Reply NotFound(const ResourceType& t, const std::string& name) {
  return Failure(404, "NotFound", t.qualified() + " \"" + name + "\" not found",
                 Details(name, t.group, t.plural));
}

Reply NoSuchPath() {
  return Failure(404, "NotFound", "the server could not find the requested resource",
                 value::object());
}

Reply AlreadyExists(const ResourceType& t, const std::string& name) {
  return Failure(409, "AlreadyExists", t.qualified() + " \"" + name + "\" already exists",
                 Details(name, t.group, t.plural));
}

Reply Conflict(const ResourceType& t, const std::string& name, const std::string& why) {
  return Failure(409, "Conflict",
                 "Operation cannot be fulfilled on " + t.qualified() + " \"" + name + "\": " + why,
                 Details(name, t.group, t.plural));
}

constexpr const char* kModified =
    "the object has been modified; please apply your changes to the latest version and try again";

// 422 with one cause; `kind_group` is "PartitionedTopic.shoal.dev" (or the core kind alone).
Reply Invalid(const std::string& kind, const std::string& group, const std::string& name,
              const std::string& field, const std::string& cause_reason,
              const std::string& detail) {
  const std::string kind_group = group.empty() ? kind : kind + "." + group;
  value details = Details(name, group, kind);
  value cause = value::object();
  cause["reason"] = value::string(cause_reason);
  cause["message"] = value::string(detail);
  cause["field"] = value::string(field);
  details["causes"] = value::array({cause});
  return Failure(422, "Invalid",
                 kind_group + " \"" + name + "\" is invalid: " + field + ": " + detail, details);
}

// 422 for a schema's field errors (k8s.io/apimachinery errors.NewInvalid): the aggregate message
// and one cause per error.
Reply InvalidFields(const ResourceType& t, const std::string& name,
                    const std::vector<FieldError>& errors) {
  const std::string kind_group = t.group.empty() ? t.kind : t.kind + "." + t.group;
  value details = Details(name, t.group, t.kind);
  std::vector<value> causes;
  for (const auto& e : errors) {
    value cause = value::object();
    cause["reason"] = value::string(e.type);
    cause["message"] = value::string(e.body);
    cause["field"] = value::string(e.field);
    causes.push_back(cause);
  }
  details["causes"] = value::array(std::move(causes));
  return Failure(422, "Invalid",
                 kind_group + " \"" + name + "\" is invalid: " + AggregateMessage(errors),
                 details);
}

Reply BadRequest(const std::string& message) { return Failure(400, "BadRequest", message); }

Reply InternalError(const std::string& message) {
  value details = value::object();
  value cause = value::object();
  cause["message"] = value::string(message);
  details["causes"] = value::array({cause});
  return Failure(500, "InternalError", "Internal error occurred: " + message, details);
}

Reply MethodNotAllowed(const ResourceType& t, const std::string& verb) {
  return Failure(405, "MethodNotAllowed",
                 verb + " is not supported on resources of kind \"" + t.qualified() + "\"",
                 Details("", t.group, t.plural));
}

Reply UnsupportedPatch(const std::string& content_type) {
  return Failure(415, "UnsupportedMediaType",
                 "the body of the request was in an unknown format (" + content_type +
                     ") - accepted media types include: application/json-patch+json, "
                     "application/merge-patch+json, application/apply-patch+yaml");
}

// The Status a failure injected by FailNextWrites answers with.
Reply Injected(int code, const ResourceType& t, const std::string& name) {
  switch (code) {
    case 409:
      return Conflict(t, name, kModified);
    case 429: {
      value details = Details(name, t.group, t.plural);
      details["retryAfterSeconds"] = value::number(1);
      return Failure(429, "TooManyRequests", "Too many requests, please try again later.", details);
    }
    case 503:
      return Failure(503, "ServiceUnavailable",
                     "the server is currently unable to handle the "
                     "request (injected failure)");
    case 500:
      return InternalError("injected failure");
    default:
      return Failure(code, code < 500 ? "BadRequest" : "InternalError",
                     "injected failure " + std::to_string(code));
  }
}

// ------------------------------------------------------------------------------------------
// Field selectors: metadata.name and metadata.namespace with =, == and !=.

struct FieldSelector {
  struct Term {
    std::string field;
    bool equals;
    std::string v;
  };
  std::vector<Term> terms;

  static Result<FieldSelector> Parse(const std::string& text) {
    FieldSelector out;
    if (text.empty()) return out;
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      const std::string part = text.substr(start, comma - start);
      start = comma + 1;
      Term term;
      size_t pos;
      if ((pos = part.find("!=")) != std::string::npos) {
        term = {part.substr(0, pos), false, part.substr(pos + 2)};
      } else if ((pos = part.find("==")) != std::string::npos) {
        term = {part.substr(0, pos), true, part.substr(pos + 2)};
      } else if ((pos = part.find('=')) != std::string::npos) {
        term = {part.substr(0, pos), true, part.substr(pos + 1)};
      } else {
        return Status::InvalidArgument("invalid selector: '" + text + "'; can't understand '" +
                                       part + "'");
      }
      if (term.field != "metadata.name" && term.field != "metadata.namespace") {
        return Status::InvalidArgument("field label not supported: " + term.field);
      }
      out.terms.push_back(std::move(term));
    }
    return out;
  }

  bool Matches(const value& obj) const {
    for (const auto& t : terms) {
      const std::string got = Meta(obj, t.field == "metadata.name" ? "name" : "namespace");
      if ((got == t.v) != t.equals) return false;
    }
    return true;
  }
};

std::string Rfc3339(int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// The server

// The state and the request handling behind FakeApiServer. Shared with cpprestsdk's
// continuations through weak pointers, so a late continuation finds it gone instead of freed.
// The verbs, Commit and Deliver run with mu_ held: one order of writes, events and watch
// registrations, which is what makes "every change after RV x, in RV order" hold for a watch.
class FakeApiServer::Impl : public std::enable_shared_from_this<FakeApiServer::Impl> {
 public:
  Impl(FakeApiServerOptions options, std::vector<value> schemas)
      : opts_(std::move(options)),
        clock_(opts_.clock != nullptr ? opts_.clock : &SystemClock::Instance()),
        schemas_(std::move(schemas)),
        rng_(opts_.seed),
        stores_(opts_.types.size()) {}

  Status Open();
  void Shutdown();

 private:
  friend class FakeApiServer;  // its test hooks work on this state directly
  enum class EventType { kAdded, kModified, kDeleted };
  using Key = std::pair<std::string, std::string>;  // namespace, name

  struct Route {
    size_t type = 0;
    std::string ns;  // empty: cluster scope (or every namespace, for a collection)
    std::string name;
    std::string sub;  // "", "status", "scale"
  };

  // One request in flight: who sent it, what it addresses.
  struct Call {
    std::string method, path, query_raw, content_type, user_agent;
    // A server-side apply (PATCH application/apply-patch+yaml): managedFields come from Apply.
    bool apply = false;
    std::map<std::string, std::string> query;
    std::string user;
    const std::vector<PolicyRule>* rules = nullptr;  // nullptr: not subject to RBAC
    // A ServiceAccount token's user: authorized by the stored (Cluster)Roles and bindings.
    bool stored_rbac = false;
    std::vector<std::string> groups;
    Route route;
    std::string verb;
  };

  struct HistoryEvent {
    uint64_t rv;
    size_t type;
    EventType event;
    value prev;  // null for ADDED
    value object;
  };

  // An open watch stream: events go into `buf`, which cpprestsdk sends chunked as it fills.
  struct Watcher {
    size_t type = 0;
    std::string ns;
    LabelSelector labels;
    FieldSelector fields;
    bool bookmarks = false;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    concurrency::streams::producer_consumer_buffer<uint8_t> buf;
  };

  void Handle(http_request req);
  void Answer(const http_request& req, const Call& call, const Reply& reply);
  std::optional<Reply> Authenticate(const http_request& req, Call& call) const;
  std::optional<Reply> ParseRoute(Call& call) const;
  std::optional<Reply> Authorize(const Call& call) const;
  // What the stored RBAC objects grant the call's user and groups in the call's namespace
  // (mu_ held).
  std::vector<PolicyRule> StoredRules(const Call& call) const;
  // The rules of a stored ClusterRole, its aggregationRule's roles' too (mu_ held).
  void ClusterRoleRules(const std::string& name, std::vector<PolicyRule>& out) const;
  // POST .../serviceaccounts/NAME/token (authentication.k8s.io/v1 TokenRequest).
  Reply IssueToken(const Call& call, const std::string& body);
  // POST .../pods/NAME/binding (v1 Binding): the scheduler's assignment of a pod to a node.
  Reply BindPod(const Call& call, const std::string& body);
  void ServeWatch(const http_request& req, const Call& call);
  Reply Process(const Call& call, const std::string& body);

  Reply Get(const Call& call);
  Reply List(const Call& call);
  Reply Create(const Call& call, value incoming);
  // ?dryRun=All: admitted and validated, not stored.
  static bool IsDryRun(const Call& call);
  Reply Replace(const Call& call, const value& incoming);
  Reply Patch(const Call& call, const std::string& body);
  Reply Delete(const Call& call, const std::string& body);
  // The update rules shared by PUT, PATCH and the scale subresource: preconditions, system
  // metadata, status subresource, finalizers, generation, no-op detection.
  Reply UpdateObject(const Call& call, const value& current, value incoming, bool rv_required);
  // Server-side apply (server_side_apply.h): creates or updates the object at the route.
  Reply ServerSideApply(const Call& call, const std::string& body);
  // ?fieldManager, else the User-Agent's product (as the real server's prefixFromUserAgent).
  static std::string FieldManager(const Call& call);
  // The PodSecurity admission plugin for pods (pod_security.h), from the namespace's labels.
  std::optional<Reply> AdmitPodSecurity(const Call& call, const std::string& name,
                                        const value& obj, std::vector<std::string>* warnings) const;
  std::optional<Reply> CheckOwnerReferences(const Call& call, const value* current,
                                            const value& next) const;
  value ScaleOf(const ResourceType& t, const value& obj) const;
  // Writes the replicas of a Scale (PUT or patched) to the object; answers with the new Scale.
  Reply UpdateScale(const Call& call, const value& current, const value& scale);
  // The stored object, or nullptr.
  const value* Find(size_t type, const Key& key) const;
  // The CRD schema's defaulting, pruning and validation of an object about to be stored (a
  // custom resource whose CRD is loaded; nothing otherwise): 422 for invalid fields, 400 for
  // unknown ones under fieldValidation=Strict, else their warnings added to `warnings`.
  std::optional<Reply> Admit(const Call& call, const std::string& name, value& obj,
                             std::vector<std::string>* warnings) const;

  // Persists a change with a new RV and sends it to the watches. Returns the stored object.
  value Commit(size_t type, const Key& key, const value* prev, value next, EventType event);
  void Deliver(Watcher& w, const HistoryEvent& ev);
  // The apiextensions controllers' part: a stored CRD's names are accepted and it is
  // established (status.conditions, acceptedNames, storedVersions), which Helm's --wait and
  // `kubectl wait --for=condition=Established` read.
  void EstablishCrd(value& crd) const;
  void WriteLine(Watcher& w, const std::string& line);
  void CloseWatcher(uint64_t id);
  void TimerLoop();

  std::string NewUid();
  std::string Now() const { return Rfc3339(clock_->NowMs()); }
  const ResourceType& type(size_t i) const { return opts_.types[i]; }
  const ResourceType* FindType(const std::string& group, const std::string& version,
                               const std::string& plural) const;

  const FakeApiServerOptions opts_;
  const Clock* const clock_;
  const std::vector<value> schemas_;  // per type: its CRD's openAPIV3Schema, or null
  uint16_t port_ = 0;
  uint16_t secure_port_ = 0;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
  std::unique_ptr<web::http::experimental::listener::http_listener> secure_listener_;
  // The TLS listener on a free port, when tls_cert_file and tls_key_file are set.
  Status OpenSecure();
  std::thread timer_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;        // watch set changed, deadlines, shutdown
  bool stopping_ = false;                     // guarded by mu_
  std::mt19937_64 rng_;                       // guarded by mu_
  uint64_t rv_ = 0;                           // guarded by mu_: the global resourceVersion
  uint64_t compacted_rv_ = 0;                 // guarded by mu_: history starts after this RV
  std::vector<std::map<Key, value>> stores_;  // guarded by mu_: one per type
  std::deque<HistoryEvent> history_;          // guarded by mu_
  std::map<uint64_t, Watcher> watchers_;      // guarded by mu_
  uint64_t next_watcher_ = 1;                 // guarded by mu_
  struct InjectedFailure {
    int count = 0;
    int code = 0;
    std::string method;  // "" for every write method
  };
  std::map<std::string, InjectedFailure> failures_;  // guarded by mu_: path -> what fails
  std::vector<FakeApiRequest> requests_;                 // guarded by mu_
  // Replies handed to cpprestsdk and not yet sent (or failed). Shutdown waits for them: the
  // listener's close() closes every connection's socket from the closing thread, and a
  // connection still writing a reply (a watch's last chunk) starts its next socket operation on
  // an I/O thread at the same time, which crashes in asio (cpprestsdk 2.10, seen as a SIGSEGV
  // in epoll_reactor::start_op under load).
  size_t replies_in_flight_ = 0;  // guarded by mu_
  // Tokens issued by TokenRequest: token -> the ServiceAccount (namespace, name).
  std::map<std::string, Key> sa_tokens_;  // guarded by mu_

  // Counts `sent` in replies_in_flight_ until it finishes; a failed send (client gone) is fine.
  void TrackReply(pplx::task<void> sent, std::function<void()> after = {});
};

const ResourceType* FakeApiServer::Impl::FindType(const std::string& group,
                                                  const std::string& version,
                                                  const std::string& plural) const {
  for (const auto& t : opts_.types) {
    if (t.group == group && t.version == version && t.plural == plural) return &t;
  }
  return nullptr;
}

Status FakeApiServer::Impl::Open() {
  Status last = Status::Unavailable("no port tried");
  // A port that FreePort found free can be taken before the bind; try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    uint16_t port = opts_.port;
    if (port == 0) {
      auto free = control::FreePort(opts_.host);
      if (!free.ok()) return free.status();
      port = *free;
    }
    const std::string uri = "http://" + opts_.host + ":" + std::to_string(port);
    auto listener = std::make_unique<web::http::experimental::listener::http_listener>(uri);
    std::weak_ptr<Impl> weak = weak_from_this();
    listener->support([weak](http_request req) {
      if (auto self = weak.lock()) self->Handle(std::move(req));
    });
    try {
      listener->open().wait();
      listener_ = std::move(listener);
      port_ = port;
      SHOAL_RETURN_IF_ERROR(OpenSecure());
      timer_ = std::thread([this] { TimerLoop(); });
      return Status::Ok();
    } catch (const std::exception& e) {
      last = Status::Unavailable("cannot listen on " + uri + ": " + e.what());
    }
    if (opts_.port != 0) break;
  }
  return last;
}

Status FakeApiServer::Impl::OpenSecure() {
  if (opts_.tls_cert_file.empty() || opts_.tls_key_file.empty()) return Status::Ok();
  Status last = Status::Unavailable("no port tried");
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto free = control::FreePort(opts_.host);
    if (!free.ok()) return free.status();
    const std::string uri = "https://" + opts_.host + ":" + std::to_string(*free);
    web::http::experimental::listener::http_listener_config config;
    const std::string cert = opts_.tls_cert_file, key = opts_.tls_key_file;
    config.set_ssl_context_callback([cert, key](boost::asio::ssl::context& ctx) {
      ctx.set_options(boost::asio::ssl::context::default_workarounds |
                      boost::asio::ssl::context::no_sslv2 | boost::asio::ssl::context::no_sslv3 |
                      boost::asio::ssl::context::no_tlsv1 | boost::asio::ssl::context::no_tlsv1_1);
      ctx.use_certificate_chain_file(cert);
      ctx.use_private_key_file(key, boost::asio::ssl::context::pem);
    });
    auto listener =
        std::make_unique<web::http::experimental::listener::http_listener>(uri, config);
    std::weak_ptr<Impl> weak = weak_from_this();
    listener->support([weak](http_request req) {
      if (auto self = weak.lock()) self->Handle(std::move(req));
    });
    try {
      listener->open().wait();
      secure_listener_ = std::move(listener);
      secure_port_ = *free;
      return Status::Ok();
    } catch (const std::exception& e) {
      last = Status::Unavailable("cannot listen on " + uri + ": " + e.what());
    }
  }
  return last;
}

void FakeApiServer::Impl::Shutdown() {
  // The watch streams are closed outside mu_: a close waits for cpprestsdk's threads, which
  // may all be busy in continuations waiting for mu_ (replies that ended lock it to count
  // themselves out), e.g. when many clients went away at once.
  std::vector<concurrency::streams::producer_consumer_buffer<uint8_t>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, w] : watchers_) streams.push_back(w.buf);
    watchers_.clear();
  }
  for (auto& buf : streams) {
    try {
      buf.close(std::ios_base::out).wait();
    } catch (...) {
    }
  }
  cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  {
    // With their streams closed, watches send their last chunk; wait until every reply is out.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return replies_in_flight_ == 0; });
  }
  for (auto* l : {listener_.get(), secure_listener_.get()}) {
    if (l == nullptr) continue;
    try {
      l->close().wait();
    } catch (...) {
    }
  }
}

void FakeApiServer::Impl::TimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    std::optional<std::chrono::steady_clock::time_point> next;
    const auto now = std::chrono::steady_clock::now();
    std::vector<uint64_t> expired;
    for (const auto& [id, w] : watchers_) {
      if (!w.deadline) continue;
      if (*w.deadline <= now) {
        expired.push_back(id);
      } else if (!next || *w.deadline < *next) {
        next = w.deadline;
      }
    }
    for (uint64_t id : expired) CloseWatcher(id);
    if (next) {
      cv_.wait_until(lock, *next);
    } else {
      cv_.wait(lock);
    }
  }
}

std::string FakeApiServer::Impl::NewUid() {
  const uint64_t a = rng_(), b = rng_();
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

// ------------------------------------------------------------------------------------------
// Request intake: authentication, routing, RBAC, then the verb.

void FakeApiServer::Impl::Answer(const http_request& req, const Call& call, const Reply& reply) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back({call.method, call.path, call.query_raw, call.user, reply.code});
  }
  try {
    web::http::http_response resp(static_cast<web::http::status_code>(reply.code));
    resp.set_body(reply.body.serialize(), "application/json");
    for (const auto& w : reply.warnings) {
      std::string quoted;
      for (char c : w) quoted += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
      resp.headers().add("Warning", "299 - \"" + quoted + "\"");
    }
    TrackReply(req.reply(resp));
  } catch (...) {
  }
}

void FakeApiServer::Impl::TrackReply(pplx::task<void> sent, std::function<void()> after) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++replies_in_flight_;
  }
  std::weak_ptr<Impl> weak = weak_from_this();
  sent.then([weak, after = std::move(after)](pplx::task<void> t) {
    try {
      t.get();
    } catch (...) {
      // The client went away; nothing to answer.
    }
    auto self = weak.lock();
    if (!self) return;
    if (after) after();
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      --self->replies_in_flight_;
    }
    self->cv_.notify_all();
  });
}

std::optional<Reply> FakeApiServer::Impl::Authenticate(const http_request& req, Call& call) const {
  if (opts_.admin_token.empty() && opts_.users.empty()) return std::nullopt;
  auto it = req.headers().find("Authorization");
  const std::string header = it == req.headers().end() ? "" : it->second;
  const std::string prefix = "Bearer ";
  if (header.rfind(prefix, 0) == 0) {
    const std::string token = header.substr(prefix.size());
    if (!opts_.admin_token.empty() && token == opts_.admin_token) {
      call.user = "admin";
      return std::nullopt;
    }
    for (const auto& u : opts_.users) {
      if (!u.token.empty() && token == u.token) {
        call.user = u.name;
        call.rules = &u.rules;
        return std::nullopt;
      }
    }
    // A bound ServiceAccount token, as the TokenRequest API issued it: the user and groups
    // the real authenticator gives (k8s.io/apiserver pkg/authentication/serviceaccount:
    // MakeUsername, MakeGroupNames).
    std::lock_guard<std::mutex> lock(mu_);
    if (auto sa = sa_tokens_.find(token); sa != sa_tokens_.end()) {
      const auto& [ns, name] = sa->second;
      call.user = "system:serviceaccount:" + ns + ":" + name;
      call.groups = {"system:serviceaccounts", "system:serviceaccounts:" + ns,
                     "system:authenticated"};
      call.stored_rbac = true;
      return std::nullopt;
    }
  }
  return Failure(401, "Unauthorized", "Unauthorized");
}

std::optional<Reply> FakeApiServer::Impl::ParseRoute(Call& call) const {
  std::vector<std::string> segs;
  try {
    for (const auto& s : web::uri::split_path(call.path)) segs.push_back(web::uri::decode(s));
  } catch (...) {
    return NoSuchPath();
  }
  std::string group, version;
  size_t i;
  if (segs.size() >= 2 && segs[0] == "api") {
    version = segs[1];
    i = 2;
  } else if (segs.size() >= 3 && segs[0] == "apis") {
    group = segs[1];
    version = segs[2];
    i = 3;
  } else {
    return NoSuchPath();
  }
  std::vector<std::string> rest(segs.begin() + static_cast<std::ptrdiff_t>(i), segs.end());
  Route r;
  if (rest.size() >= 3 && rest[0] == "namespaces") {
    r.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.empty() || rest.size() > 3) return NoSuchPath();
  const ResourceType* t = FindType(group, version, rest[0]);
  if (t == nullptr) return NoSuchPath();
  r.type = static_cast<size_t>(t - opts_.types.data());
  if (rest.size() >= 2) r.name = rest[1];
  if (rest.size() == 3) r.sub = rest[2];
  if (!t->namespaced && !r.ns.empty()) return NoSuchPath();
  if (t->namespaced && r.ns.empty() && !r.name.empty()) return NoSuchPath();
  const bool token_request =
      (r.sub == "token" && t->group.empty() && t->plural == "serviceaccounts") ||
      (r.sub == "binding" && t->group.empty() && t->plural == "pods");
  if (!r.sub.empty() && !(r.sub == "status" && t->status_subresource) &&
      !(r.sub == "scale" && t->scale) && !token_request) {
    return NoSuchPath();
  }
  call.route = r;

  const std::string& m = call.method;
  const bool named = !r.name.empty();
  const bool watch = call.query.count("watch") != 0 &&
                     (call.query.at("watch") == "1" || call.query.at("watch") == "true");
  if (m == "GET") {
    call.verb = watch ? "watch" : named ? "get" : "list";
  } else if (m == "POST" && (!named || token_request)) {
    call.verb = "create";
  } else if (m == "PUT" && named) {
    call.verb = "update";
  } else if (m == "PATCH" && named) {
    call.verb = "patch";
  } else if (m == "DELETE") {
    call.verb = named ? "delete" : "deletecollection";
  } else {
    return MethodNotAllowed(*t, m);
  }
  // ?dryRun=All (admission and validation, nothing stored), as k8s.io/apiserver's
  // handlers check it (validation.ValidateDryRun).
  if (auto d = call.query.find("dryRun"); d != call.query.end() && d->second != "All") {
    return BadRequest("dryRun[0]: Unsupported value: \"" + d->second +
                      "\": supported values: \"All\"");
  }
  return std::nullopt;
}

std::optional<Reply> FakeApiServer::Impl::Authorize(const Call& call) const {
  if (call.rules == nullptr && !call.stored_rbac) return std::nullopt;
  const ResourceType& t = type(call.route.type);
  ResourceAttributes attrs{.verb = call.verb,
                           .group = t.group,
                           .resource = t.plural,
                           .subresource = call.route.sub,
                           .name = call.route.name,
                           .namespace_ = call.route.ns};
  if (call.rules != nullptr && RulesAllow(*call.rules, attrs)) return std::nullopt;
  if (call.stored_rbac) {
    std::lock_guard<std::mutex> lock(mu_);
    if (RulesAllow(StoredRules(call), attrs)) return std::nullopt;
  }
  return Failure(403, "Forbidden", ForbiddenMessage(call.user, attrs),
                 Details(call.route.name, t.group, t.plural));
}

// The RBAC authorizer over the stored objects (k8s.io/kubernetes plugin/pkg/auth/authorizer/
// rbac: VisitRulesFor): every ClusterRoleBinding whose subjects name the user, one of its
// groups or its ServiceAccount grants its ClusterRole's rules everywhere; a RoleBinding in the
// request's namespace grants its Role's (or ClusterRole's) rules there.
std::vector<PolicyRule> FakeApiServer::Impl::StoredRules(const Call& call) const {
  std::vector<PolicyRule> out;
  const ResourceType* crb = FindType("rbac.authorization.k8s.io", "v1", "clusterrolebindings");
  const ResourceType* rb = FindType("rbac.authorization.k8s.io", "v1", "rolebindings");
  const ResourceType* roles = FindType("rbac.authorization.k8s.io", "v1", "roles");
  if (crb == nullptr || rb == nullptr || roles == nullptr) return out;
  const auto index = [&](const ResourceType* t) { return static_cast<size_t>(t - opts_.types.data()); };
  const auto names_us = [&](const value& binding, const std::string& binding_ns) {
    if (!binding.has_field("subjects") || !binding.at("subjects").is_array()) return false;
    for (const auto& s : binding.at("subjects").as_array()) {
      const std::string kind = StringField(s, "kind"), name = StringField(s, "name");
      if (kind == "User" && name == call.user) return true;
      if (kind == "Group" &&
          std::find(call.groups.begin(), call.groups.end(), name) != call.groups.end()) {
        return true;
      }
      if (kind == "ServiceAccount") {
        std::string ns = StringField(s, "namespace");
        if (ns.empty()) ns = binding_ns;
        if (call.user == "system:serviceaccount:" + ns + ":" + name) return true;
      }
    }
    return false;
  };
  const auto role_ref = [](const value& binding) -> std::pair<std::string, std::string> {
    if (!binding.has_field("roleRef")) return {};
    return {StringField(binding.at("roleRef"), "kind"), StringField(binding.at("roleRef"), "name")};
  };
  for (const auto& [key, binding] : stores_[index(crb)]) {
    if (!names_us(binding, "")) continue;
    const auto [kind, name] = role_ref(binding);
    if (kind == "ClusterRole") ClusterRoleRules(name, out);
  }
  if (!call.route.ns.empty()) {
    for (const auto& [key, binding] : stores_[index(rb)]) {
      if (key.first != call.route.ns || !names_us(binding, key.first)) continue;
      const auto [kind, name] = role_ref(binding);
      if (kind == "ClusterRole") {
        ClusterRoleRules(name, out);
      } else if (kind == "Role") {
        if (const value* role = Find(index(roles), {key.first, name})) {
          if (role->has_field("rules")) {
            if (auto rules = ParsePolicyRules(role->serialize()); rules.ok()) {
              out.insert(out.end(), rules->begin(), rules->end());
            }
          }
        }
      }
    }
  }
  return out;
}

// An aggregated ClusterRole's rules are those of every ClusterRole its
// aggregationRule.clusterRoleSelectors pick (the clusterrole-aggregation controller writes
// them into the object; reading them here gives the same answer without that controller).
void FakeApiServer::Impl::ClusterRoleRules(const std::string& name,
                                           std::vector<PolicyRule>& out) const {
  const ResourceType* cr = FindType("rbac.authorization.k8s.io", "v1", "clusterroles");
  if (cr == nullptr) return;
  const size_t index = static_cast<size_t>(cr - opts_.types.data());
  const value* role = Find(index, {"", name});
  if (role == nullptr) return;
  if (role->has_field("rules") && role->at("rules").is_array()) {
    if (auto rules = ParsePolicyRules(role->serialize()); rules.ok()) {
      out.insert(out.end(), rules->begin(), rules->end());
    }
  }
  if (!role->has_field("aggregationRule")) return;
  const value& agg = role->at("aggregationRule");
  if (!agg.has_field("clusterRoleSelectors") || !agg.at("clusterRoleSelectors").is_array()) return;
  for (const auto& selector : agg.at("clusterRoleSelectors").as_array()) {
    if (!selector.has_field("matchLabels") || !selector.at("matchLabels").is_object()) continue;
    for (const auto& [key, other] : stores_[index]) {
      if (key.second == name || !other.has_field("rules")) continue;
      bool match = true;
      for (const auto& [k, v] : selector.at("matchLabels").as_object()) {
        const value* labels = other.at("metadata").has_field("labels")
                                  ? &other.at("metadata").at("labels")
                                  : nullptr;
        if (labels == nullptr || !labels->has_field(k) || !labels->at(k).is_string() ||
            !v.is_string() || labels->at(k).as_string() != v.as_string()) {
          match = false;
          break;
        }
      }
      if (!match) continue;
      if (auto rules = ParsePolicyRules(other.serialize()); rules.ok()) {
        out.insert(out.end(), rules->begin(), rules->end());
      }
    }
  }
}

// The TokenRequest API (pkg/registry/core/serviceaccount/storage/token.go): a token for an
// existing ServiceAccount, bound to the pod named in spec.boundObjectRef when given. Tokens
// here are opaque (a real server signs a JWT) and do not expire while the server runs.
Reply FakeApiServer::Impl::IssueToken(const Call& call, const std::string& body) {
  const ResourceType& t = type(call.route.type);
  if (Find(call.route.type, {call.route.ns, call.route.name}) == nullptr) {
    return NotFound(t, call.route.name);
  }
  std::error_code ec;
  value request = body.empty() ? value::object() : value::parse(body, ec);
  if (ec || !request.is_object()) {
    return BadRequest("the body of the request could not be decoded as a TokenRequest");
  }
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string token = "sa.";
  for (int i = 0; i < 40; ++i) token += kAlphabet[rng_() % (sizeof(kAlphabet) - 1)];
  sa_tokens_[token] = {call.route.ns, call.route.name};
  int64_t seconds = 3600;
  if (request.has_field("spec") && request.at("spec").has_field("expirationSeconds") &&
      request.at("spec").at("expirationSeconds").is_integer()) {
    seconds = request.at("spec").at("expirationSeconds").as_number().to_int64();
  }
  value out = value::object();
  out["apiVersion"] = value::string("authentication.k8s.io/v1");
  out["kind"] = value::string("TokenRequest");
  value meta = value::object();
  meta["name"] = value::string(call.route.name);
  meta["namespace"] = value::string(call.route.ns);
  meta["creationTimestamp"] = value::string(Now());
  out["metadata"] = meta;
  value spec = request.has_field("spec") ? request.at("spec") : value::object();
  spec["expirationSeconds"] = value::number(seconds);
  out["spec"] = spec;
  value status = value::object();
  status["token"] = value::string(token);
  status["expirationTimestamp"] = value::string(Rfc3339(clock_->NowMs() + seconds * 1000));
  out["status"] = status;
  return Reply{201, out};
}

// pkg/registry/core/pod/storage BindingREST: sets spec.nodeName once; a pod already assigned
// gets 409 Conflict.
Reply FakeApiServer::Impl::BindPod(const Call& call, const std::string& body) {
  const ResourceType& t = type(call.route.type);
  const Key key{call.route.ns, call.route.name};
  const value* current = Find(call.route.type, key);
  if (current == nullptr) return NotFound(t, call.route.name);
  std::error_code ec;
  value binding = value::parse(body, ec);
  std::string node;
  if (!ec && binding.is_object() && binding.has_field("target")) {
    node = StringField(binding.at("target"), "name");
  }
  if (node.empty()) {
    return Invalid("Binding", "", call.route.name, "target.name", "FieldValueRequired",
                   "Required value");
  }
  const value& spec = current->at("spec");
  if (!StringField(spec, "nodeName").empty()) {
    return Failure(409, "Conflict",
                   "Operation cannot be fulfilled on pods/binding \"" + call.route.name +
                       "\": pod " + call.route.name + " is already assigned to node \"" +
                       StringField(spec, "nodeName") + "\"");
  }
  value next = *current;
  next["spec"]["nodeName"] = value::string(node);
  const value prev = *current;
  Commit(call.route.type, key, &prev, next, EventType::kModified);
  value out = value::object();
  out["kind"] = value::string("Status");
  out["apiVersion"] = value::string("v1");
  out["status"] = value::string("Success");
  out["code"] = value::number(201);
  return Reply{201, out};
}

void FakeApiServer::Impl::Handle(http_request req) {
  Call call;
  call.method = req.method();
  try {
    call.path = req.relative_uri().path();
    call.query_raw = req.relative_uri().query();
    for (const auto& [k, v] : web::uri::split_query(call.query_raw)) {
      call.query[web::uri::decode(k)] = web::uri::decode(v);
    }
    call.content_type = req.headers().content_type();
    if (auto ua = req.headers().find("User-Agent"); ua != req.headers().end()) {
      call.user_agent = ua->second;
    }
  } catch (...) {
    Answer(req, call, BadRequest("malformed request URI"));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      // Not recorded: the test is over.
      req.reply(503).then([](pplx::task<void> t) {
        try {
          t.get();
        } catch (...) {
        }
      });  // not tracked: Shutdown holds or has passed mu_ and waits for what came before
      return;
    }
  }
  if (call.path == "/healthz" || call.path == "/readyz" || call.path == "/livez") {
    Answer(req, call, Reply{200, value::string("ok")});
    return;
  }
  if (auto denied = Authenticate(req, call)) return Answer(req, call, *denied);
  // Discovery is every authenticated user's (the system:discovery ClusterRole is bound to
  // system:authenticated by the real server's bootstrap policy).
  if (call.method == "GET") {
    if (auto doc = DiscoveryDocument(opts_.types, call.path,
                                     opts_.host + ":" + std::to_string(port_))) {
      return Answer(req, call, Reply{200, *doc});
    }
    if (auto doc = OpenApiDocument(opts_.types, schemas_, call.path)) {
      return Answer(req, call, Reply{200, *doc});
    }
  }
  if (auto bad = ParseRoute(call)) return Answer(req, call, *bad);
  if (auto denied = Authorize(call)) return Answer(req, call, *denied);
  const ResourceType& t = type(call.route.type);
  if ((t.read_only && call.verb != "get" && call.verb != "list") ||
      call.verb == "deletecollection") {
    return Answer(req, call, MethodNotAllowed(t, call.verb));
  }
  if (call.verb == "watch") return ServeWatch(req, call);
  if (call.verb == "get" || call.verb == "list") {
    Reply r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      r = call.verb == "get" ? Get(call) : List(call);
    }
    // Server-side printing, when the client asks for a Table (kubectl get).
    auto accept = req.headers().find("Accept");
    if (r.code == 200 && accept != req.headers().end() && WantsTable(accept->second)) {
      std::vector<value> objects;
      value list_meta = value::null();
      if (call.verb == "get") {
        objects.push_back(r.body);
      } else {
        if (r.body.has_field("items")) {
          for (const auto& item : r.body.at("items").as_array()) objects.push_back(item);
        }
        if (r.body.has_field("metadata")) list_meta = r.body.at("metadata");
      }
      const auto inc = call.query.find("includeObject");
      r.body = ToTable(objects, t.printer_columns, list_meta,
                       inc == call.query.end() ? "" : inc->second, clock_->NowMs());
    }
    return Answer(req, call, r);
  }
  std::weak_ptr<Impl> weak = weak_from_this();
  req.extract_vector().then([weak, req, call](pplx::task<std::vector<unsigned char>> t) {
    auto self = weak.lock();
    if (!self) return;
    std::string body;
    try {
      const auto bytes = t.get();
      body.assign(bytes.begin(), bytes.end());
    } catch (const std::exception& e) {
      self->Answer(req, call, BadRequest(std::string("cannot read the body: ") + e.what()));
      return;
    }
    Reply r;
    try {
      std::lock_guard<std::mutex> lock(self->mu_);
      r = self->Process(call, body);
    } catch (const std::exception& e) {
      // A bug of the fake's, not the client's: a 500 that says what, and the server lives on.
      r = InternalError(std::string("the fake API server failed: ") + e.what());
    }
    self->Answer(req, call, r);
  });
}

Reply FakeApiServer::Impl::Process(const Call& call, const std::string& body) {
  const ResourceType& t = type(call.route.type);
  auto fail = failures_.find(call.path);
  if (fail != failures_.end() && call.method != "GET" &&
      (fail->second.method.empty() || fail->second.method == call.method)) {
    const int code = fail->second.code;
    if (--fail->second.count <= 0) failures_.erase(fail);
    return Injected(code, t, call.route.name);
  }
  const bool protobuf = Lower(call.content_type).rfind(kProtobufContentType, 0) == 0;
  if (call.route.sub == "token" || call.route.sub == "binding") {
    std::string json = body;
    if (protobuf) {
      auto decoded = DecodeProtobufObject(body);
      if (decoded.status().code() == Status::Code::kFailedPrecondition) {
        return Failure(415, "UnsupportedMediaType", decoded.status().message());
      }
      if (!decoded.ok()) return BadRequest(decoded.status().message());
      json = decoded->serialize();
    }
    return call.route.sub == "token" ? IssueToken(call, json) : BindPod(call, json);
  }
  if (call.verb == "delete" && protobuf && !body.empty()) {
    auto options = DecodeProtobufObject(body);
    if (!options.ok()) return BadRequest(options.status().message());
    return Delete(call, options->serialize());
  }
  if (call.verb == "delete") return Delete(call, body);
  if (call.verb == "patch") return Patch(call, body);
  if (protobuf) {
    auto decoded = DecodeProtobufObject(body);
    if (decoded.status().code() == Status::Code::kFailedPrecondition) {
      return Failure(415, "UnsupportedMediaType", decoded.status().message());
    }
    if (!decoded.ok()) return BadRequest(decoded.status().message());
    if (call.verb == "create") return Create(call, std::move(*decoded));
    return Replace(call, *decoded);
  }
  std::error_code ec;
  value incoming = value::parse(body, ec);
  if (ec || !incoming.is_object()) {
    return BadRequest("the body of the request could not be decoded as a JSON object" +
                      (ec ? ": " + ec.message() : std::string()));
  }
  if (call.verb == "create") return Create(call, std::move(incoming));
  return Replace(call, incoming);
}

// ------------------------------------------------------------------------------------------
// Verbs

Reply FakeApiServer::Impl::Get(const Call& call) {
  const ResourceType& t = type(call.route.type);
  const value* obj = Find(call.route.type, {call.route.ns, call.route.name});
  if (obj == nullptr) return NotFound(t, call.route.name);
  if (call.route.sub == "scale") return {200, ScaleOf(t, *obj)};
  return {200, *obj};
}

Reply FakeApiServer::Impl::List(const Call& call) {
  const ResourceType& t = type(call.route.type);
  auto q = [&](const char* k) {
    auto it = call.query.find(k);
    return it == call.query.end() ? std::string() : it->second;
  };
  auto labels = LabelSelector::Parse(q("labelSelector"));
  if (!labels.ok()) return BadRequest(labels.status().message());
  auto fields = FieldSelector::Parse(q("fieldSelector"));
  if (!fields.ok()) return BadRequest(fields.status().message());
  size_t limit = 0;
  if (!q("limit").empty()) {
    try {
      limit = std::stoul(q("limit"));
    } catch (...) {
      return BadRequest("invalid limit: " + q("limit"));
    }
  }
  const std::string cont = q("continue");
  std::vector<value> items;
  std::string next_continue;
  size_t remaining = 0;
  for (const auto& [key, obj] : stores_[call.route.type]) {
    if (!call.route.ns.empty() && key.first != call.route.ns) continue;
    if (!cont.empty() && key.first + "/" + key.second <= cont) continue;
    if (!labels->Matches(Labels(obj)) || !fields->Matches(obj)) continue;
    if (limit != 0 && items.size() == limit) {
      ++remaining;
      continue;
    }
    items.push_back(obj);
    if (limit != 0 && items.size() == limit) next_continue = key.first + "/" + key.second;
  }
  value out = value::object();
  out["kind"] = value::string(t.kind + "List");
  out["apiVersion"] = value::string(t.api_version());
  value meta = value::object();
  meta["resourceVersion"] = value::string(std::to_string(rv_));
  if (remaining > 0) {
    meta["continue"] = value::string(next_continue);
    meta["remainingItemCount"] = value::number(static_cast<int64_t>(remaining));
  }
  out["metadata"] = meta;
  out["items"] = value::array(std::move(items));
  return {200, out};
}

Reply FakeApiServer::Impl::Create(const Call& call, value obj) {
  const ResourceType& t = type(call.route.type);
  const std::string api_version = StringField(obj, "apiVersion");
  const std::string kind = StringField(obj, "kind");
  if (!api_version.empty() && api_version != t.api_version()) {
    return BadRequest("the API version in the data (" + api_version +
                      ") does not match the expected API version (" + t.api_version() + ")");
  }
  if (!kind.empty() && kind != t.kind) {
    return BadRequest("the kind in the data (" + kind + ") does not match the expected kind (" +
                      t.kind + ")");
  }
  obj["apiVersion"] = value::string(t.api_version());
  obj["kind"] = value::string(t.kind);
  std::string name = Meta(obj, "name");
  if (name.empty() && !Meta(obj, "generateName").empty()) {
    static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    name = Meta(obj, "generateName");
    for (int i = 0; i < 5; ++i) name += kAlphabet[rng_() % (sizeof(kAlphabet) - 1)];
  }
  if (name.empty()) {
    return Invalid(t.kind, t.group, "", "metadata.name", "FieldValueRequired",
                   "Required value: name or generateName is required");
  }
  const std::string ns = Meta(obj, "namespace");
  if (!ns.empty() && ns != call.route.ns) {
    return BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  if (!Meta(obj, "resourceVersion").empty()) {
    return InternalError("resourceVersion should not be set on objects to be created");
  }
  const Key key{call.route.ns, name};
  if (Find(call.route.type, key) != nullptr) return AlreadyExists(t, name);
  SetMeta(obj, "name", value::string(name));
  SetMeta(obj, "namespace", t.namespaced ? value::string(call.route.ns) : value::null());
  SetMeta(obj, "uid", value::string(NewUid()));
  SetMeta(obj, "creationTimestamp", value::string(Now()));
  SetMeta(obj, "generation", t.tracks_generation ? value::number(1) : value::null());
  SetMeta(obj, "deletionTimestamp", value::null());
  SetMeta(obj, "deletionGracePeriodSeconds", value::null());
  if (t.status_subresource) SetOrErase(obj, "status", nullptr);
  std::vector<std::string> warnings;
  if (auto refused = Admit(call, name, obj, &warnings)) return *refused;
  if (auto denied = CheckOwnerReferences(call, nullptr, obj)) return *denied;
  if (!call.apply) {
    SetManagedFields(obj, RecordUpdate(nullptr, obj, FieldManager(call), t.api_version(),
                                       t.status_subresource, Now()));
  }
  if (IsDryRun(call)) return {201, obj, std::move(warnings)};  // admitted, not stored
  Reply created{201, Commit(call.route.type, key, nullptr, std::move(obj), EventType::kAdded)};
  created.warnings = std::move(warnings);
  return created;
}

bool FakeApiServer::Impl::IsDryRun(const Call& call) {
  auto it = call.query.find("dryRun");
  return it != call.query.end() && it->second == "All";
}

Reply FakeApiServer::Impl::Replace(const Call& call, const value& incoming) {
  const ResourceType& t = type(call.route.type);
  const value* found = Find(call.route.type, {call.route.ns, call.route.name});
  if (found == nullptr) return NotFound(t, call.route.name);
  const value current = *found;
  if (call.route.sub == "scale") return UpdateScale(call, current, incoming);
  return UpdateObject(call, current, incoming, t.custom);
}

Reply FakeApiServer::Impl::Patch(const Call& call, const std::string& body) {
  const ResourceType& t = type(call.route.type);
  std::string ct = Lower(call.content_type);
  if (auto semi = ct.find(';'); semi != std::string::npos) ct.resize(semi);
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  bool json_patch = false;
  if (ct == "application/json-patch+json") {
    json_patch = true;
  } else if (ct == "application/merge-patch+json") {
  } else if (ct == "application/strategic-merge-patch+json" && !t.custom) {
    // Built-in kinds take strategic merge patch; the fake applies it as a merge patch (no
    // patchMergeKey list merging).
  } else if (ct == "application/apply-patch+yaml") {
    return ServerSideApply(call, body);
  } else {
    return UnsupportedPatch(ct);
  }
  std::error_code ec;
  const value patch = value::parse(body, ec);
  if (ec) return BadRequest("error decoding patch: " + ec.message());
  const value* found = Find(call.route.type, {call.route.ns, call.route.name});
  if (found == nullptr) return NotFound(t, call.route.name);
  const value current = *found;
  const value base = call.route.sub == "scale" ? ScaleOf(t, current) : current;
  value patched;
  if (json_patch) {
    auto r = ApplyJsonPatch(base, patch);
    if (!r.ok()) {
      if (r.status().code() == Status::Code::kInvalidArgument) {
        return BadRequest(r.status().message());
      }
      return Invalid(t.kind, t.group, call.route.name, "patch", "FieldValueInvalid",
                     "Invalid value: \"" + body + "\": " + r.status().message());
    }
    patched = std::move(*r);
  } else {
    patched = ApplyMergePatch(base, patch);
  }
  if (!patched.is_object()) return BadRequest("the patched object is not a JSON object");
  if (call.route.sub == "scale") return UpdateScale(call, current, patched);
  return UpdateObject(call, current, std::move(patched), false);
}

std::string FakeApiServer::Impl::FieldManager(const Call& call) {
  if (auto it = call.query.find("fieldManager"); it != call.query.end() && !it->second.empty()) {
    return it->second;
  }
  std::string out;
  for (char c : call.user_agent.substr(0, call.user_agent.find('/'))) {
    if (std::isprint(static_cast<unsigned char>(c))) out += c;
  }
  return out.substr(0, 128);
}

Reply FakeApiServer::Impl::ServerSideApply(const Call& call, const std::string& body) {
  const ResourceType& t = type(call.route.type);
  if (!call.route.sub.empty()) {
    return UnsupportedPatch("application/apply-patch+yaml on a subresource");
  }
  auto manager = call.query.find("fieldManager");
  if (manager == call.query.end() || manager->second.empty()) {
    return Invalid("PatchOptions", "meta.k8s.io", "", "fieldManager", "FieldValueRequired",
                   "Required value: is required for apply patch");
  }
  value applied;
  try {
    applied = YamlToJson(YAML::Load(body));
  } catch (const std::exception& e) {
    return BadRequest(std::string("error decoding YAML: ") + e.what());
  }
  if (!applied.is_object()) return BadRequest("the applied configuration is not an object");
  const std::string api_version = StringField(applied, "apiVersion");
  const std::string kind = StringField(applied, "kind");
  if (api_version.empty() || kind.empty()) {
    return BadRequest("apply needs apiVersion and kind in the applied configuration");
  }
  if (Meta(applied, "name") != call.route.name) {
    return BadRequest("the name of the object (" + Meta(applied, "name") +
                      ") does not match the name on the URL (" + call.route.name + ")");
  }
  auto force = call.query.find("force");
  const ApplyRequest request{.manager = manager->second,
                             .api_version = t.api_version(),
                             .force = force != call.query.end() && force->second == "true",
                             .status_subresource = t.status_subresource,
                             .now = Now()};
  const value* found = Find(call.route.type, {call.route.ns, call.route.name});
  const std::optional<value> current =
      found != nullptr ? std::optional<value>(*found) : std::nullopt;
  auto merged = Apply(current ? &*current : nullptr, applied, request);
  if (!merged.ok()) {
    if (merged.status().code() == Status::Code::kConflict) {
      return Failure(409, "Conflict", merged.status().message(),
                     Details(call.route.name, t.group, t.plural));
    }
    return BadRequest(merged.status().message());
  }
  Call as = call;
  as.apply = true;
  if (!current) {
    // Apply to a missing object creates it (the create rules and admission apply).
    as.verb = "create";
    return Create(as, std::move(*merged));
  }
  return UpdateObject(as, *current, std::move(*merged), false);
}

Reply FakeApiServer::Impl::UpdateObject(const Call& call, const value& current, value incoming,
                                        bool rv_required) {
  const ResourceType& t = type(call.route.type);
  const std::string& name = call.route.name;
  const std::string api_version = StringField(incoming, "apiVersion");
  const std::string kind = StringField(incoming, "kind");
  if ((!api_version.empty() && api_version != t.api_version()) ||
      (!kind.empty() && kind != t.kind)) {
    return BadRequest("the object's apiVersion and kind (" + api_version + ", " + kind +
                      ") do not match the URL's (" + t.api_version() + ", " + t.kind + ")");
  }
  if (Meta(incoming, "name") != name) {
    return BadRequest("the name of the object (" + Meta(incoming, "name") +
                      ") does not match the name on the URL (" + name + ")");
  }
  const std::string ns = Meta(incoming, "namespace");
  if (!ns.empty() && ns != call.route.ns) {
    return BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  const std::string rv = Meta(incoming, "resourceVersion");
  if (rv.empty() && rv_required) {
    return Invalid(t.kind, t.group, name, "metadata.resourceVersion", "FieldValueInvalid",
                   "Invalid value: 0x0: must be specified for an update");
  }
  if (!rv.empty() && rv != Meta(current, "resourceVersion")) return Conflict(t, name, kModified);
  const std::string uid = Meta(incoming, "uid");
  if (!uid.empty() && uid != Meta(current, "uid")) {
    return Conflict(t, name,
                    "Precondition failed: UID in precondition: " + uid +
                        ", UID in object meta: " + Meta(current, "uid"));
  }

  value next;
  if (call.route.sub == "status") {
    // Only .status comes from the request; spec and metadata changes are dropped.
    next = current;
    SetOrErase(next, "status", Field(incoming, "status"));
  } else {
    next = std::move(incoming);
    next["apiVersion"] = value::string(t.api_version());
    next["kind"] = value::string(t.kind);
    for (const char* system :
         {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
          "generation", "resourceVersion", "namespace", "name"}) {
      SetMeta(next, system, MetaValue(current, system));
    }
    if (t.status_subresource) SetOrErase(next, "status", Field(current, "status"));
    if (auto denied = CheckOwnerReferences(call, &current, next)) return *denied;
  }
  // After the patch is applied and the subresource rules chose what changes: the whole object
  // is what gets stored, so the whole object is checked (its unchanged part is valid already).
  std::vector<std::string> warnings;
  if (auto refused = Admit(call, name, next, &warnings)) return *refused;

  const bool deleting = !MetaValue(current, "deletionTimestamp").is_null();
  if (deleting) {
    const auto old = Finalizers(current);
    std::vector<std::string> added;
    for (const auto& f : Finalizers(next)) {
      if (std::find(old.begin(), old.end(), f) == old.end()) added.push_back("\"" + f + "\"");
    }
    if (!added.empty()) {
      std::string list;
      for (const auto& f : added) list += (list.empty() ? "" : ", ") + f;
      return Invalid(t.kind, t.group, name, "metadata.finalizers", "FieldValueForbidden",
                     "Forbidden: no new finalizers can be added if the object is being deleted, "
                     "found new finalizers []string{" +
                         list + "}");
    }
  }

  if (!call.apply && call.route.sub.empty()) {
    SetManagedFields(next, RecordUpdate(&current, next, FieldManager(call), t.api_version(),
                                        t.status_subresource, Now()));
  }
  if (t.tracks_generation) {
    // Any change outside metadata (and outside status, which the main resource cannot change
    // when the status subresource is on) is a new generation.
    value a = current, b = next;
    SetOrErase(a, "metadata", nullptr);
    SetOrErase(b, "metadata", nullptr);
    if (t.status_subresource) {
      SetOrErase(a, "status", nullptr);
      SetOrErase(b, "status", nullptr);
    }
    if (!JsonEqual(a, b)) {
      SetMeta(next, "generation", value::number(IntAt(current, ".metadata.generation") + 1));
    }
  }
  Reply ok{200, current, std::move(warnings)};
  if (JsonEqual(current, next)) return ok;  // a no-op: not persisted, no event
  if (IsDryRun(call)) {  // admitted, not stored
    ok.body = std::move(next);
    return ok;
  }

  const Key key{call.route.ns, name};
  const EventType event =
      deleting && Finalizers(next).empty() ? EventType::kDeleted : EventType::kModified;
  ok.body = Commit(call.route.type, key, &current, std::move(next), event);
  return ok;
}

Reply FakeApiServer::Impl::Delete(const Call& call, const std::string& body) {
  const ResourceType& t = type(call.route.type);
  const std::string& name = call.route.name;
  const Key key{call.route.ns, name};
  const value* found = Find(call.route.type, key);
  if (found == nullptr) return NotFound(t, name);
  const value current = *found;
  if (!body.empty()) {
    std::error_code ec;
    const value options = value::parse(body, ec);
    if (ec || !options.is_object()) return BadRequest("the DeleteOptions could not be decoded");
    const value* pre = Field(options, "preconditions");
    if (pre != nullptr) {
      const std::string rv = StringField(*pre, "resourceVersion");
      const std::string uid = StringField(*pre, "uid");
      if (!uid.empty() && uid != Meta(current, "uid")) {
        return Conflict(t, name,
                        "Precondition failed: UID in precondition: " + uid +
                            ", UID in object meta: " + Meta(current, "uid"));
      }
      if (!rv.empty() && rv != Meta(current, "resourceVersion")) {
        return Conflict(
            t, name,
            "Precondition failed: ResourceVersion in precondition: " + rv +
                ", ResourceVersion in object meta: " + Meta(current, "resourceVersion"));
      }
    }
  }
  if (IsDryRun(call)) return {200, current};  // nothing deleted
  if (!Finalizers(current).empty()) {
    // Graceful: the object stays until its finalizers are removed.
    if (!MetaValue(current, "deletionTimestamp").is_null()) return {200, current};
    value next = current;
    SetMeta(next, "deletionTimestamp", value::string(Now()));
    SetMeta(next, "deletionGracePeriodSeconds", value::number(0));
    if (t.tracks_generation) {
      SetMeta(next, "generation", value::number(IntAt(current, ".metadata.generation") + 1));
    }
    return {200, Commit(call.route.type, key, &current, std::move(next), EventType::kModified)};
  }
  Commit(call.route.type, key, &current, current, EventType::kDeleted);
  value s = value::object();
  s["kind"] = value::string("Status");
  s["apiVersion"] = value::string("v1");
  s["metadata"] = value::object();
  s["status"] = value::string("Success");
  value details = Details(name, t.group, t.plural);
  details["uid"] = value::string(Meta(current, "uid"));
  s["details"] = details;
  return {200, s};
}

std::optional<Reply> FakeApiServer::Impl::CheckOwnerReferences(const Call& call,
                                                               const value* current,
                                                               const value& next) const {
  // The OwnerReferencesPermissionEnforcement admission plugin (plugin/pkg/admission/gc): a user
  // subject to RBAC who sets blockOwnerDeletion on a reference (a new object, or a reference whose
  // uid is new or was not blocking before) needs `update` on the owner's finalizers subresource,
  // in the owner's API group and the object's namespace: otherwise the user could hold up the
  // deletion of an object it may not touch. The message ends in ", <nil>" as the real one does
  // (it formats the authorizer's reason and its nil error). Not done: the plugin's other rule,
  // `delete` on the object itself to change ownerReferences on update.
  if (call.rules == nullptr) return std::nullopt;
  const value refs = MetaValue(next, "ownerReferences");
  if (!refs.is_array()) return std::nullopt;
  const value old_refs =
      current == nullptr ? value::null() : MetaValue(*current, "ownerReferences");
  const ResourceType& t = type(call.route.type);
  const std::string name = Meta(next, "name");
  const std::string prefix = t.qualified() + " \"" + name + "\" is forbidden: ";
  for (const auto& ref : refs.as_array()) {
    const value* block = Field(ref, "blockOwnerDeletion");
    if (block == nullptr || !block->is_boolean() || !block->as_bool()) continue;
    bool already = false;
    if (old_refs.is_array()) {
      for (const auto& o : old_refs.as_array()) {
        const value* ob = Field(o, "blockOwnerDeletion");
        already |= StringField(o, "uid") == StringField(ref, "uid") && ob != nullptr &&
                   ob->is_boolean() && ob->as_bool();
      }
    }
    if (already) continue;
    const std::string api_version = StringField(ref, "apiVersion");
    const std::string kind = StringField(ref, "kind");
    const ResourceType* owner = nullptr;
    for (const auto& candidate : opts_.types) {
      if (candidate.api_version() == api_version && candidate.kind == kind) owner = &candidate;
    }
    if (owner == nullptr) {
      return Failure(403, "Forbidden",
                     prefix +
                         "cannot set blockOwnerDeletion in this case because cannot find "
                         "RESTMapping for APIVersion " +
                         api_version + " Kind " + kind + ": no matches for kind \"" + kind +
                         "\" in version \"" + api_version + "\"",
                     Details(name, t.group, t.plural));
    }
    ResourceAttributes attrs{.verb = "update",
                             .group = owner->group,
                             .resource = owner->plural,
                             .subresource = "finalizers",
                             .name = StringField(ref, "name"),
                             .namespace_ = call.route.ns};
    if (!RulesAllow(*call.rules, attrs)) {
      return Failure(403, "Forbidden",
                     prefix +
                         "cannot set blockOwnerDeletion if an ownerReference refers to a "
                         "resource you can't set finalizers on: " +
                         ForbiddenReason(call.user, attrs) + ", <nil>",
                     Details(name, t.group, t.plural));
    }
  }
  return std::nullopt;
}

value FakeApiServer::Impl::ScaleOf(const ResourceType& t, const value& obj) const {
  const ScaleSubresource& s = *t.scale;
  value scale = value::object();
  scale["kind"] = value::string("Scale");
  scale["apiVersion"] = value::string("autoscaling/v1");
  value meta = value::object();
  for (const char* k : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    const value v = MetaValue(obj, k);
    if (!v.is_null()) meta[k] = v;
  }
  scale["metadata"] = meta;
  value spec = value::object();
  spec["replicas"] = value::number(IntAt(obj, s.spec_replicas_path));
  scale["spec"] = spec;
  value status = value::object();
  status["replicas"] = value::number(IntAt(obj, s.status_replicas_path));
  if (!s.label_selector_path.empty()) {
    if (const value* sel = AtPath(obj, s.label_selector_path)) {
      status["selector"] = value::string(SelectorString(*sel));
    }
  }
  scale["status"] = status;
  return scale;
}

Reply FakeApiServer::Impl::UpdateScale(const Call& call, const value& current, const value& scale) {
  const ResourceType& t = type(call.route.type);
  const value* replicas = AtPath(scale, ".spec.replicas");
  std::string invalid;
  if (replicas == nullptr || !replicas->is_number() || !replicas->as_number().is_int64()) {
    invalid = "Required value: an integer spec.replicas is required";
  } else if (replicas->as_number().to_int64() < 0) {
    invalid = "Invalid value: " + std::to_string(replicas->as_number().to_int64()) +
              ": must be greater than or equal to 0";
  }
  if (!invalid.empty()) {
    return Invalid("Scale", "autoscaling", call.route.name, "spec.replicas", "FieldValueInvalid",
                   invalid);
  }
  // The scale's name and RV stand for the object's; everything else comes from the object.
  value next = current;
  SetMeta(next, "name", MetaValue(scale, "name"));
  SetMeta(next, "resourceVersion", MetaValue(scale, "resourceVersion"));
  SetAtPath(next, t.scale->spec_replicas_path, *replicas);
  Reply r = UpdateObject(call, current, std::move(next), false);
  if (r.code == 200) r.body = ScaleOf(t, r.body);
  return r;
}

std::optional<Reply> FakeApiServer::Impl::Admit(const Call& call, const std::string& name,
                                                value& obj,
                                                std::vector<std::string>* warnings) const {
  if (auto refused = AdmitPodSecurity(call, name, obj, warnings)) return refused;
  const value& schema = schemas_[call.route.type];
  if (schema.is_null()) return std::nullopt;
  // apiextensions-apiserver's order: nulls and defaults, pruning, then validation of what is left.
  ApplyDefaults(schema, obj);
  const std::vector<std::string> unknown = PruneUnknownFields(schema, obj);
  auto it = call.query.find("fieldValidation");
  const std::string mode = it == call.query.end() ? "Warn" : it->second;
  if (mode != "Strict" && mode != "Warn" && mode != "Ignore") {
    return BadRequest("fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\"");
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& f : unknown) {
      list += (list.empty() ? "" : ", ") + ("unknown field \"" + f + "\"");
    }
    if (mode == "Strict") return BadRequest("strict decoding error: " + list);
    if (mode == "Warn") {
      for (const auto& f : unknown) warnings->push_back("unknown field \"" + f + "\"");
    }
  }
  const std::vector<FieldError> errors = ValidateAgainstSchema(schema, obj);
  if (!errors.empty()) return InvalidFields(type(call.route.type), name, errors);
  return std::nullopt;
}

std::optional<Reply> FakeApiServer::Impl::AdmitPodSecurity(const Call& call,
                                                           const std::string& name,
                                                           const value& obj,
                                                           std::vector<std::string>* warnings) const {
  const ResourceType& t = type(call.route.type);
  if (!t.group.empty() || t.plural != "pods" || !call.route.sub.empty()) return std::nullopt;
  const ResourceType* ns_type = FindType("", "v1", "namespaces");
  if (ns_type == nullptr) return std::nullopt;
  const value* ns = Find(static_cast<size_t>(ns_type - opts_.types.data()), {"", call.route.ns});
  if (ns == nullptr) return std::nullopt;
  auto label = [&](const char* key) {
    const value labels = MetaValue(*ns, "labels");
    return labels.is_object() && labels.has_field(key) && labels.at(key).is_string()
               ? labels.at(key).as_string()
               : std::string();
  };
  const std::string enforce = label(kPodSecurityEnforceLabel);
  if (auto v = PodSecurityViolations(obj, enforce); !v.empty()) {
    return Failure(403, "Forbidden", PodSecurityMessage(name, enforce, v),
                   Details(name, t.group, t.plural));
  }
  const std::string warn = label(kPodSecurityWarnLabel);
  if (auto v = PodSecurityViolations(obj, warn); !v.empty()) {
    std::string list;
    for (const auto& x : v) list += (list.empty() ? "" : ", ") + x;
    warnings->push_back("would violate PodSecurity \"" + warn + ":latest\": " + list);
  }
  return std::nullopt;
}

const value* FakeApiServer::Impl::Find(size_t type_index, const Key& key) const {
  const auto& store = stores_[type_index];
  auto it = store.find(key);
  return it == store.end() ? nullptr : &it->second;
}

// ------------------------------------------------------------------------------------------
// Events and watches

value FakeApiServer::Impl::Commit(size_t type_index, const Key& key, const value* prev, value next,
                                  EventType event) {
  const uint64_t rv = ++rv_;
  SetMeta(next, "resourceVersion", value::string(std::to_string(rv)));
  if (event != EventType::kDeleted && type(type_index).plural == "customresourcedefinitions") {
    EstablishCrd(next);
  }
  auto& store = stores_[type_index];
  if (event == EventType::kDeleted) {
    store.erase(key);
  } else {
    store[key] = next;
  }
  history_.push_back({rv, type_index, event, prev != nullptr ? *prev : value::null(), next});
  while (history_.size() > std::max<size_t>(opts_.watch_history, 1)) {
    compacted_rv_ = history_.front().rv;
    history_.pop_front();
  }
  for (auto& [id, w] : watchers_) Deliver(w, history_.back());
  return next;
}

void FakeApiServer::Impl::EstablishCrd(value& crd) const {
  if (!crd.has_field("spec") || !crd.at("spec").is_object()) return;
  const value& spec = crd.at("spec");
  value status = crd.has_field("status") && crd.at("status").is_object() ? crd.at("status")
                                                                         : value::object();
  if (spec.has_field("names")) status["acceptedNames"] = spec.at("names");
  std::vector<value> stored;
  if (status.has_field("storedVersions") && status.at("storedVersions").is_array()) {
    for (const auto& v : status.at("storedVersions").as_array()) stored.push_back(v);
  }
  if (spec.has_field("versions") && spec.at("versions").is_array()) {
    for (const auto& v : spec.at("versions").as_array()) {
      const value* storage = v.has_field("storage") ? &v.at("storage") : nullptr;
      if (storage == nullptr || !storage->is_boolean() || !storage->as_bool()) continue;
      const value name = value::string(StringField(v, "name"));
      if (std::find(stored.begin(), stored.end(), name) == stored.end()) stored.push_back(name);
    }
  }
  status["storedVersions"] = value::array(stored);
  std::string since = Now();
  if (status.has_field("conditions") && status.at("conditions").is_array()) {
    for (const auto& c : status.at("conditions").as_array()) {
      if (StringField(c, "type") == "Established") since = StringField(c, "lastTransitionTime");
    }
  }
  auto condition = [&](const char* type, const char* reason, const char* message) {
    value c = value::object();
    c["type"] = value::string(type);
    c["status"] = value::string("True");
    c["reason"] = value::string(reason);
    c["message"] = value::string(message);
    c["lastTransitionTime"] = value::string(since);
    return c;
  };
  status["conditions"] = value::array(
      {condition("NamesAccepted", "NoConflicts", "no conflicts found"),
       condition("Established", "InitialNamesAccepted", "the initial names have been accepted")});
  crd["status"] = status;
}

void FakeApiServer::Impl::WriteLine(Watcher& w, const std::string& line) {
  try {
    w.buf.putn_nocopy(reinterpret_cast<const uint8_t*>(line.data()), line.size()).wait();
    w.buf.sync().wait();
  } catch (...) {
    // The stream is closed or broken; the reply's continuation removes the watcher.
  }
}

void FakeApiServer::Impl::Deliver(Watcher& w, const HistoryEvent& ev) {
  if (ev.type != w.type) return;
  auto matches = [&](const value& obj) {
    if (obj.is_null()) return false;
    if (!w.ns.empty() && Meta(obj, "namespace") != w.ns) return false;
    return w.labels.Matches(Labels(obj)) && w.fields.Matches(obj);
  };
  const bool now = matches(ev.object);
  const bool before = ev.event != EventType::kAdded && matches(ev.prev);
  // As the watch cache does: an object that starts to match is ADDED, one that stops is DELETED.
  const char* kind = nullptr;
  if (ev.event == EventType::kDeleted) {
    if (before || now) kind = "DELETED";
  } else if (now && before) {
    kind = "MODIFIED";
  } else if (now) {
    kind = "ADDED";
  } else if (before) {
    kind = "DELETED";
  }
  if (kind == nullptr) return;
  WriteLine(w,
            std::string("{\"type\":\"") + kind + "\",\"object\":" + ev.object.serialize() + "}\n");
}

void FakeApiServer::Impl::CloseWatcher(uint64_t id) {
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  try {
    it->second.buf.close(std::ios_base::out).wait();
  } catch (...) {
  }
  watchers_.erase(it);
  cv_.notify_all();
}

void FakeApiServer::Impl::ServeWatch(const http_request& req, const Call& call) {
  auto q = [&](const char* k) {
    auto it = call.query.find(k);
    return it == call.query.end() ? std::string() : it->second;
  };
  Watcher w;
  w.type = call.route.type;
  w.ns = call.route.ns;
  auto labels = LabelSelector::Parse(q("labelSelector"));
  if (!labels.ok()) return Answer(req, call, BadRequest(labels.status().message()));
  std::string field_text = q("fieldSelector");
  if (!call.route.name.empty()) {
    field_text += (field_text.empty() ? "" : ",") + std::string("metadata.name=") + call.route.name;
  }
  auto fields = FieldSelector::Parse(field_text);
  if (!fields.ok()) return Answer(req, call, BadRequest(fields.status().message()));
  w.labels = std::move(*labels);
  w.fields = std::move(*fields);
  w.bookmarks = q("allowWatchBookmarks") == "true" || q("allowWatchBookmarks") == "1";
  if (!q("timeoutSeconds").empty()) {
    try {
      w.deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(std::stol(q("timeoutSeconds")));
    } catch (...) {
      return Answer(req, call, BadRequest("invalid timeoutSeconds: " + q("timeoutSeconds")));
    }
  }
  // Streaming lists (KEP-3157, client-go's WatchListClient, on by default since 1.34): the
  // current objects as ADDED, then a BOOKMARK annotated k8s.io/initial-events-end, then the
  // changes. The real server's rules (apiserver ValidateListOptions): only with watch,
  // allowWatchBookmarks and resourceVersionMatch=NotOlderThan.
  const bool initial_events = q("sendInitialEvents") == "true" || q("sendInitialEvents") == "1";
  if (initial_events && (!w.bookmarks || q("resourceVersionMatch") != "NotOlderThan")) {
    return Answer(req, call,
                  Failure(422, "Invalid",
                          "sendInitialEvents requires allowWatchBookmarks=true and "
                          "resourceVersionMatch=NotOlderThan"));
  }
  if (!initial_events && !q("resourceVersionMatch").empty()) {
    return Answer(req, call,
                  Failure(422, "Invalid",
                          "resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                          "is provided"));
  }
  const std::string rv_text = q("resourceVersion");
  uint64_t from = 0;
  if (!rv_text.empty()) {
    try {
      size_t used = 0;
      from = std::stoull(rv_text, &used);
      if (used != rv_text.size()) throw std::invalid_argument(rv_text);
    } catch (...) {
      return Answer(req, call, BadRequest("invalid resource version: " + rv_text));
    }
  }

  concurrency::streams::producer_consumer_buffer<uint8_t> buf = w.buf;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back({call.method, call.path, call.query_raw, call.user, 200});
    id = next_watcher_++;
    if (stopping_) {
      // Shutdown has closed the streams it knew of: this one ends at once.
      try {
        w.buf.close(std::ios_base::out).wait();
      } catch (...) {
      }
    } else if (initial_events) {
      // NotOlderThan `from`: the store is always current here, so the initial events are now.
      for (const auto& [key, obj] : stores_[w.type]) {
        Deliver(w, {rv_, w.type, EventType::kAdded, value::null(), obj});
      }
      const ResourceType& t = type(w.type);
      value mark = value::object();
      mark["kind"] = value::string(t.kind);
      mark["apiVersion"] = value::string(t.api_version());
      SetMeta(mark, "resourceVersion", value::string(std::to_string(rv_)));
      value annotations = value::object();
      annotations["k8s.io/initial-events-end"] = value::string("true");
      SetMeta(mark, "annotations", annotations);
      WriteLine(w, "{\"type\":\"BOOKMARK\",\"object\":" + mark.serialize() + "}\n");
      watchers_.emplace(id, std::move(w));
    } else if (from == 0) {
      // RV unset or "0": the current state as synthetic ADDED events, then the changes.
      for (const auto& [key, obj] : stores_[w.type]) {
        Deliver(w, {rv_, w.type, EventType::kAdded, value::null(), obj});
      }
      watchers_.emplace(id, std::move(w));
    } else if (from < compacted_rv_) {
      const Reply expired = Failure(410, "Expired",
                                    "too old resource version: " + std::to_string(from) + " (" +
                                        std::to_string(compacted_rv_) + ")");
      WriteLine(w, "{\"type\":\"ERROR\",\"object\":" + expired.body.serialize() + "}\n");
      try {
        w.buf.close(std::ios_base::out).wait();
      } catch (...) {
      }
    } else {
      for (const auto& ev : history_) {
        if (ev.rv > from) Deliver(w, ev);
      }
      watchers_.emplace(id, std::move(w));
    }
  }
  cv_.notify_all();
  std::weak_ptr<Impl> weak = weak_from_this();
  try {
    web::http::http_response resp(web::http::status_codes::OK);
    resp.set_body(concurrency::streams::istream(buf), "application/json");
    TrackReply(req.reply(resp), [weak, id] {
      if (auto self = weak.lock()) {
        std::lock_guard<std::mutex> lock(self->mu_);
        self->CloseWatcher(id);
      }
    });
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    CloseWatcher(id);
  }
}

// ------------------------------------------------------------------------------------------
// FakeApiServer and its test hooks

namespace {

// `schema` with every {"$ref": NAME} replaced by definitions[NAME], itself expanded. A type that
// contains itself (none of the kinds served) keeps unknown fields below the repetition.
value Expand(const value& schema, const value& definitions, std::vector<std::string>& path) {
  if (schema.is_object() && schema.has_string_field("$ref")) {
    const std::string name = schema.at("$ref").as_string();
    if (std::find(path.begin(), path.end(), name) != path.end() ||
        !definitions.has_field(name)) {
      value open = value::object();
      open["x-kubernetes-preserve-unknown-fields"] = value::boolean(true);
      return open;
    }
    path.push_back(name);
    value out = Expand(definitions.at(name), definitions, path);
    path.pop_back();
    return out;
  }
  if (schema.is_object()) {
    value out = value::object();
    for (const auto& [k, v] : schema.as_object()) out[k] = Expand(v, definitions, path);
    return out;
  }
  if (schema.is_array()) {
    value out = value::array();
    size_t i = 0;
    for (const auto& v : schema.as_array()) out[i++] = Expand(v, definitions, path);
    return out;
  }
  return schema;
}

// The text of `path` (relative: from the root of the source tree); `what` names it in the error.
Result<std::string> ReadSourceFile(std::string path, const std::string& what) {
#ifdef SHOAL_SOURCE_DIR
  if (!path.empty() && path[0] != '/') path = std::string(SHOAL_SOURCE_DIR) + "/" + path;
#endif
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read the " + what + " " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<std::map<std::string, value>> LoadBuiltinSchemas(std::string path) {
  auto text = ReadSourceFile(path, "built-in schemas");
  if (!text.ok()) return text.status();
  std::error_code ec;
  const value doc = value::parse(*text, ec);
  if (ec || !doc.is_object() || !doc.has_object_field("kinds") ||
      !doc.has_object_field("definitions")) {
    return Status::InvalidArgument(path + " is not a schemas file of generate.py (kinds, definitions)");
  }
  std::map<std::string, value> out;
  for (const auto& [kind, model] : doc.at("kinds").as_object()) {
    if (!model.is_string()) continue;
    std::vector<std::string> trail;
    value ref = value::object();
    ref["$ref"] = model;
    out[kind] = Expand(ref, doc.at("definitions"), trail);
  }
  return out;
}

FakeApiServer::FakeApiServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

FakeApiServer::~FakeApiServer() { impl_->Shutdown(); }

Result<std::unique_ptr<FakeApiServer>> FakeApiServer::Start(FakeApiServerOptions options) {
  std::vector<std::string> texts = options.crd_yaml;
  for (const std::string& path : options.crd_files) {
    auto text = ReadSourceFile(path, "CRD file");
    if (!text.ok()) return text.status();
    texts.push_back(std::move(text).value());
  }
  std::vector<value> schemas(options.types.size(), value::null());
  for (const auto& text : texts) {
    auto crd = ParseCrd(text);
    if (!crd.ok()) return crd.status();
    size_t i = 0;
    while (i < options.types.size() && !(options.types[i].group == crd->type.group &&
                                         options.types[i].plural == crd->type.plural)) {
      ++i;
    }
    if (i == options.types.size()) {
      options.types.push_back(crd->type);
      schemas.push_back(crd->schema);
    } else {
      options.types[i] = crd->type;
      schemas[i] = crd->schema;
    }
  }
  if (!options.builtin_schemas_file.empty()) {
    auto builtin = LoadBuiltinSchemas(options.builtin_schemas_file);
    if (!builtin.ok()) return builtin.status();
    for (size_t i = 0; i < options.types.size(); ++i) {
      const ResourceType& t = options.types[i];
      if (t.custom || !schemas[i].is_null()) continue;
      auto it = builtin->find(t.api_version() + " " + t.kind);
      if (it != builtin->end()) schemas[i] = it->second;
    }
  }
  auto impl = std::make_shared<Impl>(std::move(options), std::move(schemas));
  SHOAL_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<FakeApiServer>(new FakeApiServer(std::move(impl)));
}

std::string FakeApiServer::base_url() const {
  return "http://" + impl_->opts_.host + ":" + std::to_string(impl_->port_);
}

std::string FakeApiServer::secure_url() const {
  if (impl_->secure_port_ == 0) return "";
  return "https://" + impl_->opts_.host + ":" + std::to_string(impl_->secure_port_);
}

uint16_t FakeApiServer::port() const { return impl_->port_; }

void FakeApiServer::CloseAllWatches() {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, w] : impl_->watchers_) ids.push_back(id);
  for (uint64_t id : ids) impl_->CloseWatcher(id);
}

void FakeApiServer::SendBookmark() {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  for (auto& [id, w] : impl_->watchers_) {
    if (!w.bookmarks) continue;
    const ResourceType& t = impl_->type(w.type);
    value obj = value::object();
    obj["kind"] = value::string(t.kind);
    obj["apiVersion"] = value::string(t.api_version());
    SetMeta(obj, "resourceVersion", value::string(std::to_string(impl_->rv_)));
    impl_->WriteLine(w, "{\"type\":\"BOOKMARK\",\"object\":" + obj.serialize() + "}\n");
  }
}

void FakeApiServer::CompactHistory(bool including_current) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->history_.clear();
  impl_->compacted_rv_ = impl_->rv_ + (including_current ? 1 : 0);
}

void FakeApiServer::FailNextWrites(const std::string& path, int count, int code,
                                   const std::string& method) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  if (count <= 0) {
    impl_->failures_.erase(path);
  } else {
    impl_->failures_[path] = {count, code, method};
  }
}

Status FakeApiServer::Seed(const std::string& collection_path, const std::string& object_json) {
  Impl& s = *impl_;
  Impl::Call call;
  call.method = "POST";
  call.path = collection_path;
  if (s.ParseRoute(call) || !call.route.name.empty()) {
    return Status::NotFound("not a collection path: " + collection_path);
  }
  std::error_code ec;
  value obj = value::parse(object_json, ec);
  if (ec || !obj.is_object()) return Status::InvalidArgument("not a JSON object: " + object_json);
  const ResourceType& t = s.type(call.route.type);
  const std::string name = Meta(obj, "name");
  if (name.empty()) return Status::InvalidArgument("the object has no metadata.name");
  if (!obj.has_field("apiVersion")) obj["apiVersion"] = value::string(t.api_version());
  if (!obj.has_field("kind")) obj["kind"] = value::string(t.kind);
  if (t.namespaced) SetMeta(obj, "namespace", value::string(call.route.ns));
  std::lock_guard<std::mutex> lock(s.mu_);
  const Impl::Key key{call.route.ns, name};
  const value* prev = s.Find(call.route.type, key);
  if (Meta(obj, "uid").empty()) {
    SetMeta(obj, "uid", prev != nullptr ? MetaValue(*prev, "uid") : value::string(s.NewUid()));
  }
  if (Meta(obj, "creationTimestamp").empty()) {
    SetMeta(obj, "creationTimestamp",
            prev != nullptr ? MetaValue(*prev, "creationTimestamp") : value::string(s.Now()));
  }
  const std::optional<value> old = prev != nullptr ? std::optional<value>(*prev) : std::nullopt;
  s.Commit(call.route.type, key, old ? &*old : nullptr, std::move(obj),
           old ? Impl::EventType::kModified : Impl::EventType::kAdded);
  return Status::Ok();
}

Status FakeApiServer::Unseed(const std::string& object_path) {
  Impl& s = *impl_;
  Impl::Call call;
  call.method = "DELETE";
  call.path = object_path;
  if (s.ParseRoute(call) || call.route.name.empty() || !call.route.sub.empty()) {
    return Status::NotFound("not an object path: " + object_path);
  }
  std::lock_guard<std::mutex> lock(s.mu_);
  const Impl::Key key{call.route.ns, call.route.name};
  const value* found = s.Find(call.route.type, key);
  if (found == nullptr) return Status::NotFound(object_path + " not found");
  const value current = *found;
  s.Commit(call.route.type, key, &current, current, Impl::EventType::kDeleted);
  return Status::Ok();
}

std::optional<std::string> FakeApiServer::Object(const std::string& path) const {
  Impl::Call call;
  call.method = "GET";
  call.path = path;
  if (impl_->ParseRoute(call) || call.route.name.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(impl_->mu_);
  const value* obj = impl_->Find(call.route.type, {call.route.ns, call.route.name});
  if (obj == nullptr) return std::nullopt;
  return obj->serialize();
}

uint64_t FakeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->rv_;
}

size_t FakeApiServer::open_watches() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->watchers_.size();
}

bool FakeApiServer::WaitForWatches(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(impl_->mu_);
  return impl_->cv_.wait_for(lock, timeout, [&] { return impl_->watchers_.size() >= n; });
}

std::vector<FakeApiRequest> FakeApiServer::Requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->requests_;
}

int FakeApiServer::CountRequests(const std::string& method, const std::string& path,
                                 int code) const {
  int n = 0;
  for (const auto& r : Requests()) {
    if (r.method == method && r.path == path && (code == 0 || r.code == code)) ++n;
  }
  return n;
}

}  // namespace shoal::testing
