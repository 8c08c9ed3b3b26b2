// The fake Kubernetes API server over real HTTP, rule by rule of reference/kubernetes-api.md:
// resourceVersion and 409, 422 and 404 on PUT, no-op writes, generation, the status and scale
// subresources, merge and JSON patch (415 for strategic merge on custom resources), list and
// watch (synthetic ADDED, bookmarks, timeouts, 410 for a too-old RV, label selectors), finalizers
// and deletion, Status error bodies, authentication and RBAC from deploy/rbac/operator-rules.yaml,
// the metrics API, and the test hooks (closing watches, injected failures).
//
// Requests go through cpprestsdk's client (HttpTestClient); watches through WatchStream, which
// reads one event at a time with a deadline. Nothing sleeps: a test that must show an event did
// NOT come makes a later change and checks that it is the next event.
#include "support/fake_kube/fake_api_server.h"

#include <gtest/gtest.h>

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/base_uri.h>
#include <cpprest/json.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/fake_kube/rbac.h"
#include "support/fake_kube/watch_stream.h"
#include "support/http_test_client.h"
#include "support/manual_clock.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;
using web::json::value;

constexpr char kAdmin[] = "admin-token";
constexpr char kOperator[] = "operator-token";
constexpr char kTopics[] = "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics";
constexpr char kStatefulSets[] = "/apis/apps/v1/namespaces/default/statefulsets";
constexpr char kLeases[] = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
constexpr char kPodMetrics[] = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods";
constexpr char kMergePatch[] = "application/merge-patch+json";
constexpr char kJsonPatch[] = "application/json-patch+json";
constexpr char kStrategic[] = "application/strategic-merge-patch+json";
constexpr char kConflictTail[] =
    "\": the object has been modified; please apply your changes to the latest version and try "
    "again";

value J(const std::string& text) { return value::parse(text); }
value J(const HttpResponse& r) { return value::parse(r.body); }

// The value at a dotted path ("metadata.name"), or null.
value At(const value& v, const std::string& dotted) {
  value cur = v;
  size_t start = 0;
  while (start <= dotted.size()) {
    const size_t dot = std::min(dotted.find('.', start), dotted.size());
    const std::string key = dotted.substr(start, dot - start);
    if (!cur.is_object() || !cur.has_field(key)) return value::null();
    cur = cur.at(key);
    start = dot + 1;
  }
  return cur;
}
std::string S(const value& v, const std::string& dotted) {
  const value x = At(v, dotted);
  return x.is_string() ? x.as_string() : "";
}
int64_t I(const value& v, const std::string& dotted) {
  const value x = At(v, dotted);
  return x.is_number() ? x.as_number().to_int64() : -1;
}

std::string Topic(const std::string& name, int replicas = 2, const std::string& extra = "") {
  return R"({"apiVersion":"shoal.dev/v1alpha1","kind":"PartitionedTopic","metadata":{"name":")" +
         name + R"(","labels":{"app":"shoal"})" + extra + R"(},"spec":{"replicas":)" +
         std::to_string(replicas) + R"(,"partitions":4}})";
}

class FakeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer({}); }

  // Starts (or restarts) the server with the admin token, the operator's user (rules from the
  // repository's rules file unless `rules` is given) and `tweak` applied.
  void StartServer(std::optional<std::vector<PolicyRule>> rules,
                   const std::function<void(FakeApiServerOptions&)>& tweak = {}) {
    server_.reset();
    FakeApiServerOptions o;
    o.admin_token = kAdmin;
    o.clock = &clock_;
    auto op = OperatorUser(kOperator, kOperatorRulesFile);
    ASSERT_TRUE(op.ok()) << op.status().ToString();
    if (rules) op->rules = *rules;
    o.users.push_back(*op);
    if (tweak) tweak(o);
    auto s = FakeApiServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    client_ = std::make_unique<HttpTestClient>(server_->base_url(), 10s);
  }

  HttpResponse Call(const std::string& token, const std::string& method, const std::string& path,
                    const std::string& body = "",
                    const std::string& content_type = "application/json") {
    HttpRequestOptions o;
    if (!token.empty()) o.headers["Authorization"] = std::string("Bearer ") + token;
    o.content_type = content_type;
    return client_->Send(method, path, body, o);
  }
  HttpResponse Admin(const std::string& method, const std::string& path,
                     const std::string& body = "",
                     const std::string& content_type = "application/json") {
    return Call(kAdmin, method, path, body, content_type);
  }
  HttpResponse Op(const std::string& method, const std::string& path, const std::string& body = "",
                  const std::string& content_type = "application/json") {
    return Call(kOperator, method, path, body, content_type);
  }

  // Creates a topic as the admin and returns it as stored.
  value CreateTopic(const std::string& name, int replicas = 2, const std::string& extra = "") {
    HttpResponse r = Admin("POST", kTopics, Topic(name, replicas, extra));
    EXPECT_EQ(r.status, 201) << r.Describe();
    return J(r);
  }

  std::unique_ptr<WatchStream> Watch(const std::string& path_and_query,
                                     const std::string& token = kAdmin) {
    auto w = WatchStream::Open("127.0.0.1", server_->port(), path_and_query, token, 5s);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return nullptr;
    EXPECT_EQ((*w)->status(), 200);
    return std::move(*w);
  }

  // The next event of a watch; fails the test when none comes within 5 s.
  static value NextEvent(WatchStream& w) {
    std::string line;
    const auto got = w.Read(&line, 5s);
    EXPECT_EQ(got, WatchStream::Next::kLine) << "no event within 5 s";
    if (got != WatchStream::Next::kLine) return value::null();
    return J(line);
  }
  static void ExpectEnd(WatchStream& w) {
    std::string line;
    EXPECT_EQ(w.Read(&line, 5s), WatchStream::Next::kEnd) << "unexpected: " << line;
  }

  // Checks a Status error body: kind, status Failure, code, reason, message.
  static void ExpectStatus(const HttpResponse& r, int code, const std::string& reason,
                           const std::string& message = "") {
    EXPECT_EQ(r.status, code) << r.Describe();
    const value s = J(r);
    EXPECT_EQ(S(s, "kind"), "Status");
    EXPECT_EQ(S(s, "apiVersion"), "v1");
    EXPECT_EQ(S(s, "status"), "Failure");
    EXPECT_EQ(I(s, "code"), code);
    EXPECT_EQ(S(s, "reason"), reason);
    if (!message.empty()) {
      EXPECT_EQ(S(s, "message"), message);
    }
  }

  ManualClock clock_{1'700'000'000'000};  // 2023-11-14T22:13:20Z
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<HttpTestClient> client_;
};

// ---- create, get, list, resourceVersion

TEST_F(FakeApiServerTest, CreateSetsSystemFieldsAndDropsStatus) {
  HttpResponse r = Admin("POST", kTopics, Topic("t1", 2, "").insert(1, R"("status":{"x":1},)"));
  ASSERT_EQ(r.status, 201) << r.Describe();
  const value t = J(r);
  EXPECT_EQ(S(t, "metadata.name"), "t1");
  EXPECT_EQ(S(t, "metadata.namespace"), "default");
  EXPECT_EQ(S(t, "metadata.uid").size(), 36u);
  EXPECT_EQ(S(t, "metadata.creationTimestamp"), "2023-11-14T22:13:20Z");
  EXPECT_EQ(I(t, "metadata.generation"), 1);
  EXPECT_EQ(S(t, "metadata.resourceVersion"), std::to_string(server_->resource_version()));
  EXPECT_TRUE(At(t, "status").is_null()) << "POST drops .status (status subresource)";
  EXPECT_EQ(I(t, "spec.replicas"), 2);

  HttpResponse got = Admin("GET", std::string(kTopics) + "/t1");
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(J(got).serialize(), t.serialize());

  ExpectStatus(Admin("POST", kTopics, Topic("t1")), 409, "AlreadyExists",
               "partitionedtopics.shoal.dev \"t1\" already exists");
  HttpResponse missing = Admin("GET", std::string(kTopics) + "/nope");
  ExpectStatus(missing, 404, "NotFound", "partitionedtopics.shoal.dev \"nope\" not found");
  EXPECT_EQ(S(J(missing), "details.name"), "nope");
  EXPECT_EQ(S(J(missing), "details.group"), "shoal.dev");
  EXPECT_EQ(S(J(missing), "details.kind"), "partitionedtopics");
  ExpectStatus(Admin("GET", "/apis/shoal.dev/v1alpha1/namespaces/default/nothings"), 404,
               "NotFound", "the server could not find the requested resource");
  ExpectStatus(Admin("GET", "/api/v1/namespaces/default/secrets/s/scale"), 404, "NotFound");
}

