// What `shoal up` runs, with its defaults: the topic file, the load profile and each pod's
// consumer. `shoal simulate --profile` models the same run from the same defaults.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace shoal::cli {

struct UpOptions {
  std::string file = "examples/flash-sale.yaml";
  std::string state_dir;
  std::string report_dir;
  std::string profile = "flash-sale";  // flash-sale | ramp | steady | sawtooth
  double rate = 500;                   // events/s at 1x
  double duration_s = 120;
  int keys = 5000;
  int producers = 32;
  int64_t consumer_cpu_us = 50;
  double consumer_cpu_request = 0.5;
  // What each pod's consumer waits for (a database, a downstream call): 4 ms per event in 4
  // lanes, so one pod takes about 1,000 events/s whatever the machine, as real consumers are
  // bounded per pod. 0: CPU only.
  int64_t consumer_service_us = 4000;
  int consumer_concurrency = 4;
  std::string ip_prefix = "127.0.0";
  uint16_t control_port = 9400;
  uint16_t console_port = 9401;
  bool no_load = false;
  // The producers send each batch straight to its keys' pod by the map (a producer outside the
  // pods, harness::LoadOptions::route_by_map) instead of over the ready pods as a Service would.
  bool route = false;
  bool compare = false;
  bool scheduled_sale = true;  // the flash sale is announced: a schedule holds its capacity
  bool fresh = false;
  bool json = false;
  // --chaos: during the load run, SIGKILL the sidecar of the pod that leads the most partitions
  // (a third into the flash sale's surge; a third into the run without one), and with
  // chaos_kills 2 another leader's two thirds in; each is started again by the platform after
  // chaos_down_s. Needs spec.replication.factor >= 2.
  bool chaos = false;
  int chaos_kills = 1;
  double chaos_down_s = 5;
  std::string command;
};

// The load generator's profile (harness::LoadOptions::profile) for a `shoal up --profile`.
inline std::string LoadProfile(const std::string& p) { return p == "flash-sale" ? "surge" : p; }

// `shoal up`'s flags for the load (--profile, --rate, --duration) and each pod's consumer
// (--consumer-cpu-us, --consumer-cpu-request, --consumer-service-us, --consumer-concurrency),
// bound to `o`; `shoal simulate` takes the same. Each option, to tell whether it was given.
struct LoadAndConsumerFlags {
  CLI::Option* profile = nullptr;
  CLI::Option* rate = nullptr;
  CLI::Option* duration = nullptr;
  CLI::Option* cpu_us = nullptr;
  CLI::Option* cpu_request = nullptr;
  CLI::Option* service_us = nullptr;
  CLI::Option* concurrency = nullptr;
};
LoadAndConsumerFlags AddLoadAndConsumerFlags(CLI::App* cmd, UpOptions& o);

}  // namespace shoal::cli
