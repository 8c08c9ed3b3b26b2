// The fake API server with the PartitionedTopic CRD loaded: defaulting, pruning and validation of
// custom resources against the CRD's structural schema, as apiextensions-apiserver does, on
// create, update, patch and /status writes; the 422 Status in the real server's words; 400 for
// unknown fields under fieldValidation=Strict. CEL rules are not evaluated by the fake (see
// openapi_schema.h), so nothing here relies on them.
#include <gtest/gtest.h>

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/json.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/fake_kube/fake_api_server.h"
#include "support/fake_kube/openapi_schema.h"
#include "support/http_test_client.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;
using web::json::value;

constexpr char kAdmin[] = "admin-token";
constexpr char kTopics[] = "/apis/shoal.dev/v1alpha1/namespaces/default/partitionedtopics";
constexpr char kMergePatch[] = "application/merge-patch+json";
constexpr char kJsonPatch[] = "application/json-patch+json";

value J(const std::string& text) { return value::parse(text); }
value J(const HttpResponse& r) { return value::parse(r.body); }

// The value at a dotted path ("spec.partitions.max"), or null.
value At(const value& v, const std::string& dotted) {
  value cur = v;
  std::stringstream in(dotted);
  std::string key;
  while (std::getline(in, key, '.')) {
    if (!cur.is_object() || !cur.has_field(key)) return value::null();
    cur = cur.at(key);
  }
  return cur;
}
std::string S(const value& v, const std::string& dotted) {
  const value x = At(v, dotted);
  return x.is_string() ? x.as_string() : "";
}

// A topic named `name` with `spec` (JSON).
std::string Topic(const std::string& name, const std::string& spec) {
  return R"({"apiVersion":"shoal.dev/v1alpha1","kind":"PartitionedTopic","metadata":{"name":")" +
         name + R"("},"spec":)" + spec + "}";
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

class FakeApiServerCrdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeApiServerOptions o;
    o.admin_token = kAdmin;
    o.crd_files = {kPartitionedTopicCrdFile};
    auto s = FakeApiServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    client_ = std::make_unique<HttpTestClient>(server_->base_url(), 10s);
  }

  HttpResponse Admin(const std::string& method, const std::string& path,
                     const std::string& body = "",
                     const std::string& content_type = "application/json") {
    HttpRequestOptions o;
    o.headers["Authorization"] = std::string("Bearer ") + kAdmin;
    o.content_type = content_type;
    return client_->Send(method, path, body, o);
  }

  value Create(const std::string& name, const std::string& spec) {
    HttpResponse r = Admin("POST", kTopics, Topic(name, spec));
    EXPECT_EQ(r.status, 201) << r.Describe();
    return J(r);
  }

  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<HttpTestClient> client_;
};

// The expected 422: the message and one cause per error, in order.
struct Cause {
  std::string reason, field, message;
};
void ExpectInvalid(const HttpResponse& r, const std::string& name, const std::string& message,
                   const std::vector<Cause>& causes) {
  ASSERT_EQ(r.status, 422) << r.Describe();
  const value s = J(r);
  EXPECT_EQ(S(s, "kind"), "Status");
  EXPECT_EQ(S(s, "status"), "Failure");
  EXPECT_EQ(S(s, "reason"), "Invalid");
  EXPECT_EQ(At(s, "code").as_integer(), 422);
  EXPECT_EQ(S(s, "message"), "PartitionedTopic.shoal.dev " + Quoted(name) + " is invalid: " + message);
  EXPECT_EQ(S(s, "details.name"), name);
  EXPECT_EQ(S(s, "details.group"), "shoal.dev");
  EXPECT_EQ(S(s, "details.kind"), "PartitionedTopic");
  const value got = At(s, "details.causes");
  ASSERT_TRUE(got.is_array()) << s.serialize();
  ASSERT_EQ(got.size(), causes.size()) << s.serialize();
  for (size_t i = 0; i < causes.size(); ++i) {
    EXPECT_EQ(S(got.at(i), "reason"), causes[i].reason) << i;
    EXPECT_EQ(S(got.at(i), "field"), causes[i].field) << i;
    EXPECT_EQ(S(got.at(i), "message"), causes[i].message) << i;
  }
}