TEST_F(FakeApiServerTest, CreateChecksNamesNamespacesKindsAndGeneratesNames) {
  HttpResponse gen = Admin("POST", "/api/v1/namespaces/default/secrets",
                           R"({"metadata":{"generateName":"token-"},"data":{}})");
  ASSERT_EQ(gen.status, 201) << gen.Describe();
  EXPECT_EQ(S(J(gen), "metadata.name").rfind("token-", 0), 0u);
  EXPECT_EQ(S(J(gen), "metadata.name").size(), 11u);
  EXPECT_EQ(S(J(gen), "kind"), "Secret");
  EXPECT_EQ(S(J(gen), "apiVersion"), "v1");
  EXPECT_TRUE(At(J(gen), "metadata.generation").is_null()) << "secrets keep no generation";

  ExpectStatus(Admin("POST", kTopics, R"({"metadata":{"name":"x","namespace":"other"}})"), 400,
               "BadRequest",
               "the namespace of the provided object does not match the namespace sent on the "
               "request");
  ExpectStatus(Admin("POST", kTopics, R"({"kind":"Secret","metadata":{"name":"x"}})"), 400,
               "BadRequest");
  ExpectStatus(Admin("POST", kTopics, R"({"metadata":{}})"), 422, "Invalid");
  ExpectStatus(Admin("POST", kTopics, R"({"metadata":{"name":"x","resourceVersion":"3"}})"), 500,
               "InternalError",
               "Internal error occurred: resourceVersion should not be set on objects to be "
               "created");
  ExpectStatus(Admin("POST", kTopics, "not json"), 400, "BadRequest");
}

TEST_F(FakeApiServerTest, ResourceVersionComesFromOneGlobalCounter) {
  const value a = CreateTopic("a");
  HttpResponse s =
      Admin("POST", "/api/v1/namespaces/other/secrets", R"({"metadata":{"name":"s"}})");
  ASSERT_EQ(s.status, 201);
  const value b = CreateTopic("b");
  const uint64_t rv_a = std::stoull(S(a, "metadata.resourceVersion"));
  EXPECT_EQ(S(J(s), "metadata.resourceVersion"), std::to_string(rv_a + 1));
  EXPECT_EQ(S(b, "metadata.resourceVersion"), std::to_string(rv_a + 2));

  HttpResponse list = Admin("GET", kTopics);
  ASSERT_EQ(list.status, 200);
  const value l = J(list);
  EXPECT_EQ(S(l, "kind"), "PartitionedTopicList");
  EXPECT_EQ(S(l, "apiVersion"), "shoal.dev/v1alpha1");
  EXPECT_EQ(S(l, "metadata.resourceVersion"), std::to_string(rv_a + 2));
  ASSERT_EQ(At(l, "items").as_array().size(), 2u);
  EXPECT_EQ(S(At(l, "items").as_array().at(0), "metadata.name"), "a");
}

TEST_F(FakeApiServerTest, ListFiltersByNamespaceLabelsAndFieldsAndPages) {
  for (const char* ns : {"default", "blue"}) {
    for (const char* name : {"p-0", "p-1", "q-0"}) {
      const std::string app = name[0] == 'p' ? "shoal" : "other";
      HttpResponse r = Admin("POST", std::string("/api/v1/namespaces/") + ns + "/pods",
                             std::string(R"({"metadata":{"name":")") + name +
                                 R"(","labels":{"app":")" + app + R"(","tier":"data"}}})");
      ASSERT_EQ(r.status, 201) << r.Describe();
    }
  }
  auto names = [&](const std::string& path) {
    HttpResponse r = Admin("GET", path);
    EXPECT_EQ(r.status, 200) << r.Describe();
    std::vector<std::string> out;
    const value items = At(J(r), "items");
    for (const auto& item : items.as_array()) {
      out.push_back(S(item, "metadata.namespace") + "/" + S(item, "metadata.name"));
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names("/api/v1/namespaces/blue/pods"), (V{"blue/p-0", "blue/p-1", "blue/q-0"}));
  EXPECT_EQ(names("/api/v1/namespaces/blue/pods?labelSelector=app%3Dshoal"),
            (V{"blue/p-0", "blue/p-1"}));
  EXPECT_EQ(names("/api/v1/namespaces/blue/pods?labelSelector=app!%3Dshoal,tier%3Ddata"),
            (V{"blue/q-0"}));
  EXPECT_EQ(names("/api/v1/pods?labelSelector=app%3Dother"), (V{"blue/q-0", "default/q-0"}));
  EXPECT_EQ(names("/api/v1/pods?fieldSelector=metadata.name%3Dp-1"),
            (V{"blue/p-1", "default/p-1"}));

  HttpResponse page1 = Admin("GET", "/api/v1/namespaces/default/pods?limit=2");
  ASSERT_EQ(page1.status, 200);
  EXPECT_EQ(At(J(page1), "items").as_array().size(), 2u);
  EXPECT_EQ(I(J(page1), "metadata.remainingItemCount"), 1);
  const std::string cont = S(J(page1), "metadata.continue");
  ASSERT_FALSE(cont.empty());
  EXPECT_EQ(names("/api/v1/namespaces/default/pods?limit=2&continue=" +
                  web::uri::encode_data_string(cont)),
            (V{"default/q-0"}));

  ExpectStatus(Admin("GET", "/api/v1/namespaces/blue/pods?labelSelector=a%20in%20x"), 400,
               "BadRequest");
  ExpectStatus(Admin("GET", "/api/v1/namespaces/blue/pods?fieldSelector=spec.nodeName%3Dx"), 400,
               "BadRequest", "field label not supported: spec.nodeName");
}

// ---- PUT

TEST_F(FakeApiServerTest, PutNeedsTheCurrentResourceVersion) {
  value t = CreateTopic("t1");
  const std::string path = std::string(kTopics) + "/t1";
  t["spec"]["replicas"] = value::number(3);
  HttpResponse ok = Admin("PUT", path, t.serialize());
  ASSERT_EQ(ok.status, 200) << ok.Describe();
  EXPECT_NE(S(J(ok), "metadata.resourceVersion"), S(t, "metadata.resourceVersion"));

  // `t` still carries the old RV.
  t["spec"]["replicas"] = value::number(4);
  HttpResponse stale = Admin("PUT", path, t.serialize());
  ExpectStatus(stale, 409, "Conflict",
               std::string("Operation cannot be fulfilled on partitionedtopics.shoal.dev \"t1") +
                   kConflictTail);
  EXPECT_EQ(S(J(stale), "details.name"), "t1");
  EXPECT_EQ(S(J(stale), "details.kind"), "partitionedtopics");

  t["metadata"].erase("resourceVersion");
  ExpectStatus(Admin("PUT", path, t.serialize()), 422, "Invalid",
               "PartitionedTopic.shoal.dev \"t1\" is invalid: metadata.resourceVersion: Invalid "
               "value: 0x0: must be specified for an update");
  ExpectStatus(Admin("PUT", std::string(kTopics) + "/nope", Topic("nope")), 404, "NotFound",
               "partitionedtopics.shoal.dev \"nope\" not found");
  value renamed = J(ok);
  renamed["metadata"]["name"] = value::string("other");
  ExpectStatus(Admin("PUT", path, renamed.serialize()), 400, "BadRequest",
               "the name of the object (other) does not match the name on the URL (t1)");
  value wrong_uid = J(ok);
  wrong_uid["metadata"]["uid"] = value::string("0000");
  ExpectStatus(Admin("PUT", path, wrong_uid.serialize()), 409, "Conflict");
}

TEST_F(FakeApiServerTest, BuiltInsTakeUnconditionalUpdates) {
  HttpResponse c = Admin("POST", kLeases,
                         R"({"metadata":{"name":"shoal-operator"},"spec":{"holderIdentity":"a"}})");
  ASSERT_EQ(c.status, 201) << c.Describe();
  HttpResponse u = Admin("PUT", std::string(kLeases) + "/shoal-operator",
                         R"({"metadata":{"name":"shoal-operator"},"spec":{"holderIdentity":"b"}})");
  ASSERT_EQ(u.status, 200) << u.Describe();
  EXPECT_EQ(S(J(u), "spec.holderIdentity"), "b");
  EXPECT_EQ(S(J(u), "metadata.uid"), S(J(c), "metadata.uid")) << "system fields are kept";
  EXPECT_EQ(S(J(u), "metadata.creationTimestamp"), S(J(c), "metadata.creationTimestamp"));

  // Two candidates race with the same RV: one wins, the other gets 409.
  value mine = J(u), theirs = J(u);
  mine["spec"]["holderIdentity"] = value::string("me");
  theirs["spec"]["holderIdentity"] = value::string("them");
  EXPECT_EQ(Admin("PUT", std::string(kLeases) + "/shoal-operator", mine.serialize()).status, 200);
  ExpectStatus(Admin("PUT", std::string(kLeases) + "/shoal-operator", theirs.serialize()), 409,
               "Conflict");
}

TEST_F(FakeApiServerTest, NoOpWritesAreNotPersisted) {
  const value t = CreateTopic("t1");
  const std::string path = std::string(kTopics) + "/t1";
  auto w =
      Watch(std::string(kTopics) + "?watch=1&resourceVersion=" + S(t, "metadata.resourceVersion"));
  ASSERT_TRUE(w);
  const uint64_t before = server_->resource_version();

  HttpResponse same = Admin("PUT", path, t.serialize());
  ASSERT_EQ(same.status, 200) << same.Describe();
  EXPECT_EQ(S(J(same), "metadata.resourceVersion"), S(t, "metadata.resourceVersion"));
  HttpResponse patch = Admin("PATCH", path, R"({"spec":{"replicas":2}})", kMergePatch);
  ASSERT_EQ(patch.status, 200);
  EXPECT_EQ(S(J(patch), "metadata.resourceVersion"), S(t, "metadata.resourceVersion"));
  // Status through the main resource is ignored, so this changes nothing either.
  value with_status = t;
  with_status["status"] = J(R"({"phase":"x"})");
  EXPECT_EQ(S(J(Admin("PUT", path, with_status.serialize())), "metadata.resourceVersion"),
            S(t, "metadata.resourceVersion"));
  EXPECT_EQ(server_->resource_version(), before);

  // The next event is the next real change, not any of the no-ops.
  ASSERT_EQ(Admin("PATCH", path, R"({"spec":{"replicas":5}})", kMergePatch).status, 200);
  const value ev = NextEvent(*w);
  EXPECT_EQ(S(ev, "type"), "MODIFIED");
  EXPECT_EQ(I(ev, "object.spec.replicas"), 5);
}

