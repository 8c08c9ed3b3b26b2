// Checks crds/shoal.dev_partitionedtopics.yaml: that the API server would take it (a structural
// schema, one storage version, subresource and printer-column paths that exist), that every
// PartitionedTopic under examples/ validates against it, that invalid specs are refused (by the
// schema, or by a CEL rule that the operator's ValidateTopic backs up), and that its spec is
// exactly the topic that common/src/topic_spec.cc reads, defaults included.
//
// The API server is not here (kubectl cannot even dry-run a CRD without one), so the test carries
// a small OpenAPI validator for the subset the CRD uses, with fieldValidation=Strict's treatment of
// unknown fields. CEL rules are not evaluated: their presence and messages are checked, and the
// same specs are checked to fail ParseTopic.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "shoal/common/topic_spec.h"
#include "support/utf8.h"

namespace shoal {
namespace {

namespace fs = std::filesystem;
using shoal::testing::Utf8CodePoints;

const std::string kSourceDir = SHOAL_SOURCE_DIR;
const std::string kCrdPath = kSourceDir + "/crds/shoal.dev_partitionedtopics.yaml";

// ---------------------------------------------------------------------------------------------
// Scalars as the API server sees them after YAML -> JSON (sigs.k8s.io/yaml, YAML 1.1 plain
// scalars): quoted scalars are strings; plain ones are null, bool, int, float or string.

enum class Kind { kNull, kBool, kInt, kFloat, kString, kMap, kSeq };

Kind KindOf(const YAML::Node& n) {
  if (!n || n.IsNull()) return Kind::kNull;
  if (n.IsMap()) return Kind::kMap;
  if (n.IsSequence()) return Kind::kSeq;
  if (n.Tag() == "!") return Kind::kString;  // quoted
  static const std::regex kBool(
      "^(true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF)$");
  static const std::regex kNullRe("^(~|null|Null|NULL|)$");
  static const std::regex kInt("^[-+]?(0|[1-9][0-9]*)$");
  static const std::regex kFloat(
      "^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\\.(inf|Inf|INF)$|^\\.(nan|"
      "NaN|NAN)$");
  const std::string& s = n.Scalar();
  if (std::regex_match(s, kNullRe)) return Kind::kNull;
  if (std::regex_match(s, kBool)) return Kind::kBool;
  if (std::regex_match(s, kInt)) return Kind::kInt;
  if (std::regex_match(s, kFloat)) return Kind::kFloat;
  return Kind::kString;
}

bool IsTrue(const YAML::Node& n) { return n && n.IsScalar() && n.Scalar() == "true"; }

// ---------------------------------------------------------------------------------------------
// The validator: type, properties (unknown fields are errors, as with fieldValidation=Strict),
// additionalProperties, required, minimum/maximum (and their exclusive forms), minLength/maxLength,
// minItems/maxItems, enum, pattern, format date-time, items, x-kubernetes-list-type: map keys,
// x-kubernetes-preserve-unknown-fields, x-kubernetes-int-or-string. Nulls count as absent (the API
// server prunes them from fields that are not nullable). Errors read "path: what".

class Validator {
 public:
  std::vector<std::string> Validate(const YAML::Node& schema, const YAML::Node& value) {
    errors_.clear();
    Check(schema, value, "", /*root=*/true);
    return errors_;
  }