TEST(PartitionedTopicTypeTest, AgreesWithTheCrd) {
  std::ifstream in(std::string(SHOAL_SOURCE_DIR) + "/" + kPartitionedTopicCrdFile);
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto crd = ParseCrd(text.str());
  ASSERT_TRUE(crd.ok()) << crd.status().ToString();
  const ResourceType a = PartitionedTopicType();
  const ResourceType& b = crd->type;
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.plural, b.plural);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.namespaced, b.namespaced);
  EXPECT_EQ(a.custom, b.custom);
  EXPECT_EQ(a.status_subresource, b.status_subresource);
  EXPECT_EQ(a.tracks_generation, b.tracks_generation);
  ASSERT_TRUE(a.scale && b.scale);
  EXPECT_EQ(a.scale->spec_replicas_path, b.scale->spec_replicas_path);
  EXPECT_EQ(a.scale->status_replicas_path, b.scale->status_replicas_path);
  EXPECT_EQ(a.scale->label_selector_path, b.scale->label_selector_path);
  EXPECT_EQ(At(crd->schema, "properties.spec.properties.partitions.properties.max.maximum")
                .as_number()
                .to_int64(),
            65536);
}

TEST(FieldErrorsTest, AggregateAsApimachineryPrintsIt) {
  const FieldError a{"FieldValueRequired", "spec.a", "Required value"};
  const FieldError b{"FieldValueRequired", "spec.b", "Required value"};
  EXPECT_EQ(AggregateMessage({a}), "spec.a: Required value");
  EXPECT_EQ(AggregateMessage({a, b, a}), "[spec.a: Required value, spec.b: Required value]");
  EXPECT_EQ(AggregateMessage({a, a}), "spec.a: Required value");
}

TEST_F(FakeApiServerCrdTest, CreateAppliesTheSchemaDefaults) {
  const value t = Create("t", "{}");
  // spec.partitions defaults to {initial: 4}, then its fields' own defaults apply inside it.
  EXPECT_EQ(At(t, "spec.partitions").serialize(), J(R"({"initial":4,"max":64,"min":1})").serialize());
  EXPECT_EQ(At(t, "spec.replicas").serialize(), J(R"({"max":16,"min":1})").serialize());
  EXPECT_EQ(S(t, "spec.durability.fsync"), "interval");
  EXPECT_EQ(At(t, "spec.scaling.targetEventsPerSecondPerPartition").as_double(), 5000);
  EXPECT_EQ(At(t, "spec.behavior.scaleUp.tolerance").as_double(), 0.1);
  EXPECT_EQ(At(t, "spec.behavior.scaleDown.stabilizationWindowSeconds").as_integer(), 300);
  EXPECT_EQ(At(t, "spec.retention.ms").as_number().to_int64(), 604800000);
  EXPECT_TRUE(At(t, "spec.sidecar.image").is_null()) << "no default: the operator's own image";
  EXPECT_TRUE(At(t, "spec.consumer").is_null()) << "no default: stays absent";
  EXPECT_TRUE(At(t, "spec.sidecar.resources").is_null()) << "no default: stays absent";

  // A given block keeps what it says and gets the defaults of what it leaves out (no initial:
  // the block's default {initial: 4} applies only when the block is absent). A null counts as
  // absent.
  const value u = Create("u", R"({"partitions":{"max":8},"replicas":null})");
  EXPECT_EQ(At(u, "spec.partitions").serialize(), J(R"({"max":8,"min":1})").serialize());
  EXPECT_EQ(At(u, "spec.replicas").serialize(), J(R"({"max":16,"min":1})").serialize());

  // What is stored is what was answered; a PUT of the undefaulted spec is a no-op.
  const value stored = J(*server_->Object(std::string(kTopics) + "/t"));
  EXPECT_EQ(stored.serialize(), t.serialize());
  value put = J(Topic("t", "{}"));
  put["metadata"]["resourceVersion"] = At(t, "metadata.resourceVersion");
  const HttpResponse r = Admin("PUT", std::string(kTopics) + "/t", put.serialize());
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(S(J(r), "metadata.resourceVersion"), S(t, "metadata.resourceVersion"));
}

