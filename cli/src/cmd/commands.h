// The `shoal` CLI's commands. Each Register* adds one subcommand to the app; the command runs
// from its callback and sets the exit code through the returned reference.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "shoal/common/status.h"
#include "shoal/common/tls.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/local_platform.h"
#include "shoal/control/process.h"

namespace shoal::cli {

void RegisterDemo(CLI::App& app, int& exit_code);
void RegisterBenchIngest(CLI::App& bench, int& exit_code);
void RegisterTorture(CLI::App& app, int& exit_code);
void RegisterBenchPause(CLI::App& bench, int& exit_code);
void RegisterBenchDrain(CLI::App& bench, int& exit_code);
void RegisterBenchPeers(CLI::App& bench, int& exit_code);
void RegisterBenchProducer(CLI::App& bench, int& exit_code);
void RegisterBenchConsumer(CLI::App& bench, int& exit_code);
void RegisterLoadVerify(CLI::App& app, int& exit_code);
void RegisterSimulate(CLI::App& app, int& exit_code);
void RegisterControl(CLI::App& app, int& exit_code);
void RegisterUp(CLI::App& app, int& exit_code);
void RegisterWaitDrained(CLI::App& app, int& exit_code);
void RegisterDeleteGroup(CLI::App& app, int& exit_code);
void RegisterConsole(CLI::App& app, int& exit_code);

// The whole file, or NotFound naming the path.
Result<std::string> ReadTextFile(const std::string& path);
// A token file's token: the file without its trailing newline and blanks.
Result<std::string> ReadTokenFile(const std::string& path);
// This program's path (/proc/self/exe): the `shoal` that pods run as their consumer.
std::string SelfPath();

// The local platform's options that follow from a topic's spec: topic, state directory, the
// sidecars' fsync and retention, and `shoal` itself as the pods' consumer.
control::LocalPlatformOptions PlatformOptionsFor(const TopicSpec& spec, std::string state_dir);

// What the benchmarks that drive one sidecar share, and the flags that set them: --target (a
// running sidecar's host:port; empty: start one), --topic, --partitions, --fsync, --value-bytes,
// --keys, --duration, --warmup, --json, --tls.
struct BenchRunOptions {
  std::string target;
  std::string topic = "bench";
  uint32_t partitions = 4;
  std::string fsync = "interval";
  int value_bytes = 100;
  uint64_t keys = 100000;
  double duration_s = 10;
  double warmup_s = 2;
  bool json = false;
  // TLS as a topic's pods speak it (docs/security.md): the started sidecar TLS only with a CA
  // made for the run, the benchmark a client with a certificate of that CA.
  bool tls = false;
};
void AddBenchRunFlags(CLI::App* cmd, BenchRunOptions& o);

// A sidecar a benchmark starts of its own: `topic`, `partitions`, `fsync`, its data in
// `data_dir` (a new /tmp/shoal-bench-* directory when empty), with `tls` TLS only with a CA made
// for the run (docs/security.md) and `client_tls` a client certificate of that CA.
struct BenchSidecarOptions {
  std::string topic;
  uint32_t partitions = 4;
  std::string fsync = "interval";
  std::string data_dir;
  bool tls = false;
};
struct BenchSidecar {
  control::LocalSidecar sidecar;
  std::string data_dir;
  bool made_dir = false;  // data_dir was made for it (the caller removes it)
  TlsClientFiles client_tls;
};
Result<BenchSidecar> StartBenchSidecar(const BenchSidecarOptions& options);

// Percentile of a sorted vector (nearest rank), 0 for an empty one.
double Percentile(const std::vector<double>& sorted, double p);

}  // namespace shoal::cli