// ---- generation and the status subresource

TEST_F(FakeApiServerTest, GenerationCountsSpecChangesOnly) {
  const std::string path = std::string(kTopics) + "/t1";
  CreateTopic("t1");
  auto patch = [&](const std::string& body) {
    HttpResponse r = Admin("PATCH", path, body, kMergePatch);
    EXPECT_EQ(r.status, 200) << r.Describe();
    return J(r);
  };
  EXPECT_EQ(I(patch(R"({"spec":{"replicas":3}})"), "metadata.generation"), 2);
  const value labelled = patch(R"({"metadata":{"labels":{"new":"label"}}})");
  EXPECT_EQ(I(labelled, "metadata.generation"), 2) << "metadata changes keep the generation";
  EXPECT_EQ(S(labelled, "metadata.labels.new"), "label");
  EXPECT_EQ(I(patch(R"({"metadata":{"generation":99}})"), "metadata.generation"), 2)
      << "clients cannot set the generation";

  // /status: only .status is taken; spec and metadata changes are dropped; no new generation.
  value body = J(Admin("GET", path));
  body["spec"]["replicas"] = value::number(7);
  body["metadata"]["labels"]["sneaky"] = value::string("yes");
  body["status"] = J(R"({"observedGeneration":2,"replicas":3})");
  HttpResponse st = Admin("PUT", path + "/status", body.serialize());
  ASSERT_EQ(st.status, 200) << st.Describe();
  const value after = J(st);
  EXPECT_EQ(I(after, "status.observedGeneration"), 2);
  EXPECT_EQ(I(after, "spec.replicas"), 3);
  EXPECT_TRUE(At(after, "metadata.labels.sneaky").is_null());
  EXPECT_EQ(I(after, "metadata.generation"), 2);

  // The status survives PUT and PATCH of the main resource.
  value main = after;
  main.erase("status");
  main["spec"]["replicas"] = value::number(4);
  HttpResponse put = Admin("PUT", path, main.serialize());
  ASSERT_EQ(put.status, 200);
  EXPECT_EQ(I(J(put), "status.replicas"), 3);
  EXPECT_EQ(I(J(put), "metadata.generation"), 3);

  // The RV precondition holds on /status too; a merge patch of /status works.
  ExpectStatus(Admin("PUT", path + "/status", after.serialize()), 409, "Conflict");
  HttpResponse sp = Admin("PATCH", path + "/status", R"({"status":{"replicas":4}})", kMergePatch);
  ASSERT_EQ(sp.status, 200) << sp.Describe();
  EXPECT_EQ(I(J(sp), "status.replicas"), 4);
  EXPECT_EQ(I(J(sp), "status.observedGeneration"), 2);
  EXPECT_EQ(I(J(sp), "metadata.generation"), 3);
  HttpResponse st_get = Admin("GET", path + "/status");
  EXPECT_EQ(I(J(st_get), "status.replicas"), 4);
}

// ---- the scale subresource

TEST_F(FakeApiServerTest, ScaleSubresourceReadsAndWritesReplicas) {
  const std::string path = std::string(kTopics) + "/t1";
  // The scale subresource of a PartitionedTopic is its floor of pods, spec.replicas.min.
  ASSERT_EQ(Admin("POST", kTopics,
                  R"({"apiVersion":"shoal.dev/v1alpha1","kind":"PartitionedTopic",)"
                  R"("metadata":{"name":"t1"},"spec":{"replicas":{"min":3,"max":8}}})")
                .status,
            201);
  ASSERT_EQ(Admin("PATCH", path + "/status",
                  R"({"status":{"replicas":2,"selector":"app=shoal,topic=t1"}})", kMergePatch)
                .status,
            200);
  HttpResponse g = Admin("GET", path + "/scale");
  ASSERT_EQ(g.status, 200) << g.Describe();
  const value scale = J(g);
  const value topic = J(Admin("GET", path));
  EXPECT_EQ(S(scale, "kind"), "Scale");
  EXPECT_EQ(S(scale, "apiVersion"), "autoscaling/v1");
  EXPECT_EQ(S(scale, "metadata.name"), "t1");
  EXPECT_EQ(S(scale, "metadata.namespace"), "default");
  EXPECT_EQ(S(scale, "metadata.uid"), S(topic, "metadata.uid"));
  EXPECT_EQ(S(scale, "metadata.resourceVersion"), S(topic, "metadata.resourceVersion"));
  EXPECT_EQ(I(scale, "spec.replicas"), 3);
  EXPECT_EQ(I(scale, "status.replicas"), 2);
  EXPECT_EQ(S(scale, "status.selector"), "app=shoal,topic=t1");

  // kubectl scale --replicas=5
  HttpResponse p = Admin("PATCH", path + "/scale", R"({"spec":{"replicas":5}})", kMergePatch);
  ASSERT_EQ(p.status, 200) << p.Describe();
  EXPECT_EQ(S(J(p), "kind"), "Scale");
  EXPECT_EQ(I(J(p), "spec.replicas"), 5);
  const value scaled = J(Admin("GET", path));
  EXPECT_EQ(I(scaled, "spec.replicas.min"), 5);
  EXPECT_EQ(I(scaled, "spec.replicas.max"), 8);
  EXPECT_EQ(I(scaled, "metadata.generation"), 2);
  EXPECT_EQ(S(J(p), "metadata.resourceVersion"), S(scaled, "metadata.resourceVersion"));

  // PUT of a Scale: the RV is a precondition; replicas must be >= 0.
  value put = scale;  // the RV from before the patch
  put["spec"]["replicas"] = value::number(6);
  ExpectStatus(Admin("PUT", path + "/scale", put.serialize()), 409, "Conflict",
               std::string("Operation cannot be fulfilled on partitionedtopics.shoal.dev \"t1") +
                   kConflictTail);
  put = J(p);
  put["spec"]["replicas"] = value::number(-1);
  ExpectStatus(Admin("PUT", path + "/scale", put.serialize()), 422, "Invalid");
  put["spec"]["replicas"] = value::number(6);
  HttpResponse ok = Admin("PUT", path + "/scale", put.serialize());
  ASSERT_EQ(ok.status, 200) << ok.Describe();
  EXPECT_EQ(I(J(Admin("GET", path)), "spec.replicas.min"), 6);
  // JSON patch works on the Scale too.
  HttpResponse jp = Admin("PATCH", path + "/scale",
                          R"([{"op":"replace","path":"/spec/replicas","value":1}])", kJsonPatch);
  ASSERT_EQ(jp.status, 200) << jp.Describe();
  EXPECT_EQ(I(J(Admin("GET", path)), "spec.replicas.min"), 1);
}