TEST_F(FakeApiServerCrdTest, UnknownFieldsArePrunedWithAWarning) {
  const HttpResponse r = Admin(
      "POST", kTopics,
      Topic("t", R"({"foo":1,"partitions":{"max":8,"maxx":9},
        "consumer":{"template":{"spec":{"containers":[{"name":"app","image":"a","tty":true}],
                                         "nodeSelector":{"disk":"ssd"}}}}})"));
  ASSERT_EQ(r.status, 201) << r.Describe();
  const value t = J(r);
  EXPECT_TRUE(At(t, "spec.foo").is_null());
  EXPECT_TRUE(At(t, "spec.partitions.maxx").is_null());
  EXPECT_EQ(At(t, "spec.partitions.max").as_integer(), 8);
  // x-kubernetes-preserve-unknown-fields: the pod template keeps what the schema does not list.
  EXPECT_EQ(S(t, "spec.consumer.template.spec.nodeSelector.disk"), "ssd");
  EXPECT_TRUE(
      At(t, "spec.consumer.template.spec.containers").at(0).at("tty").as_bool());
  // fieldValidation unset is Warn: each dropped field as a Warning header.
  auto w = r.headers.find("Warning");
  ASSERT_NE(w, r.headers.end());
  EXPECT_NE(w->second.find(R"(299 - "unknown field \"spec.foo\"")"), std::string::npos) << w->second;
  EXPECT_NE(w->second.find(R"(unknown field \"spec.partitions.maxx\")"), std::string::npos)
      << w->second;
  // A top-level unknown field goes too; metadata is the server's and is not pruned.
  const HttpResponse r2 = Admin(
      "POST", kTopics,
      R"({"apiVersion":"shoal.dev/v1alpha1","kind":"PartitionedTopic","extra":true,
          "metadata":{"name":"u","labels":{"a":"b"}},"spec":{}})");
  ASSERT_EQ(r2.status, 201) << r2.Describe();
  EXPECT_FALSE(J(r2).has_field("extra"));
  EXPECT_EQ(S(J(r2), "metadata.labels.a"), "b");
}

TEST_F(FakeApiServerCrdTest, StrictFieldValidationRefusesUnknownFields) {
  HttpResponse r = Admin("POST", std::string(kTopics) + "?fieldValidation=Strict",
                         Topic("t", R"({"foo":1})"));
  ASSERT_EQ(r.status, 400) << r.Describe();
  EXPECT_EQ(S(J(r), "reason"), "BadRequest");
  EXPECT_EQ(S(J(r), "message"), R"(strict decoding error: unknown field "spec.foo")");
  EXPECT_FALSE(server_->Object(std::string(kTopics) + "/t"));
  r = Admin("POST", std::string(kTopics) + "?fieldValidation=Strict",
            Topic("t", R"({"foo":1,"partitions":{"bar":2}})"));
  ASSERT_EQ(r.status, 400) << r.Describe();
  EXPECT_EQ(S(J(r), "message"),
            R"(strict decoding error: unknown field "spec.foo", unknown field "spec.partitions.bar")");
  // Strict on a patch: checked on the patched object.
  Create("t", "{}");
  r = Admin("PATCH", std::string(kTopics) + "/t?fieldValidation=Strict",
            R"({"spec":{"scaling":{"targetRPS":10}}})", kMergePatch);
  ASSERT_EQ(r.status, 400) << r.Describe();
  EXPECT_EQ(S(J(r), "message"),
            R"(strict decoding error: unknown field "spec.scaling.targetRPS")");
  // Ignore: dropped without a warning.
  r = Admin("PATCH", std::string(kTopics) + "/t?fieldValidation=Ignore",
            R"({"spec":{"scaling":{"targetRPS":10}}})", kMergePatch);
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(r.headers.count("Warning"), 0u);
}

// One case per kind of violation: the exact message and cause of the real server.
struct ViolationCase {
  const char* what;
  std::string spec;
  std::string message;  // after `... is invalid: `
  Cause cause;
};

