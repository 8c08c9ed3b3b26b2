// ChildProcess: a started program (a sidecar, a consumer) that the CLI owns: spawn with output
// to a log file, signal, wait with a deadline. Destruction kills a still-running child (SIGKILL)
// so no process outlives the command that started it. Not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal::client {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_) { o.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // argv[0] is the program path. stdout and stderr go to log_path (appended).
  static Result<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                    const std::string& log_path);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void Signal(int sig) const;
  // Waits for exit until the deadline; returns the exit code (128+signal when killed), or
  // nullopt if still running at the deadline.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit code.
  int Stop(std::chrono::milliseconds grace);

 private:
  pid_t pid_ = -1;
};

// A TCP port on `host` that was free a moment ago (bind to port 0, read it, close).
Result<uint16_t> FreePort(const std::string& host = "127.0.0.1");

// Polls GET path until it answers 200 or the deadline passes.
Status WaitForHttp(const std::string& host, uint16_t port, const std::string& path,
                   std::chrono::milliseconds timeout);

// The shoal-sidecar binary: $SHOAL_SIDECAR, next to this program, in ../sidecar/ (build tree),
// or on PATH.
std::string FindSidecarBinary();

}  // namespace shoal::client

namespace shoal::client {

struct LocalSidecarOptions {
  std::string binary;  // empty: FindSidecarBinary()
  std::string topic = "orders";
  uint32_t partitions = 4;
  std::string data_dir;
  std::string host = "127.0.0.1";
  std::string fsync = "interval";
  std::vector<std::string> extra_args;
};

// A shoal-sidecar child on free ports, ready (GET /readyz answered 200) when Start returns.
struct LocalSidecar {
  ChildProcess process;
  std::string host;
  uint16_t port = 0, admin_port = 0, metrics_port = 0;
  std::string data_dir, log_path;
  std::vector<std::string> argv;  // how it was started, for Restart
  std::string base_url() const { return "http://" + host + ":" + std::to_string(port); }
  std::string data_address() const { return host + ":" + std::to_string(port); }
  std::string admin_address() const { return host + ":" + std::to_string(admin_port); }

  static Result<LocalSidecar> Start(const LocalSidecarOptions& options);
  // Starts it again with the same arguments, ports and data directory (after a stop or a kill).
  Status Restart();

 private:
  Status WaitReady();
};

// Starts n sidecars pod-0..pod-(n-1) that join a multi-sidecar topic (--wait-for-map, the given
// admin token and log level), each under dir/pod-i; `base` gives topic and fsync.
Result<std::vector<LocalSidecar>> StartPods(int n, const std::string& dir,
                                            const LocalSidecarOptions& base,
                                            const std::string& token, const std::string& log_level);
// `map` with every pod's data and admin address as its peers.
PartitionMap WithPeers(PartitionMap map, const std::vector<LocalSidecar>& pods);

}  // namespace shoal::client