// Built-in kinds against their OpenAPI schemas (schemas/builtin.json, generated from the
// Kubernetes OpenAPI v1.34): unknown fields pruned with a Warning, 400 under
// fieldValidation=Strict; required fields and types checked; quantities and int-or-string ports
// take either form. ?dryRun=All admits and validates without storing.
TEST_F(FakeApiServerTest, BuiltInKindsArePrunedAndValidatedByTheirOpenApiSchema) {
  const std::string deployments = "/apis/apps/v1/namespaces/default/deployments";
  const std::string deployment = R"({"metadata":{"name":"d"},"spec":{"replicass":2,
      "selector":{"matchLabels":{"app":"d"}},
      "template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c",
        "image":"x","resources":{"requests":{"cpu":1,"memory":"64Mi"}},
        "ports":[{"containerPort":8080,"name":"http"}],
        "readinessProbe":{"httpGet":{"path":"/readyz","port":"http"}}}]}}}})";
  HttpResponse strict = Admin("POST", deployments + "?fieldValidation=Strict", deployment);
  ExpectStatus(strict, 400, "BadRequest", R"(strict decoding error: unknown field "spec.replicass")");
  HttpResponse warned = Admin("POST", deployments, deployment);
  ASSERT_EQ(warned.status, 201) << warned.Describe();
  ASSERT_EQ(warned.headers.count("Warning"), 1u);
  EXPECT_NE(warned.headers.at("Warning").find(R"(unknown field \"spec.replicass\")"),
            std::string::npos)
      << warned.headers.at("Warning");
  EXPECT_TRUE(At(J(Admin("GET", deployments + "/d")), "spec.replicass").is_null()) << "not pruned";
  const value containers = At(J(Admin("GET", deployments + "/d")), "spec.template.spec.containers");
  ASSERT_TRUE(containers.is_array());
  EXPECT_EQ(I(containers.at(0), "resources.requests.cpu"), 1) << "a quantity may be a number";

  // Required: a container's name, a Deployment's selector and template.
  ExpectStatus(Admin("POST", "/api/v1/namespaces/default/pods",
                     R"({"metadata":{"name":"p"},"spec":{"containers":[{"image":"x"}]}})"),
               422, "Invalid",
               R"(Pod "p" is invalid: spec.containers[0].name: Required value)");
  ExpectStatus(Admin("POST", deployments, R"({"metadata":{"name":"e"},"spec":{}})"), 422,
               "Invalid",
               R"(Deployment.apps "e" is invalid: [spec.selector: Required value, spec.template: Required value])");
  // Types: a port is an integer; a targetPort an integer or a name.
  ExpectStatus(Admin("POST", "/api/v1/namespaces/default/services",
                     R"({"metadata":{"name":"s"},"spec":{"ports":[{"port":"80"}]}})"),
               422, "Invalid",
               R"(Service "s" is invalid: spec.ports[0].port: Invalid value: "string": spec.ports[0].port in body must be of type integer: "string")");
  EXPECT_EQ(Admin("POST", "/api/v1/namespaces/default/services",
                  R"({"metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":"http"}]}})")
                .status,
            201);

  // Dry run: admitted and answered, nothing stored, no event; other values refused.
  const std::string maps = "/api/v1/namespaces/default/configmaps";
  HttpResponse dry = Admin("POST", maps + "?dryRun=All&fieldValidation=Strict",
                           R"({"metadata":{"name":"m"},"data":{"k":"v"}})");
  ASSERT_EQ(dry.status, 201) << dry.Describe();
  EXPECT_EQ(S(J(dry), "data.k"), "v");
  EXPECT_EQ(Admin("GET", maps + "/m").status, 404);
  ExpectStatus(Admin("POST", maps + "?dryRun=All&fieldValidation=Strict",
                     R"({"metadata":{"name":"m"},"datta":{"k":"v"}})"),
               400, "BadRequest", R"(strict decoding error: unknown field "datta")");
  ExpectStatus(Admin("POST", maps + "?dryRun=Some", R"({"metadata":{"name":"m"}})"), 400,
               "BadRequest", R"(dryRun[0]: Unsupported value: "Some": supported values: "All")");
  ASSERT_EQ(Admin("POST", maps, R"({"metadata":{"name":"m"},"data":{"k":"v"}})").status, 201);
  EXPECT_EQ(Admin("PUT", maps + "/m?dryRun=All", R"({"metadata":{"name":"m"},"data":{"k":"w"}})")
                .status,
            200);
  EXPECT_EQ(S(J(Admin("GET", maps + "/m")), "data.k"), "v") << "a dry-run update was stored";
  EXPECT_EQ(Admin("DELETE", maps + "/m?dryRun=All").status, 200);
  EXPECT_EQ(Admin("GET", maps + "/m").status, 200) << "a dry-run delete deleted";
}

TEST_F(FakeApiServerTest, StatefulSetScaleShowsItsSelector) {
  HttpResponse c = Admin("POST", kStatefulSets, R"({"metadata":{"name":"t1"},"spec":{"replicas":2,
      "selector":{"matchLabels":{"topic":"t1","app":"shoal"}},
      "template":{"metadata":{"labels":{"topic":"t1","app":"shoal"}},"spec":{"containers":[{"name":"c"}]}}},
      "status":{"replicas":9}})");
  ASSERT_EQ(c.status, 201) << c.Describe();
  EXPECT_TRUE(At(J(c), "status").is_null());
  const value scale = J(Admin("GET", std::string(kStatefulSets) + "/t1/scale"));
  EXPECT_EQ(I(scale, "spec.replicas"), 2);
  EXPECT_EQ(I(scale, "status.replicas"), 0);
  EXPECT_EQ(S(scale, "status.selector"), "app=shoal,topic=t1");
}

TEST_F(FakeApiServerTest, ScalePathsAreConfigurable) {
  StartServer(std::nullopt, [](FakeApiServerOptions& o) {
    o.types[0].scale = ScaleSubresource{.spec_replicas_path = ".spec.pods.desired",
                                        .status_replicas_path = ".status.pods",
                                        .label_selector_path = ""};
  });
  ASSERT_EQ(
      Admin("POST", kTopics, R"({"metadata":{"name":"t"},"spec":{"pods":{"desired":3}}})").status,
      201);
  const value scale = J(Admin("GET", std::string(kTopics) + "/t/scale"));
  EXPECT_EQ(I(scale, "spec.replicas"), 3);
  EXPECT_TRUE(At(scale, "status.selector").is_null());
  ASSERT_EQ(
      Admin("PATCH", std::string(kTopics) + "/t/scale", R"({"spec":{"replicas":4}})", kMergePatch)
          .status,
      200);
  EXPECT_EQ(I(J(Admin("GET", std::string(kTopics) + "/t")), "spec.pods.desired"), 4);
}

// ---- PATCH

TEST_F(FakeApiServerTest, PatchAppliesMergeAndJsonPatchesWithPreconditions) {
  const std::string path = std::string(kTopics) + "/t1";
  const value t = CreateTopic("t1", 2, R"(,"annotations":{"a":"1","b":"2"})");
  HttpResponse m = Admin(
      "PATCH", path, R"({"metadata":{"annotations":{"a":null}},"spec":{"x":[1]}})", kMergePatch);
  ASSERT_EQ(m.status, 200) << m.Describe();
  EXPECT_TRUE(At(J(m), "metadata.annotations.a").is_null());
  EXPECT_EQ(S(J(m), "metadata.annotations.b"), "2");
  EXPECT_EQ(At(J(m), "spec.x").serialize(), "[1]");

  // An RV in the patch is a precondition.
  ExpectStatus(Admin("PATCH", path,
                     R"({"metadata":{"resourceVersion":")" + S(t, "metadata.resourceVersion") +
                         R"("},"spec":{"replicas":9}})",
                     kMergePatch),
               409, "Conflict",
               std::string("Operation cannot be fulfilled on partitionedtopics.shoal.dev \"t1") +
                   kConflictTail);
  HttpResponse with_rv =
      Admin("PATCH", path,
            R"({"metadata":{"resourceVersion":")" + S(J(m), "metadata.resourceVersion") +
                R"("},"spec":{"replicas":9}})",
            kMergePatch);
  ASSERT_EQ(with_rv.status, 200) << with_rv.Describe();

  HttpResponse jp = Admin("PATCH", path,
                          R"([{"op":"test","path":"/spec/replicas","value":9},
                              {"op":"add","path":"/spec/x/-","value":2},
                              {"op":"remove","path":"/metadata/annotations/b"}])",
                          kJsonPatch);
  ASSERT_EQ(jp.status, 200) << jp.Describe();
  EXPECT_EQ(At(J(jp), "spec.x").serialize(), "[1,2]");
  ExpectStatus(
      Admin("PATCH", path, R"([{"op":"test","path":"/spec/replicas","value":1}])", kJsonPatch), 422,
      "Invalid");
  ExpectStatus(Admin("PATCH", path, R"({"op":"add"})", kJsonPatch), 400, "BadRequest");
  ExpectStatus(Admin("PATCH", path, "{not json", kMergePatch), 400, "BadRequest");

  ExpectStatus(Admin("PATCH", path, R"({"spec":{"replicas":1}})", kStrategic), 415,
               "UnsupportedMediaType");
  // Server-side apply is served (its own tests below); without a field manager it is refused.
  ExpectStatus(Admin("PATCH", path, "spec: {}", "application/apply-patch+yaml"), 422, "Invalid");
  ExpectStatus(Admin("PATCH", path, R"({"spec":{}})", "application/json"), 415,
               "UnsupportedMediaType");
  ExpectStatus(Admin("PATCH", std::string(kTopics) + "/nope", "{}", kMergePatch), 404, "NotFound");

  // Built-in kinds take strategic merge patch (applied as a merge patch).
  ASSERT_EQ(
      Admin("POST", kStatefulSets, R"({"metadata":{"name":"s"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"s"}},"template":{"metadata":{"labels":{"app":"s"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}})").status,
      201);
  HttpResponse sm = Admin("PATCH", std::string(kStatefulSets) + "/s", R"({"spec":{"replicas":2}})",
                          kStrategic + std::string("; charset=utf-8"));
  ASSERT_EQ(sm.status, 200) << sm.Describe();
  EXPECT_EQ(I(J(sm), "spec.replicas"), 2);
  EXPECT_EQ(I(J(sm), "metadata.generation"), 2);
}

// ---- watch

TEST_F(FakeApiServerTest, WatchWithoutRvStartsWithSyntheticAdded) {
  CreateTopic("a");
  CreateTopic("b");
  auto w = Watch(std::string(kTopics) + "?watch=1");
  ASSERT_TRUE(w);
  EXPECT_EQ(S(NextEvent(*w), "object.metadata.name"), "a");
  const value b = NextEvent(*w);
  EXPECT_EQ(S(b, "type"), "ADDED");
  EXPECT_EQ(S(b, "object.metadata.name"), "b");
  auto w0 = Watch(std::string(kTopics) + "?watch=true&resourceVersion=0");
  ASSERT_TRUE(w0);
  EXPECT_EQ(S(NextEvent(*w0), "type"), "ADDED");
  EXPECT_EQ(S(NextEvent(*w0), "type"), "ADDED");

  CreateTopic("c");
  const value c = NextEvent(*w);
  EXPECT_EQ(S(c, "type"), "ADDED");
  EXPECT_EQ(S(c, "object.metadata.name"), "c");
  EXPECT_EQ(S(NextEvent(*w0), "object.metadata.name"), "c");
}

