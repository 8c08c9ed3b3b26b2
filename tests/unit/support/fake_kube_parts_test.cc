// The pure parts of the fake API server: JSON merge patch (RFC 7386) and JSON patch (RFC 6902),
// label selectors, RBAC rule matching and messages, and the operator's rules file
// (deploy/rbac/operator-rules.yaml): what it grants, what it does not, and that every rule in it
// grants something the operator needs.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "support/fake_kube/json_patch.h"
#include "support/fake_kube/label_selector.h"
#include "support/fake_kube/openapi_schema.h"
#include "support/fake_kube/pod_security.h"
#include "support/fake_kube/protobuf.h"
#include "support/fake_kube/rbac.h"
#include "support/fake_kube/table.h"

namespace shoal::testing {
namespace {

using web::json::value;

value J(const std::string& text) { return value::parse(text); }

// ---- merge patch

TEST(MergePatchTest, FollowsRfc7386Examples) {
  struct Case {
    const char* target;
    const char* patch;
    const char* want;
  };
  const std::vector<Case> cases = {
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"a":"foo"})", "null", "null"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
  };
  for (const auto& c : cases) {
    EXPECT_TRUE(JsonEqual(ApplyMergePatch(J(c.target), J(c.patch)), J(c.want)))
        << c.target << " + " << c.patch << " = "
        << ApplyMergePatch(J(c.target), J(c.patch)).serialize();
  }
}

// ---- JSON patch

TEST(JsonPatchTest, AppliesEveryOperation) {
  struct Case {
    const char* doc;
    const char* patch;
    const char* want;
  };
  const std::vector<Case> cases = {
      {R"({"foo":"bar"})", R"([{"op":"add","path":"/baz","value":"qux"}])",
       R"({"baz":"qux","foo":"bar"})"},
      {R"({"foo":["bar","baz"]})", R"([{"op":"add","path":"/foo/1","value":"qux"}])",
       R"({"foo":["bar","qux","baz"]})"},
      {R"({"foo":["bar"]})", R"([{"op":"add","path":"/foo/-","value":"x"}])",
       R"({"foo":["bar","x"]})"},
      {R"({"baz":"qux","foo":"bar"})", R"([{"op":"remove","path":"/baz"}])", R"({"foo":"bar"})"},
      {R"({"foo":["bar","qux","baz"]})", R"([{"op":"remove","path":"/foo/1"}])",
       R"({"foo":["bar","baz"]})"},
      {R"({"baz":"qux","foo":"bar"})", R"([{"op":"replace","path":"/baz","value":"boo"}])",
       R"({"baz":"boo","foo":"bar"})"},
      {R"({"a":[1,2,3]})", R"([{"op":"replace","path":"/a/2","value":9}])", R"({"a":[1,2,9]})"},
      {R"({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}})",
       R"([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}])",
       R"({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}})"},
      {R"({"foo":["all","grass","cows","eat"]})",
       R"([{"op":"move","from":"/foo/1","path":"/foo/3"}])",
       R"({"foo":["all","cows","eat","grass"]})"},
      {R"({"a":{"b":1}})", R"([{"op":"copy","from":"/a","path":"/c"}])",
       R"({"a":{"b":1},"c":{"b":1}})"},
      {R"({"a/b":1,"m~n":2})",
       R"([{"op":"test","path":"/a~1b","value":1},{"op":"test","path":"/m~0n","value":2.0}])",
       R"({"a/b":1,"m~n":2})"},
      {R"({"a":1})", R"([{"op":"replace","path":"","value":[1]}])", R"([1])"},
  };
  for (const auto& c : cases) {
    auto r = ApplyJsonPatch(J(c.doc), J(c.patch));
    ASSERT_TRUE(r.ok()) << c.patch << ": " << r.status().ToString();
    EXPECT_TRUE(JsonEqual(*r, J(c.want))) << c.patch << " gave " << r->serialize();
  }
}

