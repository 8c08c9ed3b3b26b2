// Checks the Helm chart (helm/shoal), the Dockerfile and the kind end-to-end script without
// Helm, Docker or a cluster (none is on CI's machine; tests/e2e/kind.sh runs the real thing):
//
// - every YAML and JSON file of the chart outside templates/ parses, and Chart.yaml says what
//   Helm needs (apiVersion v2, kubeVersion >= 1.27, the project's version);
// - every template's {{ }} actions are balanced, its blocks (if/range/with/define) are closed,
//   and every template it includes is defined in _helpers.tpl;
// - the copies in crds/ and files/ are byte-identical to their sources at the repository root;
// - values.yaml validates against values.schema.json (a draft-07 subset validator,
//   tests/support/json_schema.h) and invalid values are refused, every key has a comment that
//   starts with its name, and the schema and values.yaml list the same keys;
// - nothing but the rules file grants permissions, the recommended labels are in _helpers.tpl,
//   and the templates carry what the chart promises (probes, security context, monitors);
// - the Dockerfile builds with scripts/install-deps.sh and scripts/build.sh and runs the three
//   binaries as a numeric non-root user;
// - the topic that tests/e2e/kind.sh applies is one the operator takes.
#include <cpprest/json.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "shoal/common/topic_spec.h"
#include "support/json_schema.h"

namespace shoal {
namespace {

namespace fs = std::filesystem;
using testing::UnsupportedKeywords;
using testing::ValidateJsonSchema;

const fs::path kSource = SHOAL_SOURCE_DIR;
const fs::path kChart = kSource / "helm" / "shoal";

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << p;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "\n  " + s;
  return out;
}

// Files under `dir` (recursively) whose name ends with one of `exts`, sorted.
std::vector<fs::path> FilesUnder(const fs::path& dir, const std::set<std::string>& exts) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && exts.count(e.path().extension().string())) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> Templates() {
  return FilesUnder(kChart / "templates", {".yaml", ".tpl", ".txt"});
}

// ---------------------------------------------------------------------------------------------
// Files that are not templates.

TEST(ChartFilesTest, EveryYamlAndJsonFileOutsideTemplatesParses) {
  std::vector<fs::path> yaml = {kChart / "Chart.yaml", kChart / "values.yaml"};
  for (const auto& dir : {kChart / "crds", kChart / "files"}) {
    for (const auto& p : FilesUnder(dir, {".yaml", ".yml"})) yaml.push_back(p);
  }
  EXPECT_GE(yaml.size(), 5u) << "Chart.yaml, values.yaml, the CRD, the RBAC and alert rules";
  for (const auto& p : yaml) {
    SCOPED_TRACE(p.string());
    std::vector<YAML::Node> docs;
    ASSERT_NO_THROW(docs = YAML::LoadAllFromFile(p.string()));
    ASSERT_FALSE(docs.empty());
    for (const auto& d : docs) EXPECT_TRUE(d.IsMap()) << "a document that is not a mapping";
  }
  std::vector<fs::path> json = {kChart / "values.schema.json"};
  for (const auto& p : FilesUnder(kChart / "files", {".json"})) json.push_back(p);
  EXPECT_GE(json.size(), 2u) << "the schema and the dashboard";
  for (const auto& p : json) {
    SCOPED_TRACE(p.string());
    web::json::value v;
    ASSERT_NO_THROW(v = web::json::value::parse(Read(p))) << "not JSON";
    EXPECT_TRUE(v.is_object());
  }
}

TEST(ChartFilesTest, ChartYamlIsAV2ChartForKubernetes127) {
  const YAML::Node c = YAML::LoadFile((kChart / "Chart.yaml").string());
  EXPECT_EQ(c["apiVersion"].as<std::string>(), "v2");
  EXPECT_EQ(c["name"].as<std::string>(), "shoal");
  EXPECT_EQ(c["type"].as<std::string>(), "application");
  EXPECT_EQ(c["appVersion"].as<std::string>(), SHOAL_VERSION) << "the project's version";
  EXPECT_TRUE(std::regex_match(c["version"].as<std::string>(),
                               std::regex("[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?")))
      << "a chart version is SemVer 2";
  EXPECT_EQ(c["kubeVersion"].as<std::string>(), ">=1.27.0-0");
}