TEST_F(FakeApiServerTest, WatchFromRvSendsOnlyLaterChangesInOrder) {
  const value a = CreateTopic("a");
  const std::string path = std::string(kTopics) + "/a";
  ASSERT_EQ(Admin("PATCH", path, R"({"spec":{"replicas":3}})", kMergePatch).status, 200);
  auto w =
      Watch(std::string(kTopics) + "?watch=1&resourceVersion=" + S(a, "metadata.resourceVersion") +
            "&timeoutSeconds=30");
  ASSERT_TRUE(w);
  // A change to another namespace or kind is not this watch's business.
  ASSERT_EQ(Admin("POST", "/apis/shoal.dev/v1alpha1/namespaces/other/partitionedtopics",
                  Topic("elsewhere"))
                .status,
            201);
  ASSERT_EQ(
      Admin("POST", "/api/v1/namespaces/default/secrets", R"({"metadata":{"name":"s"}})").status,
      201);
  const value deleted = J(Admin("DELETE", path));
  EXPECT_EQ(S(deleted, "status"), "Success");

  const value m = NextEvent(*w);
  EXPECT_EQ(S(m, "type"), "MODIFIED");
  EXPECT_EQ(I(m, "object.spec.replicas"), 3);
  const value d = NextEvent(*w);
  EXPECT_EQ(S(d, "type"), "DELETED");
  EXPECT_EQ(I(d, "object.spec.replicas"), 3) << "DELETED carries the last state";
  EXPECT_GT(std::stoull(S(d, "object.metadata.resourceVersion")),
            std::stoull(S(m, "object.metadata.resourceVersion")));

  // A cluster-wide watch sees every namespace.
  auto all = Watch("/apis/shoal.dev/v1alpha1/partitionedtopics?watch=1");
  ASSERT_TRUE(all);
  EXPECT_EQ(S(NextEvent(*all), "object.metadata.namespace"), "other");
}

TEST_F(FakeApiServerTest, WatchFollowsLabelSelectorsInAndOut) {
  const std::string path = std::string(kTopics) + "/a";
  CreateTopic("a");
  auto w = Watch(std::string(kTopics) + "?watch=1&labelSelector=tier%3Dgold");
  ASSERT_TRUE(w);
  ASSERT_EQ(Admin("PATCH", path, R"({"metadata":{"labels":{"tier":"gold"}}})", kMergePatch).status,
            200);
  EXPECT_EQ(S(NextEvent(*w), "type"), "ADDED");
  ASSERT_EQ(Admin("PATCH", path, R"({"spec":{"replicas":4}})", kMergePatch).status, 200);
  EXPECT_EQ(S(NextEvent(*w), "type"), "MODIFIED");
  ASSERT_EQ(Admin("PATCH", path, R"({"metadata":{"labels":{"tier":null}}})", kMergePatch).status,
            200);
  EXPECT_EQ(S(NextEvent(*w), "type"), "DELETED");
  ASSERT_EQ(Admin("POST", kTopics, R"({"metadata":{"name":"b","labels":{"tier":"gold"}}})").status,
            201);
  const value b = NextEvent(*w);
  EXPECT_EQ(S(b, "type"), "ADDED");
  EXPECT_EQ(S(b, "object.metadata.name"), "b");
}

TEST_F(FakeApiServerTest, BookmarksOnlyForWatchesThatAskForThem) {
  CreateTopic("a");
  const std::string rv = std::to_string(server_->resource_version());
  auto with =
      Watch(std::string(kTopics) + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv);
  auto without = Watch(std::string(kTopics) + "?watch=1&resourceVersion=" + rv);
  ASSERT_TRUE(with && without);
  ASSERT_TRUE(server_->WaitForWatches(2, 5s));
  server_->SendBookmark();
  CreateTopic("b");
  const value bm = NextEvent(*with);
  EXPECT_EQ(S(bm, "type"), "BOOKMARK");
  EXPECT_EQ(S(bm, "object.kind"), "PartitionedTopic");
  EXPECT_EQ(S(bm, "object.apiVersion"), "shoal.dev/v1alpha1");
  EXPECT_EQ(S(bm, "object.metadata.resourceVersion"), rv);
  EXPECT_EQ(S(NextEvent(*with), "type"), "ADDED");
  EXPECT_EQ(S(NextEvent(*without), "type"), "ADDED");
}

TEST_F(FakeApiServerTest, WatchesEndAtTheirTimeoutAndWhenClosed) {
  auto timed = Watch(std::string(kTopics) + "?watch=1&timeoutSeconds=1");
  auto open = Watch(std::string(kTopics) + "?watch=1");
  ASSERT_TRUE(timed && open);
  ExpectEnd(*timed);
  ASSERT_TRUE(server_->WaitForWatches(1, 5s));
  server_->CloseAllWatches();
  ExpectEnd(*open);
  EXPECT_EQ(server_->open_watches(), 0u);
}

TEST_F(FakeApiServerTest, TooOldRvGetsExpiredThenTheStreamCloses) {
  StartServer(std::nullopt, [](FakeApiServerOptions& o) { o.watch_history = 3; });
  const value first = CreateTopic("a");
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(Admin("PATCH", std::string(kTopics) + "/a",
                    R"({"spec":{"replicas":)" + std::to_string(i + 3) + "}}", kMergePatch)
                  .status,
              200);
  }
  // History holds RVs 4..6 (watching from 3 or later still works).
  const std::string rv = S(first, "metadata.resourceVersion");
  ASSERT_EQ(rv, "1");
  auto w = Watch(std::string(kTopics) + "?watch=1&resourceVersion=" + rv);
  ASSERT_TRUE(w);
  const value err = NextEvent(*w);
  EXPECT_EQ(S(err, "type"), "ERROR");
  EXPECT_EQ(S(err, "object.kind"), "Status");
  EXPECT_EQ(I(err, "object.code"), 410);
  EXPECT_EQ(S(err, "object.reason"), "Expired");
  EXPECT_EQ(S(err, "object.message"), "too old resource version: 1 (3)");
  ExpectEnd(*w);

  auto recent = Watch(std::string(kTopics) + "?watch=1&resourceVersion=3");
  ASSERT_TRUE(recent);
  EXPECT_EQ(I(NextEvent(*recent), "object.spec.replicas"), 5);

  // The hook forgets all history: any older RV expires, the current one still works.
  server_->CompactHistory();
  auto expired = Watch(std::string(kTopics) + "?watch=1&resourceVersion=5");
  ASSERT_TRUE(expired);
  EXPECT_EQ(S(NextEvent(*expired), "object.reason"), "Expired");
  auto current = Watch(std::string(kTopics) + "?watch=1&resourceVersion=6");
  ASSERT_TRUE(current);
  ASSERT_EQ(Admin("DELETE", std::string(kTopics) + "/a").status, 200);
  EXPECT_EQ(S(NextEvent(*current), "type"), "DELETED");
}

// ---- finalizers and deletion

TEST_F(FakeApiServerTest, FinalizersHoldDeletionUntilTheLastIsRemoved) {
  const std::string path = std::string(kTopics) + "/t1";
  const value t = CreateTopic("t1", 2, R"(,"finalizers":["shoal.dev/cleanup"])");
  auto w =
      Watch(std::string(kTopics) + "?watch=1&resourceVersion=" + S(t, "metadata.resourceVersion"));
  ASSERT_TRUE(w);

  HttpResponse d = Admin("DELETE", path);
  ASSERT_EQ(d.status, 200) << d.Describe();
  const value deleting = J(d);
  EXPECT_EQ(S(deleting, "kind"), "PartitionedTopic") << "the object, not a Status";
  EXPECT_EQ(S(deleting, "metadata.deletionTimestamp"), "2023-11-14T22:13:20Z");
  EXPECT_EQ(I(deleting, "metadata.generation"), 2);
  EXPECT_EQ(Admin("GET", path).status, 200);
  const value modified = NextEvent(*w);
  EXPECT_EQ(S(modified, "type"), "MODIFIED");
  EXPECT_FALSE(S(modified, "object.metadata.deletionTimestamp").empty());

  // Deleting again changes nothing.
  EXPECT_EQ(S(J(Admin("DELETE", path)), "metadata.resourceVersion"),
            S(deleting, "metadata.resourceVersion"));
  // Only removal: adding a finalizer is refused; spec changes are still allowed.
  ExpectStatus(Admin("PATCH", path,
                     R"({"metadata":{"finalizers":["shoal.dev/cleanup","other/x"]}})", kMergePatch),
               422, "Invalid",
               "PartitionedTopic.shoal.dev \"t1\" is invalid: metadata.finalizers: Forbidden: no "
               "new finalizers can be added if the object is being deleted, found new finalizers "
               "[]string{\"other/x\"}");
  value clear_ts = deleting;
  clear_ts["metadata"].erase("deletionTimestamp");
  clear_ts["spec"]["replicas"] = value::number(1);
  HttpResponse kept = Admin("PUT", path, clear_ts.serialize());
  ASSERT_EQ(kept.status, 200) << kept.Describe();
  EXPECT_EQ(S(J(kept), "metadata.deletionTimestamp"), S(deleting, "metadata.deletionTimestamp"))
      << "an update cannot remove the deletionTimestamp";
  EXPECT_EQ(S(NextEvent(*w), "type"), "MODIFIED");

  // Removing the last finalizer (with the RV, as the reference advises) deletes the object.
  HttpResponse last = Admin("PATCH", path,
                            R"({"metadata":{"finalizers":null,"resourceVersion":")" +
                                S(J(kept), "metadata.resourceVersion") + R"("}})",
                            kMergePatch);
  ASSERT_EQ(last.status, 200) << last.Describe();
  EXPECT_EQ(Admin("GET", path).status, 404);
  const value gone = NextEvent(*w);
  EXPECT_EQ(S(gone, "type"), "DELETED");
  EXPECT_EQ(S(gone, "object.metadata.name"), "t1");
  ExpectStatus(Admin("DELETE", path), 404, "NotFound");
}

