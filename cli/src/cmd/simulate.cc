// shoal simulate: replays a load trace (docs/simulator.md) through the real scaling policy and
// change planner and prints the decisions over time with their reasons, the timeline's totals and
// how long deciding and planning took. `--profile` replays `shoal up`'s own load profile and
// consumers instead of a trace file, and `--against` puts a real `shoal up` run's report beside
// it.
#include <simdjson.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "cmd/commands.h"
#include "cmd/up_options.h"
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
  // `shoal up`'s load and consumers (--profile) instead of a trace file; its defaults.
  UpOptions up;
  LoadAndConsumerFlags flags;  // which were given (the consumer's override a trace's)
  double pod_start_s = 2;      // local pods of `shoal up` start in about 2 s
  const CLI::Option* pod_start_flag = nullptr;
  bool parents_whole = false;
  bool compare_parents = false;  // run with parents divided and whole, print both
  std::string against;           // a `shoal up` report directory to compare with

  bool profile() const { return flags.profile->count() > 0; }
};

Result<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The consumers of `shoal up` (4 ms per event in 4 lanes, 50 us of CPU per event over half a
// core by default), as the simulator models them: `shoal consume`'s loop, batches of up to 500
// events (its default max), a round trip of about 5 ms to fetch one and another to commit it.
control::Trace::Consumer UpConsumer(const UpOptions& up) {
  control::Trace::Consumer c;
  c.service_us = static_cast<double>(up.consumer_service_us);
  c.concurrency = static_cast<uint32_t>(std::max(1, up.consumer_concurrency));
  c.cpu_us = static_cast<double>(up.consumer_cpu_us);
  c.cpu_request_cores = up.consumer_cpu_request;
  c.batch_max = 500;
  c.round_trip_ms = 5;
  return c;
}

// `shoal up --profile P --rate R --duration D` as a trace: the same load profile (the load
// generator's own ProfileFactor), the same consumers, then as long without load as `shoal up`
// waits at most for the topic to drain and shrink (three scale-down windows and 30 s).
control::Trace ProfileTrace(const SimulateOptions& o, const TopicSpec& spec) {
  control::Trace t;
  t.name = "shoal up --profile " + o.up.profile;
  t.profile = LoadProfile(o.up.profile);
  t.profile_rate = o.up.rate;
  t.profile_duration_s = o.up.duration_s;
  t.duration_s = o.up.duration_s + 3.0 * spec.scale_down.stabilization_window_seconds + 30;
  t.consumer = UpConsumer(o.up);
  t.pod_start_s = o.pod_start_s;
  return t;
}

// The flags given on the command line override the trace's consumer and pods.
void ApplyFlags(const SimulateOptions& o, control::Trace& t) {
  const control::Trace::Consumer up = UpConsumer(o.up);
  if (o.flags.service_us->count()) t.consumer.service_us = up.service_us;
  if (o.flags.concurrency->count()) t.consumer.concurrency = up.concurrency;
  if (o.flags.cpu_us->count()) t.consumer.cpu_us = up.cpu_us;
  if (o.flags.cpu_request->count()) t.consumer.cpu_request_cores = up.cpu_request_cores;
  if (o.pod_start_flag->count()) t.pod_start_s = o.pod_start_s;
  if (o.parents_whole) t.parents_whole = true;
  if (o.initial_partitions) t.initial_partitions = o.initial_partitions;
}

// What a real run's report.json (harness/run_report.h) says of the figures simulated.
struct RealRun {
  std::string command;
  double peak_lag = 0;
  uint32_t scale_ups = 0;  // decisions that split or added pods
};

Result<RealRun> ReadRealRun(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "report.json").string();
  auto text = ReadAll(path);
  if (!text.ok()) return text.status();
  simdjson::dom::parser parser;
  simdjson::padded_string padded(*text);
  simdjson::dom::element doc;
  if (parser.parse(padded).get(doc)) return Status::InvalidArgument(path + ": not JSON");
  RealRun r;
  std::string_view command;
  if (!doc["command"].get(command)) r.command = std::string(command);
  if (doc["figures"]["peak_lag"].get(r.peak_lag)) {
    return Status::InvalidArgument(path + ": no figures.peak_lag");
  }
  simdjson::dom::array decisions;
  if (doc["decisions"].get(decisions)) return Status::InvalidArgument(path + ": no decisions");
  for (auto d : decisions) {
    std::string_view kinds;
    if (d["kinds"].get(kinds)) continue;
    if (kinds.find("split") != std::string_view::npos ||
        kinds.find("pods_up") != std::string_view::npos) {
      ++r.scale_ups;
    }
  }
  return r;
}

