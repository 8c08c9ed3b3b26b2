// shoal simulate: replays a load trace (docs/simulator.md) through the real scaling policy and
// change planner and prints the decisions over time with their reasons, the timeline's totals and
// how long deciding and planning took.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cmd/commands.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/simulator.h"

namespace shoal::cli {

namespace {

struct SimulateOptions {
  std::string trace;
  std::string topic;  // overrides the trace's topic file
  bool json = false;
  bool timeline = false;
  uint32_t initial_partitions = 0;
  bool reactive = false;          // prediction off (behavior.scaleUp.predictive: false)
  bool compare_reactive = false;  // run with and without prediction, print both
};

Result<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The same trace with the topic's prediction on and off, side by side.
int CompareReactive(TopicSpec spec, const control::Trace& trace, bool json) {
  spec.scale_up.predictive = true;
  auto predictive = control::Simulate(spec, trace);
  spec.scale_up.predictive = false;
  auto reactive = control::Simulate(spec, trace);
  for (const auto* r : {&predictive, &reactive}) {
    if (!r->ok()) {
      std::cerr << "shoal simulate: " << r->status().message() << "\n";
      return 1;
    }
  }
  const double lag_ratio = reactive->max_lag > 0 ? predictive->max_lag / reactive->max_lag : 0;
  if (json) {
    std::cout << "{\"trace\":\"" << trace.name << "\",\"predictive\":" << predictive->ToJson(false)
              << ",\"reactive\":" << reactive->ToJson(false) << ",\"max_lag_ratio\":" << lag_ratio
              << "}\n";
    return 0;
  }
  std::printf("trace %s over topic %s: %.0f s\n", trace.name.c_str(), spec.name.c_str(),
              trace.duration_s);
  std::printf("%-11s %9s %9s %10s %10s %12s %12s\n", "policy", "scale-ups", "decisions",
              "max parts", "max lag", "part-seconds", "pod-seconds");
  for (const auto& [name, r] : {std::pair{"predictive", &*predictive}, {"reactive", &*reactive}}) {
    std::printf("%-11s %9u %9zu %10u %10.0f %12.0f %12.0f\n", name, r->scale_ups,
                r->decisions.size(), r->max_partitions, r->max_lag, r->partition_seconds,
                r->pod_seconds);
  }
  std::printf("predictive max lag / reactive: %.2f\n", lag_ratio);
  return 0;
}

int Run(const SimulateOptions& o) {
  auto text = ReadAll(o.trace);
  if (!text.ok()) {
    std::cerr << "shoal simulate: " << text.status().message() << "\n";
    return 2;
  }
  auto trace = control::ParseTrace(*text);
  if (!trace.ok()) {
    std::cerr << "shoal simulate: " << o.trace << ": " << trace.status().message() << "\n";
    return 2;
  }
  if (o.initial_partitions) trace->initial_partitions = o.initial_partitions;
  std::string topic_path = o.topic;
  if (topic_path.empty()) {
    if (trace->topic_file.empty()) {
      std::cerr << "shoal simulate: the trace names no topic file; pass --topic FILE\n";
      return 2;
    }
    topic_path = (std::filesystem::path(o.trace).parent_path() / trace->topic_file).string();
  }
  auto topic_text = ReadAll(topic_path);
  if (!topic_text.ok()) {
    std::cerr << "shoal simulate: " << topic_text.status().message() << "\n";
    return 2;
  }
  auto spec = ParseTopic(*topic_text);
  if (!spec.ok()) {
    std::cerr << "shoal simulate: " << topic_path << ": " << spec.status().message() << "\n";
    return 2;
  }
  if (o.reactive) spec->scale_up.predictive = false;
  if (o.compare_reactive) return CompareReactive(*spec, *trace, o.json);
  auto result = control::Simulate(*spec, *trace);
  if (!result.ok()) {
    std::cerr << "shoal simulate: " << result.status().message() << "\n";
    return 1;
  }
  if (o.json) {
    std::cout << result->ToJson(o.timeline) << "\n";
    return 0;
  }
  std::printf("trace %s over topic %s: %.0f s in steps of %.3g s\n", trace->name.c_str(),
              spec->name.c_str(), trace->duration_s, trace->step_s);
  for (const auto& d : result->decisions) {
    const std::string kinds = control::JoinKinds(d.kinds);
    std::printf(
        "t=%6.0fs  partitions %u -> %u  pods %u -> %u  [%s]  decide %.2f ms, plan %.2f ms\n", d.t,
        d.partitions_before, d.partitions_after, d.pods_before, d.pods_after, kinds.c_str(),
        d.decide_ms, d.plan_ms);
    std::printf("          %s\n", d.reason.c_str());
  }
  if (o.timeline) {
    std::printf("%8s %12s %10s %5s %12s\n", "t", "rate", "partitions", "pods", "lag");
    for (const auto& p : result->timeline) {
      std::printf("%8.0f %12.0f %10u %5u %12.0f%s\n", p.t, p.rate, p.partitions, p.pods, p.lag,
                  p.plan_in_progress ? "  (changing)" : "");
    }
  }
  std::printf(
      "summary: %zu decisions (%u scale-ups, %llu holds), max partitions %u, max pods %u, max lag "
      "%.0f events, %.0f partition-seconds, %.0f pod-seconds, slowest decide %.2f ms, slowest "
      "plan %.2f ms, "
      "slowest later change step %.2f ms\n",
      result->decisions.size(), result->scale_ups, static_cast<unsigned long long>(result->holds),
      result->max_partitions, result->max_pods, result->max_lag, result->partition_seconds,
      result->pod_seconds, result->max_decide_ms, result->max_plan_ms, result->max_resolve_ms);
  return 0;
}

}  // namespace

void RegisterSimulate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand("simulate",
                                 "Replay a load trace through the real scaling policy and planner");
  cmd->add_option("trace", o->trace, "Trace file (docs/simulator.md)")->required();
  cmd->add_option("--topic", o->topic, "PartitionedTopic file (default: the trace's topic)");
  cmd->add_option("--initial-partitions", o->initial_partitions,
                  "Start with this many partitions (overrides trace and topic)");
  cmd->add_flag("--timeline", o->timeline, "Also print the state at every step");
  cmd->add_flag("--reactive", o->reactive,
                "Turn prediction off (as behavior.scaleUp.predictive: false)");
  cmd->add_flag("--compare-reactive", o->compare_reactive,
                "Run with prediction and without, and print both side by side");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace shoal::cli