// Helm reads only files inside the chart, so these are copies; a copy that drifts from its
// source is a chart that installs something other than what the tests test.
TEST(ChartFilesTest, CopiesAreByteIdenticalToTheirSources) {
  const std::pair<const char*, const char*> kCopies[] = {
      {"crds/shoal.dev_partitionedtopics.yaml", "crds/shoal.dev_partitionedtopics.yaml"},
      {"files/operator-rules.yaml", "deploy/rbac/operator-rules.yaml"},
      {"files/dashboards/shoal.json", "dashboards/shoal.json"},
      {"files/prometheus/shoal-rules.yaml", "prometheus/shoal-rules.yaml"},
  };
  for (const auto& [copy, source] : kCopies) {
    SCOPED_TRACE(copy);
    ASSERT_TRUE(fs::exists(kSource / source)) << source << " is missing";
    ASSERT_TRUE(fs::exists(kChart / copy))
        << "helm/shoal/" << copy << " is missing: cp " << source << " helm/shoal/" << copy;
    EXPECT_TRUE(Read(kChart / copy) == Read(kSource / source))
        << "helm/shoal/" << copy << " differs from " << source << ": cp " << source
        << " helm/shoal/" << copy;
  }
  // The chart's CRDs are exactly the repository's.
  EXPECT_EQ(FilesUnder(kChart / "crds", {".yaml", ".yml", ".json"}).size(),
            FilesUnder(kSource / "crds", {".yaml", ".yml", ".json"}).size());
}

// ---------------------------------------------------------------------------------------------
// Templates, read as text: a Go template parser is not here, but its most common failures are.

struct Action {
  std::string text;  // between the delimiters, trim markers and spaces removed
  int line;
};

// The actions of a template, or a failure for an unclosed or nested delimiter.
std::vector<Action> ActionsOf(const std::string& t, std::string* error) {
  std::vector<Action> out;
  size_t pos = 0;
  auto line_at = [&](size_t at) {
    return 1 + static_cast<int>(std::count(t.begin(), t.begin() + at, '\n'));
  };
  while (true) {
    const size_t open = t.find("{{", pos);
    const size_t stray = t.find("}}", pos);
    if (stray != std::string::npos && (open == std::string::npos || stray < open)) {
      *error = "line " + std::to_string(line_at(stray)) + ": }} without {{";
      return out;
    }
    if (open == std::string::npos) return out;
    size_t close;
    if (t.compare(open, 4, "{{/*") == 0 || t.compare(open, 5, "{{- /") == 0) {
      const size_t end = t.find("*/", open);
      close = end == std::string::npos ? end : t.find("}}", end);
    } else {
      close = t.find("}}", open + 2);
      const size_t next = t.find("{{", open + 2);
      if (next != std::string::npos && next < close) {
        *error = "line " + std::to_string(line_at(next)) + ": {{ inside an action";
        return out;
      }
    }
    if (close == std::string::npos) {
      *error = "line " + std::to_string(line_at(open)) + ": {{ never closed";
      return out;
    }
    std::string inner = t.substr(open + 2, close - open - 2);
    if (!inner.empty() && inner.front() == '-') inner.erase(0, 1);
    if (!inner.empty() && inner.back() == '-') inner.pop_back();
    const size_t b = inner.find_first_not_of(" \t\n");
    const size_t e = inner.find_last_not_of(" \t\n");
    out.push_back({b == std::string::npos ? "" : inner.substr(b, e - b + 1), line_at(open)});
    pos = close + 2;
  }
}

std::string FirstWord(const std::string& s) {
  const size_t end = s.find_first_of(" \t\n(");
  return s.substr(0, end);
}

TEST(ChartTemplatesTest, ActionsAndBlocksAreBalanced) {
  ASSERT_GE(Templates().size(), 12u);
  for (const auto& p : Templates()) {
    SCOPED_TRACE(p.filename().string());
    std::string error;
    const auto actions = ActionsOf(Read(p), &error);
    EXPECT_EQ(error, "");
    std::vector<Action> open;
    for (const auto& a : actions) {
      if (a.text.rfind("/*", 0) == 0) {
        EXPECT_TRUE(a.text.size() >= 4 && a.text.compare(a.text.size() - 2, 2, "*/") == 0)
            << "line " << a.line << ": a comment must fill its action";
        continue;
      }
      const std::string w = FirstWord(a.text);
      if (w == "if" || w == "range" || w == "with" || w == "define" || w == "block") {
        open.push_back(a);
      } else if (w == "end") {
        EXPECT_FALSE(open.empty()) << "line " << a.line << ": end without a block";
        if (!open.empty()) open.pop_back();
      } else if (w == "else") {
        EXPECT_FALSE(open.empty()) << "line " << a.line << ": else outside a block";
      }
      EXPECT_FALSE(a.text.empty()) << "line " << a.line << ": an empty action";
    }
    for (const auto& a : open)
      ADD_FAILURE() << "line " << a.line << ": \"" << a.text << "\" never ends";
  }
}