TEST_F(FakeApiServerTest, DeleteWithoutFinalizersAnswersSuccessAndChecksPreconditions) {
  const value t = CreateTopic("t1");
  const std::string path = std::string(kTopics) + "/t1";
  ASSERT_EQ(Admin("PATCH", path, R"({"spec":{"replicas":3}})", kMergePatch).status, 200);
  ExpectStatus(Admin("DELETE", path,
                     R"({"preconditions":{"resourceVersion":")" + S(t, "metadata.resourceVersion") +
                         R"("}})"),
               409, "Conflict");
  ExpectStatus(Admin("DELETE", path, R"({"preconditions":{"uid":"not-it"}})"), 409, "Conflict");
  HttpResponse d = Admin("DELETE", path, R"({"propagationPolicy":"Background"})");
  ASSERT_EQ(d.status, 200) << d.Describe();
  const value s = J(d);
  EXPECT_EQ(S(s, "kind"), "Status");
  EXPECT_EQ(S(s, "status"), "Success");
  EXPECT_EQ(S(s, "details.name"), "t1");
  EXPECT_EQ(S(s, "details.group"), "shoal.dev");
  EXPECT_EQ(S(s, "details.kind"), "partitionedtopics");
  EXPECT_EQ(S(s, "details.uid"), S(t, "metadata.uid"));
  EXPECT_EQ(Admin("GET", path).status, 404);
  ExpectStatus(Admin("DELETE", kTopics), 405, "MethodNotAllowed");
}

// ---- injected failures

TEST_F(FakeApiServerTest, InjectedFailuresHitTheNextWritesToAPath) {
  const std::string path = std::string(kTopics) + "/t1";
  CreateTopic("t1");
  server_->FailNextWrites(path + "/status", 2, 409);
  const std::string status_patch = R"({"status":{"replicas":1}})";
  ExpectStatus(Admin("PATCH", path + "/status", status_patch, kMergePatch), 409, "Conflict",
               std::string("Operation cannot be fulfilled on partitionedtopics.shoal.dev \"t1") +
                   kConflictTail);
  EXPECT_EQ(Admin("GET", path + "/status").status, 200) << "reads are not affected";
  EXPECT_EQ(Admin("PATCH", path, R"({"spec":{"replicas":3}})", kMergePatch).status, 200)
      << "other paths are not affected";
  ExpectStatus(Admin("PATCH", path + "/status", status_patch, kMergePatch), 409, "Conflict");
  EXPECT_TRUE(At(J(Admin("GET", path)), "status").is_null()) << "a failed write changes nothing";
  EXPECT_EQ(Admin("PATCH", path + "/status", status_patch, kMergePatch).status, 200);
  EXPECT_EQ(server_->CountRequests("PATCH", path + "/status"), 3);
  EXPECT_EQ(server_->CountRequests("PATCH", path + "/status", 409), 2);

  server_->FailNextWrites(kTopics, 1, 500);
  ExpectStatus(Admin("POST", kTopics, Topic("t2")), 500, "InternalError",
               "Internal error occurred: injected failure");
  EXPECT_EQ(Admin("POST", kTopics, Topic("t2")).status, 201);
  server_->FailNextWrites(path, 1, 429);
  ExpectStatus(Admin("DELETE", path), 429, "TooManyRequests");
  EXPECT_EQ(Admin("DELETE", path).status, 200);

  // Failures for one method only: other writes to the path go through and do not use them up.
  CreateTopic("t3");
  const std::string t3 = std::string(kTopics) + "/t3";
  server_->FailNextWrites(t3 + "/status", 1, 409, "PUT");
  EXPECT_EQ(Admin("PATCH", t3 + "/status", status_patch, kMergePatch).status, 200);
  value t3_now = J(Admin("GET", t3));
  ExpectStatus(Admin("PUT", t3 + "/status", t3_now.serialize()), 409, "Conflict");
  EXPECT_EQ(Admin("PUT", t3 + "/status", t3_now.serialize()).status, 200);
}

// ---- authentication and RBAC

TEST_F(FakeApiServerTest, UnknownOrMissingTokensAreUnauthorized) {
  ExpectStatus(Call("", "GET", kTopics), 401, "Unauthorized", "Unauthorized");
  ExpectStatus(Call("wrong", "GET", kTopics), 401, "Unauthorized");
  EXPECT_EQ(Admin("GET", kTopics).status, 200);
  EXPECT_EQ(Call("", "GET", "/healthz").status, 200);

  StartServer(std::nullopt, [](FakeApiServerOptions& o) {
    o.admin_token.clear();
    o.users.clear();
  });
  EXPECT_EQ(Call("", "GET", kTopics).status, 200) << "no tokens configured: no authentication";
}

TEST_F(FakeApiServerTest, OperatorTokenIsHeldToTheRulesFile) {
  CreateTopic("t1");
  const std::string path = std::string(kTopics) + "/t1";
  const std::string who = "User \"system:serviceaccount:shoal-system:shoal-operator\" cannot ";

  EXPECT_EQ(Op("GET", kTopics).status, 200);
  EXPECT_EQ(Op("GET", "/apis/shoal.dev/v1alpha1/partitionedtopics").status, 200);
  EXPECT_EQ(Op("PATCH", path + "/status", R"({"status":{"replicas":1}})", kMergePatch).status, 200);
  HttpResponse create = Op("POST", kTopics, Topic("t2"));
  ExpectStatus(create, 403, "Forbidden",
               "partitionedtopics.shoal.dev is forbidden: " + who +
                   "create resource \"partitionedtopics\" in API group \"shoal.dev\" in the "
                   "namespace \"default\"");
  EXPECT_EQ(S(J(create), "details.group"), "shoal.dev");
  EXPECT_EQ(S(J(create), "details.kind"), "partitionedtopics");
  HttpResponse del = Op("DELETE", path);
  ExpectStatus(del, 403, "Forbidden",
               "partitionedtopics.shoal.dev \"t1\" is forbidden: " + who +
                   "delete resource \"partitionedtopics\" in API group \"shoal.dev\" in the "
                   "namespace \"default\"");
  EXPECT_EQ(S(J(del), "details.name"), "t1");
  ExpectStatus(Op("GET", "/apis/coordination.k8s.io/v1/leases"), 403, "Forbidden",
               "leases.coordination.k8s.io is forbidden: " + who +
                   "list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster "
                   "scope");
  ExpectStatus(Op("POST", "/api/v1/namespaces/default/pods", R"({"metadata":{"name":"p"}})"), 403,
               "Forbidden");
  ExpectStatus(Op("PUT", "/api/v1/namespaces/default/pods/p/status", "{}"), 403, "Forbidden");
  auto watch = Watch(std::string(kTopics) + "?watch=1&timeoutSeconds=1", kOperator);
  ASSERT_TRUE(watch);
  EXPECT_EQ(S(NextEvent(*watch), "type"), "ADDED");

  // What the operator does for a topic is granted.
  EXPECT_EQ(Op("POST", kStatefulSets, R"({"metadata":{"name":"t1","ownerReferences":[
      {"apiVersion":"shoal.dev/v1alpha1","kind":"PartitionedTopic","name":"t1","uid":"u",
       "controller":true,"blockOwnerDeletion":true}]},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"t1"}},"template":{"metadata":{"labels":{"app":"t1"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}})")
                .status,
            201);
  EXPECT_EQ(Op("PATCH", std::string(kStatefulSets) + "/t1/scale", R"({"spec":{"replicas":2}})",
               kMergePatch)
                .status,
            200);
  EXPECT_EQ(Op("POST", "/api/v1/namespaces/default/secrets", R"({"metadata":{"name":"t"}})").status,
            201);
  // Events go through events.k8s.io/v1 only.
  ExpectStatus(Op("POST", "/api/v1/namespaces/default/events", R"({"metadata":{"name":"e.1"}})"),
               403, "Forbidden");
  EXPECT_EQ(Op("POST", "/apis/events.k8s.io/v1/namespaces/default/events",
               R"({"metadata":{"name":"e.2"},"eventTime":"2023-11-14T22:13:20.000000Z"})")
                .status,
            201);
  ExpectStatus(Op("GET", "/api/v1/namespaces/default/events/e.1"), 403, "Forbidden");
  EXPECT_EQ(Op("POST", kLeases, R"({"metadata":{"name":"l"}})").status, 201);
  EXPECT_EQ(Op("GET", std::string(kLeases) + "/l").status, 200);
  ExpectStatus(Op("DELETE", std::string(kLeases) + "/l"), 403, "Forbidden");
}