 private:
  void Error(const std::string& path, const std::string& what) {
    errors_.push_back((path.empty() ? "(root)" : path) + ": " + what);
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  void Check(const YAML::Node& s, const YAML::Node& v, const std::string& path, bool root) {
    const Kind k = KindOf(v);
    if (k == Kind::kNull) return;
    if (IsTrue(s["x-kubernetes-int-or-string"])) {
      if (k != Kind::kInt && k != Kind::kString) {
        return Error(path, "must be an integer or a string");
      }
    } else if (s["type"]) {
      const std::string t = s["type"].as<std::string>();
      const bool ok = (t == "object" && k == Kind::kMap) || (t == "array" && k == Kind::kSeq) ||
                      (t == "string" && k == Kind::kString) ||
                      (t == "integer" && k == Kind::kInt) ||
                      (t == "number" && (k == Kind::kInt || k == Kind::kFloat)) ||
                      (t == "boolean" && k == Kind::kBool);
      if (!ok) return Error(path, "must be of type " + t + ", got \"" + YAML::Dump(v) + "\"");
    }
    if (auto e = s["enum"]) {
      bool found = false;
      for (const auto& x : e) found |= v.IsScalar() && x.Scalar() == v.Scalar();
      if (!found) Error(path, "unsupported value \"" + YAML::Dump(v) + "\" (enum)");
    }
    if (k == Kind::kInt || k == Kind::kFloat) CheckNumber(s, v, path, k);
    if (k == Kind::kString) CheckString(s, v.Scalar(), path);
    if (k == Kind::kSeq) CheckArray(s, v, path);
    if (k == Kind::kMap) CheckObject(s, v, path, root);
  }

  void CheckNumber(const YAML::Node& s, const YAML::Node& v, const std::string& path, Kind k) {
    if (k == Kind::kInt) {
      errno = 0;
      std::strtoll(v.Scalar().c_str(), nullptr, 10);
      if (errno == ERANGE) return Error(path, "integer out of the int64 range");
    }
    const long double x = std::strtold(v.Scalar().c_str(), nullptr);
    if (auto m = s["minimum"]) {
      const long double lo = m.as<long double>();
      const bool excl = IsTrue(s["exclusiveMinimum"]);
      if (excl ? !(x > lo) : !(x >= lo)) {
        Error(path, std::string("should be ") +
                        (excl ? "greater than " : "greater than or equal to ") + m.Scalar());
      }
    }
    if (auto m = s["maximum"]) {
      const long double hi = m.as<long double>();
      const bool excl = IsTrue(s["exclusiveMaximum"]);
      if (excl ? !(x < hi) : !(x <= hi)) {
        Error(path, std::string("should be ") + (excl ? "less than " : "less than or equal to ") +
                        m.Scalar());
      }
    }
  }

  void CheckString(const YAML::Node& s, const std::string& v, const std::string& path) {
    if (auto m = s["minLength"]; m && Utf8CodePoints(v) < m.as<size_t>()) {
      Error(path, "should be at least " + m.Scalar() + " chars long");
    }
    if (auto m = s["maxLength"]; m && Utf8CodePoints(v) > m.as<size_t>()) {
      Error(path, "may not be longer than " + m.Scalar());
    }
    if (auto p = s["pattern"]; p && !std::regex_search(v, std::regex(p.as<std::string>()))) {
      Error(path, "should match '" + p.as<std::string>() + "'");
    }
    if (auto f = s["format"]; f && f.as<std::string>() == "date-time") {
      static const std::regex kRfc3339(
          "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:"
          "[0-9]{2})$");
      if (!std::regex_match(v, kRfc3339)) Error(path, "must be an RFC 3339 date-time");
    }
  }

  void CheckArray(const YAML::Node& s, const YAML::Node& v, const std::string& path) {
    if (auto m = s["minItems"]; m && v.size() < m.as<size_t>()) {
      Error(path, "should have at least " + m.Scalar() + " items");
    }
    if (auto m = s["maxItems"]; m && v.size() > m.as<size_t>()) {
      Error(path, "must have at most " + m.Scalar() + " items");
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (s["items"]) Check(s["items"], v[i], path + "[" + std::to_string(i) + "]", false);
    }
    if (s["x-kubernetes-list-type"] && s["x-kubernetes-list-type"].as<std::string>() == "map") {
      std::set<std::string> seen;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].IsMap()) continue;
        std::string key;
        for (const auto& k : s["x-kubernetes-list-map-keys"]) {
          const YAML::Node field = v[i][k.as<std::string>()];
          key += (field ? YAML::Dump(field) : "<absent>") + "\x1f";
        }
        if (!seen.insert(key).second) {
          Error(path + "[" + std::to_string(i) + "]", "Duplicate value (list map key)");
        }
      }
    }
  }

  void CheckObject(const YAML::Node& s, const YAML::Node& v, const std::string& path, bool root) {
    const YAML::Node props = s["properties"];
    const YAML::Node extra = s["additionalProperties"];
    const bool preserve = IsTrue(s["x-kubernetes-preserve-unknown-fields"]);
    for (const auto& kv : v) {
      const std::string key = kv.first.as<std::string>();
      const std::string p = Join(path, key);
      // ObjectMeta at the root is the API server's business, not the CRD schema's.
      if (root && key == "metadata") continue;
      if (props && props[key]) {
        Check(props[key], kv.second, p, false);
      } else if (extra && extra.IsMap()) {
        Check(extra, kv.second, p, false);
      } else if (!preserve) {
        Error(p, "unknown field \"" + key + "\"");
      }
    }
    if (auto req = s["required"]) {
      for (const auto& r : req) {
        const std::string key = r.as<std::string>();
        if (KindOf(v[key]) == Kind::kNull) Error(Join(path, key), "Required value");
      }
    }
  }

  std::vector<std::string> errors_;
};

// Applies the schema's defaults the way the API server does: a missing property with a default
// gets it, then defaulting goes on inside (also inside a value that was just defaulted).
void ApplyDefaults(const YAML::Node& s, YAML::Node v) {
  if (!v.IsMap() || !s["properties"]) return;
  for (const auto& kv : s["properties"]) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& view = v;  // const lookups add no key
    if (KindOf(view[key]) == Kind::kNull && kv.second["default"]) {
      v[key] = YAML::Clone(kv.second["default"]);
    }
    if (view[key]) ApplyDefaults(kv.second, v[key]);
  }
}

// ---------------------------------------------------------------------------------------------

class CrdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    crd_ = YAML::LoadFile(kCrdPath);
    for (const auto& v : crd_["spec"]["versions"]) {
      if (IsTrue(v["storage"])) version_.reset(v);
    }
    ASSERT_TRUE(version_) << "no storage version";
    schema_.reset(version_["schema"]["openAPIV3Schema"]);
    ASSERT_TRUE(schema_.IsMap());
  }

  // The schema node at a dotted path of property names ("spec.partitions.max"); "*" steps into
  // additionalProperties, "[]" into items. Null when there is none.
  YAML::Node At(const std::string& dotted) const {
    // Lookups go through a const node: a non-const operator[] would add the missing key, and
    // assigning to a bound node would overwrite the schema; reset() rebinds instead.
    YAML::Node n = schema_;
    std::stringstream in(dotted);
    std::string part;
    while (std::getline(in, part, '.')) {
      if (part.empty()) continue;
      const YAML::Node& cur = n;
      // Copy-constructed: assigning a missing (zombie) node would throw.
      const YAML::Node next = part == "*"         ? cur["additionalProperties"]
                              : part == "[]"      ? cur["items"]
                              : cur["properties"] ? cur["properties"][part]
                                                  : YAML::Node();
      if (!next) return YAML::Node();
      n.reset(next);
    }
    return n;
  }

  std::vector<std::string> Validate(const YAML::Node& doc) {
    return Validator().Validate(schema_, doc);
  }

  // Messages of the CEL rules on a schema node.
  std::vector<std::string> RuleMessages(const std::string& dotted) const {
    std::vector<std::string> out;
    const YAML::Node n = dotted.empty() ? schema_ : At(dotted);
    if (n && n["x-kubernetes-validations"]) {
      for (const auto& r : n["x-kubernetes-validations"]) {
        out.push_back(r["message"].as<std::string>());
      }
    }
    return out;
  }

  YAML::Node crd_, version_, schema_;
};

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "\n  " + s;
  return out;
}