TEST(JsonPatchTest, RefusesWhatCannotApplyAndChangesNothing) {
  const value doc = J(R"({"a":{"b":1},"l":[1]})");
  const std::vector<const char*> cannot_apply = {
      R"([{"op":"test","path":"/a/b","value":2}])",
      R"([{"op":"remove","path":"/nope"}])",
      R"([{"op":"replace","path":"/a/c","value":1}])",
      R"([{"op":"add","path":"/x/y","value":1}])",
      R"([{"op":"add","path":"/l/5","value":1}])",
      R"([{"op":"add","path":"/l/01","value":1}])",
      R"([{"op":"move","from":"/a","path":"/a/b/c"}])",
      R"([{"op":"add","path":"/new","value":1},{"op":"test","path":"/new","value":2}])",
  };
  for (const char* p : cannot_apply) {
    auto r = ApplyJsonPatch(doc, J(p));
    EXPECT_EQ(r.status().code(), Status::Code::kFailedPrecondition) << p;
  }
  const std::vector<const char*> malformed = {
      R"({"op":"add"})",
      R"([{"path":"/a"}])",
      R"([{"op":"add","path":"/a"}])",
      R"([{"op":"frobnicate","path":"/a"}])",
      R"([{"op":"add","path":"a","value":1}])",
  };
  for (const char* p : malformed) {
    auto r = ApplyJsonPatch(doc, J(p));
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << p;
  }
}

TEST(JsonEqualTest, NumbersByValueObjectsBySet) {
  EXPECT_TRUE(JsonEqual(J("1"), J("1.0")));
  EXPECT_TRUE(JsonEqual(value::number(int64_t{3}), J("3")));
  EXPECT_TRUE(JsonEqual(J(R"({"a":1,"b":[true,null]})"), J(R"({"b":[true,null],"a":1})")));
  EXPECT_FALSE(JsonEqual(J(R"({"a":1})"), J(R"({"a":1,"b":2})")));
  EXPECT_FALSE(JsonEqual(J(R"([1,2])"), J(R"([2,1])")));
  EXPECT_FALSE(JsonEqual(J(R"("1")"), J("1")));
}

// ---- label selectors

TEST(LabelSelectorTest, MatchesEqualitySetAndExistenceRequirements) {
  const std::map<std::string, std::string> labels = {{"app", "shoal"}, {"tier", "data"}};
  struct Case {
    const char* selector;
    bool matches;
  };
  const std::vector<Case> cases = {
      {"", true},
      {"app=shoal", true},
      {"app==shoal", true},
      {"app=other", false},
      {"app!=other", true},
      {"app!=shoal", false},
      {"missing!=x", true},
      {"app=shoal,tier=data", true},
      {"app=shoal,tier!=data", false},
      {"app", true},
      {"!app", false},
      {"!missing", true},
      {"tier in (data, web)", true},
      {"tier in (web)", false},
      {"tier notin (web),app=shoal", true},
      {"missing notin (x)", true},
      {" app = shoal ", true},
  };
  for (const auto& c : cases) {
    auto s = LabelSelector::Parse(c.selector);
    ASSERT_TRUE(s.ok()) << c.selector << ": " << s.status().ToString();
    EXPECT_EQ(s->Matches(labels), c.matches) << c.selector;
  }
  for (const char* bad : {"=x", "a in x", "a between (x)", "a,,b", "a in (x"}) {
    EXPECT_FALSE(LabelSelector::Parse(bad).ok()) << bad;
  }
}

// ---- RBAC