TEST_F(FakeApiServerTest, ARuleRemovedFromTheFileIsA403) {
  auto full = OperatorUser(kOperator, kOperatorRulesFile);
  ASSERT_TRUE(full.ok());
  std::vector<PolicyRule> rules;
  for (const auto& r : full->rules) {
    if (r.resources != std::vector<std::string>{"partitionedtopics/status"} &&
        r.resources != std::vector<std::string>{"partitionedtopics/finalizers"}) {
      rules.push_back(r);
    }
  }
  ASSERT_EQ(rules.size(), full->rules.size() - 2);
  StartServer(rules);
  CreateTopic("x");
  const std::string path = std::string(kTopics) + "/x";
  value t = J(Admin("GET", path));
  t["status"] = J(R"({"replicas":1})");
  HttpResponse r = Op("PUT", path + "/status", t.serialize());
  ExpectStatus(r, 403, "Forbidden",
               "partitionedtopics.shoal.dev \"x\" is forbidden: User "
               "\"system:serviceaccount:shoal-system:shoal-operator\" cannot update resource "
               "\"partitionedtopics/status\" in API group \"shoal.dev\" in the namespace "
               "\"default\"");
  EXPECT_EQ(S(J(r), "details.name"), "x");
  EXPECT_EQ(S(J(r), "details.group"), "shoal.dev");
  EXPECT_EQ(S(J(r), "details.kind"), "partitionedtopics");

  // Without partitionedtopics/finalizers, an owner reference that blocks the owner's deletion
  // is refused (OwnerReferencesPermissionEnforcement); one that does not is fine.
  const std::string owned = R"({"metadata":{"name":"x","ownerReferences":[{"apiVersion":
      "shoal.dev/v1alpha1","kind":"PartitionedTopic","name":"x","uid":"u","controller":true,
      "blockOwnerDeletion":BLOCK}]}})";
  auto with_block = [&](const char* block) {
    std::string s = owned;
    s.replace(s.find("BLOCK"), 5, block);
    return s;
  };
  ExpectStatus(Op("POST", kStatefulSets, with_block("true")), 403, "Forbidden",
               "statefulsets.apps \"x\" is forbidden: cannot set blockOwnerDeletion if an "
               "ownerReference refers to a resource you can't set finalizers on: User "
               "\"system:serviceaccount:shoal-system:shoal-operator\" cannot update resource "
               "\"partitionedtopics/finalizers\" in API group \"shoal.dev\" in the namespace "
               "\"default\", <nil>");
  EXPECT_EQ(Op("POST", kStatefulSets, with_block("false")).status, 201);
  EXPECT_EQ(Admin("POST", "/api/v1/namespaces/default/services", with_block("true")).status, 201)
      << "the admin bypasses RBAC";

  // The same rule on update: turning an existing reference into a blocking one, or adding a
  // new blocking one, is refused; keeping one that already blocks is not checked again.
  const std::string sts = std::string(kStatefulSets) + "/x";
  auto with_refs = [&](const std::string& refs_json) {
    value obj = J(Admin("GET", sts));
    obj["metadata"]["ownerReferences"] = J(refs_json);
    return obj;
  };
  const std::string blocking = R"([{"apiVersion":"shoal.dev/v1alpha1","kind":"PartitionedTopic",
      "name":"x","uid":"u","controller":true,"blockOwnerDeletion":true}])";
  HttpResponse updated = Op("PUT", sts, with_refs(blocking).serialize());
  ExpectStatus(updated, 403, "Forbidden",
               "statefulsets.apps \"x\" is forbidden: cannot set blockOwnerDeletion if an "
               "ownerReference refers to a resource you can't set finalizers on: User "
               "\"system:serviceaccount:shoal-system:shoal-operator\" cannot update resource "
               "\"partitionedtopics/finalizers\" in API group \"shoal.dev\" in the namespace "
               "\"default\", <nil>");
  EXPECT_EQ(S(J(updated), "details.name"), "x");
  EXPECT_EQ(S(J(updated), "details.kind"), "statefulsets");
  ASSERT_EQ(Admin("PUT", sts, with_refs(blocking).serialize()).status, 200);
  value more = J(Admin("GET", sts));
  more["spec"] = J(R"({"replicas":3,"selector":{"matchLabels":{"app":"x"}},
      "template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"c"}]}}})");
  EXPECT_EQ(Op("PUT", sts, more.serialize()).status, 200)
      << "a reference that already blocked is not checked again";
  ExpectStatus(Op("PUT", sts,
                  with_refs(R"([{"apiVersion":"apps/v1","kind":"StatefulSet","name":"y",
                      "uid":"v","blockOwnerDeletion":true}])")
                      .serialize()),
               403, "Forbidden",
               "statefulsets.apps \"x\" is forbidden: cannot set blockOwnerDeletion if an "
               "ownerReference refers to a resource you can't set finalizers on: User "
               "\"system:serviceaccount:shoal-system:shoal-operator\" cannot update resource "
               "\"statefulsets/finalizers\" in API group \"apps\" in the namespace "
               "\"default\", <nil>");
  ExpectStatus(Op("POST", "/api/v1/namespaces/default/secrets", R"({"metadata":{"name":"s",
      "ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"w","uid":"w",
      "blockOwnerDeletion":true}]}})"),
               403, "Forbidden",
               "secrets \"s\" is forbidden: cannot set blockOwnerDeletion in this case because "
               "cannot find RESTMapping for APIVersion example.com/v1 Kind Widget: no matches for "
               "kind \"Widget\" in version \"example.com/v1\"");
}

// ---- metrics.k8s.io

TEST_F(FakeApiServerTest, PodMetricsAreServedFromWhatTheTestPutsThere) {
  ASSERT_TRUE(server_
                  ->Seed(kPodMetrics, R"({"metadata":{"name":"t1-0","labels":{"topic":"t1"}},
                     "timestamp":"2023-11-14T22:13:20Z","window":"15s",
                     "containers":[{"name":"consumer","usage":{"cpu":"508234567n","memory":"256Mi"}}]})")
                  .ok());
  ASSERT_TRUE(server_->Seed(kPodMetrics, R"({"metadata":{"name":"other"},"containers":[]})").ok());
  // The operator lists; getting one is the admin's (the operator's rules grant list only).
  ExpectStatus(Op("GET", std::string(kPodMetrics) + "/t1-0"), 403, "Forbidden");
  HttpResponse g = Admin("GET", std::string(kPodMetrics) + "/t1-0");
  ASSERT_EQ(g.status, 200) << g.Describe();
  EXPECT_EQ(S(J(g), "kind"), "PodMetrics");
  EXPECT_EQ(S(J(g), "apiVersion"), "metrics.k8s.io/v1beta1");
  EXPECT_EQ(S(At(J(g), "containers").as_array().at(0), "usage.cpu"), "508234567n");
  HttpResponse l = Op("GET", std::string(kPodMetrics) + "?labelSelector=topic%3Dt1");
  ASSERT_EQ(l.status, 200);
  EXPECT_EQ(S(J(l), "kind"), "PodMetricsList");
  EXPECT_EQ(At(J(l), "items").as_array().size(), 1u);
  ExpectStatus(Admin("POST", kPodMetrics, R"({"metadata":{"name":"x"}})"), 405, "MethodNotAllowed");
  ExpectStatus(Admin("GET", std::string(kPodMetrics) + "?watch=1"), 405, "MethodNotAllowed");
  ExpectStatus(Admin("GET", std::string(kPodMetrics) + "/nope"), 404, "NotFound",
               "pods.metrics.k8s.io \"nope\" not found");

  // A seed replaces the object of that name.
  ASSERT_TRUE(server_->Seed(kPodMetrics, R"({"metadata":{"name":"t1-0"},"containers":[]})").ok());
  EXPECT_EQ(
      At(J(Admin("GET", std::string(kPodMetrics) + "/t1-0")), "containers").as_array().size(), 0u);
  ASSERT_TRUE(server_->Object(std::string(kPodMetrics) + "/t1-0").has_value());
  EXPECT_FALSE(server_->Object(std::string(kPodMetrics) + "/gone").has_value());
  EXPECT_FALSE(server_->Seed("/nowhere", "{}").ok());
}

// ---- what real kubectl and Helm read first: discovery, OpenAPI, tables, streaming lists