TEST_F(CrdTest, NamesAndVersions) {
  EXPECT_EQ(crd_["apiVersion"].as<std::string>(), "apiextensions.k8s.io/v1");
  EXPECT_EQ(crd_["kind"].as<std::string>(), "CustomResourceDefinition");
  const YAML::Node spec = crd_["spec"];
  EXPECT_EQ(crd_["metadata"]["name"].as<std::string>(),
            spec["names"]["plural"].as<std::string>() + "." + spec["group"].as<std::string>());
  EXPECT_EQ(spec["group"].as<std::string>(), "shoal.dev");
  EXPECT_EQ(spec["scope"].as<std::string>(), "Namespaced");
  EXPECT_EQ(spec["names"]["kind"].as<std::string>(), "PartitionedTopic");
  EXPECT_EQ(spec["names"]["plural"].as<std::string>(), "partitionedtopics");
  EXPECT_EQ(spec["names"]["singular"].as<std::string>(), "partitionedtopic");
  EXPECT_EQ(spec["names"]["shortNames"].as<std::vector<std::string>>(),
            std::vector<std::string>{"ptopic"});
  EXPECT_EQ(spec["names"]["categories"].as<std::vector<std::string>>(),
            std::vector<std::string>{"shoal"});
  int storage = 0;
  for (const auto& v : spec["versions"]) {
    storage += IsTrue(v["storage"]);
    EXPECT_TRUE(v["schema"]["openAPIV3Schema"]) << v["name"];
  }
  EXPECT_EQ(storage, 1) << "exactly one version is the storage version";
  EXPECT_EQ(version_["name"].as<std::string>(), "v1alpha1");
  EXPECT_TRUE(IsTrue(version_["served"]));
}

// The structural-schema rules of apiextensions.k8s.io/v1 (reference/kubernetes-api.md, "CRD
// authoring"), and descriptions everywhere.
TEST_F(CrdTest, SchemaIsStructuralAndDescribed) {
  std::vector<std::string> problems;
  const std::set<std::string> kTypes = {"object",  "array",  "string",
                                        "integer", "number", "boolean"};
  // Not structural ($ref, definitions, patternProperties), or structural but outside what this
  // test's validator implements (the logical combinators, nullable): kept out of the CRD so that
  // the validator's verdicts stay the API server's.
  const std::set<std::string> kForbidden = {
      "$ref", "definitions", "patternProperties", "allOf", "anyOf", "oneOf", "not", "nullable"};
  Validator validator;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& s,
                                                                        const std::string& path) {
    auto bad = [&](const std::string& what) { problems.push_back(path + ": " + what); };
    if (!s.IsMap()) return bad("not a schema object");
    for (const auto& kv : s) {
      if (kForbidden.count(kv.first.as<std::string>())) bad("uses " + kv.first.as<std::string>());
    }
    if (IsTrue(s["uniqueItems"])) bad("uniqueItems: true");
    if (s["additionalProperties"] && !s["additionalProperties"].IsMap()) {
      bad("additionalProperties must be a schema (false/true are not structural)");
    }
    if (s["additionalProperties"] && s["properties"]) {
      bad("both properties and additionalProperties");
    }
    const bool int_or_string = IsTrue(s["x-kubernetes-int-or-string"]);
    const bool preserve = IsTrue(s["x-kubernetes-preserve-unknown-fields"]);
    if (int_or_string && s["type"]) bad("x-kubernetes-int-or-string with a type");
    if (!s["type"] && !int_or_string && !preserve) bad("no type");
    const std::string type = s["type"] ? s["type"].as<std::string>() : "";
    if (s["type"] && !kTypes.count(type)) bad("unknown type " + type);
    if (path != "metadata" && !s["description"]) bad("no description");
    if (s["description"] && s["description"].as<std::string>().size() < 10) {
      bad("description too short");
    }
    if ((s["properties"] || s["additionalProperties"]) && type != "object") {
      bad("properties on a non-object");
    }
    if (type == "array" && !s["items"]) bad("array without items");
    if (s["items"] && type != "array") bad("items on a non-array");
    if (auto d = s["default"]) {
      auto errs = validator.Validate(s, d);
      if (!errs.empty()) bad("default does not validate:" + Joined(errs));
    }
    if (s["x-kubernetes-list-type"] && s["x-kubernetes-list-type"].as<std::string>() == "map") {
      const YAML::Node items = s["items"];
      std::set<std::string> req;
      if (items && items["required"]) {
        for (const auto& r : items["required"]) req.insert(r.as<std::string>());
      }
      if (!s["x-kubernetes-list-map-keys"]) bad("list-type map without list-map-keys");
      for (const auto& k : s["x-kubernetes-list-map-keys"]) {
        const std::string key = k.as<std::string>();
        if (!req.count(key) && !(items["properties"][key] && items["properties"][key]["default"])) {
          bad("list map key " + key + " is neither required nor defaulted");
        }
      }
    }
    if (auto rules = s["x-kubernetes-validations"]) {
      for (const auto& r : rules) {
        if (!r["rule"] || r["rule"].as<std::string>().empty()) bad("a CEL rule without rule");
        if (!r["message"]) bad("a CEL rule without message: " + r["rule"].as<std::string>());
        if (r["message"] && r["message"].as<std::string>().find('\n') != std::string::npos) {
          bad("a CEL message with a line break");
        }
      }
    }
    if (auto p = s["properties"]) {
      for (const auto& kv : p) {
        const std::string key = kv.first.as<std::string>();
        walk(kv.second, path.empty() ? key : path + "." + key);
      }
    }
    if (s["items"]) walk(s["items"], path + "[]");
    if (s["additionalProperties"] && s["additionalProperties"].IsMap()) {
      walk(s["additionalProperties"], path + ".*");
    }
  };
  walk(schema_, "");
  // metadata at the root: only `type: object` (the API server forbids anything else there,
  // descriptions included).
  const YAML::Node meta = At("metadata");
  ASSERT_TRUE(meta);
  EXPECT_EQ(meta.size(), 1u) << YAML::Dump(meta);
  EXPECT_EQ(meta["type"].as<std::string>(), "object");
  EXPECT_TRUE(problems.empty()) << Joined(problems);
}