TEST_F(FakeApiServerCrdTest, EachKindOfViolationIs422InTheServersWords) {
  const std::string kQuantity =
      R"(^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$)";
  const std::string kDnsLabel = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
  const std::string kContainers = "spec.consumer.template.spec.containers";
  auto consumer = [](const std::string& containers) {
    return R"({"consumer":{"template":{"spec":{"containers":)" + containers + "}}}}";
  };
  const ViolationCase kCases[] = {
      {"maximum", R"({"partitions":{"max":70000}})",
       "spec.partitions.max: Invalid value: 70000: spec.partitions.max in body should be less "
       "than or equal to 65536",
       {"FieldValueInvalid", "spec.partitions.max",
        "Invalid value: 70000: spec.partitions.max in body should be less than or equal to "
        "65536"}},
      {"minimum", R"({"retention":{"ms":-1}})",
       "spec.retention.ms: Invalid value: -1: spec.retention.ms in body should be greater than or "
       "equal to 0",
       {"FieldValueInvalid", "spec.retention.ms",
        "Invalid value: -1: spec.retention.ms in body should be greater than or equal to 0"}},
      {"exclusive maximum", R"({"behavior":{"scaleUp":{"tolerance":1}}})",
       "spec.behavior.scaleUp.tolerance: Invalid value: 1: spec.behavior.scaleUp.tolerance in "
       "body should be less than 1",
       {"FieldValueInvalid", "spec.behavior.scaleUp.tolerance",
        "Invalid value: 1: spec.behavior.scaleUp.tolerance in body should be less than 1"}},
      {"exclusive minimum", R"({"scaling":{"targetEventsPerSecondPerPartition":0}})",
       "spec.scaling.targetEventsPerSecondPerPartition: Invalid value: 0: "
       "spec.scaling.targetEventsPerSecondPerPartition in body should be greater than 0",
       {"FieldValueInvalid", "spec.scaling.targetEventsPerSecondPerPartition",
        "Invalid value: 0: spec.scaling.targetEventsPerSecondPerPartition in body should be "
        "greater than 0"}},
      {"type", R"({"partitions":{"max":"lots"}})",
       R"(spec.partitions.max: Invalid value: "string": spec.partitions.max in body must be of type integer: "string")",
       {"FieldValueTypeInvalid", "spec.partitions.max",
        R"(Invalid value: "string": spec.partitions.max in body must be of type integer: "string")"}},
      {"a fraction for an integer", R"({"replicas":{"max":2.5}})",
       R"(spec.replicas.max: Invalid value: "number": spec.replicas.max in body must be of type integer: "number")",
       {"FieldValueTypeInvalid", "spec.replicas.max",
        R"(Invalid value: "number": spec.replicas.max in body must be of type integer: "number")"}},
      {"enum", R"({"durability":{"fsync":"sometimes"}})",
       R"(spec.durability.fsync: Unsupported value: "sometimes": supported values: "always", "interval", "never")",
       {"FieldValueNotSupported", "spec.durability.fsync",
        R"(Unsupported value: "sometimes": supported values: "always", "interval", "never")"}},
      {"required", R"({"consumer":{}})", "spec.consumer.template: Required value",
       {"FieldValueRequired", "spec.consumer.template", "Required value"}},
      {"minLength", R"({"sidecar":{"image":""}})",
       R"(spec.sidecar.image: Invalid value: "": spec.sidecar.image in body should be at least 1 chars long)",
       {"FieldValueInvalid", "spec.sidecar.image",
        R"(Invalid value: "": spec.sidecar.image in body should be at least 1 chars long)"}},
      {"maxLength", consumer(R"([{"name":")" + std::string(64, 'a') + R"(","image":"a"}])"),
       kContainers + "[0].name: Too long: may not be longer than 63",
       {"FieldValueTooLong", kContainers + "[0].name", "Too long: may not be longer than 63"}},
      {"pattern", consumer(R"([{"name":"App_1","image":"a"}])"),
       kContainers + R"([0].name: Invalid value: "App_1": )" + kContainers +
           "[0].name in body should match '" + kDnsLabel + "'",
       {"FieldValueInvalid", kContainers + "[0].name",
        R"(Invalid value: "App_1": )" + kContainers + "[0].name in body should match '" +
            kDnsLabel + "'"}},
      {"minItems", consumer("[]"),
       kContainers + ": Invalid value: 0: " + kContainers + " in body should have at least 1 items",
       {"FieldValueInvalid", kContainers,
        "Invalid value: 0: " + kContainers + " in body should have at least 1 items"}},
      {"additionalProperties", R"({"consumer":{"template":{"metadata":{"labels":{"tier":1}},
          "spec":{"containers":[{"name":"app","image":"a"}]}}}})",
       R"(spec.consumer.template.metadata.labels.tier: Invalid value: "integer": spec.consumer.template.metadata.labels.tier in body must be of type string: "integer")",
       {"FieldValueTypeInvalid", "spec.consumer.template.metadata.labels.tier",
        R"(Invalid value: "integer": spec.consumer.template.metadata.labels.tier in body must be of type string: "integer")"}},
      {"int-or-string pattern", R"({"sidecar":{"resources":{"requests":{"cpu":"lots"}}}})",
       R"(spec.sidecar.resources.requests.cpu: Invalid value: "lots": spec.sidecar.resources.requests.cpu in body should match ')" +
           kQuantity + "'",
       {"FieldValueInvalid", "spec.sidecar.resources.requests.cpu",
        R"(Invalid value: "lots": spec.sidecar.resources.requests.cpu in body should match ')" +
            kQuantity + "'"}},
      {"int-or-string type", R"({"sidecar":{"resources":{"limits":{"cpu":true}}}})",
       R"(spec.sidecar.resources.limits.cpu: Invalid value: "boolean": spec.sidecar.resources.limits.cpu in body must be of type integer,string: "boolean")",
       {"FieldValueTypeInvalid", "spec.sidecar.resources.limits.cpu",
        R"(Invalid value: "boolean": spec.sidecar.resources.limits.cpu in body must be of type integer,string: "boolean")"}},
      {"object type", R"({"consumer":{"template":[1,2]}})",
       R"(spec.consumer.template: Invalid value: "array": spec.consumer.template in body must be of type object: "array")",
       {"FieldValueTypeInvalid", "spec.consumer.template",
        R"(Invalid value: "array": spec.consumer.template in body must be of type object: "array")"}},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.what);
    const HttpResponse r = Admin("POST", kTopics, Topic("t", c.spec));
    ExpectInvalid(r, "t", c.message, {c.cause});
    EXPECT_FALSE(server_->Object(std::string(kTopics) + "/t")) << "stored anyway";
  }
  // The int-or-string quantities that are fine.
  Create("ok", R"({"sidecar":{"resources":{"requests":{"cpu":"100m","memory":"128Mi"},
                                             "limits":{"cpu":1}}}})");
  // spec is required at the root.
  ExpectInvalid(Admin("POST", kTopics,
                      R"({"apiVersion":"shoal.dev/v1alpha1","kind":"PartitionedTopic",
                          "metadata":{"name":"nospec"}})"),
                "nospec", "spec: Required value", {{"FieldValueRequired", "spec", "Required value"}});
}

