// Workload pieces shared by `shoal load`, `shoal torture` and tests:
//
// LoadGenerator: producer threads with idempotent producer ids and per-key counters. Each producer
// sends one batch at a time and retries it with the same (producer, seq) until it is acknowledged,
// so per-key order holds across retries (invariant 7) and duplicates are the sidecars' to drop.
// Rates follow a profile: steady, surge (1x, 10x, 1x by thirds) or sawtooth (1x..10x ramps).
//
// GroupConsumer: one consumer of a group reading from one sidecar, recording what it sees for the
// verifier, committing after recording (retried until accepted, before it takes more), and
// skipping offsets it already saw and had not committed yet when a restarted sidecar hands them
// out again. An offset handed out below an accepted commit is recorded again, so the verifier
// counts it duplicated: the broker gave out twice what the group had committed. By default it keeps
// what it saw in memory (TakeSeen); with ConsumerOptions::stream_to it is a long-running pod
// consumer instead: each batch's lines are written to that file before the batch's offsets are
// committed, so a consumer killed with kill -9 never loses the line of an event its group committed
// (it may repeat uncommitted ones). Streaming also guards against what a killed predecessor leaves
// behind: events it took and never committed lie behind the sidecar's in-memory delivery cursor,
// and since commits are cumulative, committing what follows them would commit them unseen; so a
// partition's events are taken only where the group stands (its commit, from the topic view), and
// after such a gap the consumer waits for the sidecar's redelivery (--redelivery-ms) to hand the
// gap out again.
//
// Both own their threads: Start, then Stop (joins). Thread-safe accessors.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shoal/common/status.h"
#include "shoal/common/tls.h"
#include "shoal/harness/verifier.h"

namespace shoal::harness {

struct LoadOptions {
  std::vector<std::string> targets;  // sidecar base URLs; batches rotate over them
  std::string topic = "orders";
  int producers = 4;
  int keys = 64;
  int batch = 20;
  double rate = 1000;  // events/s in total at 1x; 0: as fast as answers come
  std::string profile = "steady";
  double duration_s = 0;  // the profile's length (surge and sawtooth scale to it); 0: no end
  // "surge": 10x from surge_from to surge_until, as fractions of duration_s, 1x around it (a
  // flash sale: a while at 1x, a shorter burst, and a longer return to 1x). "ramp": 1x until
  // surge_from, rising evenly to 10x at surge_until, held at 10x as long again, then 1x.
  double surge_from = 0.3, surge_until = 0.5;
  uint64_t seed = 1;
  std::string producer_prefix = "prod";
  // Skewed keys: nine in ten keys hash into two narrow hot ranges (1/128 of the hash space each),
  // the rest anywhere, so most ranges see few or no events and a lineage has empty partitions.
  bool skew = false;
  // Each batch goes to the next target in turn (as a Service spreads connections over its
  // pods), instead of staying on one until it fails. With SetTargets, the list can follow the
  // pods as they come and go.
  bool spread = false;
  // TLS to the targets (https:// URLs), for a topic whose pods require it (shoal/common/tls.h).
  TlsClientFiles tls;
  // A producer outside the pods (client::ProducerOptions::route_by_map): each batch holds keys of
  // one pod's partitions and goes straight to that pod, by the owners the first target's topic
  // view shows (its partitions and "peers"), read by a thread of its own every route_refresh.
  // The keys stay uniformly drawn: a batch's first key from all keys, the others from the keys of
  // that key's pod. A batch the pod does not take goes through the targets (which forward it)
  // and the map is read again at once; a pod that did not answer within 5 s is left out for 30 s.
  bool route_by_map = false;
  std::chrono::milliseconds route_refresh{1000};
};

// The load generator's key names: `keys` of them, "key-<i>", or with `skew` names chosen so that
// nine in ten hash into the two hot ranges. Deterministic.
std::vector<std::string> KeyNames(int keys, bool skew);

// The profile's rate multiplier at time t (seconds from the start).
double ProfileFactor(const LoadOptions& o, double t);
// The same for `profile` over a run of length d, with LoadOptions' default surge window.
double ProfileFactor(const std::string& profile, double t, double d);

class LoadGenerator {
 public:
  explicit LoadGenerator(LoadOptions options);
  ~LoadGenerator();
  LoadGenerator(const LoadGenerator&) = delete;
  LoadGenerator& operator=(const LoadGenerator&) = delete;

  void Start();
  void Stop();
  // Replaces the targets (non-empty; ignored when empty): the next batch of every producer goes
  // to the new list. Thread-safe.
  void SetTargets(std::vector<std::string> targets);
  std::vector<AckedEvent> TakeAcked();
  // Produce latencies (ms, from first send to acknowledgement) since the last call.
  std::vector<double> TakeLatenciesMs();

  uint64_t acked() const { return acked_.load(); }
  uint64_t retries() const { return retries_.load(); }
  // Events given up because the sidecar answered sequence_unknown for them (never acked).
  uint64_t abandoned() const { return abandoned_.load(); }
  // Batches a pod took straight from this generator (route_by_map).
  uint64_t routed() const { return routed_.load(); }
  std::string last_error() const;

 private:
  struct KeyOwners;  // route_by_map: the pod of each key (workload.cc)
  void Run(int index);
  // route_by_map: the owners' reader (a thread of its own: a slow first target never holds up a
  // batch), every route_refresh and at once when asked; the snapshot, after the first read.
  void ReadOwners();
  std::shared_ptr<const KeyOwners> CurrentOwners();
  void ReadOwnersNow();
  // A direct send's timeout; a pod that took this long to fail is left out for kShunFor.
  static constexpr std::chrono::milliseconds kDirectTimeout{5000};
  static constexpr std::chrono::milliseconds kShunAfter{4500};
  static constexpr std::chrono::seconds kShunFor{30};