// A printer column or scale path (".status.conditions[?(@.type==\"Ready\")].status") as a
// schema path ("status.conditions.[].status").
std::string SchemaPath(std::string json_path) {
  json_path = std::regex_replace(json_path, std::regex("\\[\\?\\(.*?\\)\\]"), ".[]");
  return json_path;
}

TEST_F(CrdTest, SubresourcesAndPrinterColumnsPointAtDeclaredFields) {
  const YAML::Node sub = version_["subresources"];
  ASSERT_TRUE(sub["status"]);
  const YAML::Node scale = sub["scale"];
  ASSERT_TRUE(scale);
  const std::string spec_path = scale["specReplicasPath"].as<std::string>();
  EXPECT_EQ(spec_path.rfind(".spec.", 0), 0u);
  EXPECT_EQ(spec_path, ".spec.replicas.min")
      << "docs/kubernetes.md says kubectl scale sets the floor";
  ASSERT_TRUE(At(spec_path));
  EXPECT_EQ(At(spec_path)["type"].as<std::string>(), "integer");
  const std::string status_path = scale["statusReplicasPath"].as<std::string>();
  EXPECT_EQ(status_path.rfind(".status.", 0), 0u);
  ASSERT_TRUE(At(status_path));
  EXPECT_EQ(At(status_path)["type"].as<std::string>(), "integer");
  ASSERT_TRUE(At(scale["labelSelectorPath"].as<std::string>()));
  EXPECT_EQ(At(scale["labelSelectorPath"].as<std::string>())["type"].as<std::string>(), "string");

  std::set<std::string> names;
  for (const auto& c : version_["additionalPrinterColumns"]) {
    const std::string name = c["name"].as<std::string>();
    names.insert(name);
    const std::string path = c["jsonPath"].as<std::string>();
    EXPECT_TRUE(c["description"]) << name;
    if (path == ".metadata.creationTimestamp") continue;
    const YAML::Node n = At(SchemaPath(path));
    ASSERT_TRUE(n) << name << ": " << path << " is not in the schema";
    const std::string col = c["type"].as<std::string>();
    const std::string field = n["type"].as<std::string>();
    EXPECT_TRUE(col == field || (col == "date" && field == "string" && n["format"] &&
                                 n["format"].as<std::string>() == "date-time"))
        << name << ": column type " << col << ", field type " << field;
  }
  for (const char* want : {"Partitions", "Replicas", "Epoch", "Ready", "Last Decision", "Age"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  // Conditions are a list map keyed by type, as metav1.Condition lists are.
  const YAML::Node cond = At("status.conditions");
  ASSERT_TRUE(cond);
  EXPECT_EQ(cond["x-kubernetes-list-type"].as<std::string>(), "map");
  EXPECT_EQ(cond["x-kubernetes-list-map-keys"].as<std::vector<std::string>>(),
            std::vector<std::string>{"type"});
  for (const char* f :
       {"type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"}) {
    EXPECT_TRUE(At(std::string("status.conditions.[].") + f)) << f;
  }
  for (const char* f : {"observedGeneration", "partitions", "replicas", "selector", "partitionMap",
                        "plan", "lastDecision.time", "lastDecision.reason", "lastDecision.kinds"}) {
    EXPECT_TRUE(At(std::string("status.") + f)) << f;
  }
}

std::vector<fs::path> PartitionedTopicFiles() {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(kSourceDir + "/examples")) {
    if (!e.is_regular_file() || e.path().extension() != ".yaml") continue;
    for (const auto& doc : YAML::LoadAllFromFile(e.path().string())) {
      if (doc.IsMap() && doc["kind"] && doc["kind"].as<std::string>() == "PartitionedTopic") {
        out.push_back(e.path());
        break;
      }
    }
  }
  return out;
}

TEST_F(CrdTest, EveryExampleTopicValidates) {
  const auto files = PartitionedTopicFiles();
  EXPECT_GE(files.size(), 4u) << "flash-sale, steady, traces/topic, traces/big-topic at least";
  for (const auto& f : files) {
    for (const auto& doc : YAML::LoadAllFromFile(f.string())) {
      if (!doc.IsMap() || !doc["kind"] || doc["kind"].as<std::string>() != "PartitionedTopic")
        continue;
      EXPECT_TRUE(Validate(doc).empty()) << f << Joined(Validate(doc));
      EXPECT_TRUE(ParseTopic(YAML::Dump(doc)).ok()) << f;
    }
  }
}

constexpr const char* kValid = R"(apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata: {name: orders}
spec:
  partitions: {min: 2, max: 32, initial: 4}
  replicas: {min: 1, max: 8}
  scaling:
    targetEventsPerSecondPerPartition: 500
    targetCPUUtilizationPercent: 70
    targetConsumerLag: 5000
    targetPartitionsPerReplica: 4
    drainSeconds: 30
    schedules:
      - {name: friday-sale, cron: "0 12 * * 5", timeZone: Europe/Berlin, durationSeconds: 3600,
         readySeconds: 300, minPartitions: 4, minReplicas: 1}
      - {name: launch, start: "2026-12-24T12:00:00Z", durationSeconds: 1800, minReplicas: 1}
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0, tolerance: 0.1, maxPartitionsPerStep: 0,
              predictive: false}
    scaleDown: {stabilizationWindowSeconds: 300, tolerance: 0.1, maxPartitionsPerStep: 8}
  durability: {fsync: always}
  replication: {factor: 3, acks: quorum}
  retention: {bytes: 0, ms: 86400000}
  consumer:
    template:
      metadata: {labels: {team: checkout}}
      spec:
        containers:
          - {name: app, image: "example/app:1", env: [{name: A, value: "1"}]}
  sidecar:
    image: shoal:latest
    resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {cpu: 1, memory: 1Gi}}
)";