TEST_F(FakeApiServerCrdTest, SeveralViolationsAreListedInBrackets) {
  const HttpResponse r = Admin(
      "POST", kTopics,
      Topic("t", R"({"partitions":{"max":70000,"min":0},"durability":{"fsync":"sometimes"}})"));
  const std::string fsync =
      R"(Unsupported value: "sometimes": supported values: "always", "interval", "never")";
  const std::string max =
      "Invalid value: 70000: spec.partitions.max in body should be less than or equal to 65536";
  const std::string min =
      "Invalid value: 0: spec.partitions.min in body should be greater than or equal to 1";
  ExpectInvalid(r, "t",
                "[spec.durability.fsync: " + fsync + ", spec.partitions.max: " + max +
                    ", spec.partitions.min: " + min + "]",
                {{"FieldValueNotSupported", "spec.durability.fsync", fsync},
                 {"FieldValueInvalid", "spec.partitions.max", max},
                 {"FieldValueInvalid", "spec.partitions.min", min}});
}

TEST_F(FakeApiServerCrdTest, APatchThatMakesTheTopicInvalidChangesNothing) {
  const value t = Create("t", R"({"partitions":{"max":8}})");
  const std::string rv = S(t, "metadata.resourceVersion");
  const std::string path = std::string(kTopics) + "/t";
  ExpectInvalid(Admin("PATCH", path, R"({"spec":{"partitions":{"max":70000}}})", kMergePatch), "t",
                "spec.partitions.max: Invalid value: 70000: spec.partitions.max in body should be "
                "less than or equal to 65536",
                {{"FieldValueInvalid", "spec.partitions.max",
                  "Invalid value: 70000: spec.partitions.max in body should be less than or "
                  "equal to 65536"}});
  ExpectInvalid(
      Admin("PATCH", path, R"([{"op":"replace","path":"/spec/durability/fsync","value":"x"}])",
            kJsonPatch),
      "t", R"(spec.durability.fsync: Unsupported value: "x": supported values: "always", "interval", "never")",
      {{"FieldValueNotSupported", "spec.durability.fsync",
        R"(Unsupported value: "x": supported values: "always", "interval", "never")"}});
  // A PUT too.
  value put = t;
  put["spec"]["replicas"]["max"] = value::string("many");
  EXPECT_EQ(Admin("PUT", path, put.serialize()).status, 422);
  const value after = J(*server_->Object(path));
  EXPECT_EQ(S(after, "metadata.resourceVersion"), rv);
  EXPECT_EQ(At(after, "spec").serialize(), At(t, "spec").serialize());
  EXPECT_EQ(server_->resource_version(), std::stoull(rv)) << "no write happened";
  // Removing a field with a default by a merge patch brings the default back.
  const HttpResponse r = Admin("PATCH", path, R"({"spec":{"partitions":{"max":null}}})", kMergePatch);
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(At(J(r), "spec.partitions.max").as_integer(), 64);
}