  const LoadOptions opts_;
  const std::vector<std::string> key_names_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> acked_{0}, retries_{0}, abandoned_{0}, routed_{0};
  mutable std::mutex mu_;
  std::vector<AckedEvent> acked_events_;  // guarded by mu_
  std::vector<double> latencies_ms_;      // guarded by mu_
  std::string last_error_;                // guarded by mu_
  std::vector<std::string> targets_;      // guarded by mu_
  std::atomic<uint64_t> targets_version_{0};
  std::vector<std::thread> threads_;
  std::shared_ptr<const KeyOwners> owners_;  // guarded by mu_
  bool owners_read_ = false;                 // the first read ended; guarded by mu_
  bool read_owners_now_ = false;             // guarded by mu_
  std::condition_variable owners_cv_;
  std::thread owners_thread_;
};

struct ConsumerOptions {
  std::string target;  // the sidecar's base URL
  std::string topic = "orders";
  std::string group = "verify";
  size_t max = 500;
  int64_t wait_ms = 100;
  // Streaming: write every seen event's line (verifier.h's SeenLine) to this file and flush it
  // before committing; nothing is kept for TakeSeen. Empty: record in memory.
  std::string stream_to;
  // With stream_to: append to the file instead of truncating it. A torn last line (a previous
  // consumer killed in the middle of a write; those events were not committed) is cut off, and
  // offsets the file already holds are not written again when the sidecar hands them out again.
  bool append = false;
  // Busy work per event, in microseconds of CPU (a steady-clock busy loop), so that a consumer
  // pod uses CPU in proportion to its events.
  int64_t cpu_us_per_event = 0;
  // Service time: what a consumer mostly waits for (a database write, a downstream call), not
  // CPU. Each event waits service_us_per_event in one of `concurrency` lanes (by key: one key's
  // events stay in order, in one lane), and each batch waits service_us_per_batch once (a round
  // trip per batch); a batch takes service_us_per_batch + (events of its busiest lane) x
  // service_us_per_event before it is recorded and committed. So a consumer takes at most about
  // concurrency x 1e6 / service_us_per_event events/s, whatever the machine's CPU.
  int64_t service_us_per_event = 0;
  int64_t service_us_per_batch = 0;
  int concurrency = 1;
  // At most this many events per second (0: as fast as they come); SetRate changes it.
  double rate = 0;
  // How long Stop retries the commit of the last batch.
  std::chrono::milliseconds stop_commit_timeout{5000};
  // TLS to the target (an https:// URL), for a topic whose pods require it.
  TlsClientFiles tls;
  // Each consume carries the commit of the batch before it (commit=P:O, docs/data-plane.md)
  // instead of a POST of its own; and answers in the binary batch format.
  bool carry_commits = false;
  bool binary = false;
};

class GroupConsumer {
 public:
  explicit GroupConsumer(ConsumerOptions options);
  ~GroupConsumer();
  GroupConsumer(const GroupConsumer&) = delete;
  GroupConsumer& operator=(const GroupConsumer&) = delete;

  // Starts the consuming thread. With stream_to: opens the file first; an error if it cannot.
  Status Start();
  // Stops and joins. The batch in progress is finished: its events are recorded (with stream_to,
  // written) and its offsets committed (retried for a few seconds) before Stop returns.
  void Stop();
  void SetRate(double events_per_s) { rate_.store(events_per_s); }
  // CLOCK_MONOTONIC of the first answered consume (0 before): from then on the sidecars know
  // the group.
  uint64_t joined_ns() const { return joined_ns_.load(); }
  std::vector<SeenEvent> TakeSeen();
  uint64_t seen() const { return seen_count_.load(); }
  // Whether the last commit of what was recorded succeeded (false when Stop gave up committing
  // because the sidecar did not answer).
  bool committed_all() const { return committed_all_.load(); }
  // With stream_to: not OK once writing the file failed; the consumer then stopped by itself
  // (without committing the batch it could not write).
  Status status() const;

 private:
  void Run();
  Status OpenStream(std::map<uint32_t, uint64_t>* next);
  Status WriteLines(const std::vector<SeenEvent>& batch);

  const ConsumerOptions opts_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> seen_count_{0};
  std::atomic<bool> committed_all_{true};
  std::atomic<double> rate_{0};
  std::atomic<uint64_t> joined_ns_{0};
  mutable std::mutex mu_;
  std::vector<SeenEvent> seen_;               // guarded by mu_
  Status status_;                             // guarded by mu_
  int out_fd_ = -1;                           // with stream_to; used by the consuming thread only
  std::map<uint32_t, uint64_t> resume_next_;  // from the appended file; handed to the thread
  std::set<std::pair<uint32_t, uint64_t>> resume_recorded_;  // the same, every event's place
  std::thread thread_;
};

uint64_t MonotonicNs();
// How long a batch of events with these keys waits under ConsumerOptions' service time.
std::chrono::microseconds ServiceTime(const std::vector<std::string_view>& keys,
                                      int64_t us_per_event, int64_t us_per_batch, int concurrency);
// Spins for `us` microseconds of wall time: a consumer's simulated work per event, so that its
// CPU use grows with its events (what CPU-based scaling measures).
void BurnCpu(int64_t us);

}  // namespace shoal::harness
