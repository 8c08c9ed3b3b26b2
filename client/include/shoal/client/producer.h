// Producer: what an application sends events with when it wants them batched and retried the
// way Kafka's producer does (linger.ms, batch.size, idempotence), per key in order:
//
//   shoal::client::Producer producer(std::getenv("SHOAL_URL"), "orders");
//   auto done = producer.Send("user_7", R"({"order":42})");   // returns at once
//   producer.Flush();                                        // or done.get() for one event
//   if (!done.get().ok()) { /* the error that ended its retries */ }
//
// Send queues the event; a sender thread takes a batch once `batch_events` are waiting or the
// oldest has waited `linger`, numbers its events (producer id and sequence, so that a retry is
// stored once: docs/data-plane.md, idempotent producers) and sends it until it is answered or
// `retry_for` runs out on retryable errors (503 and no answer; 507, a full volume). One batch is
// in flight at a time: a retried batch is never overtaken by a later one, which keeps each key's
// order through retries. A sequence_unknown refusal renumbers the events the sidecar could not
// decide and sends them again (they may then be stored twice). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "shoal/client/shoal_client.h"
#include "shoal/common/status.h"
#include "shoal/common/wire.h"

namespace shoal::client {

struct ProducerOptions {
  size_t batch_events = 500;                   // events per request at most
  std::chrono::microseconds linger{2000};      // how long a partial batch waits for more
  std::chrono::milliseconds retry_for{30000};  // retries of one batch, then its events fail
  size_t max_buffered = 100000;                // events waiting at most; Send blocks past it
  std::string producer_id;                     // empty: a random one; stable across restarts
                                               // for a process that resends what it sent
  std::chrono::milliseconds timeout{30000};    // one request
  TlsClientFiles tls;                          // a topic whose pods require TLS
};

class Producer {
 public:
  Producer(const std::string& base_url, std::string topic, ProducerOptions options = {});
  // Flush, then stop.
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Queues one event (`value_json`: any JSON text); its result once acknowledged, or the error
  // that ended its retries. Blocks while max_buffered events wait.
  std::shared_future<Result<wire::ProduceResult>> Send(std::string key,
                                                       std::string value_json = "null");
  // Waits until every event sent so far is acknowledged or failed.
  void Flush();

  const std::string& producer_id() const { return id_; }
  uint64_t requests() const;  // produce requests sent, retries included
  uint64_t retries() const;

 private:
  struct Pending {
    OutgoingEvent event;
    std::promise<Result<wire::ProduceResult>> done;
  };
  void Run();
  void SendBatch(std::vector<Pending>& batch);

  const ProducerOptions opts_;
  const std::string id_;
  ShoalClient client_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::chrono::steady_clock::time_point oldest_;  // when the oldest pending event was queued
  uint64_t next_seq_ = 1;
  size_t in_flight_ = 0;
  bool closed_ = false;
  uint64_t requests_ = 0, retries_ = 0;
  std::thread thread_;
};

}  // namespace shoal::client
