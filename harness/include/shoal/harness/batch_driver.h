// What the throughput benchmarks share (`shoal bench ingest`, shoal-bench-peers): the events they
// send and the loop that sends them.
//
// Bench events. Event n of a run has the key user_<(n * 2654435761) mod keys> and a JSON value of
// exactly `value_bytes` bytes, {"ts":"<20 digits>","n":<n>,"pad":"xxx..."}. The "ts" field is a
// fixed-width send-time stamp (steady clock, ns), so that a request built once, before the clock
// starts, can be stamped in place just before it is sent (StampAt) and a consumer can measure
// end-to-end latency (ReadStamp). Requests are built before the clock starts because the load
// generator shares the machine with the server it measures: it must spend as little CPU per
// event as it can.
//
// DriveBatches: `connections` threads, each with one batch in flight at a time, sending through
// a caller-given function. Without a rate it sends as fast as the answers come (closed loop);
// with one it sends on a fixed schedule (open loop), and each batch's latency is measured from
// its scheduled send time, so that a stalled server cannot hide its stall (no coordinated
// omission).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/raw_http.h"
#include "shoal/common/status.h"

namespace shoal::harness {

std::string BenchKey(uint64_t n, uint64_t keys);
std::string BenchValue(uint64_t n, int value_bytes);

// The steady clock in ns: the clock of stamps and schedules (one process stamps and reads).
uint64_t StampNow();
// Offsets of the stamps' first digits in an encoded request holding bench values.
std::vector<size_t> FindStamps(std::string_view encoded);
// Writes `ns` into every stamp of `encoded` (offsets from FindStamps).
void StampAt(std::string& encoded, const std::vector<size_t>& stamps, uint64_t ns);
// The stamp of a bench value (or of any text holding one), or 0 when there is none.
uint64_t ReadStamp(std::string_view value);

// Percentile of a sorted vector (nearest rank), 0 for an empty one.
double Percentile(const std::vector<double>& sorted, double p);

// Sends a produce body of `events` events on `conn` to `path`; OK when the answer is 200 with one
// result per event. `answer` is scratch (kept to reuse its buffer).
Status PostProduceBody(RawHttpConnection& conn, const std::string& path, std::string_view body,
                       size_t events, std::string* answer);

struct DriveOptions {
  int connections = 4;
  int batch = 1000;        // events per batch (counts and the schedule)
  double warmup_s = 0;     // batches started before this are sent but not counted
  double duration_s = 10;  // measured seconds after the warm-up
  double rate = 0;         // offered events/s in total; 0: closed loop
  // Open loop: stop sending once the schedule is this far behind the clock (a server slower
  // than the offered rate); the batches not sent show in DriveReport::unsent_batches. 0: never
  // stop, whatever the run's length.
  double max_behind_s = 0;
  // The rate's multiplier over time (ProfileFactor of workload.h: steady, surge, sawtooth).
  std::string profile = "steady";
};

struct DriveReport {
  uint64_t measured_events = 0;  // acknowledged in the measured window
  uint64_t total_events = 0;     // acknowledged over the whole run, warm-up included
  uint64_t failed_batches = 0;
  uint64_t unsent_batches = 0;       // open loop, max_behind_s: scheduled but never sent
  std::string first_error;           // of the first failed batch
  std::vector<double> latencies_ms;  // per measured batch, sorted
  double elapsed_s = 0;              // from the end of the warm-up to the last answer
  double events_per_sec(double duration_s) const {
    return duration_s > 0 ? static_cast<double>(measured_events) / duration_s : 0;
  }
};

// Sends batch i of connection `conn` (called on that connection's thread, i = 0, 1, ...):
// returns once every event of it is acknowledged. `scheduled_ns` (StampNow's clock) is its
// scheduled send time under a rate, else now.
using SendBatchFn = std::function<Status(int conn, uint64_t i, uint64_t scheduled_ns)>;

// Runs the connections until the measured window ends and returns what they saw.
// `on_measure_start` (optional) runs once, on the thread that starts the first measured batch.
DriveReport DriveBatches(const DriveOptions& options, const SendBatchFn& send,
                         const std::function<void()>& on_measure_start = nullptr);

}  // namespace shoal::harness
