// Workload pieces shared by `shoal load`, `shoal torture` and tests:
//
// LoadGenerator: producer threads with idempotent producer ids and per-key counters. Each producer
// sends one batch at a time and retries it with the same (producer, seq) until it is acknowledged,
// so per-key order holds across retries (invariant 7) and duplicates are the sidecars' to drop.
// Rates follow a profile: steady, surge (1x, 10x, 1x by thirds) or sawtooth (1x..10x ramps).
//
// GroupConsumer: one consumer of a group reading from one sidecar, recording what it sees for the
// verifier, committing after recording, and skipping offsets it already saw when a restarted
// sidecar hands them out again.
//
// Both own their threads: Start, then Stop (joins). Thread-safe accessors.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/verifier.h"

namespace shoal::client {

struct LoadOptions {
  std::vector<std::string> targets;  // sidecar base URLs; batches rotate over them
  std::string topic = "orders";
  int producers = 4;
  int keys = 64;
  int batch = 20;
  double rate = 1000;  // events/s in total at 1x; 0: as fast as answers come
  std::string profile = "steady";
  double duration_s = 0;  // the profile's length (surge and sawtooth scale to it); 0: no end
  uint64_t seed = 1;
  std::string producer_prefix = "prod";
};

// The profile's rate multiplier at time t of a run of length d.
double ProfileFactor(const std::string& profile, double t, double d);

class LoadGenerator {
 public:
  explicit LoadGenerator(LoadOptions options);
  ~LoadGenerator();
  LoadGenerator(const LoadGenerator&) = delete;
  LoadGenerator& operator=(const LoadGenerator&) = delete;

  void Start();
  void Stop();
  std::vector<AckedEvent> TakeAcked();

  uint64_t acked() const { return acked_.load(); }
  uint64_t retries() const { return retries_.load(); }
  std::string last_error() const;

 private:
  void Run(int index);

  const LoadOptions opts_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> acked_{0}, retries_{0};
  mutable std::mutex mu_;
  std::vector<AckedEvent> acked_events_;  // guarded by mu_
  std::string last_error_;                // guarded by mu_
  std::vector<std::thread> threads_;
};

struct ConsumerOptions {
  std::string target;  // the sidecar's base URL
  std::string topic = "orders";
  std::string group = "verify";
  size_t max = 500;
  int64_t wait_ms = 100;
};

class GroupConsumer {
 public:
  explicit GroupConsumer(ConsumerOptions options);
  ~GroupConsumer();
  GroupConsumer(const GroupConsumer&) = delete;
  GroupConsumer& operator=(const GroupConsumer&) = delete;

  void Start();
  void Stop();
  std::vector<SeenEvent> TakeSeen();
  uint64_t seen() const { return seen_count_.load(); }

 private:
  void Run();

  const ConsumerOptions opts_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> seen_count_{0};
  std::mutex mu_;
  std::vector<SeenEvent> seen_;  // guarded by mu_
  std::thread thread_;
};

uint64_t MonotonicNs();

}  // namespace shoal::client
