// Consumer: a group's loop of fetch, process and commit against one sidecar (in a pod, its own at
// $SHOAL_URL), pipelined:
//
//   shoal::client::Consumer consumer(std::getenv("SHOAL_URL"), "orders", "billing");
//   Status done = consumer.Run([](const std::vector<shoal::wire::ConsumedEvent>& events) {
//     for (const auto& e : events) { /* per key in the order acknowledged */ }
//     return shoal::Status::Ok();   // an error stops the loop; this batch is handed out again
//   });                             // until Stop() (from any thread)
//
// Each batch the handler took is committed by a later request: carried by the next fetch
// (`commit=P:O,...`, docs/data-plane.md) when one is about to go, or POSTed at once when a fetch
// is already out (a partition hands the group nothing more until its batch is committed, so its
// commit is not left waiting behind a long poll). With `prefetch`, the next fetch goes out while
// the handler runs: the sidecar hands out one batch per group and partition at a time, and a
// successor's events only once its ancestors' events of the same hash are committed, so the
// fetched batch holds other partitions' events and each key's order holds; batches alternate
// between the partitions instead of each waiting for the other's processing.
//
// Delivery is at least once: a batch whose handler failed (or threw), or whose commit did not
// reach the sidecar, is handed out again (after the sidecar's --redelivery-ms). A stop lets the
// handler finish the batch in hand and the one fetched, and commits both; it waits for a fetch
// that is out (wait_ms, or `timeout` when the sidecar does not answer) and for the final commit
// (up to retry_for). Retryable errors (503, no answer) are retried for `retry_for` at a time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "shoal/common/status.h"
#include "shoal/common/wire.h"

namespace shoal::client {

struct ConsumerOptions {
  size_t max_events = 500;                     // events per fetch at most
  int64_t wait_ms = 1000;                      // how long a fetch waits for events
  bool prefetch = true;                        // fetch the next batch while the handler runs
  std::chrono::milliseconds retry_for{60000};  // retryable errors, then Run returns the error
  std::chrono::milliseconds timeout{70000};    // one request (at least wait_ms + 5 s)
  wire::Format format = wire::Format::kJson;   // kBinary: binary answers (docs/data-plane.md)
  TlsClientFiles tls;                          // a topic whose pods require TLS
};

class Consumer {
 public:
  using Handler = std::function<Status(const std::vector<wire::ConsumedEvent>&)>;

  Consumer(const std::string& base_url, std::string topic, std::string group,
           ConsumerOptions options = {});
  // Stops a Run in progress and waits for it to return.
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Hands each non-empty batch to `handler` until Stop(); Ok after a stop, else the handler's
  // error (an exception it threw, as kInternal) or the error that outlasted retry_for. One Run
  // at a time (a second one at once is refused kFailedPrecondition); a Run after an error
  // starts again, a Run after Stop() returns at once.
  Status Run(const Handler& handler);
  // Ends Run after the batches in hand, for good (from any thread, also before Run starts).
  void Stop();

  uint64_t fetches() const;       // fetch requests started, retries included
  uint64_t commit_posts() const;  // commits sent as requests of their own
  uint64_t carried() const;       // fetches that carried a commit

 private:
  using Offsets = std::map<uint32_t, uint64_t>;  // partition -> next offset to read
  void FetchLoop();
  // POSTs `offsets` (retrying retryable errors for retry_for).
  Status CommitNow(const Offsets& offsets);
  static std::vector<wire::CommitOffset> ToCommit(const Offsets& offsets);

  const ConsumerOptions opts_;
  const std::string group_;
  ShoalClient client_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::vector<wire::ConsumedEvent>> ready_;  // fetched, not yet handed over
  Offsets to_commit_;                                      // handled, not yet committed
  bool fetching_ = false;  // a fetch is out, or the fetcher backs off after a failed one
  bool running_ = false;   // a Run is in progress
  bool stopped_ = false;   // Stop() was called
  bool wanted_ = false;  // without prefetch: the handler waits for a batch
  bool stop_ = false;
  bool fetcher_done_ = false;
  Status fetch_error_;
  uint64_t fetches_ = 0, commit_posts_ = 0, carried_ = 0;
};

}  // namespace shoal::client