// Two runs side by side: one row each, and the first's peak lag over the second's.
int PrintRuns(const TopicSpec& spec, const control::Trace& trace,
              const std::vector<std::pair<std::string, control::SimResult>>& runs,
              const std::string& ratio_name, bool json) {
  const double second_lag = runs.back().second.max_lag;
  const double lag_ratio = second_lag > 0 ? runs.front().second.max_lag / second_lag : 0;
  if (json) {
    std::cout << "{\"trace\":\"" << trace.name << "\"";
    for (const auto& [name, r] : runs) std::cout << ",\"" << name << "\":" << r.ToJson(false);
    std::cout << ",\"" << ratio_name << "\":" << lag_ratio << "}\n";
    return 0;
  }
  std::printf("trace %s over topic %s: %.0f s\n", trace.name.c_str(), spec.name.c_str(),
              trace.duration_s);
  std::printf("%-11s %9s %9s %10s %10s %14s %12s %12s\n", "run", "scale-ups", "decisions",
              "max parts", "max lag", "lag event-s", "part-seconds", "pod-seconds");
  for (const auto& [name, r] : runs) {
    std::printf("%-11s %9u %9zu %10u %10.0f %14.0f %12.0f %12.0f\n", name.c_str(), r.scale_ups,
                r.decisions.size(), r.max_partitions, r.max_lag, r.lag_event_seconds,
                r.partition_seconds, r.pod_seconds);
  }
  std::printf("%s max lag / %s: %.2f\n", runs.front().first.c_str(), runs.back().first.c_str(),
              lag_ratio);
  return 0;
}

// The same trace two ways (prediction on and off, or parents divided and whole), side by side.
int Compare(TopicSpec spec, control::Trace trace, bool parents, bool json) {
  std::vector<std::pair<std::string, control::SimResult>> runs;
  for (const bool second : {false, true}) {
    if (parents) {
      trace.parents_whole = second;
    } else {
      spec.scale_up.predictive = !second;
    }
    auto r = control::Simulate(spec, trace);
    if (!r.ok()) {
      std::cerr << "shoal simulate: " << r.status().message() << "\n";
      return 1;
    }
    runs.emplace_back(
        parents ? (second ? "whole" : "divided") : (second ? "reactive" : "predictive"),
        std::move(*r));
  }
  return PrintRuns(spec, trace, runs, parents ? "max_lag_ratio_divided" : "max_lag_ratio", json);
}

// The simulated run beside the real one it models.
void PrintAgainst(const control::SimResult& sim, const RealRun& real, bool json) {
  const double lag_ratio = real.peak_lag > 0 ? sim.max_lag / real.peak_lag : 0;
  if (json) {
    std::cout << "{\"simulated\":" << sim.ToJson(false)
              << ",\"real\":{\"peak_lag\":" << real.peak_lag << ",\"scale_ups\":" << real.scale_ups
              << "},\"peak_lag_ratio\":" << lag_ratio << "}\n";
    return;
  }
  std::printf("\n%-10s %10s %10s\n", "", "peak lag", "scale-ups");
  std::printf("%-10s %10.0f %10u   %s\n", "real", real.peak_lag, real.scale_ups,
              real.command.c_str());
  std::printf("%-10s %10.0f %10u\n", "simulated", sim.max_lag, sim.scale_ups);
  std::printf("simulated / real: peak lag %.2f, scale-ups %.2f\n", lag_ratio,
              real.scale_ups ? static_cast<double>(sim.scale_ups) / real.scale_ups : 0.0);
}