// A copy of kValid with one node replaced; `path` is dotted, the value YAML.
YAML::Node With(const std::string& path, const std::string& value) {
  YAML::Node doc = YAML::Load(kValid);
  YAML::Node n = doc;
  std::stringstream in(path);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(in, part, '.')) parts.push_back(part);
  for (size_t i = 0; i + 1 < parts.size(); ++i) n.reset(n[parts[i]]);
  if (value == "<remove>") {
    n.remove(parts.back());
  } else {
    n[parts.back()] = YAML::Load(value);
  }
  return doc;
}

TEST_F(CrdTest, TheValidSampleValidatesAndParses) {
  EXPECT_TRUE(Validate(YAML::Load(kValid)).empty()) << Joined(Validate(YAML::Load(kValid)));
  EXPECT_TRUE(ParseTopic(kValid).ok()) << ParseTopic(kValid).status().ToString();
  // Every value topic_spec.cc accepts at the edges, the schema accepts too.
  const std::pair<const char*, const char*> kEdges[] = {
      {"spec.durability.fsync", "always"},
      {"spec.durability.fsync", "interval"},
      {"spec.durability.fsync", "never"},
      {"spec.partitions", "{min: 1, max: 65536, initial: 65536}"},
      {"spec.partitions", "{min: 7, max: 7}"},
      {"spec.replicas", "{min: 1, max: 3}"},
      {"spec.replication", "{factor: 1}"},
      {"spec.replication", "{factor: 5, acks: leader}"},
      {"spec.scaling.targetEventsPerSecondPerPartition", "0.5"},
      {"spec.scaling.targetCPUUtilizationPercent", "1"},
      {"spec.scaling.targetCPUUtilizationPercent", "100"},
      {"spec.scaling.targetConsumerLag", "0"},
      {"spec.scaling.drainSeconds", "1"},
      {"spec.scaling.drainSeconds", "3600"},
      {"spec.behavior.scaleUp.tolerance", "0"},
      {"spec.behavior.scaleUp.tolerance", "0.99"},
      {"spec.behavior.scaleDown.stabilizationWindowSeconds", "3600"},
      {"spec.retention", "{bytes: 0, ms: 0}"},
      {"spec.sidecar.resources", "{requests: {cpu: 1, memory: 1.5Gi}, limits: {cpu: \"2\"}}"},
  };
  for (const auto& [path, value] : kEdges) {
    const YAML::Node doc = With(path, value);
    EXPECT_TRUE(Validate(doc).empty()) << path << " = " << value << Joined(Validate(doc));
    EXPECT_TRUE(ParseTopic(YAML::Dump(doc)).ok())
        << path << " = " << value << ": " << ParseTopic(YAML::Dump(doc)).status().ToString();
  }
}

// Specs the schema refuses by itself. `code` is what ParseTopic says about the same spec, or
// empty where only Kubernetes checks it (the pod template is checked again when the operator
// creates the StatefulSet).
struct SchemaCase {
  const char* what;
  const char* path;
  const char* value;
  const char* schema_error;  // a substring of one of the validator's errors
  const char* code_error;    // a substring of ParseTopic's message, or "" when it accepts it
};

