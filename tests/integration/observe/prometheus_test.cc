// The Grafana dashboard (dashboards/shoal.json) and the alert rules (prometheus/shoal-rules.yaml)
// against a REAL Prometheus that scrapes real sidecars under load and a real shoal-operator
// (TestCluster: the fake API server and the test kubelet, tests/support/fake_kube/). The topic
// gets keyed load with a surge, so the control loop splits partitions and adds pods and the
// change, decision and plan metrics exist. A second topic of the same name, "orders" in
// namespace team-b, gets a light load beside it. Prometheus scrapes every second:
//   - the sidecars through file_sd_configs, from a targets file this test rewrites as pods come
//     and go (pod IP, port 9090, labels shoal_component="sidecar", namespace, pod), as a
//     PodMonitor would find them;
//   - the operator on its --http-port, with shoal_component="operator" (and namespace, pod), as
//     a ServiceMonitor would;
//   - it loads the repository's rules file as it is, and evaluates it every second.
// Then:
//   - every expression of the dashboard (panel targets, annotations, templating queries), with
//     Grafana's variables substituted, is accepted and returns data (an instant query, or a
//     range query over the test's span, as a rate or an annotation may be empty at one
//     instant); with the topic variable's All value too, when it has one;
//   - the two topics named orders never merge: every dashboard expression, run with
//     $namespace of either (team-b's may be empty: it has no surge), returns no series of the
//     other namespace; both are there as two series of the active partitions; and every
//     selector of an alert over the operator's per-topic series sees both namespaces apart
//     (check_observability.py checks that no filter or by/on clause drops namespace);
//   - every alert rule is loaded, evaluated without error and accepted as a query, and every
//     vector selector of its expression returns data. Not the expression itself: an alert's
//     expression is empty for as long as it does not fire, which is what a healthy run shows,
//     so an empty answer cannot tell a correct rule from one that names a metric or a label that
//     does not exist. That mistake is the one a selector check finds: a rule that can never fire.
//   - `promtool check rules` on the rules file and `promtool check metrics` on the /metrics text
//     of one sidecar and of the operator: no problems reported.
// Failures name the expression, where it is, what was run, and what Prometheus answered.
// Nothing sleeps bare: waits poll the API, Prometheus or files with deadlines.
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on
#include <cpprest/json.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "promql_exprs.h"
#include "shoal/control/process.h"
#include "shoal/harness/workload.h"
#include "shoal/kubeapi/kube_client.h"
#include "support/fake_kube/test_cluster.h"
#include "support/http_test_client.h"
#include "support/loopback.h"
#include "support/prometheus_server.h"
#include "support/temp_dir.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;
using kubeapi::At;
using web::json::value;
using SteadyClock = std::chrono::steady_clock;

constexpr uint16_t kSidecarMetricsPort = 9090;  // the sidecar's metrics port in the StatefulSet
// A second namespace with a topic of the test topic's name ("orders"), under light load only.
constexpr char kOtherNamespace[] = "team-b";
const std::string kDashboard = std::string(SHOAL_SOURCE_DIR) + "/dashboards/shoal.json";
const std::string kRules = std::string(SHOAL_SOURCE_DIR) + "/prometheus/shoal-rules.yaml";

