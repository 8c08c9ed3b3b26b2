// LocalPlatform: the Platform of `shoal up`: a topic's pods as processes on this machine. Pod
// <topic>-<i> is a shoal-sidecar bound to its own loopback address (ip_prefix + "." + (2 + i), so
// 127.0.0.2, 127.0.0.3, ...) on the ports a cluster uses (8080 data, 8081 admin, 9090 metrics),
// plus, when a consumer binary is given, a `shoal consume` process that reads from that sidecar
// like an app container reads from localhost, recording what it sees in state_dir/seen/<pod>.jsonl
// for the verifier.
//
// State directory:
//   admin-token              the sidecars' admin bearer token (generated once, reused)
//   desired-pods             the number last asked for
//   control-state.json       the control loop's state (SaveState / LoadState)
//   pods/<pod>/              data/ (the sidecar's), sidecar.log, consumer.log, sidecar.pid,
//                            consumer.pid, draining (marker of a drained pod)
//   seen/<pod>.jsonl         what the pod's consumer saw; never deleted by the platform
//
// Pods outlive the control loop, as in Kubernetes: processes start in sessions of their own and
// are recorded in pid files; the destructor leaves them running, and a LocalPlatform opened later
// over the same directory (after a kill -9 of the loop) adopts every pod whose recorded process
// still runs the expected command (pids get reused: /proc/<pid>/cmdline must name the pod's data
// directory or seen file) and starts again those whose processes are gone. Shutdown() stops them.
//
// A supervisor thread restarts a sidecar or consumer that died without being stopped on purpose,
// with exponential backoff (counted in Processes()). A drained pod's consumer stays stopped.
//
// Thread-safe. Owned by main (or the test); outlives the control loop that uses it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shoal/common/clock.h"
#include "shoal/control/platform.h"

namespace shoal::control {

struct LocalPlatformOptions {
  std::string topic;
  std::string state_dir;
  std::string sidecar_binary;   // empty: control::FindSidecarBinary()
  std::string consumer_binary;  // the `shoal` CLI; empty: pods run no consumer
  // Pod i binds ip_prefix + "." + (2 + i); up to 253 pods. Tests pass a random 127.x.y.
  std::string ip_prefix = "127.0.0";
  uint16_t data_port = 8080;  // every pod uses the same ports on its own address
  uint16_t admin_port = 8081;
  uint16_t metrics_port = 9090;
  std::string fsync = "interval";         // the sidecars' --fsync
  std::vector<std::string> sidecar_args;  // more sidecar flags
  std::string admin_token;                // empty: generated once into state_dir/admin-token
  std::string log_level = "info";         // the sidecars' --log-level

  // The consumer processes (with consumer_binary).
  std::string group = "app";
  int64_t cpu_us_per_event = 0;    // busy CPU work per event
  double cpu_request_cores = 1.0;  // the denominator of PodInfo::cpu_utilization
  // Service time (harness::ConsumerOptions): what each consumer waits per event, in
  // `concurrency` lanes by key, and per batch; it bounds a pod's consumer, not the CPU.
  int64_t service_us_per_event = 0;
  int64_t service_us_per_batch = 0;
  int concurrency = 1;