TEST_F(CrdTest, TheSchemaRefusesInvalidSpecs) {
  const SchemaCase kCases[] = {
      {"cap above the operator's limit", "spec.partitions.max", "65537",
       "spec.partitions.max: should be less than or equal to 65536", "at most 65536"},
      {"zero partitions", "spec.partitions.min", "0",
       "spec.partitions.min: should be greater than or equal to 1", "at least 1"},
      {"negative partitions", "spec.partitions.initial", "-1",
       "spec.partitions.initial: should be greater", "non-negative integer"},
      {"zero replicas", "spec.replicas.min", "0",
       "spec.replicas.min: should be greater than or equal to 1", "need 1 <= min <= max"},
      {"negative rate target", "spec.scaling.targetEventsPerSecondPerPartition", "-5",
       "targetEventsPerSecondPerPartition: should be greater than 0", "must be a positive number"},
      {"zero rate target", "spec.scaling.targetEventsPerSecondPerPartition", "0",
       "targetEventsPerSecondPerPartition: should be greater than 0", "must be a positive number"},
      {"negative lag target", "spec.scaling.targetConsumerLag", "-1",
       "targetConsumerLag: should be greater than or equal to 0", "non-negative integer"},
      {"CPU target above 100", "spec.scaling.targetCPUUtilizationPercent", "101",
       "targetCPUUtilizationPercent: should be less than or equal to 100", "between 1 and 100"},
      {"CPU target 0", "spec.scaling.targetCPUUtilizationPercent", "0",
       "targetCPUUtilizationPercent: should be greater than or equal to 1", "between 1 and 100"},
      {"drain in no time", "spec.scaling.drainSeconds", "0",
       "drainSeconds: should be greater than or equal to 1", "between 1 and 3600"},
      {"drain over an hour", "spec.scaling.drainSeconds", "3601",
       "drainSeconds: should be less than or equal to 3600", "between 1 and 3600"},
      {"zero partitions per replica", "spec.scaling.targetPartitionsPerReplica", "0",
       "targetPartitionsPerReplica: should be greater than or equal to 1", "at least 1"},
      {"tolerance 1", "spec.behavior.scaleUp.tolerance", "1",
       "scaleUp.tolerance: should be less than 1", "must be in [0, 1)"},
      {"negative tolerance", "spec.behavior.scaleDown.tolerance", "-0.1",
       "scaleDown.tolerance: should be greater than or equal to 0", "must be in [0, 1)"},
      {"window above an hour", "spec.behavior.scaleDown.stabilizationWindowSeconds", "3601",
       "stabilizationWindowSeconds: should be less than or equal to 3600", "at most 3600"},
      {"unknown fsync mode", "spec.durability.fsync", "sometimes",
       "spec.durability.fsync: unsupported value", "must be always, interval or never"},
      {"six copies", "spec.replication.factor", "6",
       "spec.replication.factor: should be less than or equal to 5", "must be 1 to 5"},
      {"unknown acks", "spec.replication.acks", "all",
       "spec.replication.acks: unsupported value", "must be quorum"},
      {"negative retention", "spec.retention.ms", "-1",
       "spec.retention.ms: should be greater than or equal to 0", "must be >= 0"},
      {"not a number", "spec.partitions.max", "lots",
       "spec.partitions.max: must be of type integer", "expected a non-negative integer"},
      {"a fractional count", "spec.replicas.max", "2.5",
       "spec.replicas.max: must be of type integer", "expected a non-negative integer"},
      {"unknown spec field", "spec.partitons", "{max: 8}", "spec.partitons: unknown field",
       "unknown field"},
      {"unknown nested field", "spec.scaling.targetRPS", "10",
       "spec.scaling.targetRPS: unknown field", "unknown field"},
      {"unknown behavior field", "spec.behavior.scaleUp.policies", "[]",
       "spec.behavior.scaleUp.policies: unknown field", "unknown field"},
      {"template without containers", "spec.consumer.template.spec.containers", "<remove>",
       "spec.consumer.template.spec.containers: Required value", ""},
      {"template without spec", "spec.consumer.template.spec", "<remove>",
       "spec.consumer.template.spec: Required value", ""},
      {"template with no containers", "spec.consumer.template.spec.containers", "[]",
       "containers: should have at least 1 items", ""},
      {"container without image", "spec.consumer.template.spec.containers", "[{name: app}]",
       "containers[0].image: Required value", ""},
      {"containers of one name", "spec.consumer.template.spec.containers",
       "[{name: app, image: a}, {name: app, image: b}]", "containers[1]: Duplicate value", ""},
      {"a container name that is no DNS label", "spec.consumer.template.spec.containers",
       "[{name: App_1, image: a}]", "containers[0].name: should match", ""},
      {"template not an object", "spec.consumer.template", "[1, 2]",
       "spec.consumer.template: must be of type object", ""},
      {"consumer without template", "spec.consumer", "{}", "spec.consumer.template: Required value",
       ""},
      {"a label value that is not a string", "spec.consumer.template.metadata.labels",
       "{tier: [1]}", "labels.tier: must be of type string", ""},
      {"a quantity that is none", "spec.sidecar.resources.requests.cpu", "lots",
       "requests.cpu: should match", ""},
      {"an unknown resource list", "spec.sidecar.resources.claims", "[]",
       "resources.claims: unknown field", ""},
      {"an empty sidecar image", "spec.sidecar.image", "\"\"",
       "spec.sidecar.image: should be at least 1", ""},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.what);
    const YAML::Node doc = With(c.path, c.value);
    const auto errors = Validate(doc);
    bool found = false;
    for (const auto& e : errors) found |= e.find(c.schema_error) != std::string::npos;
    EXPECT_TRUE(found) << "want \"" << c.schema_error << "\", got:" << Joined(errors);
    const auto parsed = ParseTopic(YAML::Dump(doc));
    if (std::string(c.code_error).empty()) continue;
    ASSERT_FALSE(parsed.ok()) << "ParseTopic accepted it";
    EXPECT_NE(parsed.status().message().find(c.code_error), std::string::npos)
        << parsed.status().ToString();
  }
}

// Specs only a CEL rule can refuse (the fields are fine one by one). The schema passes them, a rule
// with the fix in its message is declared on the right node, and ParseTopic refuses them too, so an
// API server that did not run the rule still leaves the operator reporting Degraded.
struct CelCase {
  const char* what;
  const char* path;          // the one node edited in kValid
  std::string value;         // its new value, YAML
  const char* rule_node;     // "" for the root
  const char* rule_message;  // a substring of the rule's message
  const char* code_error;    // a substring of ParseTopic's message
};