int64_t Int(const value& v) { return v.is_number() ? v.as_number().to_int64() : -1; }
std::string Str(const value& v) { return v.is_string() ? v.as_string() : ""; }
bool Bool(const value& v) { return v.is_boolean() && v.as_bool(); }
// The elements of an array (none for anything else), as copies: safe to loop over the result of
// At(), a temporary (a range-for over At(...).as_array() would read a destroyed value).
std::vector<value> Items(const value& v) {
  std::vector<value> items;
  if (v.is_array()) items.assign(v.as_array().begin(), v.as_array().end());
  return items;
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes the sidecar targets for Prometheus' file_sd_configs: one group per running pod (its IP
// and metrics port, labels shoal_component, its namespace and pod), rewritten whenever the pods
// change. A background thread polls the kubelet (there is nothing to block on) and replaces
// the file with a rename, so Prometheus never reads half of it.
// Lifecycle: writes the file once in the constructor; the destructor stops the thread. The
// kubelet must outlive it. Owned by the test; not copyable.
class SidecarTargetsFile {
 public:
  SidecarTargetsFile(TestKubelet& kubelet, std::string path)
      : kubelet_(kubelet), path_(std::move(path)) {
    WriteIfChanged();
    thread_ = std::thread([this] { Run(); });
  }
  ~SidecarTargetsFile() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  SidecarTargetsFile(const SidecarTargetsFile&) = delete;
  SidecarTargetsFile& operator=(const SidecarTargetsFile&) = delete;

  const std::string& path() const { return path_; }
  // The pods of the last write, by namespace/name -> "ip:port".
  std::map<std::string, std::string> targets() const {
    std::lock_guard<std::mutex> l(mu_);
    return targets_;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    while (!cv_.wait_for(l, 200ms, [&] { return stop_; })) {
      l.unlock();
      WriteIfChanged();
      l.lock();
    }
  }

  void WriteIfChanged() {
    std::map<std::string, std::string> now;
    for (const auto& pod : kubelet_.Pods()) {
      const TestContainerState* sidecar = pod.container("shoal-sidecar");
      if (pod.ip.empty() || pod.terminating || !sidecar || sidecar->pid <= 0) continue;
      now[pod.ns + "/" + pod.name] = pod.ip + ":" + std::to_string(kSidecarMetricsPort);
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      if (written_ && now == targets_) return;
    }
    value groups = value::array();
    size_t i = 0;
    for (const auto& [pod, address] : now) {
      value g = value::object();
      g["targets"][0] = value::string(address);
      g["labels"]["shoal_component"] = value::string("sidecar");
      g["labels"]["namespace"] = value::string(pod.substr(0, pod.find('/')));
      g["labels"]["pod"] = value::string(pod.substr(pod.find('/') + 1));
      groups[i++] = g;
    }
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << groups.serialize();
    std::filesystem::rename(tmp, path_);
    std::lock_guard<std::mutex> l(mu_);
    targets_ = std::move(now);
    written_ = true;
  }

  TestKubelet& kubelet_;
  const std::string path_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                           // guarded by mu_
  bool written_ = false;                        // guarded by mu_
  std::map<std::string, std::string> targets_;  // guarded by mu_
  std::thread thread_;
};

// One expression to check, with where it comes from.
struct Expr {
  std::string where;  // `panel "Arrival rate" target A`
  std::string expr;   // as written in the file
};

// Every panel target expression, also in rows (collapsed rows keep their panels inside).
void CollectPanels(const value& panels, std::vector<Expr>* out) {
  if (!panels.is_array()) return;
  for (const auto& p : panels.as_array()) {
    const std::string title = Str(At(p, "title"));
    const value targets = At(p, "targets");
    if (targets.is_array()) {
      for (const auto& t : targets.as_array()) {
        const std::string expr = Str(At(t, "expr"));
        if (!expr.empty()) {
          out->push_back({"panel \"" + title + "\" target " + Str(At(t, "refId")), expr});
        }
      }
    }
    CollectPanels(At(p, "panels"), out);
  }
}

// The label values in the result of a vector or matrix answer.
std::set<std::string> LabelValues(const PromAnswer& a, const std::string& label) {
  std::set<std::string> values;
  const value result = At(a.data, "result");
  if (!result.is_array()) return values;
  for (const auto& series : result.as_array()) {
    const std::string v = Str(At(At(series, "metric"), label));
    if (!v.empty()) values.insert(v);
  }
  return values;
}

// One check of the run: passes ("" from `run`) or says what went wrong.
struct Check {
  std::string name;  // `dashboard panel "Arrival rate" target A with $topic="orders"`
  std::function<std::string()> run;
};

// Alerting and recording rules from groups[].rules[] of a rules file.
struct Rules {
  std::vector<Expr> rules;  // `where` is "alert X (group g)" or "recording rule r (group g)"
  size_t alerts = 0;
};

class PrometheusTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) {
      dir_.Keep();
      std::printf("kept %s\n", dir_.path().c_str());
    }
  }

  // The rules file: checked by promtool, then read.
  void ReadRules(Rules* out) {
    ASSERT_TRUE(std::filesystem::exists(kRules)) << "missing " << kRules;
    const std::string log = dir_.path() + "/promtool-rules.log";
    auto p = control::ChildProcess::Spawn({SHOAL_PROMTOOL_BIN, "check", "rules", kRules}, log);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_EQ(p->Wait(30s), 0) << "promtool check rules " << kRules << ":\n"
                               << ReadFile(log).value_or("");
    YAML::Node yaml;
    ASSERT_NO_THROW(yaml = YAML::LoadFile(kRules)) << kRules << " is not YAML";
    for (const auto& group : yaml["groups"]) {
      for (const auto& rule : group["rules"]) {
        const bool alert = rule["alert"].IsDefined();
        out->alerts += alert ? 1 : 0;
        out->rules.push_back({(alert ? "alert " : "recording rule ") +
                                  (alert ? rule["alert"] : rule["record"]).as<std::string>("?") +
                                  " (group " + group["name"].as<std::string>("?") + ")",
                              rule["expr"].as<std::string>("")});
      }
    }
    ASSERT_FALSE(out->rules.empty()) << kRules << " has no rules under groups[].rules[]";
  }

  // The cluster, one operator and the topic (up to 8 partitions: a surge doubles it twice),
  // ready.
  void StartClusterAndTopic() {
    ASSERT_TRUE(std::filesystem::create_directories(dir_.path() + "/seen"));
    TestClusterOptions o;
    o.work_dir = dir_.path();
    o.operator_binary = SHOAL_OPERATOR_BIN;
    o.sidecar_binary = SHOAL_SIDECAR_BIN;
    o.shoal_binary = SHOAL_BIN;
    o.ip_prefix = RandomLoopbackPrefix();
    o.namespaces = {kTestNamespace, kOtherNamespace};
    auto c = TestCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status().message();
    cluster_ = std::move(c).value();
    ASSERT_EQ(cluster_->Admin("POST", "/api/v1/namespaces",
                              value::parse(std::string(R"({"metadata":{"name":")") +
                                           kOtherNamespace + R"("}})"))
                  .status,
              201);
    const Status started = cluster_->StartOperator("a");
    ASSERT_TRUE(started.ok()) << started.message();
    operator_target_ = "127.0.0.1:" + std::to_string(cluster_->operator_http_port("a"));
    // Two copies of each partition once there are two pods, so that replication's series (the
    // replica lag, under-replicated partitions) have data too.
    value topic = TestTopicJson(dir_.path() + "/seen", /*max_partitions=*/8);
    topic["spec"]["replication"]["factor"] = value::number(2);
    const Status created = cluster_->CreateTopic(topic);
    ASSERT_TRUE(created.ok()) << created.message();
    // The same topic name in the other namespace: another topic, which must never merge with it.
    ASSERT_TRUE(std::filesystem::create_directories(dir_.path() + "/seen-other"));
    value other_topic = TestTopicJson(dir_.path() + "/seen-other", 8);
    other_topic["metadata"]["namespace"] = value::string(kOtherNamespace);
    const HttpResponse other = cluster_->Admin("POST", OtherTopicPath(""), other_topic);
    ASSERT_EQ(other.status, 201) << other.Describe();
    ASSERT_TRUE(cluster_->WaitReady(60s)) << cluster_->OperatorLog("a");
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto t = cluster_->Get(OtherTopicPath(kTestTopicName));
          return t && Condition(*t, "Ready") == "True";
        },
        60s))
        << cluster_->OperatorLog("a");
  }

  // The collection of topics in the other namespace, or one topic of it.
  static std::string OtherTopicPath(const std::string& name) {
    return std::string("/apis/shoal.dev/v1alpha1/namespaces/") + kOtherNamespace +
           "/partitionedtopics" + (name.empty() ? "" : "/" + name);
  }

  // Prometheus scraping the sidecars (file_sd from `targets_`) and the operator, with the rules
  // file; returns once every target is up.
  void StartPrometheus() {
    ASSERT_TRUE(std::filesystem::create_directories(dir_.path() + "/prometheus"));
    targets_ = std::make_unique<SidecarTargetsFile>(cluster_->kubelet(),
                                                    dir_.path() + "/prometheus/sidecars.json");
    // clang-format off
    const std::string config =
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        "rule_files:\n"
        "  - " + kRules + "\n"
        "scrape_configs:\n"
        "  - job_name: shoal-sidecar\n"
        "    file_sd_configs:\n"
        "      - files: [" + targets_->path() + "]\n"
        "        refresh_interval: 1s\n"
        "  - job_name: shoal-operator\n"
        "    honor_labels: true\n"
        "    static_configs:\n"
        "      - targets: ['" + operator_target_ + "']\n"
        "        labels:\n"
        "          {shoal_component: operator, namespace: shoal-system, pod: shoal-operator-a}\n";
    // clang-format on
    PrometheusServerOptions o;
    o.binary = SHOAL_PROMETHEUS_BIN;
    o.work_dir = dir_.path() + "/prometheus";
    o.config_yaml = config;
    auto prom = PrometheusServer::Start(o);
    ASSERT_TRUE(prom.ok()) << prom.status().message();
    prom_ = std::move(prom).value();
    prom_started_ = SteadyClock::now();
    WaitAllTargetsUp();
  }

  // Every target up: the operator and each sidecar in the targets file.
  void WaitAllTargetsUp() {
    std::string seen;
    ASSERT_TRUE(WaitUntil(
        [&] {
          const PromAnswer a = prom_->Api("/api/v1/targets?state=active");
          seen = a.Describe() + "\n" + a.body.substr(0, 2000);
          std::set<std::string> up;
          for (const auto& t : Items(At(a.data, "activeTargets"))) {
            if (Str(At(t, "health")) == "up") {
              up.insert(Str(At(At(t, "discoveredLabels"), "__address__")));
            }
          }
          const auto sidecars = targets_->targets();
          for (const auto& [pod, address] : sidecars) {
            if (!up.count(address)) return false;
          }
          return !sidecars.empty() && up.count(operator_target_);
        },
        30s))
        << "not every target is up: " << seen << "\n"
        << prom_->LogTail();
  }

  // An instant query; when it is empty, a range query over the test's span (one point a
  // second): a rate can be empty at one instant, an annotation outside its event.
  PromAnswer QueryWithData(const std::string& expr) {
    PromAnswer a = prom_->Query(expr);
    if (!a.success() || a.non_empty()) return a;
    const auto span =
        std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - prom_started_) + 5s;
    return prom_->QueryRange(expr, std::max<std::chrono::seconds>(span, 60s), 1s);
  }

  // `promtool check metrics` on one /metrics answer fed on its stdin: no problems reported.
  void PromtoolCheckMetrics(const std::string& name, const std::string& base_url) {
    HttpTestClient http(base_url);
    const HttpResponse r = http.Get("/metrics");
    ASSERT_EQ(r.status, 200) << name << " /metrics: " << r.Describe();
    const std::string input = dir_.path() + "/metrics-" + name + ".txt";
    const std::string log = dir_.path() + "/promtool-" + name + ".log";
    std::ofstream(input) << r.body;
    auto p = control::ChildProcess::Spawn(
        {"/bin/sh", "-c", "exec \"$0\" check metrics < \"$1\"", SHOAL_PROMTOOL_BIN, input}, log);
    ASSERT_TRUE(p.ok()) << p.status().message();
    const auto code = p->Wait(30s);
    const std::string out = ReadFile(log).value_or("");
    EXPECT_TRUE(code == 0 && out.empty()) << "promtool check metrics on the " << name
                                          << "'s /metrics: exit " << code.value_or(-1) << ":\n"
                                          << out;
  }

  // The dashboard's variables, in order, as the checks substitute them: the topic variable must
  // offer the test topic and stands for it; `topic_all` gets its All value when it has one
  // (allValue, or ".*"). Other query variables take their first value.
  std::map<std::string, std::string> DashboardVariables(const value& dashboard,
                                                        std::optional<std::string>* topic_all) {
    std::map<std::string, std::string> vars;
    bool has_topic = false;
    for (const auto& v : Items(At(dashboard, "templating.list"))) {
      const std::string name = Str(At(v, "name")), type = Str(At(v, "type"));
      const std::string where = "dashboard variable $" + name + " (" + type + ")";
      if (type == "interval") {
        vars[name] = "1m";
      } else if (type == "custom" || type == "constant" || type == "textbox") {
        const value current = At(v, "current.value");
        vars[name] = current.is_string() ? current.as_string() : Str(At(v, "query"));
      } else if (type == "query") {
        const value q = At(v, "query");
        const std::string query = q.is_string() ? q.as_string() : Str(At(q, "query"));
        std::string answer;
        const std::set<std::string> values =
            VariableValues(SubstituteVariables(query, vars), &answer);
        if (name == "topic") {
          has_topic = true;
          EXPECT_TRUE(values.count(kTestTopicName))
              << where << " query `" << query << "` does not offer the topic \"" << kTestTopicName
              << "\": " << answer;
          vars[name] = kTestTopicName;
          if (Bool(At(v, "includeAll")) || Bool(At(v, "multi"))) {
            const std::string all = Str(At(v, "allValue"));
            *topic_all = all.empty() ? ".*" : all;
          }
        } else if (values.empty() && Bool(At(v, "includeAll"))) {
          // Nothing carries the label here (cluster, with one Prometheus): Grafana offers only
          // All, whose regex must then match every series (a label a series lacks is "").
          const std::string all = Str(At(v, "allValue"));
          EXPECT_EQ(all, ".*") << where << " has no values and an All that would match nothing";
          vars[name] = all.empty() ? ".*" : all;
        } else {
          EXPECT_FALSE(values.empty())
              << where << " query `" << query << "` has no values: " << answer;
          if (!values.empty()) vars[name] = *values.begin();
        }
      }  // datasource and adhoc variables are not in expressions
    }
    EXPECT_TRUE(has_topic) << "no topic variable ($topic) in " << kDashboard;
    return vars;
  }

  // The values a templating query offers (Prometheus' answer in *answer).
  std::set<std::string> VariableValues(const std::string& query, std::string* answer) {
    const TemplateQuery tq = ParseTemplateQuery(query);
    std::set<std::string> values;
    if (tq.kind == TemplateQuery::Kind::kLabelName) {
      const PromAnswer a = prom_->Api("/api/v1/label/" + tq.label + "/values");
      *answer = a.Describe();
      for (const auto& x : Items(a.data)) values.insert(Str(x));
      return values;
    }
    const std::string run = tq.kind == TemplateQuery::Kind::kSeriesLabel
                                ? "count by (" + tq.label + ") (" + tq.expr + ")"
                                : tq.expr;
    const PromAnswer a = QueryWithData(run);
    *answer = "`" + run + "`: " + a.Describe();
    if (tq.kind == TemplateQuery::Kind::kSeriesLabel) return LabelValues(a, tq.label);
    if (a.non_empty()) values.insert("");
    return values;
  }

  // Every panel target and annotation of the dashboard, with the topic and, if it has one, its
  // All value: accepted and with data.
  void AddDashboardChecks(const value& dashboard, std::vector<Check>* checks) {
    std::optional<std::string> topic_all;
    const auto vars = DashboardVariables(dashboard, &topic_all);
    std::vector<Expr> exprs;
    CollectPanels(At(dashboard, "panels"), &exprs);
    for (const auto& r : Items(At(dashboard, "rows"))) CollectPanels(At(r, "panels"), &exprs);
    EXPECT_FALSE(exprs.empty()) << "no panel target has an expr in " << kDashboard;
    for (const auto& a : Items(At(dashboard, "annotations.list"))) {
      const std::string expr = Str(At(a, "expr"));
      if (!expr.empty()) exprs.push_back({"annotation \"" + Str(At(a, "name")) + "\"", expr});
    }
    EXPECT_EQ(vars.count("namespace"), 1u) << "no namespace variable ($namespace) in " << kDashboard;
    std::vector<std::map<std::string, std::string>> var_sets = {vars};
    if (topic_all) {
      var_sets.push_back(vars);
      var_sets.back()["topic"] = *topic_all;
    }
    // The other namespace's "orders": its own series only, whether or not a panel has data for
    // its light load.
    var_sets.push_back(vars);
    var_sets.back()["namespace"] = kOtherNamespace;
    for (const auto& e : exprs) {
      for (const auto& vs : var_sets) {
        const std::string run = SubstituteVariables(e.expr, vs);
        const auto topic = vs.find("topic");
        const auto ns = vs.find("namespace");
        const std::string name =
            "dashboard " + e.where +
            (ns == vs.end() ? "" : " with $namespace=\"" + ns->second + "\"") +
            (topic == vs.end() ? "" : " with $topic=\"" + topic->second + "\"");
        if (auto unresolved = UnresolvedVariable(run)) {
          ADD_FAILURE() << name << ": `" << e.expr << "` uses " << *unresolved
                        << ", which is not a variable of the dashboard";
          continue;
        }
        const std::string want_ns = ns == vs.end() ? "" : ns->second;
        const bool need_data = want_ns != kOtherNamespace;
        checks->push_back({name, [this, e, run, want_ns, need_data]() -> std::string {
                             const PromAnswer a = need_data ? QueryWithData(run) : prom_->Query(run);
                             if (need_data && !a.non_empty()) {
                               return "`" + e.expr + "` (run as `" + run + "`): " + a.Describe();
                             }
                             if (!a.success()) return "`" + run + "`: " + a.Describe();
                             // Kept apart: no series of another namespace.
                             for (const auto& got : LabelValues(a, "namespace")) {
                               if (!want_ns.empty() && got != want_ns) {
                                 return "`" + run + "` has a series of namespace \"" + got +
                                        "\": " + a.body.substr(0, 400);
                               }
                             }
                             return "";
                           }});
      }
    }
  }

  // Both topics named "orders" are there, apart: the active partitions of each namespace's, as
  // the dashboard and the alerts aggregate them, are two series, and every selector of an
  // alert over a metric with a topic label tells the two namespaces apart.
  void AddNamespaceChecks(const Rules& rules, std::vector<Check>* checks) {
    checks->push_back({"two topics named orders", [this]() -> std::string {
      const std::string q =
          R"(max by (namespace, topic) (shoal_control_partitions{state="active",topic="orders"}))";
      const PromAnswer a = prom_->Query(q);
      const auto namespaces = LabelValues(a, "namespace");
      if (namespaces == std::set<std::string>{kTestNamespace, kOtherNamespace}) return "";
      return "`" + q + "`: " + a.Describe() + " " + a.body.substr(0, 400);
    }});
    for (const auto& r : rules.rules) {
      for (const auto& sel : VectorSelectors(r.expr)) {
        if (sel.rfind("shoal_control_", 0) != 0 || sel.find("steps_total") != std::string::npos) {
          continue;  // the operator's per-topic series (failed steps happen in one namespace)
        }
        checks->push_back({"rules " + r.where + ", selector " + sel + " by namespace",
                           [this, sel]() -> std::string {
                             const std::string q = "count by (namespace) (" + sel + ")";
                             const PromAnswer a = prom_->Query(q);
                             if (LabelValues(a, "namespace") ==
                                 std::set<std::string>{kTestNamespace, kOtherNamespace}) {
                               return "";
                             }
                             return "`" + q + "`: " + a.Describe() + " " + a.body.substr(0, 300);
                           }});
      }
    }
  }

  // Prometheus loaded every rule of the file and evaluated each without error. Returns the
  // alerts that are pending or firing (for the log: a surge may well start some).
  std::vector<std::string> CheckRulesEvaluated(const Rules& rules) {
    std::string answer;
    value groups;
    const bool evaluated = WaitUntil(
        [&] {
          const PromAnswer a = prom_->Api("/api/v1/rules");
          answer = a.Describe() + "\n" + a.body.substr(0, 3000);
          groups = At(a.data, "groups");
          size_t n = 0;
          for (const auto& g : Items(groups)) {
            for (const auto& r : Items(At(g, "rules"))) {
              ++n;
              if (Str(At(r, "health")) == "unknown") return false;  // not evaluated yet
            }
          }
          return n == rules.rules.size();
        },
        30s);
    EXPECT_TRUE(evaluated) << "Prometheus did not load and evaluate the " << rules.rules.size()
                           << " rules of " << kRules << ": " << answer << "\n"
                           << prom_->LogTail();
    std::vector<std::string> active;
    for (const auto& g : Items(groups)) {
      for (const auto& r : Items(At(g, "rules"))) {
        EXPECT_EQ(Str(At(r, "health")), "ok")
            << "rule " << Str(At(r, "name")) << " (`" << Str(At(r, "query"))
            << "`) failed to evaluate: " << Str(At(r, "lastError"));
        if (Str(At(r, "type")) == "alerting" && Str(At(r, "state")) != "inactive") {
          active.push_back(Str(At(r, "name")) + " (" + Str(At(r, "state")) + ")");
        }
      }
    }
    return active;
  }

  // Each rule is accepted as a query and each vector selector of its expression has data (see
  // the top of the file for why not the alert's expression itself). A recording rule's result
  // is what dashboards and alerts read: it must have data itself.
  size_t AddRuleChecks(const Rules& rules, std::vector<Check>* checks) {
    size_t selectors = 0;
    for (const auto& r : rules.rules) {
      const bool recording = r.where.rfind("recording", 0) == 0;
      checks->push_back({"rules " + r.where, [this, r, recording]() -> std::string {
                           const PromAnswer a =
                               recording ? QueryWithData(r.expr) : prom_->Query(r.expr);
                           if (a.success() && (!recording || a.non_empty())) return "";
                           return "`" + r.expr + "`: " + a.Describe();
                         }});
      for (const auto& sel : VectorSelectors(r.expr)) {
        ++selectors;
        checks->push_back(
            {"rules " + r.where + ", selector " + sel, [this, r, sel]() -> std::string {
               const PromAnswer a = QueryWithData(sel);
               if (a.non_empty()) return "";
               return "selector `" + sel + "` of `" + r.expr + "` has no data: " + a.Describe();
             }});
      }
    }
    return selectors;
  }

  // Runs the checks until each passed or the deadline (a metric appears at its first event and
  // needs a scrape or two; a rate needs two samples); each one still failing is a failure.
  size_t RunChecks(const std::vector<Check>& checks, std::chrono::milliseconds timeout) {
    std::map<size_t, std::string> failing;
    for (size_t i = 0; i < checks.size(); ++i) failing[i] = "";
    WaitUntil(
        [&] {
          for (auto it = failing.begin(); it != failing.end();) {
            std::string why = checks[it->first].run();
            if (why.empty()) {
              it = failing.erase(it);
            } else {
              it->second = std::move(why);
              ++it;
            }
          }
          return failing.empty();
        },
        timeout);
    for (const auto& [i, why] : failing) ADD_FAILURE() << checks[i].name << ": " << why;
    return failing.size();
  }

  // Destroyed in reverse: Prometheus, the targets file, the cluster, then the directory.
  TempDir dir_{"shoal-prom"};
  std::unique_ptr<TestCluster> cluster_;
  std::string operator_target_;  // host:port of the operator's /metrics
  std::unique_ptr<SidecarTargetsFile> targets_;
  std::unique_ptr<PrometheusServer> prom_;
  SteadyClock::time_point prom_started_;
};

