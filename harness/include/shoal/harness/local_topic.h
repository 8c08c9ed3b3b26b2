// LocalTopic: one elastic topic on this machine, run in this process the way `shoal up` runs it:
// the operator's control loop (on a thread of its own) on the local platform, whose pods are
// sidecar processes on loopback addresses with a `shoal consume` process beside each one. For
// programs that drive a topic and watch it (benchmarks, `shoal up`), without the live view and
// the report of `shoal up`.
//
// Lifecycle: Start returns once the loop installed the topic's first map (the topic takes
// events). Stop, or the destructor, stops the loop and then shuts the pods down (consumers first,
// so that they commit what they recorded); the state directory stays. Accessors are thread-safe
// (the loop's and the platform's own locking). Owned by its caller; not copyable.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "shoal/client/admin_client.h"
#include "shoal/common/status.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/control_loop.h"
#include "shoal/control/local_platform.h"
#include "shoal/control/metrics_observer.h"

namespace shoal::harness {

// The local platform's options that follow from a topic's spec: topic, state directory, the
// sidecars' fsync and retention, and `consumer_binary` (the `shoal` CLI) as the pods' consumer.
control::LocalPlatformOptions LocalPlatformOptionsFor(const TopicSpec& spec, std::string state_dir,
                                                      std::string consumer_binary);

class LocalTopic {
 public:
  struct Options {
    TopicSpec spec;
    control::LocalPlatformOptions platform;  // LocalPlatformOptionsFor(spec, ...) and more
    control::ControlLoopOptions loop;
    std::chrono::seconds ready_timeout{60};  // for the first map
  };

  static Result<std::unique_ptr<LocalTopic>> Start(Options options);
  ~LocalTopic();
  LocalTopic(const LocalTopic&) = delete;
  LocalTopic& operator=(const LocalTopic&) = delete;

  // Stops the loop, then the pods. Idempotent; returns the platform's shutdown status.
  Status Stop();

  control::ControlLoop& loop() { return *loop_; }
  control::LocalPlatform& platform() { return *platform_; }
  // Pod 0's data plane, http://<ip>:<port>: it forwards events to their partitions' owners.
  std::string data_url() const;
  // Events the pods' consumers recorded so far (lines of state_dir/seen/*.jsonl).
  uint64_t SeenEvents() const;

 private:
  LocalTopic() = default;

  // Declared in construction order: the loop uses the platform, the observer and the client.
  std::unique_ptr<control::LocalPlatform> platform_;
  std::unique_ptr<control::MetricsObserver> observer_;
  std::unique_ptr<client::AdminClient> admin_;
  std::unique_ptr<control::ControlLoop> loop_;
  std::atomic<bool> stop_loop_{false};
  std::thread loop_thread_;
  bool stopped_ = false;
};

}  // namespace shoal::harness
