// ChildProcess: a started program (a sidecar, a consumer) that the CLI owns: spawn with output
// to a log file, signal, wait with a deadline. Destruction kills a still-running child (SIGKILL)
// so no process outlives the command that started it, unless the owner Release()d it (pods of
// the local platform outlive the control loop, as in Kubernetes). Not thread-safe; one owner.
//
// The free functions below (ProcessAlive, StopProcess, ...) work on any pid, also one this
// program did not start (a pod adopted from a pid file): they poll kill(pid, 0) and /proc.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal::control {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_) { o.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  struct SpawnOptions {
    // Start the child in a session of its own (setsid): a terminal's Ctrl-C and the end of this
    // program's process group do not reach it, and it inherits no descriptor above stderr.
    bool new_session = false;
  };

  // argv[0] is the program path. stdout and stderr go to log_path (appended).
  static Result<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                    const std::string& log_path);
  static Result<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                    const std::string& log_path, const SpawnOptions& options);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void Signal(int sig) const;
  // Waits for exit until the deadline; returns the exit code (128+signal when killed), or
  // nullopt if still running at the deadline.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit code.
  int Stop(std::chrono::milliseconds grace);
  // Gives the process up: the destructor no longer kills it. Returns its pid (-1 if none).
  pid_t Release() {
    const pid_t p = pid_;
    pid_ = -1;
    return p;
  }

 private:
  pid_t pid_ = -1;
};

// Whether `pid` runs. A zombie counts as gone; when it is an exited child of this program it is
// reaped, and its exit code (128+signal when killed) goes to *exit_code if given.
bool ProcessAlive(pid_t pid, std::optional<int>* exit_code = nullptr);
// Polls until `pid` is gone or the timeout passes; returns whether it is gone.
bool WaitProcessGone(pid_t pid, std::chrono::milliseconds timeout);
// SIGTERM, wait up to `grace`, then SIGKILL and wait up to 10 s more. Returns whether it is gone
// (true at once for a pid that does not run).
bool StopProcess(pid_t pid, std::chrono::milliseconds grace);
// The arguments of a running process from /proc/<pid>/cmdline (empty when it is gone).
std::vector<std::string> ProcessCmdline(pid_t pid);
// The CPU time (user + system) a running process used so far, from /proc/<pid>/stat.
std::optional<std::chrono::nanoseconds> ProcessCpuTime(pid_t pid);

// A TCP port on `host` that was free a moment ago, drawn below the kernel's ephemeral range
// (where outgoing connections cannot take it) when the machine allows.
Result<uint16_t> FreePort(const std::string& host = "127.0.0.1");

// Polls GET path until it answers 200 or the deadline passes.
Status WaitForHttp(const std::string& host, uint16_t port, const std::string& path,
                   std::chrono::milliseconds timeout);

// The shoal-sidecar binary: $SHOAL_SIDECAR, next to this program, in ../sidecar/ (build tree),
// or on PATH.
std::string FindSidecarBinary();

}  // namespace shoal::control

namespace shoal::control {

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

}  // namespace shoal::control
