// shoal control FILE: the operator's control loop on this machine (the local platform): pods are
// sidecar processes on their own loopback addresses with consumer processes beside them, the
// control state lives in --state-dir. Killed and started again, it adopts the running pods and
// resumes the plan it was in. `shoal down` stops a topic's pods; `shoal status` prints the
// control state (plan, steps, the last decision and its reason).
// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cmd/commands.h"
#include "shoal/client/admin_client.h"
#include "shoal/common/clock.h"
#include "shoal/common/logging.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/control_frontend.h"
#include "shoal/control/control_loop.h"
#include "shoal/control/local_platform.h"
#include "shoal/control/metrics_observer.h"
#include "shoal/control/process.h"
#include "shoal/harness/local_topic.h"

namespace shoal::cli {

namespace {

std::atomic<bool> g_stop{false};
// Fields the status printout shows when present; a missing one prints as empty.
void Ignore(simdjson::error_code) {}
void OnSignal(int) { g_stop.store(true); }

struct ControlOptions {
  std::string file;
  std::string state_dir;
  std::string ip_prefix = "127.0.0";
  uint16_t data_port = 8080, admin_port = 8081, metrics_port = 9090;
  uint16_t control_port = 9400;
  bool no_consumers = false;
  int64_t consumer_cpu_us = 0;
  int interval_ms = 1000;
  std::string log_level = "info";
  bool stop_pods_on_exit = false;
};

std::string DefaultStateDir(const std::string& topic) { return ".shoal/" + topic; }

int RunControl(const ControlOptions& o) {
  (void)InitLogging(o.log_level);
  auto text = ReadTextFile(o.file);
  if (!text.ok()) {
    std::cerr << "shoal control: " << text.status().message() << "\n";
    return 2;
  }
  auto spec = ParseTopic(*text);
  if (!spec.ok()) {
    std::cerr << "shoal control: " << o.file << ": " << spec.status().message() << "\n";
    return 2;
  }
  control::LocalPlatformOptions po =
      PlatformOptionsFor(*spec, o.state_dir.empty() ? DefaultStateDir(spec->name) : o.state_dir);
  if (o.no_consumers) po.consumer_binary.clear();
  po.ip_prefix = o.ip_prefix;
  po.data_port = o.data_port;
  po.admin_port = o.admin_port;
  po.metrics_port = o.metrics_port;
  po.cpu_us_per_event = o.consumer_cpu_us;
  po.log_level = o.log_level == "debug" ? "debug" : "info";
  auto platform = control::LocalPlatform::Open(po);
  if (!platform.ok()) {
    std::cerr << "shoal control: " << platform.status().message() << "\n";
    return 1;
  }
  auto& clock = SystemClock::Instance();
  control::MetricsObserver observer(clock, (*platform)->AdminToken());
  client::AdminClient admin((*platform)->AdminToken());
  control::ControlLoopOptions lo;
  lo.interval = std::chrono::milliseconds(o.interval_ms);
  control::ControlLoop loop(*spec, **platform, observer, admin, clock, lo);
  if (Status st = loop.Start(); !st.ok()) {
    std::cerr << "shoal control: " << st.message() << "\n";
    return 1;
  }
  std::unique_ptr<control::ControlFrontend> frontend;
  if (o.control_port) {
    frontend = std::make_unique<control::ControlFrontend>("127.0.0.1", o.control_port, loop);
    if (Status st = frontend->Open(); !st.ok()) {
      std::cerr << "shoal control: " << st.message() << " (choose another --control-port)\n";
      return 1;
    }
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  std::cerr << "shoal control: topic " << spec->name << ", state in " << po.state_dir
            << ", pods on " << po.ip_prefix << ".2..";
  if (o.control_port) std::cerr << ", status on http://127.0.0.1:" << o.control_port << "/status";
  std::cerr << "\n";
  loop.Run(g_stop);
  if (frontend) frontend->Close();
  if (o.stop_pods_on_exit) {
    std::cerr << "shoal control: stopping the pods\n";
    if (Status st = (*platform)->Shutdown(); !st.ok()) {
      std::cerr << "shoal control: " << st.message() << "\n";
      return 1;
    }
  }
  return 0;
}

struct DownOptions {
  std::string state_dir;
  std::string topic;
};

int RunDown(const DownOptions& o) {
  control::LocalPlatformOptions po;
  po.topic = o.topic;
  po.state_dir = o.state_dir.empty() ? DefaultStateDir(o.topic) : o.state_dir;
  po.supervise_interval = std::chrono::milliseconds(0);
  auto platform = control::LocalPlatform::Open(po);
  if (!platform.ok()) {
    std::cerr << "shoal down: " << platform.status().message() << "\n";
    return 1;
  }
  if (Status st = (*platform)->Shutdown(); !st.ok()) {
    std::cerr << "shoal down: " << st.message() << "\n";
    return 1;
  }
  std::cerr << "shoal down: stopped the pods of " << o.topic << "\n";
  return 0;
}

struct StatusOptions {
  std::string state_dir;
  std::string topic;
  bool json = false;
};

int RunStatus(const StatusOptions& o) {
  const std::string dir = o.state_dir.empty() ? DefaultStateDir(o.topic) : o.state_dir;
  auto text = ReadTextFile(dir + "/control-state.json");
  if (!text.ok()) {
    std::cerr << "shoal status: no control state in " << dir
              << " (is the topic running? pass --state-dir)\n";
    return 1;
  }
  if (o.json) {
    std::cout << *text << "\n";
    return 0;
  }
  simdjson::dom::parser parser;
  simdjson::padded_string padded(*text);
  simdjson::dom::element doc;
  if (parser.parse(padded).get(doc)) {
    std::cerr << "shoal status: " << dir << "/control-state.json is not JSON\n";
    return 1;
  }
  std::string_view topic;
  Ignore(doc["topic"].get(topic));
  simdjson::dom::element map;
  if (!doc["map"].get(map) && !map.is_null()) {
    uint64_t epoch = 0;
    Ignore(map["epoch"].get(epoch));
    size_t active = 0, sealed = 0;
    std::map<std::string, size_t> per_pod;
    simdjson::dom::array parts;
    if (!map["partitions"].get(parts)) {
      for (auto p : parts) {
        std::string_view state, owner;
        Ignore(p["state"].get(state));
        Ignore(p["owner"].get(owner));
        if (state == "active") {
          ++active;
          ++per_pod[std::string(owner)];
        } else {
          ++sealed;
        }
      }
    }
    std::printf("topic %.*s: epoch %llu, %zu active partitions, %zu sealed\n",
                static_cast<int>(topic.size()), topic.data(),
                static_cast<unsigned long long>(epoch), active, sealed);
    for (const auto& [pod, n] : per_pod) std::printf("  %-24s %zu partitions\n", pod.c_str(), n);
  } else {
    std::printf("topic %.*s: not created yet (waiting for its first pods)\n",
                static_cast<int>(topic.size()), topic.data());
  }
  simdjson::dom::element plan;
  if (!doc["plan"].get(plan) && !plan.is_null()) {
    uint64_t id = 0, next = 0;
    std::string_view reason;
    Ignore(plan["id"].get(id));
    Ignore(plan["next"].get(next));
    Ignore(plan["reason"].get(reason));
    std::printf("plan %llu in progress: %.*s\n", static_cast<unsigned long long>(id),
                static_cast<int>(reason.size()), reason.data());
    simdjson::dom::array steps;
    if (!plan["steps"].get(steps)) {
      uint64_t i = 0;
      for (auto s : steps) {
        std::string_view what, err;
        uint64_t attempts = 0;
        Ignore(s["what"].get(what));
        Ignore(s["last_error"].get(err));
        Ignore(s["attempts"].get(attempts));
        const char* mark = i < next ? "done" : i == next ? "now " : "    ";
        std::printf("  [%s] %.*s", mark, static_cast<int>(what.size()), what.data());
        if (attempts) {
          std::printf("  (%llu failed attempts: %.*s)", static_cast<unsigned long long>(attempts),
                      static_cast<int>(err.size()), err.data());
        }
        std::printf("\n");
        ++i;
      }
    }
  } else {
    std::printf("no plan in progress\n");
  }
  simdjson::dom::element last;
  if (!doc["last_decision"].get(last)) {
    std::string_view reason;
    int64_t at = 0;
    Ignore(last["reason"].get(reason));
    Ignore(last["at_ms"].get(at));
    if (at > 0) {
      const int64_t age = (SystemClock::Instance().NowMs() - at) / 1000;
      std::printf("last saved decision (%llds ago): %.*s\n", static_cast<long long>(age),
                  static_cast<int>(reason.size()), reason.data());
    }
  }
  simdjson::dom::array schedules;
  if (!doc["schedules"].get(schedules)) {
    for (auto sc : schedules) {
      std::string_view name, state, start, end, prepare;
      uint64_t parts = 0, pods = 0;
      Ignore(sc["name"].get(name));
      Ignore(sc["state"].get(state));
      Ignore(sc["start"].get(start));
      Ignore(sc["end"].get(end));
      Ignore(sc["prepare_from"].get(prepare));
      Ignore(sc["min_partitions"].get(parts));
      Ignore(sc["min_replicas"].get(pods));
      std::printf("schedule %.*s: %.*s", static_cast<int>(name.size()), name.data(),
                  static_cast<int>(state.size()), state.data());
      if (!start.empty()) {
        std::printf(", %.*s to %.*s (capacity from %.*s)", static_cast<int>(start.size()),
                    start.data(), static_cast<int>(end.size()), end.data(),
                    static_cast<int>(prepare.size()), prepare.data());
      }
      std::printf(": at least %llu partitions, %llu pods\n", static_cast<unsigned long long>(parts),
                  static_cast<unsigned long long>(pods));
    }
  }
  return 0;
}

}  // namespace

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::string> ReadTokenFile(const std::string& path) {
  auto token = ReadTextFile(path);
  if (!token.ok()) return token.status();
  std::string t = std::move(*token);
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "shoal";
}

control::LocalPlatformOptions PlatformOptionsFor(const TopicSpec& spec, std::string state_dir) {
  return harness::LocalPlatformOptionsFor(spec, std::move(state_dir), SelfPath());
}

void RegisterControl(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<ControlOptions>();
  auto* cmd = app.add_subcommand(
      "control", "Run the control loop of a PartitionedTopic on this machine (local platform)");
  cmd->add_option("file", c->file, "PartitionedTopic YAML")->required();
  cmd->add_option("--state-dir", c->state_dir, "Control state and pods (default .shoal/<topic>)");
  cmd->add_option("--ip-prefix", c->ip_prefix, "Pods bind <prefix>.2, <prefix>.3, ...");
  cmd->add_option("--data-port", c->data_port, "Sidecars' data port");
  cmd->add_option("--admin-port", c->admin_port, "Sidecars' admin port");
  cmd->add_option("--metrics-port", c->metrics_port, "Sidecars' metrics port");
  cmd->add_option("--control-port", c->control_port,
                  "The loop's /metrics and /status on 127.0.0.1 (0: none)");
  cmd->add_flag("--no-consumers", c->no_consumers, "Pods run no consumer process");
  cmd->add_option("--consumer-cpu-us", c->consumer_cpu_us, "CPU microseconds spent per event");
  cmd->add_option("--interval-ms", c->interval_ms, "Observation interval")
      ->check(CLI::Range(50, 60000));
  cmd->add_option("--log-level", c->log_level, "trace | debug | info | warn | error | off");
  cmd->add_flag("--stop-pods-on-exit", c->stop_pods_on_exit,
                "Stop the pods on SIGINT/SIGTERM (default: leave them for the next run)");
  cmd->callback([c, &exit_code] { exit_code = RunControl(*c); });

  auto d = std::make_shared<DownOptions>();
  auto* down = app.add_subcommand("down", "Stop the pods of a topic run by `shoal control`");
  down->add_option("--topic", d->topic, "Topic name")->required();
  down->add_option("--state-dir", d->state_dir, "State directory (default .shoal/<topic>)");
  down->callback([d, &exit_code] { exit_code = RunDown(*d); });

  auto s = std::make_shared<StatusOptions>();
  auto* status = app.add_subcommand("status", "The control state: map, plan, last decision");
  status->add_option("--topic", s->topic, "Topic name")->required();
  status->add_option("--state-dir", s->state_dir, "State directory (default .shoal/<topic>)");
  status->add_flag("--json", s->json, "Print the control state as JSON");
  status->callback([s, &exit_code] { exit_code = RunStatus(*s); });
}

}  // namespace shoal::cli