  // Supervision. The supervisor thread checks the processes every supervise_interval (0: no
  // thread; call SuperviseOnce). A process that died is started again after a backoff that
  // doubles from restart_backoff up to restart_backoff_max, and is reset once a process ran for
  // restart_backoff_max.
  std::chrono::milliseconds supervise_interval{200};
  std::chrono::milliseconds restart_backoff{100};
  std::chrono::milliseconds restart_backoff_max{10'000};
  // Stopping a process: SIGTERM, this long to exit, then SIGKILL.
  std::chrono::milliseconds stop_grace{10'000};
  // How long a consumer gets to finish, commit and exit in DrainPod before SIGKILL.
  std::chrono::milliseconds drain_timeout{30'000};
  // GET /readyz in ListPods.
  std::chrono::milliseconds ready_timeout{300};
  // Backoff deadlines and the wall time of cpu_utilization. Null: SystemClock.
  const Clock* clock = nullptr;
};

// What the platform knows of one pod's processes, for `shoal up`'s display and for tests.
struct LocalPodProcesses {
  PodName name;
  uint32_t ordinal = 0;
  pid_t sidecar_pid = -1;   // -1: not running now
  pid_t consumer_pid = -1;  // -1: not running now (or no consumer)
  uint32_t sidecar_restarts = 0;
  uint32_t consumer_restarts = 0;
  bool draining = false;
  std::string last_error;  // the last start failure or unexpected exit, empty if none
};

class LocalPlatform final : public Platform {
 public:
  // Creates the state directory if needed, loads or generates the admin token, adopts the pods
  // that run, starts again the missing processes of pods below DesiredPods(), finishes a removal
  // interrupted by a crash, and starts the supervisor. Errors: a binary that cannot be found, a
  // state directory that cannot be written, a bad ip_prefix.
  static Result<std::unique_ptr<LocalPlatform>> Open(LocalPlatformOptions options);

  // Stops the supervisor only: the pods keep running, for a later Open to adopt.
  ~LocalPlatform() override;
  LocalPlatform(const LocalPlatform&) = delete;
  LocalPlatform& operator=(const LocalPlatform&) = delete;

  // Platform.
  Status SetDesiredPods(uint32_t n) override;
  uint32_t DesiredPods() const override;
  Result<std::vector<PodInfo>> ListPods() override;
  Status DrainPod(const PodName& pod) override;
  // Local pods have no template to change (none is ever outdated): FailedPrecondition.
  Status RestartPod(const PodInfo& pod) override;
  Status SaveState(const std::string& json) override;
  Result<std::string> LoadState() override;
  std::string AdminToken() const override;

  // Stops every pod (consumers first, so that they commit what they recorded while their
  // sidecars still answer), keeping their data and DesiredPods for the next Open. Afterwards
  // SetDesiredPods and DrainPod answer FailedPrecondition.
  Status Shutdown();

  // One pass of the supervisor: notices exited processes and starts those whose backoff passed.
  void SuperviseOnce();
  // The pods' processes, by ordinal.
  std::vector<LocalPodProcesses> Processes() const;
  // Kills the pod's sidecar with SIGKILL, as a crash would (`shoal up --chaos`). The supervisor
  // starts it again as it does any process that died, no sooner than `restart_after` from now
  // (0: after its usual backoff): a pod down that long, as one whose node is lost. Returns the
  // pid killed. NotFound for a pod the platform does not run (or is removing); Unavailable when
  // its sidecar is not running at the moment; FailedPrecondition after Shutdown.
  Result<pid_t> KillSidecar(const PodName& pod,
                            std::chrono::milliseconds restart_after = std::chrono::milliseconds(0));

  // Where things are, for `shoal up` and tests.
  std::string PodDir(const PodName& pod) const;
  std::string SeenFile(const PodName& pod) const;
  std::string PodIp(uint32_t ordinal) const;
  const LocalPlatformOptions& options() const { return opts_; }

 private:
  enum class Role { kSidecar, kConsumer };
  struct Proc {
    pid_t pid = -1;
    bool wanted = false;  // should run; false once stopped on purpose
    uint32_t restarts = 0;
    bool started_once = false;
    std::chrono::milliseconds backoff{0};
    std::chrono::steady_clock::time_point not_before{};  // earliest (re)start
    std::chrono::steady_clock::time_point started_at{};
    // Not started again before this (KillSidecar's restart_after).
    std::chrono::steady_clock::time_point held_until{};
  };
  // A consumer's CPU time at the start of the current measuring interval, and the utilisation
  // of the last complete interval (intervals of at least kCpuInterval: /proc counts in 10 ms
  // ticks, and ListPods is called by more than one reader, sometimes milliseconds apart).
  struct CpuSample {
    pid_t pid = -1;
    std::chrono::nanoseconds cpu{0};
    std::chrono::steady_clock::time_point at{};
    std::optional<double> utilization;
  };
  static constexpr std::chrono::seconds kCpuInterval{2};
  struct Pod {
    uint32_t ordinal = 0;
    PodName name;
    std::string ip, dir;
    Proc sidecar, consumer;
    bool draining = false;
    bool removing = false;
    std::string last_error;
    CpuSample cpu;
  };

  explicit LocalPlatform(LocalPlatformOptions options);
  Status Init();
  Pod MakePod(uint32_t ordinal) const;
  std::vector<std::string> Argv(const Pod& pod, Role role) const;
  std::string PidFile(const Pod& pod, Role role) const;
  bool Matches(const Pod& pod, Role role, pid_t pid) const;
  // Spawns the process now; records the pid. Requires mu_.
  Status StartProc(Pod& pod, Role role);
  void SuperviseLocked(std::chrono::steady_clock::time_point now);
  Status RemovePod(uint32_t ordinal);
  Status CheckBindable(const std::string& ip) const;
  void SupervisorLoop();

  const LocalPlatformOptions opts_;
  const Clock& clock_;
  std::string token_;
  std::string state_dir_;  // absolute

  // Serializes the changing operations (SetDesiredPods, DrainPod, Shutdown), which wait for
  // processes with mu_ released.
  std::mutex op_mu_;
  mutable std::mutex mu_;
  uint32_t desired_ = 0;          // guarded by mu_
  std::map<uint32_t, Pod> pods_;  // guarded by mu_; by ordinal
  bool shut_down_ = false;        // guarded by mu_

  std::mutex supervisor_mu_;
  std::condition_variable supervisor_cv_;
  bool supervisor_stop_ = false;  // guarded by supervisor_mu_
  std::thread supervisor_;
  int lock_fd_ = -1;  // flock'd for this platform's life: one coordinator per state directory
};

}  // namespace shoal::control
