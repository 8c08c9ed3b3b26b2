// DataFrontend: the data plane of docs/data-plane.md over HTTP: produce, consume (with long-poll),
// commit, the topic view, and the probes. Requests are handled on cpprestsdk's thread pool; a
// consume that finds nothing waits as a parked request, answered by the poller thread when data
// arrives or its wait_ms runs out, so a waiting consumer holds no thread.
//
// Lifecycle: construct, Open (listens), Close (stops listening, answers parked requests). Thread-
// safe. Owned by main; the Topic and the probe must outlive it.
#pragma once

#include <cpprest/http_msg.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "broker/sidecar_probe.h"
#include "broker/topic.h"
#include "http/access_policy.h"
#include "http/guarded_listener.h"
#include "http/peer_client.h"
#include "http/worker_pool.h"
#include "shoal/common/wire.h"

namespace shoal::http {

struct DataFrontendOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8080;
  size_t max_body_bytes = 8 << 20;
  // A request body must arrive whole within this long of its headers.
  int64_t body_timeout_ms = 10000;
  wire::Limits limits;
  size_t max_consume_events = 10000;
  int64_t max_wait_ms = 60000;
  // Threads that run consumes and commits (WorkerPool: they may wait on a peer).
  size_t workers = 16;
  // The listener's limits (its body limit and timeout are the two above).
  ListenerLimits http;
  // Answers held for clients that have not taken them; a consume is refused (503) while it is
  // spent. Null: not counted.
  ByteBudget* answers = nullptr;
  // Request bodies being read and handled (GuardedListener). Null: not counted.
  ByteBudget* requests = nullptr;
  // TLS for clients that start a handshake (GuardedListener). With a client CA, the port is
  // TLS only: every caller shows a certificate of that CA (403 tls_required otherwise).
  TlsFiles tls;
  // The plain port of the pod's own containers, bound to the pod's loopback (local_host), where
  // TLS is required on `port`; -1: none, 0: the system picks one (local_port()). Callers there
  // are not named and may do anything.
  int local_port = -1;
  std::string local_host = "127.0.0.1";
  // The name the topic's own pods carry in their certificates (shoal/common/tls.h PeerName): a
  // caller of that name may do anything, and only such a caller's X-Shoal-Forwarded is honoured
  // on a TLS-only port.
  std::string peer_name;
  // Who may do what (by the TLS client's name). Set: every caller over TLS other than a peer is
  // held to its grant, and producer ids are bound to the caller's name. Null: no authorization
  // (a standalone sidecar, `shoal up`).
  const AccessPolicy* access = nullptr;
};

class DataFrontend {
 public:
  // `peers` forwards events of keys other sidecars own; null: such events are refused.
  DataFrontend(DataFrontendOptions options, broker::Topic& topic, broker::SidecarProbe& probe,
               const std::atomic<bool>& ready, HttpPeerClient* peers = nullptr);
  ~DataFrontend();
  DataFrontend(const DataFrontend&) = delete;
  DataFrontend& operator=(const DataFrontend&) = delete;

  Status Open();
  void Close();
  // The port listened on (the one chosen when options.port is 0).
  uint16_t port() const { return listener_ ? listener_->port() : 0; }
  uint16_t local_port() const { return local_listener_ ? local_listener_->port() : 0; }
  // Wakes the poller: events became visible.
  void NotifyData();

 private:
  struct Waiter {
    web::http::http_request request;
    std::string group;
    size_t max;
    std::chrono::steady_clock::time_point deadline;
    wire::Format format = wire::Format::kJson;  // of the answer (the request's Accept)
  };

  void Handle(web::http::http_request req);
  // `principal`: the TLS caller's name under an access policy (empty: unrestricted).
  // `forwarded`: sent by a peer (X-Shoal-Forwarded, from a caller trusted to send it).
  void HandleProduce(const web::http::http_request& req, std::chrono::steady_clock::time_point t0,
                     const std::string& principal, bool forwarded);
  void HandleConsume(const web::http::http_request& req, const std::string& principal);
  // The consume itself, on a worker: answers, or parks the request for up to `wait_ms`.
  void ConsumeNow(const web::http::http_request& req, const std::string& group, size_t max,
                  int64_t wait_ms, wire::Format format);
  void HandleCommit(const web::http::http_request& req, const std::string& principal,
                    bool forwarded);
  // Calls `done` once every wait of `quorum` (a commit's, Topic::Commit) is reached, or any ran
  // past replication_timeout_ms: with the first failure, or OK.
  void WhenReached(std::vector<broker::QuorumWait>& quorum,
                   std::function<void(const Status&)> done);
  // A consume's carried commit (commit=P:O,...): commits `offsets` for `group`, then runs
  // `consume` on the pool (once a quorum holds the commit, for replicated partitions); a commit
  // that fails is the consume's answer.
  void CommitThenConsume(const web::http::http_request& req, const std::string& group,
                         const std::vector<wire::CommitOffset>& offsets,
                         std::function<void()> consume);
  void PollLoop();
  // Consumes for a parked request on the pool and answers it, or parks it again.
  void Serve(Waiter w);
  // Answers a consume with the `n` events of `out`, once `quorum` (Topic::Consume) is reached.
  void Hand(const web::http::http_request& req, const std::string& group, size_t n, std::string out,
            std::vector<broker::QuorumWait> quorum, wire::Format format);
  // The consumers' busy time (SidecarProbe::ConsumerBusy): a group asked again, or was handed
  // `n` events.
  void NoteAsked(const std::string& group);
  void NoteHanded(const std::string& group, size_t n);
  // The task completes once the answer is sent (or could not be).
  pplx::task<void> Answer(const web::http::http_request& req, const std::string& endpoint, int code,
                          std::string body, wire::Format format = wire::Format::kJson);
  void Fail(const web::http::http_request& req, const std::string& endpoint, const Status& st);

  const DataFrontendOptions opts_;
  broker::Topic& topic_;
  broker::SidecarProbe& probe_;
  const std::atomic<bool>& ready_;
  HttpPeerClient* peers_;
  std::unique_ptr<GuardedListener> listener_;
  std::unique_ptr<GuardedListener> local_listener_;  // the plain port of the pod's containers

  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::list<Waiter> waiters_;  // guarded by wait_mu_
  bool data_ = false;          // guarded by wait_mu_
  bool stopping_ = false;      // guarded by wait_mu_
  int serving_ = 0;            // guarded by wait_mu_: Serve tasks not finished
  std::condition_variable served_cv_;
  std::thread poller_;
  WorkerPool workers_;
  std::mutex busy_mu_;
  // Per group: when its consumers here were last handed events and have not asked again since.
  std::map<std::string, std::chrono::steady_clock::time_point> handed_at_;  // guarded by busy_mu_
};

}  // namespace shoal::http