TEST_F(CrdTest, CelRulesRefuseWhatTheSchemaCannotSay) {
  const CelCase kCases[] = {
      {"partitions min > max", "spec.partitions", "{min: 10, max: 5}", "spec.partitions",
       "spec.partitions.min must not exceed spec.partitions.max",
       "min (10) must not exceed max (5)"},
      {"partitions min > default max", "spec.partitions", "{min: 100}", "spec.partitions",
       "spec.partitions.min must not exceed spec.partitions.max",
       "min (100) must not exceed max (64)"},
      {"initial above max", "spec.partitions", "{min: 2, max: 8, initial: 9}", "spec.partitions",
       "spec.partitions.initial must lie within [min, max]", "must lie within [min, max]"},
      {"initial below min", "spec.partitions", "{min: 4, max: 8, initial: 2}", "spec.partitions",
       "spec.partitions.initial must lie within [min, max]", "must lie within [min, max]"},
      {"replicas min > max", "spec.replicas", "{min: 5, max: 2}", "spec.replicas",
       "spec.replicas.min must not exceed spec.replicas.max", "need 1 <= min <= max"},
      {"kubectl scale above the default max", "spec.replicas", "{min: 20}", "spec.replicas",
       "kubectl scale --replicas=N sets min", "need 1 <= min <= max"},
      {"a topic name that is no DNS label", "metadata.name", "orders.eu", "",
       "metadata.name must be a DNS-1123 label", "must be 1-63 lowercase letters"},
      {"a topic name over 63 characters", "metadata.name", std::string(64, 'a'), "",
       "metadata.name must be a DNS-1123 label", "must be 1-63 lowercase letters"},
      {"more copies than pods", "spec.replicas", "{min: 1, max: 2}", "",
       "spec.replication.factor must not exceed spec.replicas.max",
       "copies need as many pods"},
      {"a schedule with both cron and start", "spec.scaling.schedules",
       "[{name: a, cron: '0 12 * * *', start: '2026-12-24T12:00:00Z', durationSeconds: 60, "
       "minReplicas: 1}]",
       "spec.scaling.schedules.[]", "a schedule needs exactly one of cron", "exactly one of cron"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.what);
    const YAML::Node doc = With(c.path, c.value);
    EXPECT_TRUE(Validate(doc).empty()) << "the schema alone refuses it:" << Joined(Validate(doc));
    bool found = false;
    for (const auto& m : RuleMessages(c.rule_node))
      found |= m.find(c.rule_message) != std::string::npos;
    EXPECT_TRUE(found) << "no rule on \"" << c.rule_node << "\" with \"" << c.rule_message
                       << "\":" << Joined(RuleMessages(c.rule_node));
    const auto parsed = ParseTopic(YAML::Dump(doc));
    ASSERT_FALSE(parsed.ok()) << "ParseTopic accepted it";
    EXPECT_NE(parsed.status().message().find(c.code_error), std::string::npos)
        << parsed.status().ToString();
  }
  // The bounds in the rules are the ones topic_spec.cc defaults to.
  const TopicSpec d;
  for (const auto& r : At("spec.partitions")["x-kubernetes-validations"]) {
    const std::string rule = r["rule"].as<std::string>();
    EXPECT_NE(rule.find(": " + std::to_string(d.partitions.min) + ")"), std::string::npos) << rule;
    EXPECT_NE(rule.find(": " + std::to_string(d.partitions.max) + ")"), std::string::npos) << rule;
  }
  for (const auto& r : At("spec.replicas")["x-kubernetes-validations"]) {
    const std::string rule = r["rule"].as<std::string>();
    EXPECT_NE(rule.find(": " + std::to_string(d.replicas.min) + ")"), std::string::npos) << rule;
    EXPECT_NE(rule.find(": " + std::to_string(d.replicas.max) + ")"), std::string::npos) << rule;
  }
}

// A status as the operator writes it (docs/kubernetes.md, "Status"): the schema keeps all of it.
// The plan's steps carry what PlanToJson writes; fields the schema does not list are kept there.
constexpr const char* kStatus = R"({
  "observedGeneration": 3, "epoch": 7, "partitions": 12, "sealedPartitions": 2,
  "replicas": 3, "readyReplicas": 3, "selector": "app.kubernetes.io/instance=orders",
  "conditions": [
    {"type": "Ready", "status": "True", "observedGeneration": 3,
     "lastTransitionTime": "2025-01-02T03:04:05Z", "reason": "AtTarget", "message": ""},
    {"type": "Progressing", "status": "False", "observedGeneration": 3,
     "lastTransitionTime": "2025-01-02T03:04:05Z", "reason": "NoPlan",
     "message": "no change in progress"},
    {"type": "Degraded", "status": "False", "observedGeneration": 3,
     "lastTransitionTime": "2025-01-02T03:04:05Z", "reason": "SpecValid", "message": ""}],
  "partitionMap": {"epoch": 7, "encoding": "gzip+base64", "data": "H4sIAAAAAAAA"},
  "plan": {"id": 4, "reason": "rate 5400/s against 500/s", "next": 1, "steps": [
    {"kind": "change", "what": "split 0 in 3", "pods": 1, "state": "done", "attempts": 1,
     "last_error": "", "rebalance": false, "retire": false,
     "splits": [{"partition": 0, "rate": 5400.5, "cuts": [1431655765, 2863311530]}], "merges": [],
     "target": null},
    {"kind": "set_pods", "what": "3 pods", "pods": 3, "state": "pending", "attempts": 0}]},
  "nextPlanId": 5,
  "lastDecision": {"time": "2025-01-02T03:04:05Z", "reason": "split 0 in 3",
                   "kinds": ["split", "pods_up"], "partitions": 12, "replicas": 3}
})";