TEST(RbacTest, MatchesGroupsResourcesSubresourcesVerbsAndNames) {
  auto rules = ParsePolicyRules(R"(
rules:
  - apiGroups: ["apps"]
    resources: ["statefulsets", "statefulsets/scale"]
    verbs: ["get", "patch"]
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["*"]
    resourceNames: ["only-this"]
  - apiGroups: ["*"]
    resources: ["*/status"]
    verbs: ["get"]
)");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  auto allow = [&](std::string verb, std::string group, std::string resource, std::string sub,
                   std::string name = "x") {
    return RulesAllow(*rules, {.verb = verb,
                               .group = group,
                               .resource = resource,
                               .subresource = sub,
                               .name = name,
                               .namespace_ = "default"});
  };
  EXPECT_TRUE(allow("get", "apps", "statefulsets", ""));
  EXPECT_TRUE(allow("patch", "apps", "statefulsets", "scale"));
  EXPECT_FALSE(allow("update", "apps", "statefulsets", ""));
  EXPECT_FALSE(allow("get", "", "statefulsets", ""));  // another group
  EXPECT_FALSE(allow("patch", "apps", "statefulsets", "status"));
  EXPECT_TRUE(allow("get", "apps", "statefulsets", "status"));  // */status
  EXPECT_TRUE(allow("get", "shoal.dev", "partitionedtopics", "status"));
  EXPECT_FALSE(allow("get", "shoal.dev", "partitionedtopics", ""));
  EXPECT_TRUE(allow("delete", "", "configmaps", "", "only-this"));
  EXPECT_FALSE(allow("delete", "", "configmaps", "", "another"));
  EXPECT_FALSE(allow("list", "", "configmaps", "", ""));  // resourceNames cannot list

  EXPECT_FALSE(ParsePolicyRules("rules: [{apiGroups: [''], verbs: [get]}]").ok());
  EXPECT_FALSE(ParsePolicyRules("not: rules").ok());
  EXPECT_FALSE(ParsePolicyRules("rules: [{apiGroups: x, resources: [a], verbs: [get]}]").ok());
}

TEST(RbacTest, ForbiddenMessagesAreTheApiServers) {
  const std::string user = "system:serviceaccount:shoal-system:shoal-operator";
  EXPECT_EQ(ForbiddenMessage(user, {.verb = "update",
                                    .group = "shoal.dev",
                                    .resource = "partitionedtopics",
                                    .subresource = "status",
                                    .name = "x",
                                    .namespace_ = "default"}),
            "partitionedtopics.shoal.dev \"x\" is forbidden: User "
            "\"system:serviceaccount:shoal-system:shoal-operator\" cannot update resource "
            "\"partitionedtopics/status\" in API group \"shoal.dev\" in the namespace \"default\"");
  EXPECT_EQ(ForbiddenMessage(user, {.verb = "list", .group = "", .resource = "pods"}),
            "pods is forbidden: User \"system:serviceaccount:shoal-system:shoal-operator\" "
            "cannot list resource \"pods\" in API group \"\" at the cluster scope");
}

// ---- the operator's rules file

using Grant = std::tuple<std::string, std::string, std::string>;  // group, resource, verb

std::vector<Grant> OperatorNeeds() {
  std::vector<Grant> out;
  auto add = [&](const std::string& group, const std::string& resource,
                 const std::vector<std::string>& verbs) {
    for (const auto& v : verbs) out.emplace_back(group, resource, v);
  };
  add("shoal.dev", "partitionedtopics", {"list", "watch", "patch"});
  add("shoal.dev", "partitionedtopics/status", {"get", "update", "patch"});
  add("shoal.dev", "partitionedtopics/finalizers", {"update"});
  add("apps", "statefulsets", {"list", "watch", "create", "update", "delete"});
  add("apps", "statefulsets/scale", {"get", "patch"});
  add("", "services", {"get", "create", "update", "delete"});
  add("policy", "poddisruptionbudgets", {"get", "create", "update", "delete"});
  add("", "secrets", {"get", "create", "update", "delete"});
  add("", "pods", {"list", "watch", "delete"});
  add("events.k8s.io", "events", {"create", "patch"});
  add("coordination.k8s.io", "leases", {"get", "create", "update"});
  add("metrics.k8s.io", "pods", {"list"});
  add("", "nodes", {"get"});
  return out;
}

ResourceAttributes Attrs(const Grant& g) {
  const auto& [group, resource, verb] = g;
  const size_t slash = resource.find('/');
  return {.verb = verb,
          .group = group,
          .resource = resource.substr(0, slash),
          .subresource = slash == std::string::npos ? "" : resource.substr(slash + 1),
          .name = "x",
          .namespace_ = "default"};
}

Result<std::vector<PolicyRule>> OperatorRules() {
  return LoadPolicyRules(std::string(SHOAL_SOURCE_DIR) + "/deploy/rbac/operator-rules.yaml");
}

