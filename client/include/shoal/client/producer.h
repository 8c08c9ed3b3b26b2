// Producer: what an application sends events with when it wants them batched and retried the
// way Kafka's producer does (linger.ms, batch.size, idempotence), per key in order:
//
//   shoal::client::Producer producer(std::getenv("SHOAL_URL"), "orders");
//   auto done = producer.Send("user_7", R"({"order":42})");   // returns at once
//   producer.Flush();                                        // or done.get() for one event
//   if (!done.get().ok()) { /* the error that ended its retries */ }
//
// Send queues the event; a sender takes a batch once `batch_events` are waiting or the oldest
// has waited `linger` (events left over after a take wait a linger of their own), numbers its
// events (producer id and sequence, so that a retry is stored once: docs/data-plane.md,
// idempotent producers) and sends it until it is answered or `retry_for` runs out on retryable
// errors (503 and no answer; 507, a full volume).
//
// Up to `max_in_flight` batches are in flight at once (Kafka's
// max.in.flight.requests.per.connection), one per sender ("slot"). Each key's order holds
// through retries because a key is in at most one batch in flight: a batch takes the waiting
// events in the order sent, passing over (and leaving in place, in order) those whose key is in
// a batch in flight, so a hot key has one batch in flight while other keys use the other slots
// (a take looks at most 4 x batch_events events deep: other keys queued behind more of a hot
// key's than that wait for its batch). Batches stay as large as one sender would make them: a
// second slot is used only when a batch is ready while the first is still out.
//
// Sequence numbers: each slot numbers its events under a producer id of its own (a random
// `cpp-...` id, then `.0`, `.1`, ... with more than one slot) and has one batch out at a time, so
// a retried batch is never older, for its id, than the batches after it. The sidecar remembers
// the last 256 sequence numbers of a producer id per partition, so batch_events is at most 256:
// a batch stored whose answer was lost is then answered `duplicate` when sent again, whatever
// its events' partitions. A refusal `sequence_unknown` (the sidecar cannot decide: a restart that
// lost its producer state) renumbers those events and sends them again: they may then be stored
// twice. With a stable `producer_id` (a process that resends what it sent before it restarted,
// to have it stored once), events are numbered in Send order, 1, 2, 3, ...: that takes one batch
// in flight, and max_in_flight is then 1.
//
// Thread-safe. A callback runs on a sender thread (in Send itself when the producer is closing)
// and must neither throw nor call into the producer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "shoal/common/status.h"
#include "shoal/common/wire.h"

namespace shoal::client {

struct ProducerOptions {
  size_t batch_events = 256;                   // events per request at most (1..256)
  std::chrono::microseconds linger{2000};      // how long a partial batch waits for more
  std::chrono::milliseconds retry_for{30000};  // retries of one batch, then its events fail
  size_t max_buffered = 100000;                // events waiting at most; Send blocks past it
  std::string producer_id;                     // empty: a random one; stable across restarts
                                               // for a process that resends what it sent (then
                                               // one batch in flight)
  std::chrono::milliseconds timeout{30000};    // one request
  TlsClientFiles tls;                          // a topic whose pods require TLS
  size_t max_in_flight = 4;                    // batches in flight at once (1..64; 1 with a
                                               // stable producer_id)
  wire::Format format = wire::Format::kJson;   // kBinary: binary batches (docs/data-plane.md)
  // Outside the pods: each batch holds the events of one pod's partitions and goes straight to
  // that pod, by the map the sidecar at base_url shows (GET /v1/topics/{topic}, its partitions
  // and "peers"), read by a thread of its own at once and then every route_refresh. A pod that
  // does not take a batch (gone, unreachable from here, or answering an error that is not about
  // the events) has it sent through base_url (which forwards it) as without routing, and the
  // map is read again; one that did not answer within 5 s is left out of the routes for 30 s
  // (its ranges go through base_url). With a stable producer_id a batch stops at the
  // first event of another pod, keeping the numbering in Send order. Inside a pod, its own
  // sidecar is the right target: leave it off.
  bool route_by_map = false;
  std::chrono::milliseconds route_refresh{1000};
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
  // The same, with `done` called instead (once, without a future's cost; Kafka's send with a
  // callback; see above for where it runs).
  using Callback = std::function<void(const Result<wire::ProduceResult>&)>;
  void Send(std::string key, std::string value_json, Callback done);
  // Waits until every event sent so far is acknowledged or failed.
  void Flush();

