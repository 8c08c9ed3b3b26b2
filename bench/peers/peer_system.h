// The systems shoal-bench-peers measures side by side: Shoal (one shoal-sidecar), Redis Streams
// (redis-server) and NATS JetStream (nats-server -js). Each is a PeerSystem: it starts its own
// server on loopback, on free ports, with its data in a directory of the run, and with comparable
// durability (Shoal --fsync interval; Redis appendonly with appendfsync everysec; JetStream file
// storage); it hands out producer and consumer connections; and it stops the server again.
//
// The benchmark gives every system the same events (bench events of batch_driver.h: keys user_N,
// ~100-byte JSON values carrying a send-time stamp), the same number of connections and one
// batch in flight per connection. A partition of the topic is a stream in Redis (bench:<p>) and
// a subject in JetStream (ev.<p>.<key>); the benchmark routes keys to partitions with Shoal's
// partition map (crc32 of the key over equal hash ranges), so every system sees the same spread.
//
// Ownership and threads: a PeerSystem is owned by the benchmark's main thread; its destructor
// stops the server (so every exit path does). Producers and consumers are each used by one
// thread at a time and must be destroyed before their system.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::bench {

struct BenchEvent {
  std::string key;
  std::string value;  // JSON text with a stamp (BenchValue)
  uint32_t partition = 0;
};
using BenchBatch = std::vector<BenchEvent>;

struct PeerConfig {
  std::string dir;  // the server's data and log; created by Start
  uint32_t partitions = 4;
  // Consumers of the benchmark's group that will be created. Redis consumer c reads the streams
  // p with p % consumers == c when there are no more consumers than streams (each stream then
  // has one reader, which keeps per-key order), else every stream. Shoal and JetStream hand a
  // group's events to whichever consumer asks.
  int consumers = 1;
};

// One producer connection, with its batches encoded once, before the clock starts.
class PeerProducer {
 public:
  virtual ~PeerProducer() = default;
  // Sends batch i (modulo the number of batches) and returns once the server acknowledged every
  // event of it. With stamp_ns != 0 the events' stamps are set to it first.
  virtual Status Send(uint64_t i, uint64_t stamp_ns) = 0;
};

// One consumer connection of the benchmark's consumer group.
class PeerConsumer {
 public:
  virtual ~PeerConsumer() = default;
  // Reads up to `max` events, waiting up to wait_ms for the first, acknowledges them (Shoal's
  // commit, XACK, JetStream's ack) and appends their stamps to *stamps. Returns how many it read
  // (0 when none came within wait_ms).
  virtual Result<size_t> Poll(size_t max, int wait_ms, std::vector<uint64_t>* stamps) = 0;
};

class PeerSystem {
 public:
  virtual ~PeerSystem() = default;
  virtual std::string name() const = 0;  // "shoal", "redis", "jetstream"
  // Starts the server and creates the topic: partitions, streams, the consumer group.
  virtual Status Start(const PeerConfig& config) = 0;
  // Stops the server (SIGTERM, then SIGKILL). Idempotent.
  virtual void Stop() = 0;
  virtual Result<std::unique_ptr<PeerProducer>> NewProducer(
      const std::vector<BenchBatch>& batches) = 0;
  virtual Result<std::unique_ptr<PeerConsumer>> NewConsumer(int index) = 0;
  // The server's version and durability setting, for the report.
  virtual std::string Describe() const = 0;
};

// The batches of a run, built before the clock starts: `per_connection` batches of `batch`
// events for each connection, events numbered across all of them (BenchKey, BenchValue), each
// routed to its partition by Shoal's partition map over `partitions` equal ranges.
Result<std::vector<std::vector<BenchBatch>>> BuildBatches(int connections, int per_connection,
                                                          int batch, uint64_t keys, int value_bytes,
                                                          uint32_t partitions);

// How Shoal runs in a run of the benchmark; its name in the results says which: "shoal"
// followed by any of "-binary", "-tls", "-rf3", in that order, and "-routed" after "-rf3".
struct ShoalVariant {
  // -tls: the sidecars TLS only (to each other as well) and their clients with certificates of
  // a CA made for the run.
  bool tls = false;
  // -binary: produce and consume in the binary batch format (docs/data-plane.md), values as
  // opaque bytes; otherwise JSON.
  bool binary = false;
  // -rf3: three pods, every partition with three copies and acks quorum (a produce answered
  // once two copies hold it); producer and consumer connection i talks to pod i % 3, which
  // forwards the events of the other pods' partitions, as an application outside the pods.
  bool rf3 = false;
  // -routed (with -rf3): each producer connection's events regrouped by the pod that leads their
  // partition, in batches of the same size, each sent straight to that pod (as the client's
  // producer with route_by_map does): no forwarding.
  bool routed = false;
  std::string Name() const {
    return std::string("shoal") + (binary ? "-binary" : "") + (tls ? "-tls" : "") +
           (rf3 ? "-rf3" : "") + (rf3 && routed ? "-routed" : "");
  }
};
// The variant a system name stands for, or nullopt when it is none.
std::optional<ShoalVariant> ShoalVariantOf(const std::string& name);
// `sidecar`: the shoal-sidecar binary.
std::unique_ptr<PeerSystem> NewShoalSystem(std::string sidecar, ShoalVariant variant = {});
// `server`: the redis-server / nats-server binary (FindServerBinary).
std::unique_ptr<PeerSystem> NewRedisSystem(std::string server);
std::unique_ptr<PeerSystem> NewJetStreamSystem(std::string server);

}  // namespace shoal::bench