TEST_F(FakeApiServerTest, DiscoveryListsTheServedTypesToAnyAuthenticatedUser) {
  HttpResponse api = Op("GET", "/api");
  ASSERT_EQ(api.status, 200) << api.Describe();
  EXPECT_EQ(S(J(api), "kind"), "APIVersions");
  EXPECT_EQ(J(api).at("versions").at(0).as_string(), "v1");

  HttpResponse groups = Op("GET", "/apis");
  ASSERT_EQ(groups.status, 200) << groups.Describe();
  bool shoal = false;
  const value group_list = J(groups);
  for (const auto& g : group_list.at("groups").as_array()) {
    if (g.at("name").as_string() != "shoal.dev") continue;
    shoal = true;
    EXPECT_EQ(g.at("preferredVersion").at("groupVersion").as_string(), "shoal.dev/v1alpha1");
  }
  EXPECT_TRUE(shoal) << groups.body;

  HttpResponse list = Op("GET", "/apis/shoal.dev/v1alpha1");
  ASSERT_EQ(list.status, 200) << list.Describe();
  std::map<std::string, value> by_name;
  const value resources = J(list);
  for (const auto& r : resources.at("resources").as_array()) by_name[r.at("name").as_string()] = r;
  ASSERT_TRUE(by_name.count("partitionedtopics")) << list.body;
  EXPECT_EQ(by_name["partitionedtopics"].at("shortNames").at(0).as_string(), "ptopic");
  EXPECT_EQ(by_name["partitionedtopics"].at("kind").as_string(), "PartitionedTopic");
  EXPECT_TRUE(by_name.count("partitionedtopics/status"));
  ASSERT_TRUE(by_name.count("partitionedtopics/scale"));
  EXPECT_EQ(by_name["partitionedtopics/scale"].at("kind").as_string(), "Scale");
  EXPECT_EQ(by_name["partitionedtopics/scale"].at("group").as_string(), "autoscaling");

  EXPECT_EQ(Op("GET", "/apis/apps/v1").status, 200);
  EXPECT_EQ(Op("GET", "/apis/nothing.example/v1").status, 404);
  EXPECT_EQ(Call("", "GET", "/api").status, 401) << "discovery needs a known user";
  EXPECT_EQ(S(J(Op("GET", "/version")), "minor"), "35");
}

TEST_F(FakeApiServerTest, OpenApiV3SaysPatchTakesFieldValidation) {
  HttpResponse root = Op("GET", "/openapi/v3");
  ASSERT_EQ(root.status, 200) << root.Describe();
  const std::string url =
      J(root).at("paths").at("apis/shoal.dev/v1alpha1").at("serverRelativeURL").as_string();
  ASSERT_EQ(url.rfind("/openapi/v3/apis/shoal.dev/v1alpha1?", 0), 0u) << url;
  HttpResponse gv = Op("GET", url);
  ASSERT_EQ(gv.status, 200) << gv.Describe();
  const value doc = J(gv);
  const value& patch = doc.at("paths")
                           .at("/apis/shoal.dev/v1alpha1/namespaces/{namespace}/"
                               "partitionedtopics/{name}")
                           .at("patch");
  EXPECT_EQ(patch.at("x-kubernetes-group-version-kind").at("kind").as_string(),
            "PartitionedTopic");
  bool field_validation = false;
  for (const auto& p : patch.at("parameters").as_array()) {
    field_validation |= p.at("name").as_string() == "fieldValidation" &&
                        p.at("in").as_string() == "query";
  }
  EXPECT_TRUE(field_validation) << patch.serialize();
  EXPECT_EQ(Op("GET", "/openapi/v3/apis/nothing.example/v1").status, 404);
}

TEST_F(FakeApiServerTest, AListAskedAsATableIsOneRowPerObjectWithItsMetadata) {
  CreateTopic("a");
  CreateTopic("b");
  HttpRequestOptions o;
  o.headers["Authorization"] = std::string("Bearer ") + kAdmin;
  o.headers["Accept"] = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
  HttpResponse r = client_->Send("GET", kTopics, "", o);
  ASSERT_EQ(r.status, 200) << r.Describe();
  const value t = J(r);
  EXPECT_EQ(S(t, "kind"), "Table");
  EXPECT_EQ(S(t, "apiVersion"), "meta.k8s.io/v1");
  // No printer columns without the CRD: Name and Age, as the server's default table.
  ASSERT_EQ(t.at("columnDefinitions").size(), 2u);
  EXPECT_EQ(t.at("columnDefinitions").at(0).at("name").as_string(), "Name");
  EXPECT_EQ(t.at("columnDefinitions").at(1).at("name").as_string(), "Age");
  ASSERT_EQ(t.at("rows").size(), 2u);
  EXPECT_EQ(t.at("rows").at(0).at("cells").at(0).as_string(), "a");
  EXPECT_EQ(t.at("rows").at(0).at("cells").at(1).as_string(), "0s");
  EXPECT_EQ(t.at("rows").at(1).at("object").at("kind").as_string(), "PartialObjectMetadata");
  EXPECT_EQ(t.at("rows").at(1).at("object").at("metadata").at("name").as_string(), "b");
  // Without the Accept header the same request is the list.
  EXPECT_EQ(S(J(Admin("GET", kTopics)), "kind"), "PartitionedTopicList");
}

TEST_F(FakeApiServerTest, AStreamingListSendsTheObjectsThenTheInitialEventsEndBookmark) {
  CreateTopic("a");
  auto w = Watch(std::string(kTopics) +
                 "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                 "&resourceVersionMatch=NotOlderThan&resourceVersion=");
  ASSERT_TRUE(w);
  const value added = NextEvent(*w);
  EXPECT_EQ(S(added, "type"), "ADDED");
  EXPECT_EQ(S(added.at("object").at("metadata"), "name"), "a");
  const value mark = NextEvent(*w);
  EXPECT_EQ(S(mark, "type"), "BOOKMARK");
  EXPECT_EQ(mark.at("object")
                .at("metadata")
                .at("annotations")
                .at("k8s.io/initial-events-end")
                .as_string(),
            "true");
  CreateTopic("b");
  EXPECT_EQ(S(NextEvent(*w), "type"), "ADDED") << "changes follow the bookmark";

  // The real server's rules: only with bookmarks and resourceVersionMatch=NotOlderThan.
  auto bad = WatchStream::Open("127.0.0.1", server_->port(),
                               std::string(kTopics) + "?watch=1&sendInitialEvents=true", kAdmin, 5s);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ((*bad)->status(), 422);
}

TEST_F(FakeApiServerTest, ServerSideApplyCreatesOwnsConflictsAndForces) {
  const std::string path = std::string(kTopics) + "/applied";
  const std::string apply = "application/apply-patch+yaml";
  const std::string config =
      "apiVersion: shoal.dev/v1alpha1\nkind: PartitionedTopic\nmetadata:\n  name: applied\n"
      "  labels: {team: a}\nspec:\n  replicas: 2\n  partitions: 4\n";
  // Apply to a missing object creates it, owned by the applier.
  HttpResponse created = Admin("PATCH", path + "?fieldManager=helm", config, apply);
  ASSERT_EQ(created.status, 201) << created.Describe();
  value obj = J(created);
  EXPECT_EQ(I(obj, "spec.replicas"), 2);
  const value mf = At(obj, "metadata.managedFields");
  ASSERT_TRUE(mf.is_array()) << obj.serialize();
  ASSERT_EQ(mf.size(), 1u);
  EXPECT_EQ(S(mf.at(0), "manager"), "helm");
  EXPECT_EQ(S(mf.at(0), "operation"), "Apply");
  EXPECT_EQ(S(mf.at(0), "fieldsType"), "FieldsV1");
  EXPECT_TRUE(mf.at(0).at("fieldsV1").at("f:spec").has_field("f:replicas")) << mf.serialize();

  // Another manager's update takes the field it changes.
  HttpResponse scaled = Admin("PATCH", path + "?fieldManager=kubectl-scale",
                              R"({"spec":{"replicas":5}})", "application/merge-patch+json");
  ASSERT_EQ(scaled.status, 200) << scaled.Describe();
  // Re-applying the old value conflicts, naming the owner and the field.
  HttpResponse conflict = Admin("PATCH", path + "?fieldManager=helm", config, apply);
  ExpectStatus(conflict, 409, "Conflict");
  EXPECT_NE(S(J(conflict), "message").find("conflict with \"kubectl-scale\""), std::string::npos)
      << conflict.body;
  EXPECT_NE(S(J(conflict), "message").find(".spec.replicas"), std::string::npos);
  EXPECT_EQ(I(J(Admin("GET", path)), "spec.replicas"), 5) << "a refused apply changes nothing";
  // Agreeing values are no conflict; force takes the field over.
  HttpResponse forced = Admin("PATCH", path + "?fieldManager=helm&force=true", config, apply);
  ASSERT_EQ(forced.status, 200) << forced.Describe();
  EXPECT_EQ(I(J(forced), "spec.replicas"), 2);

  // A field the manager stops applying goes (nobody else owns it).
  const std::string smaller =
      "apiVersion: shoal.dev/v1alpha1\nkind: PartitionedTopic\nmetadata:\n  name: applied\n"
      "spec:\n  replicas: 2\n  partitions: 4\n";
  HttpResponse dropped = Admin("PATCH", path + "?fieldManager=helm", smaller, apply);
  ASSERT_EQ(dropped.status, 200) << dropped.Describe();
  EXPECT_TRUE(At(J(dropped), "metadata.labels.team").is_null()) << dropped.body;
  // The name in the body must be the URL's.
  ExpectStatus(Admin("PATCH", std::string(kTopics) + "/other?fieldManager=helm", config, apply),
               400, "BadRequest");
}

}  // namespace
}  // namespace shoal::testing