TEST(OperatorRulesTest, GrantsWhatTheOperatorNeedsAndNothingElse) {
  auto rules = OperatorRules();
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  const auto needs = OperatorNeeds();
  const std::set<Grant> needed(needs.begin(), needs.end());
  for (const auto& g : needs) {
    EXPECT_TRUE(RulesAllow(*rules, Attrs(g)))
        << std::get<0>(g) << " " << std::get<1>(g) << " " << std::get<2>(g);
  }
  // Everything else over the same groups and resources is refused.
  const std::vector<std::string> verbs = {"get",    "list",  "watch",  "create",
                                          "update", "patch", "delete", "deletecollection"};
  for (const auto& [group, resource, verb] : needs) {
    for (const auto& v : verbs) {
      const Grant g{group, resource, v};
      if (needed.count(g) == 0) {
        EXPECT_FALSE(RulesAllow(*rules, Attrs(g))) << group << " " << resource << " " << v;
      }
    }
  }
  EXPECT_FALSE(RulesAllow(*rules, Attrs({"", "configmaps", "get"})));
  EXPECT_FALSE(RulesAllow(*rules, Attrs({"", "pods/status", "update"})));
  EXPECT_FALSE(RulesAllow(*rules, Attrs({"apps", "statefulsets/status", "update"})));
}

TEST(OperatorRulesTest, EveryRuleIsNeeded) {
  auto rules = OperatorRules();
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  for (size_t i = 0; i < rules->size(); ++i) {
    std::vector<PolicyRule> without = *rules;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    bool some_need_refused = false;
    for (const auto& g : OperatorNeeds()) some_need_refused |= !RulesAllow(without, Attrs(g));
    EXPECT_TRUE(some_need_refused) << "rule " << i << " grants nothing the operator needs";
  }
}

TEST(TableTest, JsonPathsOfPrinterColumns) {
  const web::json::value obj = web::json::value::parse(R"({
    "metadata": {"name": "t"},
    "status": {"partitions": 4, "conditions": [{"type": "Degraded", "status": "False"},
                                               {"type": "Ready", "status": "True"}]}})");
  EXPECT_EQ(EvalJsonPath(obj, ".status.partitions").as_integer(), 4);
  EXPECT_EQ(EvalJsonPath(obj, ".status.conditions[?(@.type==\"Ready\")].status").as_string(),
            "True");
  EXPECT_EQ(EvalJsonPath(obj, ".status.conditions[0].type").as_string(), "Degraded");
  EXPECT_TRUE(EvalJsonPath(obj, ".status.conditions[5].type").is_null());
  EXPECT_TRUE(EvalJsonPath(obj, ".status.epoch").is_null());
  EXPECT_TRUE(EvalJsonPath(obj, ".status.conditions[?(@.type==\"Paused\")].status").is_null());
}

TEST(TableTest, TheCrdsPrinterColumnsAsKubectlGetShowsThem) {
  std::ifstream in(std::string(SHOAL_SOURCE_DIR) + "/crds/shoal.dev_partitionedtopics.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto crd = ParseCrd(text.str());
  ASSERT_TRUE(crd.ok()) << crd.status().ToString();
  ASSERT_FALSE(crd->type.printer_columns.empty());
  EXPECT_EQ(crd->type.short_names, std::vector<std::string>{"ptopic"});
  const int64_t now = 1'700'000'000'000;  // 2023-11-14T22:13:20Z
  const web::json::value topic = web::json::value::parse(R"({
    "metadata": {"name": "orders", "creationTimestamp": "2023-11-14T22:08:20Z"},
    "status": {"partitions": 4, "replicas": 2, "epoch": 7,
               "conditions": [{"type": "Ready", "status": "True"},
                              {"type": "Paused", "status": "False"}],
               "lastDecision": {"time": "2023-11-14T22:13:05.500Z", "reason": "split"}}})");
  const web::json::value t = ToTable({topic}, crd->type.printer_columns, web::json::value::null(),
                                     "", now);
  std::vector<std::string> names;
  for (const auto& c : t.at("columnDefinitions").as_array()) names.push_back(c.at("name").as_string());
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "Partitions", "Replicas", "Epoch", "Ready",
                                             "Paused", "Last Decision", "Reason", "Age"}));
  const auto& cells = t.at("rows").at(0).at("cells");
  EXPECT_EQ(cells.at(0).as_string(), "orders");
  EXPECT_EQ(cells.at(1).as_integer(), 4);
  EXPECT_EQ(cells.at(4).as_string(), "True");
  EXPECT_EQ(cells.at(5).as_string(), "False");
  EXPECT_EQ(cells.at(6).as_string(), "14s");  // fractional seconds parse, as Go's RFC3339
  EXPECT_EQ(cells.at(7).as_string(), "split");
  EXPECT_EQ(cells.at(8).as_string(), "5m");
  // A topic without status: empty cells, as kubectl shows them.
  const web::json::value fresh = web::json::value::parse(R"({"metadata": {"name": "new"}})");
  const auto row = ToTable({fresh}, crd->type.printer_columns, web::json::value::null(), "None",
                           now).at("rows").at(0);
  EXPECT_TRUE(row.at("cells").at(1).is_null());
  EXPECT_TRUE(row.at("cells").at(8).is_null()) << "missing is an empty cell, also for dates";
  EXPECT_FALSE(row.has_field("object")) << "includeObject=None";
}