// Names in `include "x"` / `template "x"` and in `define "x"`.
std::set<std::string> Names(const std::string& text, const std::string& verb) {
  std::set<std::string> out;
  const std::regex re(verb + "\\s+\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.insert((*it)[1].str());
  }
  return out;
}

TEST(ChartTemplatesTest, EveryIncludedTemplateIsDefinedInHelpers) {
  const std::string helpers = Read(kChart / "templates" / "_helpers.tpl");
  const auto defined = Names(helpers, "define");
  ASSERT_GE(defined.size(), 8u);
  std::set<std::string> used;
  for (const auto& p : Templates()) {
    SCOPED_TRACE(p.filename().string());
    const std::string text = Read(p);
    if (p.filename() != "_helpers.tpl") {
      EXPECT_TRUE(Names(text, "define").empty()) << "named templates belong in _helpers.tpl";
    }
    for (const auto& verb : {"include", "template"}) {
      for (const auto& name : Names(text, verb)) {
        EXPECT_TRUE(defined.count(name)) << verb << " \"" << name << "\" is not defined";
        used.insert(name);
      }
    }
  }
  for (const auto& name : defined) EXPECT_TRUE(used.count(name)) << name << " is never used";
}

TEST(ChartTemplatesTest, RecommendedLabelsAreInHelpers) {
  const std::string helpers = Read(kChart / "templates" / "_helpers.tpl");
  const size_t begin = helpers.find("define \"shoal.labels\"");
  ASSERT_NE(begin, std::string::npos);
  const std::string labels = helpers.substr(begin, helpers.find("{{- define", begin + 1) - begin);
  for (const char* key : {"helm.sh/chart:", "app.kubernetes.io/name:",
                          "app.kubernetes.io/instance:", "app.kubernetes.io/version:",
                          "app.kubernetes.io/part-of:", "app.kubernetes.io/managed-by:"}) {
    EXPECT_NE(labels.find(key), std::string::npos) << key;
  }
  EXPECT_NE(labels.find("app.kubernetes.io/managed-by: {{ .Release.Service }}"), std::string::npos);
  // The component comes with the object: the operator's helpers and the others'.
  EXPECT_NE(helpers.find("app.kubernetes.io/component: operator"), std::string::npos);
  EXPECT_NE(helpers.find("app.kubernetes.io/component: {{ .component }}"), std::string::npos);
  // Every object of the chart takes its labels from there.
  for (const auto& p : Templates()) {
    if (p.extension() != ".yaml") continue;
    SCOPED_TRACE(p.filename().string());
    const std::string text = Read(p);
    const std::regex kinds("\nkind: ");
    const auto objects = std::distance(std::sregex_iterator(text.begin(), text.end(), kinds),
                                       std::sregex_iterator());
    const std::regex with_labels(
        "\n  labels:\n    \\{\\{- include \"shoal\\.[a-zA-Z.]*[lL]abels\"");
    const auto labelled = std::distance(std::sregex_iterator(text.begin(), text.end(), with_labels),
                                        std::sregex_iterator());
    EXPECT_GE(objects, 1);
    EXPECT_EQ(labelled, objects) << "an object without the chart's labels";
  }
}

// deploy/rbac/operator-rules.yaml is the one list of what the operator may do (the fake API
// server enforces it): the chart renders it and grants nothing else. (rbac-aggregate.yaml grants
// namespace users, never the operator: AggregatedRolesGrantNamespaceUsersOnlyTopics.)
TEST(ChartTemplatesTest, OnlyTheRulesFileGrantsPermissions) {
  const std::string helpers = Read(kChart / "templates" / "_helpers.tpl");
  const size_t def = helpers.find("define \"shoal.operator.rules\"");
  ASSERT_NE(def, std::string::npos);
  const std::string body = helpers.substr(def, helpers.find("{{- define", def + 1) - def);
  EXPECT_NE(body.find(".Files.Get \"files/operator-rules.yaml\" | fromYaml"), std::string::npos);
  EXPECT_NE(body.find("toYaml $file.rules"), std::string::npos);
  const YAML::Node rules = YAML::LoadFile((kChart / "files" / "operator-rules.yaml").string());
  ASSERT_TRUE(rules["rules"].IsSequence());
  EXPECT_GE(rules["rules"].size(), 10u);

  const std::regex grants(
      "^\\s*(-\\s*)?(verbs|apiGroups|resourceNames|nonResourceURLs|aggregationRule)\\s*:");
  const std::regex rules_key("^\\s*rules\\s*:");
  const std::regex role_kind("^kind:\\s*(Cluster)?Role\\s*$");
  for (const auto& p : Templates()) {
    if (p.filename() == "rbac-aggregate.yaml") continue;
    SCOPED_TRACE(p.filename().string());
    std::istringstream in(Read(p));
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    int roles = 0, rendered = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      EXPECT_FALSE(std::regex_search(lines[i], grants)) << "line " << i + 1 << ": " << lines[i];
      if (std::regex_search(lines[i], role_kind)) ++roles;
      if (std::regex_search(lines[i], rules_key)) {
        ASSERT_LT(i + 1, lines.size());
        EXPECT_NE(lines[i + 1].find("include \"shoal.operator.rules\""), std::string::npos)
            << "line " << i + 1 << ": rules not from the rules file";
        ++rendered;
      }
    }
    EXPECT_EQ(roles, rendered) << "every Role and ClusterRole has the rules file's rules";
    if (p.filename() == "rbac.yaml") {
      EXPECT_EQ(roles, 2) << "a ClusterRole, or a Role per namespace";
    }
  }
}