int Run(const SimulateOptions& o) {
  if (o.trace.empty() == !o.profile()) {
    std::cerr << "shoal simulate: give either a trace file or --profile (shoal up's load)\n";
    return 2;
  }
  std::optional<control::Trace> trace;
  std::string topic_path = o.topic;
  if (!o.trace.empty()) {
    auto text = ReadAll(o.trace);
    if (!text.ok()) {
      std::cerr << "shoal simulate: " << text.status().message() << "\n";
      return 2;
    }
    auto parsed = control::ParseTrace(*text);
    if (!parsed.ok()) {
      std::cerr << "shoal simulate: " << o.trace << ": " << parsed.status().message() << "\n";
      return 2;
    }
    trace = std::move(*parsed);
    if (topic_path.empty()) {
      if (trace->topic_file.empty()) {
        std::cerr << "shoal simulate: the trace names no topic file; pass --topic FILE\n";
        return 2;
      }
      topic_path = (std::filesystem::path(o.trace).parent_path() / trace->topic_file).string();
    }
  } else if (topic_path.empty()) {
    topic_path = o.up.file;
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
  if (!trace) trace = ProfileTrace(o, *spec);
  ApplyFlags(o, *trace);
  if (Status st = control::ValidateConsumer(trace->consumer); !st.ok()) {
    std::cerr << "shoal simulate: " << st.message() << "\n";
    return 2;
  }
  if (o.reactive) spec->scale_up.predictive = false;
  if (o.compare_reactive || o.compare_parents) {
    return Compare(*spec, *trace, o.compare_parents, o.json);
  }
  std::optional<RealRun> real;
  if (!o.against.empty()) {
    auto r = ReadRealRun(o.against);
    if (!r.ok()) {
      std::cerr << "shoal simulate: " << r.status().message() << "\n";
      return 2;
    }
    real = *r;
  }
  auto result = control::Simulate(*spec, *trace);
  if (!result.ok()) {
    std::cerr << "shoal simulate: " << result.status().message() << "\n";
    return 1;
  }
  if (o.json) {
    if (real) {
      PrintAgainst(*result, *real, true);
    } else {
      std::cout << result->ToJson(o.timeline) << "\n";
    }
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
      "%.0f events, %.0f event-seconds of lag, %.0f partition-seconds, %.0f pod-seconds, slowest "
      "decide %.2f ms, slowest plan %.2f ms, slowest later change step %.2f ms\n",
      result->decisions.size(), result->scale_ups, static_cast<unsigned long long>(result->holds),
      result->max_partitions, result->max_pods, result->max_lag, result->lag_event_seconds,
      result->partition_seconds, result->pod_seconds, result->max_decide_ms, result->max_plan_ms,
      result->max_resolve_ms);
  if (real) PrintAgainst(*result, *real, false);
  return 0;
}

}  // namespace

void RegisterSimulate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand("simulate",
                                 "Replay a load trace through the real scaling policy and planner");
  cmd->add_option("trace", o->trace, "Trace file (docs/simulator.md); or --profile");
  cmd->add_option(
      "--topic", o->topic,
      "PartitionedTopic file (default: the trace's, or with --profile " + o->up.file + ")");
  o->flags = AddLoadAndConsumerFlags(cmd, o->up);
  o->flags.profile->description(
      "Instead of a trace: shoal up's load, flash-sale | ramp | steady | sawtooth, with "
      "--rate, --duration and its consumers (the --consumer-* flags, as shoal up's)");
  o->pod_start_flag =
      cmd->add_option("--pod-start-s", o->pod_start_s,
                      "Seconds from asking for a pod to its being ready (with --profile: 2, as "
                      "local pods; a trace's pods.start_s otherwise)");
  cmd->add_flag("--parents-whole", o->parents_whole,
                "A sealed partition's backlog is read whole by the pod that held it, before its "
                "successors' events (sidecars without ranged reads)");
  cmd->add_flag("--compare-parents", o->compare_parents,
                "Run with parents divided among the successors and whole, side by side");
  cmd->add_option("--against", o->against,
                  "A shoal up report directory (reports/<topic>-<time>): print its peak lag and "
                  "scale-ups beside the simulation's");
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