  const std::string& producer_id() const { return id_; }
  // The producer id slot `slot` numbers its events under.
  std::string SlotId(size_t slot) const;
  uint64_t requests() const;  // produce requests sent, retries included
  uint64_t retries() const;
  size_t peak_in_flight() const;  // the most batches that were in flight at once
  // Events a batch passed over because their key was in a batch in flight (each time).
  uint64_t passed_over() const;
  // Events sent straight to their owner by route_by_map (and taken there), and the hash ranges
  // the producer routes now (0 before the map was read).
  uint64_t routed() const;
  size_t routed_ranges() const;

 private:
  struct Pending {
    OutgoingEvent event;
    uint64_t key_hash = 0;         // KeyHash(event.key), with several slots or route_by_map
    ShoalClient* owner = nullptr;  // route_by_map: the pod its batch goes to (nullptr: base_url)
    std::optional<std::promise<Result<wire::ProduceResult>>> done;  // Send without a callback
    Callback callback;
    void Finish(const Result<wire::ProduceResult>& r) {
      if (callback) {
        callback(r);
      } else if (done) {
        done->set_value(r);
      }
    }
  };
  struct Slot {
    std::string id;  // the producer id its events carry
    uint64_t next_seq = 1;
    std::thread thread;
  };
  void Queue(Pending p);
  void Run(size_t slot);
  // Takes the next batch off pending_ (mu_ held): up to batch_events of the waiting events in
  // order, passing over those whose key is in a batch in flight; their key hashes go in
  // keys_out_ (with more than one slot).
  std::vector<Pending> TakeBatch();
  // How deep a take looks into pending_ for events whose key is not in flight.
  size_t TakeWindow() const { return 4 * opts_.batch_events; }
  void SendBatch(Slot& slot, std::vector<Pending>& batch);
  // Sends `events` to `client` until answered or `deadline` on retryable errors (renumbering
  // what the sidecar could not decide); the results in order, or the error that ended it.
  Result<std::vector<wire::ProduceResult>> SendEvents(
      ShoalClient& client, std::vector<OutgoingEvent>& events, Slot& slot,
      std::chrono::steady_clock::time_point deadline);
  // route_by_map. The routes: hash ranges of the active partitions and their owner's client.
  struct RouteEntry {
    uint64_t lo = 0, hi = 0;  // a hash range [lo, hi)
    ShoalClient* owner = nullptr;
  };
  struct Routes {
    std::vector<RouteEntry> entries;  // by lo
    std::chrono::steady_clock::time_point read_at;
    ShoalClient* OwnerOf(uint64_t key_hash) const;  // by KeyHash; nullptr: not known
  };
  // The route thread: reads the map at once, then every route_refresh and when a pod was shunned.
  void RouteLoop();
  std::shared_ptr<Routes> ReadRoutes();  // nullptr: not readable now
  std::shared_ptr<const Routes> CurrentRoutes() const;
  ShoalClient* OwnerClient(const std::string& data_address);
  // A pod did not take a batch sent to it: the map read again at once, and `shun` (a pod that
  // did not answer within kDirectTimeout) left out of the routes for kShunFor.
  void Reroute(ShoalClient* shun);
  static constexpr std::chrono::seconds kShunFor{30};
  static constexpr std::chrono::milliseconds kDirectTimeout{5000};

  const ProducerOptions opts_;
  const std::string id_;
  const std::string base_url_, topic_;
  ShoalClient client_;
  mutable std::mutex mu_;
  std::condition_variable work_;  // a batch may be ready: an event came, one went out, closing
  std::condition_variable room_;  // buffered or in flight went down (a blocked Send, Flush)
  size_t waiting_ = 0;            // threads waiting on room_
  std::deque<Pending> pending_;
  std::chrono::steady_clock::time_point oldest_;  // when pending_'s first event was queued
  std::unordered_set<uint64_t> keys_out_;         // hashes of the keys in batches in flight
  bool stalled_ = false;     // every waiting event a take looked at has its key in flight
  std::vector<Slot> slots_;  // sized once
  size_t in_flight_ = 0;
  size_t peak_in_flight_ = 0;
  bool closed_ = false;
  uint64_t requests_ = 0, retries_ = 0, passed_over_ = 0, routed_ = 0;

  mutable std::mutex route_mu_;           // taken alone or inside mu_, never the other way round
  std::shared_ptr<const Routes> routes_;  // guarded by route_mu_
  std::map<std::string, std::unique_ptr<ShoalClient>> owners_;  // by address; route_mu_
  std::condition_variable route_cv_;
  std::map<ShoalClient*, std::chrono::steady_clock::time_point> shunned_;  // until; route_mu_
  bool read_now_ = false, route_stop_ = false;                             // route_mu_
  std::thread route_thread_;
};

}  // namespace shoal::client