TEST_F(PrometheusTest, DashboardAndAlertRulesHaveDataFromSidecarsUnderLoadAndTheOperator) {
  const auto test_start = SteadyClock::now();
  // The files under test, read first: a missing or malformed file fails here, never skips.
  const auto dashboard_text = ReadFile(kDashboard);
  ASSERT_TRUE(dashboard_text) << "missing " << kDashboard;
  value dashboard;
  ASSERT_NO_THROW(dashboard = value::parse(*dashboard_text)) << kDashboard << " is not JSON";
  Rules rules;
  ASSERT_NO_FATAL_FAILURE(ReadRules(&rules));

  ASSERT_NO_FATAL_FAILURE(StartClusterAndTopic());
  ASSERT_NO_FATAL_FAILURE(StartPrometheus());  // scraping from before the load starts
  const auto pod0 = cluster_->kubelet().Pod("orders-0");
  ASSERT_TRUE(pod0);

  // Series that exist only after an event of their own, made to happen once: a failed plan
  // step (the first scale of the StatefulSet answers 500; the step is retried) and a refused
  // request (malformed JSON), so that the rules and panels about failures have their series.
  cluster_->api().FailNextWrites(
      "/apis/apps/v1/namespaces/" + std::string(kTestNamespace) + "/statefulsets/orders/scale", 1,
      500);
  {
    HttpTestClient data("http://" + pod0->ip + ":8080");
    const HttpResponse r = data.Post("/v1/topics/orders/events", "not json");
    ASSERT_TRUE(r.status >= 400 && r.status < 500) << r.Describe();
  }

  // Keyed load into pod 0 (it forwards): 500 events/s, ten times that from 3 s to 24 s, then
  // 500/s again until the checks are done.
  harness::LoadGenerator load(SurgeLoad(pod0->ip, 60, 0.05, 0.4));
  load.Start();
  // The other namespace's orders: its base load only (no surge before the end of the test).
  const auto other0 = cluster_->kubelet().Pod("orders-0", kOtherNamespace);
  ASSERT_TRUE(other0);
  harness::LoadGenerator other_load(SurgeLoad(other0->ip, 60, 0.99, 1.0));
  other_load.Start();

  // The control loop splits and adds a pod; wait for its plans to be done and the new pod to be
  // scraped.
  int64_t max_partitions = 0, max_replicas = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto t = cluster_->Get(kTopicPath);
        if (!t) return false;
        max_partitions = std::max(max_partitions, Int(At(*t, "status.partitions")));
        max_replicas = std::max(max_replicas, Int(At(*t, "status.replicas")));
        return max_partitions >= 4 && max_replicas >= 2 && !At(*t, "status.plan").is_object();
      },
      60s))
      << "no split and scale-up under the surge: max partitions " << max_partitions << ", max pods "
      << max_replicas << "\n"
      << cluster_->OperatorLog("a");
  ASSERT_NO_FATAL_FAILURE(WaitAllTargetsUp());
  const auto scaled_at = SteadyClock::now();

  PromtoolCheckMetrics("sidecar", "http://" + pod0->ip + ":" + std::to_string(kSidecarMetricsPort));
  PromtoolCheckMetrics("operator", "http://" + operator_target_);

  std::vector<Check> checks;
  AddDashboardChecks(dashboard, &checks);
  const size_t dashboard_checks = checks.size();
  const std::vector<std::string> active_alerts = CheckRulesEvaluated(rules);
  const size_t selectors = AddRuleChecks(rules, &checks);
  AddNamespaceChecks(rules, &checks);
  const auto checks_from = SteadyClock::now();
  const size_t failing = RunChecks(checks, 20s);
  load.Stop();
  other_load.Stop();

  const auto secs = [](SteadyClock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0;
  };
  std::string active_text;
  for (const auto& a : active_alerts) active_text += (active_text.empty() ? "" : ", ") + a;
  std::printf(
      "dashboard: %zu queries; rules: %zu (%zu alerts), %zu selectors; failing %zu of %zu "
      "checks. Surge: max partitions %lld, max pods %lld, acked %llu. Alerts pending or firing: "
      "[%s]. Scaled after %.1f s, checks took %.1f s, test %.1f s\n",
      dashboard_checks, rules.rules.size(), rules.alerts, selectors, failing, checks.size(),
      static_cast<long long>(max_partitions), static_cast<long long>(max_replicas),
      static_cast<unsigned long long>(load.acked()), active_text.c_str(),
      secs(scaled_at - test_start), secs(SteadyClock::now() - checks_from),
      secs(SteadyClock::now() - test_start));
}

