// The elastic case of shoal-bench-peers, which the peers cannot run: a flash sale (the load
// generator's "surge" profile: the base rate, ten times it for a window of the run, the base rate
// again; SurgeWindow) on
//   - a Shoal topic from a PartitionedTopic spec (examples/flash-sale.yaml: 2 partitions and one
//     pod at rest) run by the operator's control loop on the local platform (harness::LocalTopic),
//     produced to by the project's load generator, as `shoal up` does; and
//   - Redis Streams with a fixed number of streams and consumers (one consumer per stream keeps
//     per-key order; more consumers than streams would not), produced to by the benchmark's
//     paced producers with the same number of producers, batch size and rate profile.
// Consumers of both spend the same CPU per event (harness::BurnCpu). The lag of both is measured
// the same way, once a second: events acknowledged to the producers minus events the consumers
// finished. After the load, each side runs until its consumers caught up (or a deadline).
//
// Each Run* starts what it measures and stops it again before returning, error or not.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::bench {

struct FlashSaleOptions {
  std::string topic_file = "examples/flash-sale.yaml";
  std::string dir;           // state of the run (created)
  std::string shoal_cli;     // the `shoal` binary the pods run as their consumer
  std::string sidecar;       // shoal-sidecar
  std::string redis_server;  // redis-server
  double rate = 800;         // events/s at 1x
  double duration_s = 45;    // of load; SurgeWindow() of it is at 10x
  int producers = 4;
  int batch = 20;
  uint64_t keys = 5000;
  int value_bytes = 100;          // of the Redis side's events (the load generator's are its own)
  int64_t consumer_cpu_us = 100;  // per event, both sides
  double consumer_cpu_request = 0.25;  // a Shoal pod's CPU request (its utilisation's denominator)
  uint32_t redis_streams = 2;
  int redis_consumers = 2;
  double drain_timeout_s = 60;  // after the load, for the consumers to catch up
  bool progress = false;        // a line every 5 s on stderr
  // Shoal's producers send each batch straight to its keys' pod, by the map (a producer outside
  // the pods; harness::LoadOptions::route_by_map); false: every batch to one pod, which forwards.
  bool route_by_map = true;
};

struct LagSample {
  double t = 0;                       // seconds since the load began
  double acked = 0;                   // events acknowledged in the second before
  double lag = 0;                     // acknowledged minus consumed
  uint32_t partitions = 0, pods = 0;  // Shoal: active partitions and pods; Redis: fixed
};

struct FlashSaleResult {
  std::string system;  // "shoal", "redis"
  uint64_t acked = 0, consumed = 0;
  double peak_lag = 0;
  double peak_lag_at_s = 0;
  // Seconds from the end of the surge until the lag was 0 again (one sample a second); -1: it
  // was not 0 again before the drain deadline.
  double recovered_s = -1;
  double produce_p99_ms = 0;
  uint32_t partitions_start = 0, partitions_max = 0, pods_start = 0, pods_max = 0;
  std::vector<LagSample> samples;
};

// When the surge begins and ends, as fractions of the run (harness::LoadOptions' defaults).
std::pair<double, double> SurgeWindow();

Result<FlashSaleResult> RunShoalFlashSale(const FlashSaleOptions& options);
Result<FlashSaleResult> RunRedisFlashSale(const FlashSaleOptions& options);

}  // namespace shoal::bench