TEST(PodSecurityTest, RestrictedNamesWhatEachContainerLacks) {
  const std::string ok_container = R"({"name":"ok","image":"x","securityContext":{
      "allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"runAsNonRoot":true,
      "seccompProfile":{"type":"RuntimeDefault"}}})";
  auto pod = [](const std::string& spec) {
    return web::json::value::parse(R"({"metadata":{"name":"p"},"spec":)" + spec + "}");
  };
  const auto good = pod(R"({"containers":[)" + ok_container + "]}");
  EXPECT_TRUE(PodSecurityViolations(good, "restricted").empty());
  EXPECT_TRUE(PodSecurityViolations(good, "baseline").empty());

  const auto bare = pod(R"({"containers":[{"name":"a","image":"x"},{"name":"b","image":"x"}]})");
  EXPECT_TRUE(PodSecurityViolations(bare, "baseline").empty()) << "baseline allows the defaults";
  EXPECT_TRUE(PodSecurityViolations(bare, "privileged").empty());
  const auto v = PodSecurityViolations(bare, "restricted");
  const std::vector<std::string> want = {
      R"(allowPrivilegeEscalation != false (containers "a", "b" must set securityContext.allowPrivilegeEscalation=false))",
      R"(unrestricted capabilities (containers "a", "b" must set securityContext.capabilities.drop=["ALL"]))",
      R"(runAsNonRoot != true (pod or containers "a", "b" must set securityContext.runAsNonRoot=true))",
      R"(seccompProfile (pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"))"};
  EXPECT_EQ(v, want);
  // Pod-level runAsNonRoot and seccompProfile cover every container.
  const auto pod_level = pod(R"({"securityContext":{"runAsNonRoot":true,
      "seccompProfile":{"type":"RuntimeDefault"}},"containers":[{"name":"a","image":"x",
      "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]})");
  EXPECT_TRUE(PodSecurityViolations(pod_level, "restricted").empty());

  const auto host = pod(R"({"hostNetwork":true,"volumes":[{"name":"seen","hostPath":{"path":"/x"}}],
      "containers":[)" + ok_container.substr(0, ok_container.size() - 2) +
                        R"(,"privileged":true}}]})");
  const auto hv = PodSecurityViolations(host, "baseline");
  ASSERT_EQ(hv.size(), 3u);
  EXPECT_EQ(hv[0], "host namespaces (hostNetwork=true)");
  EXPECT_EQ(hv[1], R"(privileged (container "ok" must not set securityContext.privileged=true))");
  EXPECT_EQ(hv[2], R"(hostPath volume "seen")");
  EXPECT_EQ(PodSecurityMessage("p", "restricted", {"x", "y"}),
            R"(pods "p" is forbidden: violates PodSecurity "restricted:latest": x, y)");
}