// The lexer that finds the vector selectors of rule expressions, on the shapes rules use.
TEST(PromqlExprsTest, VectorSelectorsSkipFunctionsKeywordsLabelsAndStrings) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"up", {"up"}},
      {R"(up{shoal_component="sidecar"} == 0)", {R"(up{shoal_component="sidecar"})"}},
      {R"(sum by (topic) (rate(shoal_events_appended_total{topic=~"a|b"}[5m])) > 400)",
       {R"(shoal_events_appended_total{topic=~"a|b"})"}},
      {"histogram_quantile(0.99, sum without (pod) (rate(shoal_produce_latency_seconds_bucket"
       "[1m:10s] offset 5m)))",
       {"shoal_produce_latency_seconds_bucket"}},
      {R"(a / on (topic, partition) group_left(pod) b unless ignoring(x) c and bool d)",
       {"a", "b", "c", "d"}},
      {R"x(label_replace(x{l="}{"}, "dst", "$1", "src", "(.*)") or vector(0))x", {R"(x{l="}{"})"}},
      {R"({__name__=~"shoal_.*", topic!=""} # a comment with words
         + count_values("v", y) + topk(3, z) @ start())",
       {R"({__name__=~"shoal_.*", topic!=""})", "y", "z"}},
      {"max_over_time(ns:rec:rate5m[10m]) * 1e3 - Inf + NaN", {"ns:rec:rate5m"}},
      {"sum(x) by (topic) / sum(x) by (topic)", {"x"}},
  };
  for (const auto& [expr, want] : cases) EXPECT_EQ(VectorSelectors(expr), want) << expr;
}