TEST_F(FakeApiServerCrdTest, StatusWritesAreValidatedAgainstTheStatusSchema) {
  const value t = Create("t", "{}");
  const std::string status_path = std::string(kTopics) + "/t/status";
  const std::string rv = S(t, "metadata.resourceVersion");
  ExpectInvalid(Admin("PATCH", status_path, R"({"status":{"partitions":-1}})", kMergePatch), "t",
                "status.partitions: Invalid value: -1: status.partitions in body should be greater "
                "than or equal to 0",
                {{"FieldValueInvalid", "status.partitions",
                  "Invalid value: -1: status.partitions in body should be greater than or equal "
                  "to 0"}});
  const std::string cond =
      R"({"type":"Ready","status":"True","lastTransitionTime":"2025-01-02T03:04:05Z","reason":"AtTarget","message":""})";
  // A condition without a reason, and one with a time that is none.
  ExpectInvalid(
      Admin("PATCH", status_path,
            R"({"status":{"conditions":[{"type":"Ready","status":"True","message":"",
                "lastTransitionTime":"yesterday"}]}})",
            kMergePatch),
      "t",
      R"([status.conditions[0].reason: Required value, status.conditions[0].lastTransitionTime: Invalid value: "yesterday": status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday"])",
      {{"FieldValueRequired", "status.conditions[0].reason", "Required value"},
       {"FieldValueTypeInvalid", "status.conditions[0].lastTransitionTime",
        R"(Invalid value: "yesterday": status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday")"}});
  // maxItems.
  std::string many;
  for (int i = 0; i < 17; ++i) many += (i ? "," : "") + cond;
  ExpectInvalid(Admin("PATCH", status_path, R"({"status":{"conditions":[)" + many + "]}}",
                      kMergePatch),
                "t", "status.conditions: Too many: 17: must have at most 16 items",
                {{"FieldValueTooMany", "status.conditions", "Too many: 17: must have at most 16 items"}});
  EXPECT_EQ(S(J(*server_->Object(std::string(kTopics) + "/t")), "metadata.resourceVersion"), rv);

  // A valid status: stored, with unknown fields pruned except under plan (preserved).
  const HttpResponse r = Admin(
      "PATCH", status_path,
      R"({"status":{"partitions":4,"phase":"Running","conditions":[)" + cond +
          R"(],"plan":{"id":1,"next":0,"steps":[{"kind":"change","splits":[{"partition":0}]}]}}})",
      kMergePatch);
  ASSERT_EQ(r.status, 200) << r.Describe();
  const value s = J(r);
  EXPECT_EQ(At(s, "status.partitions").as_integer(), 4);
  EXPECT_TRUE(At(s, "status.phase").is_null());
  EXPECT_EQ(At(s, "status.plan.steps").at(0).at("splits").size(), 1u);
  EXPECT_NE(S(s, "metadata.resourceVersion"), rv);
}

TEST_F(FakeApiServerCrdTest, TheScaleSubresourceIsValidatedToo) {
  Create("t", "{}");
  const HttpResponse r =
      Admin("PATCH", std::string(kTopics) + "/t/scale", R"({"spec":{"replicas":0}})", kMergePatch);
  ExpectInvalid(r, "t",
                "spec.replicas.min: Invalid value: 0: spec.replicas.min in body should be greater "
                "than or equal to 1",
                {{"FieldValueInvalid", "spec.replicas.min",
                  "Invalid value: 0: spec.replicas.min in body should be greater than or equal "
                  "to 1"}});
}

TEST(FakeApiServerCrdOptionsTest, AMissingCrdFileFailsStart) {
  FakeApiServerOptions o;
  o.crd_files = {"/nonexistent/crd.yaml"};
  EXPECT_FALSE(FakeApiServer::Start(std::move(o)).ok());
  FakeApiServerOptions p;
  p.crd_yaml = {"apiVersion: v1\nkind: ConfigMap\n"};
  EXPECT_FALSE(FakeApiServer::Start(std::move(p)).ok());
}

}  // namespace
}  // namespace shoal::testing