// Protobuf as client-go writes it: length-delimited fields (wire type 2) and varints.
void AppendVarint(std::string& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out += static_cast<char>(b | (v ? 0x80 : 0));
  } while (v);
}

std::string Pb(uint32_t field, const std::string& bytes) {
  std::string out;
  AppendVarint(out, (field << 3) | 2);
  AppendVarint(out, bytes.size());
  return out + bytes;
}

TEST(ProtobufTest, DecodesTheSecretsHelmStoresItsReleasesIn) {
  const std::string meta = Pb(1, "sh.helm.release.v1.shoal.v1") + Pb(3, "shoal-system") +
                           Pb(11, Pb(1, "owner") + Pb(2, "helm"));
  const std::string secret = Pb(1, meta) + Pb(2, Pb(1, "release") + Pb(2, std::string("\x01\x02", 2))) +
                             Pb(3, "helm.sh/release.v1");
  const std::string body =
      std::string("k8s\0", 4) + Pb(1, Pb(1, "v1") + Pb(2, "Secret")) + Pb(2, secret);
  auto obj = DecodeProtobufObject(body);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  EXPECT_EQ(obj->at("kind").as_string(), "Secret");
  EXPECT_EQ(obj->at("metadata").at("name").as_string(), "sh.helm.release.v1.shoal.v1");
  EXPECT_EQ(obj->at("metadata").at("namespace").as_string(), "shoal-system");
  EXPECT_EQ(obj->at("metadata").at("labels").at("owner").as_string(), "helm");
  EXPECT_EQ(obj->at("data").at("release").as_string(), "AQI=");  // base64 of 01 02
  EXPECT_EQ(obj->at("type").as_string(), "helm.sh/release.v1");

  EXPECT_FALSE(DecodeProtobufObject("{}").ok()) << "no k8s\\0 envelope";
  EXPECT_FALSE(DecodeProtobufObject(body.substr(0, body.size() - 3)).ok()) << "truncated";
  auto other = DecodeProtobufObject(std::string("k8s\0", 4) + Pb(1, Pb(1, "apps/v1") +
                                                                  Pb(2, "Deployment")));
  EXPECT_EQ(other.status().code(), Status::Code::kFailedPrecondition) << "answered 415";
}

// A varint field (wire type 0).
std::string PbVarint(uint32_t field, uint64_t v) {
  std::string out;
  AppendVarint(out, field << 3);
  AppendVarint(out, v);
  return out;
}

// What `kubectl create namespace` and `kubectl create token` send.
TEST(ProtobufTest, DecodesNamespacesAndTokenRequestsAsKubectlSendsThem) {
  auto ns = DecodeProtobufObject(std::string("k8s\0", 4) + Pb(1, Pb(1, "v1") + Pb(2, "Namespace")) +
                                 Pb(2, Pb(1, Pb(1, "team-a")) + Pb(2, Pb(1, "kubernetes"))));
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  EXPECT_EQ(ns->at("metadata").at("name").as_string(), "team-a");
  EXPECT_EQ(ns->at("spec").at("finalizers").at(0).as_string(), "kubernetes");

  const std::string spec = Pb(1, "https://kubernetes.default.svc") + PbVarint(4, 3600) +
                           Pb(3, Pb(1, "Pod") + Pb(2, "v1") + Pb(3, "app-0") + Pb(4, "u-1"));
  auto token = DecodeProtobufObject(
      std::string("k8s\0", 4) + Pb(1, Pb(1, "authentication.k8s.io/v1") + Pb(2, "TokenRequest")) +
      Pb(2, Pb(1, Pb(1, "developer")) + Pb(2, spec)));
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->at("kind").as_string(), "TokenRequest");
  EXPECT_EQ(token->at("spec").at("expirationSeconds").as_integer(), 3600);
  EXPECT_EQ(token->at("spec").at("audiences").at(0).as_string(), "https://kubernetes.default.svc");
  EXPECT_EQ(token->at("spec").at("boundObjectRef").at("name").as_string(), "app-0");
  EXPECT_EQ(token->at("spec").at("boundObjectRef").at("kind").as_string(), "Pod");
}

}  // namespace
}  // namespace shoal::testing