TEST(PromqlExprsTest, GrafanaVariablesAndTemplateQueries) {
  const std::map<std::string, std::string> vars = {{"topic", "orders"}, {"topics", "X"}};
  EXPECT_EQ(
      SubstituteVariables(R"(rate(m{topic=~"$topic",b="${topic:regex}"}[$__rate_interval]))", vars),
      R"(rate(m{topic=~"orders",b="orders"}[60s]))");
  EXPECT_EQ(SubstituteVariables("$topics [[topic]] $__range_s $__interval_ms", vars),
            "X orders 60 60000");
  EXPECT_EQ(UnresolvedVariable(R"x(label_replace(a, "x", "$1", "y", "(.*)"))x"), std::nullopt);
  EXPECT_EQ(UnresolvedVariable(R"(a{pod="$pod"})"), "$pod");
  EXPECT_EQ(UnresolvedVariable(R"(a{pod="${pod}"})"), "${pod}");

  TemplateQuery q = ParseTemplateQuery(" label_values(shoal_control_partitions, topic) ");
  EXPECT_EQ(q.kind, TemplateQuery::Kind::kSeriesLabel);
  EXPECT_EQ(q.expr, "shoal_control_partitions");
  EXPECT_EQ(q.label, "topic");
  q = ParseTemplateQuery(R"(label_values(shoal_epoch{topic="a,b"}, pod))");
  EXPECT_EQ(q.expr, R"(shoal_epoch{topic="a,b"})");
  EXPECT_EQ(q.label, "pod");
  q = ParseTemplateQuery("label_values(topic)");
  EXPECT_EQ(q.kind, TemplateQuery::Kind::kLabelName);
  EXPECT_EQ(q.label, "topic");
  q = ParseTemplateQuery("query_result(sum by (topic) (shoal_epoch))");
  EXPECT_EQ(q.kind, TemplateQuery::Kind::kExpr);
  EXPECT_EQ(q.expr, "sum by (topic) (shoal_epoch)");
}

}  // namespace
}  // namespace shoal::testing