// The ClusterRoles Kubernetes' default admin/edit and view roles aggregate grant PartitionedTopics
// only: edit may change them and their scale, view only reads; no role binds them to anyone.
TEST(ChartTemplatesTest, AggregatedRolesGrantNamespaceUsersOnlyTopics) {
  const std::string text = Read(kChart / "templates" / "rbac-aggregate.yaml");
  std::istringstream in(text);
  int roles = 0, groups = 0;
  std::string role;
  for (std::string l; std::getline(in, l);) {
    if (l.find("name: {{ include \"shoal.fullname\" . }}-aggregate-to-") != std::string::npos) {
      role = l.substr(l.rfind('-') + 1);
      ++roles;
    }
    if (l.find("apiGroups:") != std::string::npos) {
      ++groups;
      EXPECT_NE(l.find("apiGroups: [\"shoal.dev\"]"), std::string::npos) << l;
    }
    if (l.find("resources:") != std::string::npos) {
      std::string rest = l.substr(l.find('[') + 1);
      for (size_t at; (at = rest.find("partitionedtopics")) != std::string::npos;) rest.erase(at, 17);
      for (const char* ok : {"/status", "/scale", "\"", ",", " ", "]"}) {
        for (size_t at; (at = rest.find(ok)) != std::string::npos;) rest.erase(at, std::strlen(ok));
      }
      EXPECT_EQ(rest, "") << "a resource other than partitionedtopics: " << l;
    }
    if (role == "view" && l.find("verbs:") != std::string::npos) {
      EXPECT_EQ(l.substr(l.find('[')), "[\"get\", \"list\", \"watch\"]") << l;
    }
  }
  EXPECT_EQ(roles, 2);
  EXPECT_EQ(groups, 3);
  EXPECT_NE(text.find("rbac.authorization.k8s.io/aggregate-to-edit: \"true\""), std::string::npos);
  EXPECT_NE(text.find("rbac.authorization.k8s.io/aggregate-to-admin: \"true\""), std::string::npos);
  EXPECT_NE(text.find("rbac.authorization.k8s.io/aggregate-to-view: \"true\""), std::string::npos);
  EXPECT_EQ(text.find("kind: RoleBinding"), std::string::npos);
  EXPECT_EQ(text.find("kind: ClusterRoleBinding"), std::string::npos);
}

