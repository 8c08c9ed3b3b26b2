// SidecarProcess: a real `shoal-sidecar` child process for multi-process integration tests.
//
// Start() picks three free loopback ports, spawns the binary on a data directory, and waits until
// GET /readyz on the metrics port answers 200 (polling with short waits up to a deadline). Kill9()
// and Terminate() end it the hard and the clean way; Restart() starts it again on the same
// directory and the same ports, which is what a pod restart looks like. The child's stdout and
// stderr are appended to `<data dir>/sidecar.log`, so a failing test can print what the sidecar
// said (Describe()).
//
// Lifecycle: construct, Start, then any sequence of Kill9/Terminate/Restart. The destructor
// kills a child that still runs (SIGKILL) and reaps it, and removes the data directory when this
// object created it; so a failing assertion never leaves a sidecar behind. The child also gets
// SIGKILL if the thread that started it dies (PR_SET_PDEATHSIG), so start it from the test's main
// thread. Not thread-safe: one test thread drives it. Not copyable; owned by the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shoal/common/status.h"
#include "support/http_test_client.h"
#include "support/temp_dir.h"

namespace shoal::testing {

// TempDir: a fresh directory under $TMPDIR (or /tmp), removed with everything in it on
// destruction unless Keep() was called. Not copyable; owned by its creator.

struct SidecarOptions {
  std::string binary;  // path of shoal-sidecar; tests pass SHOAL_SIDECAR_BIN
  std::string topic = "orders";
  uint32_t partitions = 4;
  std::string fsync = "always";
  std::string data_dir;     // empty: a fresh temp dir owned by the SidecarProcess
  std::string admin_token;  // empty: no --admin-token (the sidecar generates one)
  std::string log_level = "info";
  std::vector<std::string> extra_args;  // more flags, e.g. {"--max-body-bytes", "65536"}
  std::chrono::milliseconds ready_timeout = std::chrono::seconds(20);
};

class SidecarProcess {
 public:
  explicit SidecarProcess(SidecarOptions options);
  ~SidecarProcess();
  SidecarProcess(const SidecarProcess&) = delete;
  SidecarProcess& operator=(const SidecarProcess&) = delete;

  // Picks free ports, spawns the child and waits for readiness. If the child dies before it is
  // ready (e.g. a port was taken meanwhile), tries again with new ports a few times.
  Status Start();
  // Starts again on the same data dir and ports; the child must have ended (Kill9/Terminate).
  Status Restart();
  // Flags for the next Restart (an operator changing the topic's settings).
  void set_extra_args(std::vector<std::string> args) { opts_.extra_args = std::move(args); }
  // SIGKILL, then reaps the child. No-op when it is not running.
  void Kill9();
  // SIGTERM, then waits up to `deadline` for the exit; returns the exit code (128+signal when a
  // signal ended it). Past the deadline: SIGKILL, and the result is an error.
  Result<int> Terminate(std::chrono::milliseconds deadline = std::chrono::seconds(20));
  // Whether the child is still running (reaps it if it exited on its own).
  bool Running();

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  uint16_t admin_port() const { return admin_port_; }
  uint16_t metrics_port() const { return metrics_port_; }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& topic() const { return opts_.topic; }
  std::string log_path() const { return data_dir_ + "/sidecar.log"; }

  std::string data_url() const { return Url(port_); }
  std::string admin_url() const { return Url(admin_port_); }
  std::string metrics_url() const { return Url(metrics_port_); }
  // Fresh clients for the current ports (a new connection pool, nothing kept from before a kill).
  std::unique_ptr<HttpTestClient> DataClient(
      std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  std::unique_ptr<HttpTestClient> AdminClient() const;
  std::unique_ptr<HttpTestClient> MetricsClient() const;

  // pid, ports, data dir and the last `lines` lines of the sidecar's log: for failure messages.
  std::string Describe(size_t lines = 30) const;

 private:
  static std::string Url(uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }
  Status Spawn();
  Status WaitReady();
  // Reaps the child if it exited; returns whether it did, with its exit code.
  bool Reap(bool block, int* exit_code);

  SidecarOptions opts_;
  std::unique_ptr<TempDir> owned_dir_;
  std::string data_dir_;
  pid_t pid_ = -1;
  int last_exit_code_ = -1;
  uint16_t port_ = 0;
  uint16_t admin_port_ = 0;
  uint16_t metrics_port_ = 0;
};

// Binds `n` free ports of 127.0.0.1 below the ephemeral range at once (so they differ), closes
// the sockets.
Result<std::vector<uint16_t>> PickFreePorts(size_t n);

// Sums every sample of `name` (any labels) in a Prometheus text exposition.
double SumMetric(const std::string& exposition, const std::string& name);

}  // namespace shoal::testing