TEST_F(CrdTest, AStatusAsTheOperatorWritesItValidates) {
  YAML::Node doc = YAML::Load(kValid);
  doc["status"] = YAML::Load(kStatus);
  EXPECT_TRUE(Validate(doc).empty()) << Joined(Validate(doc));
  // What the schema does not declare outside the plan is dropped by the API server.
  doc["status"]["phase"] = "Running";
  doc["status"]["conditions"][0]["reason"] = "at target";
  doc["status"]["conditions"][1]["type"] = "Ready";
  doc["status"]["lastDecision"]["time"] = "yesterday";
  const auto errors = Validate(doc);
  for (const char* want :
       {"status.phase: unknown field", "status.conditions[0].reason: should match",
        "status.conditions[1]: Duplicate value", "status.lastDecision.time: must be an RFC 3339"}) {
    bool found = false;
    for (const auto& e : errors) found |= e.find(want) != std::string::npos;
    EXPECT_TRUE(found) << want << Joined(errors);
  }
}

// Key paths of a YAML tree's leaves under `node` ("spec.partitions.min"); consumer.template is one
// leaf (its insides are the user's pod template, not topic fields).
void LeafPaths(const YAML::Node& node, const std::string& path, std::set<std::string>* out) {
  if (node.IsMap() && path != "spec.consumer.template") {
    for (const auto& kv : node) LeafPaths(kv.second, path + "." + kv.first.as<std::string>(), out);
  } else {
    out->insert(path);
  }
}

// The same for the schema: properties are named, additionalProperties are "*".
void SchemaLeafPaths(const YAML::Node& s, const std::string& path, std::set<std::string>* out) {
  if (s["properties"] && path != "spec.consumer.template") {
    for (const auto& kv : s["properties"]) {
      SchemaLeafPaths(kv.second, path + "." + kv.first.as<std::string>(), out);
    }
  } else if (s["additionalProperties"]) {
    SchemaLeafPaths(s["additionalProperties"], path + ".*", out);
  } else {
    out->insert(path);
  }
}

// A TopicSpec with every field set away from its default, as the operator would write it back.
TopicSpec FullyPopulated() {
  auto t = ParseTopic(kValid);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  TopicSpec s = t.value();
  s.scale_up.max_partitions_per_step = 3;
  s.retention.bytes = 1 << 30;
  s.storage.size = "64Gi";
  s.storage.storage_class = "fast-ssd";
  s.storage.reserve = "256Mi";
  s.security.tls = true;
  s.security.principals.push_back({"billing", true, {"billing", "audit-*"}});
  return s;
}

TEST_F(CrdTest, SpecFieldsAreExactlyTheFieldsTopicSpecReads) {
  const YAML::Node emitted = YAML::Load(TopicToYaml(FullyPopulated()));
  std::set<std::string> code_paths, schema_paths;
  LeafPaths(emitted["spec"], "spec", &code_paths);
  SchemaLeafPaths(At("spec"), "spec", &schema_paths);
  // Map entries (sidecar.resources.requests.cpu) match the schema's "*".
  auto generalize = [&](const std::string& p) {
    for (const char* map : {"spec.sidecar.resources.requests.", "spec.sidecar.resources.limits."}) {
      if (p.rfind(map, 0) == 0) return std::string(map) + "*";
    }
    return p;
  };
  std::set<std::string> code_general;
  for (const auto& p : code_paths) code_general.insert(generalize(p));
  for (const auto& p : code_general)
    EXPECT_TRUE(schema_paths.count(p)) << p << ": topic_spec.cc writes it, the CRD lacks it";
  for (const auto& p : schema_paths)
    EXPECT_TRUE(code_general.count(p))
        << p << ": the CRD declares it, topic_spec.cc does not read it";
  EXPECT_GE(code_general.size(), 20u);

  // What the operator writes back validates, and ParseTopic takes every field the schema declares.
  EXPECT_TRUE(Validate(emitted).empty()) << Joined(Validate(emitted));
  const auto back = ParseTopic(TopicToYaml(FullyPopulated()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(TopicToJson(*back), TopicToJson(FullyPopulated()));
}

// The schema's defaults are topic_spec.cc's: a spec defaulted by the API server parses to the same
// topic as the spec the user wrote.
TEST_F(CrdTest, DefaultsAreTopicSpecDefaults) {
  const char* kSpecs[] = {
      "{}",
      "{partitions: {min: 8, max: 100}}",
      "{partitions: {max: 2}}",
      "{partitions: {}, replicas: {}, scaling: {}, behavior: {}, durability: {}, retention: {}, "
      "sidecar: {}}",
      "{behavior: {scaleUp: {}, scaleDown: {}}}",
      "{behavior: {scaleDown: {tolerance: 0.2}}, replicas: {max: 3}}",
      "{sidecar: {resources: {requests: {cpu: 100m}}}}",
  };
  for (const char* spec : kSpecs) {
    SCOPED_TRACE(spec);
    YAML::Node doc =
        YAML::Load("{apiVersion: shoal.dev/v1alpha1, kind: PartitionedTopic, metadata: {name: t}}");
    doc["spec"] = YAML::Load(spec);
    const auto as_written = ParseTopic(YAML::Dump(doc));
    ASSERT_TRUE(as_written.ok()) << as_written.status().ToString();
    ApplyDefaults(schema_, doc);
    EXPECT_TRUE(Validate(doc).empty()) << Joined(Validate(doc));
    const auto defaulted = ParseTopic(YAML::Dump(doc));
    ASSERT_TRUE(defaulted.ok()) << defaulted.status().ToString() << "\n" << YAML::Dump(doc);
    EXPECT_EQ(TopicToJson(*defaulted), TopicToJson(*as_written)) << YAML::Dump(doc);
  }
  // Every default under spec is checked above: each block is defaulted from {} in one of them.
  EXPECT_TRUE(At("spec.partitions")["default"]);
  EXPECT_FALSE(At("spec.partitions.initial")["default"])
      << "initial defaults to min in topic_spec.cc";
}

}  // namespace
}  // namespace shoal