// What the templates promise, in the words the brief and docs/kubernetes.md use.
TEST(ChartTemplatesTest, ObjectsCarryWhatTheChartPromises) {
  const std::map<std::string, std::vector<std::string>> kWants = {
      {"deployment.yaml",
       {"kind: Deployment",
        "replicas: {{ $op.replicas }}",
        "--sidecar-image={{ include \"shoal.image\" . }}",
        "--image-pull-secrets=",
        "--leader-elect={{ $op.leaderElection.enabled }}",
        "--namespaces={{ join \",\" . }}",
        "--http-port=8080",
        "--max-partitions=",
        "--data-volume-size=",
        "--storage-class=",
        "--sidecar-log-level=",
        "--log-level=",
        "name: POD_NAMESPACE",
        "fieldPath: metadata.namespace",
        "path: /healthz",
        "path: /readyz",
        "containerPort: 8080",
        "runAsNonRoot: true",
        "readOnlyRootFilesystem: true",
        "drop: [\"ALL\"]",
        "allowPrivilegeEscalation: false",
        "resources:",
        "nodeSelector:",
        "tolerations:",
        "affinity:",
        "serviceAccountName:"}},
      {"service.yaml", {"kind: Service", "name: http-metrics", "port: {{ .Values.service.port }}"}},
      {"serviceaccount.yaml", {"kind: ServiceAccount"}},
      {"rbac.yaml",
       {"kind: ClusterRole", "kind: ClusterRoleBinding", "kind: Role", "kind: RoleBinding",
        "include \"shoal.rbacNamespaces\"", "kind: ServiceAccount"}},
      {"servicemonitor.yaml",
       {"kind: ServiceMonitor", "port: http-metrics", "targetLabel: shoal_component",
        "replacement: operator"}},
      {"podmonitor.yaml",
       {"kind: PodMonitor", "include \"shoal.sidecar.selectorLabels\"", "port: metrics",
        "any: true", "matchNames:", "targetLabel: shoal_component", "replacement: sidecar"}},
      {"prometheusrule.yaml",
       {"kind: PrometheusRule", ".Files.Get \"files/prometheus/shoal-rules.yaml\" | fromYaml",
        "toYaml $rules.groups"}},
      {"dashboard-configmap.yaml",
       {"kind: ConfigMap", "$.Files.Get \"files/dashboards/shoal.json\"",
        "{{ .labelKey }}: {{ .labelValue | quote }}"}},
      {"networkpolicy.yaml",
       {"kind: NetworkPolicy", "include \"shoal.sidecar.selectorLabels\"",
        "include \"shoal.operator.selectorLabels\"", "port: 8081", "port: 8080", "port: 9090",
        "policyTypes: [\"Ingress\"]"}},
      {"tests/test-readyz.yaml",
       {"helm.sh/hook: test", "/readyz", "wget", "image: {{ .Values.tests.image }}"}},
      {"NOTES.txt", {"kubectl apply -f", "kubectl get ptopic", "/metrics", "helm test"}},
  };
  for (const auto& [file, wants] : kWants) {
    SCOPED_TRACE(file);
    const std::string text = Read(kChart / "templates" / file);
    for (const auto& w : wants) EXPECT_NE(text.find(w), std::string::npos) << w;
  }
  // The sidecar selector is what the operator puts on the pods it creates
  // (reconciler/src/manifests.cc, Labels).
  const std::string helpers = Read(kChart / "templates" / "_helpers.tpl");
  EXPECT_NE(helpers.find("app.kubernetes.io/managed-by: shoal-operator\n"
                         "app.kubernetes.io/component: topic"),
            std::string::npos);
  const std::string manifests = Read(kSource / "operator" / "reconciler" / "src" / "manifests.cc");
  EXPECT_NE(manifests.find("l[\"app.kubernetes.io/managed-by\"] = Str(\"shoal-operator\")"),
            std::string::npos);
  EXPECT_NE(manifests.find("l[\"app.kubernetes.io/component\"] = Str(\"topic\")"),
            std::string::npos);
  EXPECT_NE(manifests.find("Port(\"metrics\", kMetricsPort)"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// values.yaml and values.schema.json.

class HelmValuesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    values_ = YAML::LoadFile((kChart / "values.yaml").string());
    schema_ = YAML::LoadFile((kChart / "values.schema.json").string());
    ASSERT_TRUE(values_.IsMap());
    ASSERT_TRUE(schema_.IsMap());
  }

  // values.yaml with `override` (YAML) merged in, as `helm install -f` merges it.
  YAML::Node With(const std::string& override_yaml) const {
    YAML::Node out = YAML::Clone(values_);
    std::function<void(YAML::Node, const YAML::Node&)> merge = [&](YAML::Node into,
                                                                   const YAML::Node& from) {
      for (const auto& kv : from) {
        const std::string key = kv.first.as<std::string>();
        const YAML::Node& cinto = into;
        if (kv.second.IsMap() && cinto[key] && cinto[key].IsMap()) {
          merge(into[key], kv.second);
        } else {
          into[key] = YAML::Clone(kv.second);
        }
      }
    };
    merge(out, YAML::Load(override_yaml));
    return out;
  }

  YAML::Node values_, schema_;
};

TEST_F(HelmValuesTest, SchemaIsDraft07AndWithinTheValidator) {
  EXPECT_EQ(schema_["$schema"].as<std::string>(), "http://json-schema.org/draft-07/schema#");
  const auto unsupported = UnsupportedKeywords(schema_);
  EXPECT_TRUE(unsupported.empty()) << Joined(unsupported);
  EXPECT_FALSE(schema_["additionalProperties"].as<bool>()) << "unknown top-level values refused";
}

TEST_F(HelmValuesTest, DefaultValuesValidate) {
  const auto errors = ValidateJsonSchema(schema_, values_);
  EXPECT_TRUE(errors.empty()) << Joined(errors);
}

TEST_F(HelmValuesTest, ValidOverridesValidate) {
  const char* kValid[] = {
      "operator: {watchNamespaces: [shop, billing], replicas: 1, leaderElection: {enabled: false}}",
      "operator: {storageClass: fast-ssd, dataVolumeSize: 20Gi, maxPartitions: 1024}",
      "operator: {resources: {requests: {cpu: 1, memory: 1Gi}}, extraArgs: [--resync-ms=5000]}",
      "metrics: {serviceMonitor: {enabled: true, labels: {release: kps}, interval: 1m30s}}",
      "metrics: {podMonitor: {enabled: true, scrapeTimeout: 10s}, prometheusRule: {enabled: true}}",
      "networkPolicy: {enabled: true, namespaces: [shop], dataFrom: []}",
      "grafanaDashboard: {namespace: monitoring, annotations: {grafana_folder: Shoal}}",
      "imagePullSecrets: [{name: regcred}]",
      "image: {tag: 0.2.0-rc.1, pullPolicy: Always}",
  };
  for (const char* v : kValid) {
    SCOPED_TRACE(v);
    const auto errors = ValidateJsonSchema(schema_, With(v));
    EXPECT_TRUE(errors.empty()) << Joined(errors);
  }
}

TEST_F(HelmValuesTest, InvalidValuesAreRefused) {
  const std::pair<const char*, const char*> kInvalid[] = {
      {"replica: 3", "replica: unknown key"},
      {"operator: {replicas: 0}", "operator.replicas: must be >= 1"},
      {"operator: {replicas: two}", "operator.replicas: must be of type integer"},
      {"operator: {maxPartitions: 70000}", "operator.maxPartitions: must be <= 65536"},
      {"operator: {logLevel: loud}", "operator.logLevel: must be one of"},
      {"operator: {sidecarLogLevel: INFO}", "operator.sidecarLogLevel: must be one of"},
      {"operator: {watchNamespaces: [Shop]}", "operator.watchNamespaces[0]: must match"},
      {"operator: {watchNamespaces: shop}", "operator.watchNamespaces: must be of type array"},
      {"operator: {watchNamespaces: [a, a]}", "operator.watchNamespaces[1]: duplicates item 0"},
      {"operator: {dataVolumeSize: lots}", "operator.dataVolumeSize: must match"},
      {"operator: {extraArgs: [resync]}", "operator.extraArgs[0]: must match"},
      {"operator: {leaderElection: {enable: true}}", "operator.leaderElection.enable: unknown key"},
      {"operator: {nodeSelector: {disk: [ssd]}}",
       "operator.nodeSelector.disk: must be of type string"},
      {"image: {pullPolicy: Sometimes}", "image.pullPolicy: must be one of"},
      {"image: {repository: \"\"}", "image.repository: must be at least 1"},
      {"serviceAccount: {create: \"yes\"}", "serviceAccount.create: must be of type boolean"},
      {"service: {port: 70000}", "service.port: must be <= 65535"},
      {"metrics: {serviceMonitor: {interval: 30}}",
       "metrics.serviceMonitor.interval: must be of type string"},
      {"metrics: {podMonitor: {interval: soon}}", "metrics.podMonitor.interval: must match"},
      {"metrics: {prometheusRule: {enabled: true, extra: 1}}",
       "metrics.prometheusRule.extra: unknown key"},
      {"grafanaDashboard: {labelValue: 1}", "grafanaDashboard.labelValue: must be of type string"},
      {"networkPolicy: {dataFrom: {podSelector: {}}}",
       "networkPolicy.dataFrom: must be of type array"},
      {"imagePullSecrets: [regcred]", "imagePullSecrets[0]: must be of type object"},
      {"tests: {timeoutSeconds: 0}", "tests.timeoutSeconds: must be >= 1"},
  };
  for (const auto& [override_yaml, want] : kInvalid) {
    SCOPED_TRACE(override_yaml);
    const auto errors = ValidateJsonSchema(schema_, With(override_yaml));
    bool found = false;
    for (const auto& e : errors) found |= e.find(want) != std::string::npos;
    EXPECT_TRUE(found) << "want \"" << want << "\", got:" << Joined(errors);
  }
}

// Key paths of the maps of a values tree, not entering lists or the user's own maps (those
// the schema gives as additionalProperties).
void SchemaKeys(const YAML::Node& s, const std::string& path, std::set<std::string>* out) {
  if (!s["properties"]) return;
  for (const auto& kv : s["properties"]) {
    const std::string p =
        path.empty() ? kv.first.as<std::string>() : path + "." + kv.first.as<std::string>();
    out->insert(p);
    SchemaKeys(kv.second, p, out);
  }
}

void ValueKeys(const YAML::Node& v, const YAML::Node& s, const std::string& path,
               std::set<std::string>* out) {
  if (!v.IsMap() || !s["properties"]) return;
  for (const auto& kv : v) {
    const std::string key = kv.first.as<std::string>();
    const std::string p = path.empty() ? key : path + "." + key;
    out->insert(p);
    const YAML::Node& props = s["properties"];
    if (props[key]) ValueKeys(kv.second, props[key], p, out);
  }
}

TEST_F(HelmValuesTest, SchemaAndValuesListTheSameKeys) {
  std::set<std::string> in_schema, in_values;
  SchemaKeys(schema_, "", &in_schema);
  ValueKeys(values_, schema_, "", &in_values);
  in_schema.erase("global");  // Helm's, for subcharts
  for (const auto& k : in_values) EXPECT_TRUE(in_schema.count(k)) << k << ": not in the schema";
  for (const auto& k : in_schema)
    EXPECT_TRUE(in_values.count(k)) << k << ": no default in values.yaml";
  EXPECT_GE(in_values.size(), 40u);
}

// Each key of values.yaml that begins a line has, on the line right above it, a comment at its
// indentation whose first word is the key's name (reference/kubernetes-api.md, "Helm").
TEST_F(HelmValuesTest, EveryKeyHasACommentStartingWithItsName) {
  std::vector<std::string> lines;
  {
    std::istringstream in(Read(kChart / "values.yaml"));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  int checked = 0;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& m,
                                                                        const std::string& path) {
    for (const auto& kv : m) {
      const std::string key = kv.first.as<std::string>();
      const std::string p = path.empty() ? key : path + "." + key;
      const int line = kv.first.Mark().line;  // 0-based
      const int column = kv.first.Mark().column;
      ASSERT_GE(line, 0) << p;
      const std::string& text = lines[line];
      if (static_cast<int>(text.find_first_not_of(' ')) == column) {  // the key begins its line
        ++checked;
        // The comment block right above the key, at its indentation: its first line.
        const std::string indent(column, ' ');
        int first = line;
        while (first > 0 && lines[first - 1].rfind(indent + "#", 0) == 0) --first;
        const std::string want = indent + "# " + key + " ";
        ASSERT_LT(first, line) << p << " (line " << line + 1 << "): no comment above";
        EXPECT_EQ(lines[first].rfind(want, 0), 0u)
            << p << " (line " << line + 1 << "): its comment should start \"" << want
            << "\", it is \"" << lines[first] << "\"";
        EXPECT_TRUE(std::regex_match(key, std::regex("[a-z][a-zA-Z0-9]*"))) << p << ": camelCase";
      }
      if (kv.second.IsMap()) walk(kv.second, p);
    }
  };
  walk(values_, "");
  EXPECT_GE(checked, 40);
}

// ---------------------------------------------------------------------------------------------
// The Dockerfile.

struct Stage {
  std::string from;
  std::vector<std::string> lines;  // instructions, continuation lines joined
};

std::vector<Stage> Stages(const std::string& dockerfile) {
  std::vector<Stage> out;
  std::istringstream in(dockerfile);
  std::string joined;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("#", 0) == 0 || l.find_first_not_of(" \t") == std::string::npos) continue;
    if (!l.empty() && l.back() == '\\') {
      joined += l.substr(0, l.size() - 1) + " ";
      continue;
    }
    joined += l;
    if (joined.rfind("FROM ", 0) == 0) {
      out.push_back({joined, {}});
    } else if (!out.empty()) {
      out.back().lines.push_back(joined);
    }
    joined.clear();
  }
  return out;
}

bool AnyLine(const Stage& s, const std::string& re) {
  return std::any_of(s.lines.begin(), s.lines.end(),
                     [&](const std::string& l) { return std::regex_search(l, std::regex(re)); });
}

TEST(DockerfileTest, BuildsWithTheRepositoryScriptsAndRunsAsNonRoot) {
  const auto stages = Stages(Read(kSource / "Dockerfile"));
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_TRUE(std::regex_match(stages[0].from, std::regex("FROM debian:12 AS build")));
  EXPECT_TRUE(std::regex_match(stages[1].from, std::regex("FROM debian:12-slim AS run")));
  for (const auto& s : stages) {
    SCOPED_TRACE(s.from);
    EXPECT_TRUE(AnyLine(s, "^COPY .*scripts/install-deps\\.sh"));
    EXPECT_TRUE(AnyLine(s, "^RUN .*install-deps\\.sh"));
  }
  EXPECT_TRUE(
      AnyLine(stages[0], "^RUN .*\\./scripts/build\\.sh shoal shoal-sidecar shoal-operator$"));
  EXPECT_TRUE(AnyLine(stages[1], "^RUN .*install-deps\\.sh --runtime"));
  EXPECT_FALSE(AnyLine(stages[1], "^RUN [^&]*install-deps\\.sh( &&|$)"))
      << "the run stage installs with --runtime only";
  for (const char* bin : {"build/cli/shoal", "build/sidecar/shoal-sidecar",
                          "build/operator/reconciler/shoal-operator"}) {
    EXPECT_TRUE(
        AnyLine(stages[1], std::string("^COPY --from=build /src/") + bin + " /usr/local/bin/"))
        << bin;
  }
  // A numeric, non-root user: Kubernetes checks runAsNonRoot only against a numeric one.
  std::smatch m;
  std::string user;
  for (const auto& l : stages[1].lines) {
    if (std::regex_match(l, m, std::regex("USER ([0-9]+)(:[0-9]+)?"))) user = m[1];
  }
  ASSERT_FALSE(user.empty()) << "no numeric USER in the run stage";
  EXPECT_NE(user, "0");
  EXPECT_TRUE(AnyLine(stages[1], "ldd")) << "the run stage checks for missing libraries";

  const std::string ignore = Read(kSource / ".dockerignore");
  for (const char* dir : {"\nbuild\n", "\nbuild-*\n", ".git\n"}) {
    EXPECT_NE(ignore.find(dir), std::string::npos) << dir;
  }
  // --runtime names the packages of what the binaries load (scripts/install-deps.sh).
  const std::string deps = Read(kSource / "scripts" / "install-deps.sh");
  for (const char* pkg : {"libcpprest2.10", "libyaml-cpp0.7", "libprometheus-cpp-core1.0",
                          "libspdlog1.10", "libfmt9", "libsimdjson14", "libssl3", "zlib1g"}) {
    EXPECT_NE(deps.find(pkg), std::string::npos) << pkg;
  }
}

// ---------------------------------------------------------------------------------------------
// tests/e2e/kind.sh: the topic it applies is the example with a real consumer.

std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe.get())) out.append(buf.data(), n);
  *status = pclose(pipe.release());
  return out;
}

TEST(KindScriptTest, AppliesTheExampleWithARealConsumer) {
  int status = -1;
  const std::string text = RunCommand(
      "bash '" + (kSource / "tests/e2e/kind.sh").string() + "' --print-topic --image shoal:t",
      &status);
  ASSERT_EQ(status, 0) << text;
  const auto topic = ParseTopic(text);
  ASSERT_TRUE(topic.ok()) << topic.status().ToString() << "\n" << text;
  const auto example = ParseTopic(Read(kSource / "examples" / "flash-sale.yaml"));
  ASSERT_TRUE(example.ok()) << example.status().ToString();
  EXPECT_EQ(topic->name, example->name);
  EXPECT_EQ(topic->partitions.min, example->partitions.min);
  EXPECT_EQ(topic->partitions.max, example->partitions.max);
  EXPECT_EQ(topic->replicas.max, example->replicas.max);
  EXPECT_EQ(topic->sidecar_image, "shoal:t");

  const YAML::Node doc = YAML::Load(text);
  const YAML::Node app = doc["spec"]["consumer"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(app["image"].as<std::string>(), "shoal:t");
  const auto args = app["args"].as<std::vector<std::string>>();
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "consume");
  EXPECT_NE(std::find(args.begin(), args.end(), "$(SHOAL_URL)"), args.end())
      << "the consumer reads from its pod's sidecar (SHOAL_URL, injected by the operator)";
  for (const auto& env : app["env"]) {
    EXPECT_NE(env["name"].as<std::string>(), "SHOAL_URL")
        << "a SHOAL_URL of its own would keep the operator's out";
  }
  // The CLI has the subcommands and flags the script uses.
  const std::string script = Read(kSource / "tests/e2e/kind.sh");
  for (const char* use :
       {"shoal load --targets", "--profile surge", "--acked-out", "shoal verify --acked", "--seen",
        "helm test", "kind delete cluster", "trap cleanup EXIT",
        // The quickstart's steps with quickstart.sh's checks (tests/e2e/checks.sh).
        "source tests/e2e/checks.sh", "pod-security.kubernetes.io/enforce=restricted",
        "rollout status deployment/shoal-operator", "expect_restricted_refusal",
        "examples/quickstart.yaml", "expect_quickstart_listed", "scale ptopic quickstart",
        "patch ptopic quickstart", "expect_rolled", "describe ptopic quickstart",
        "delete ptopic quickstart", "helm uninstall"}) {
    EXPECT_NE(script.find(use), std::string::npos) << use;
  }
  const std::string cli = Read(kSource / "cli/src/cmd/load_verify.cc");
  for (const char* flag : {"\"--targets\"", "\"--profile\"", "\"--acked-out\"", "\"--keys\"",
                           "\"--acked\"", "\"--seen\"", "\"--append\"", "\"--idle-exit\""}) {
    EXPECT_NE(cli.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace shoal
