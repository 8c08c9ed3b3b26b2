// MetricsObserver: the Observer that scrapes the sidecars themselves.
//
// Each Observe fetches, from every pod that owns a partition of the map, concurrently:
//   GET http://<pod.metrics>/metrics                   (docs/metrics.md)
//   GET http://<pod.address.admin>/v1/admin/partitions (bearer token; admin_partitions.h)
// and turns them into one PartitionLoad per partition of the map, read at the partition's owner
// only (a sidecar also holds partitions it does not own, e.g. a moved partition's sealed parent):
//   - rate: the increase of shoal_events_appended_total{topic,partition} since the previous
//     Observe, over the Clock's time between the two. The observer keeps the previous counters per
//     (pod, partition). With no earlier sample, or a counter that went down (the sidecar
//     restarted), or a pod that did not answer the previous time, the rate is unknown: the
//     partition goes to `missing` and not into `partitions` (a made-up 0 would read as "idle").
//     Except a partition new at a pod that answered the previous Observe (a split or merge
//     there): it is young, not unseen; it stays out of `partitions` but is not missing.
//   - lag: the largest shoal_consumer_lag_events over the groups (0 with no group).
//   - buckets, top_hash, top_share: DiffHashLoad of the admin plane's cumulative counters against
//     the previous Observe's. An admin plane that answers 404 (a sidecar without the endpoint)
//     means "unknown": zeros, nothing missing; any other failure leaves the zeros and adds an
//     entry to `missing`, because the planner would split blind.
//   - sealed partitions: active = false and their lag; their rate is 0 (they take no appends).
//   - consumers (per pod and group): delivered_rate is the increase of
//     shoal_events_delivered_total{topic,group} at the pod since the previous Observe, over the
//     Clock's time between them (none without an earlier sample or after the counter went down);
//     backlog is the group's shoal_consumer_lag_events on what the pod serves (ConsumerLoad),
//     each partition's lag read at its owner; busy is the increase of
//     shoal_consumer_busy_seconds_total{topic,group} over the same interval, per second of it
//     (nullopt when either sample lacks it or it went down); interval_s is that interval. Both
//     counters are summed over any label beside topic and group. A sidecar without the delivered
//     counter leaves its pod out, one without the busy counter its busy fraction; nothing goes
//     missing for either.
// A pod that does not answer /metrics makes every partition it owns go missing with the reason;
// so does a partition its owner does not report, or whose owner is not among `pods`. Pods that
// own no partition of the map are not scraped. cpu_utilization comes from PodInfo as given.
//
// Requests are asynchronous cpprestsdk tasks, all in flight at once; continuations only copy the
// answer out, and the calling thread waits. Each request is bounded by Options::timeout (real
// time: a socket cannot wait on an injected clock); the Clock only dates the samples. Never
// throws: cpprestsdk's exceptions are caught where it is called.
//
// Thread-safe: concurrent Observe calls are serialized (each one diffs against the previous).
// Do not call Observe or PartitionsOf from a cpprestsdk pool thread (a continuation): they wait
// for network answers. Owned by the control loop; the Clock must outlive it. Not copyable.
#pragma once

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shoal/common/clock.h"
#include "shoal/common/status.h"
#include "shoal/common/tls.h"
#include "shoal/control/admin_partitions.h"
#include "shoal/control/observer.h"
#include "shoal/control/platform.h"

namespace web::http::client {
class http_client;
}  // namespace web::http::client

namespace shoal::control {

class MetricsObserver final : public Observer {
 public:
  struct Options {
    // Bounds each request (connect, send, answer).
    std::chrono::milliseconds timeout{1000};
    // The admin plane over TLS (a topic whose pods require it); the metrics port stays plain.
    TlsClientFiles tls;
  };

  MetricsObserver(Clock& clock, std::string admin_token, Options options);
  MetricsObserver(Clock& clock, std::string admin_token)
      : MetricsObserver(clock, std::move(admin_token), Options()) {}
  ~MetricsObserver() override;
  MetricsObserver(const MetricsObserver&) = delete;
  MetricsObserver& operator=(const MetricsObserver&) = delete;

  Observation Observe(const PartitionMap& map, const std::vector<PodInfo>& pods) override;

  // GET /v1/admin/partitions at the pod (NotFound on 404, Unauthenticated on 401).
  Result<AdminPartitionsReport> PartitionsOf(const PodInfo& pod) override;

 private:
  // One answer as fetched: status 0 when none arrived (then `error` says why).
  struct Answer {
    int status = 0;
    std::string body;
    std::string error;
  };
  // What the previous Observe read at one (pod, partition).
  struct Sample {
    double appended = 0;
    std::chrono::steady_clock::time_point at;
    bool has_admin = false;
    AdminPartition admin;
  };

  // `admin`: a client of the admin port (TLS when opts_.tls is on).
  std::shared_ptr<web::http::client::http_client> ClientFor(const std::string& host_port,
                                                            bool admin);
  // Sends a GET and returns at once; the answer arrives in the future, which is always
  // satisfied (with an error when the request failed).
  std::future<Answer> StartGet(const std::string& host_port, const std::string& path, bool admin);
  // Waits for it, at most until `deadline` (real time).
  Answer Wait(std::future<Answer>& answer, std::chrono::steady_clock::time_point deadline) const;
  // A deadline for requests started now: past it, an answer counts as not arriving.
  std::chrono::steady_clock::time_point Deadline() const;

  Clock& clock_;
  const std::string token_;
  const Options opts_;

  std::mutex clients_mu_;
  // One client (with its connection pool) per "host:port"; guarded by clients_mu_. Shared with
  // requests in flight, so dropping a pod's client never pulls it from under one.
  std::map<std::string, std::shared_ptr<web::http::client::http_client>> clients_;

  std::mutex observe_mu_;  // serializes Observe
  // Keyed by (pod, partition id); guarded by observe_mu_.
  std::map<std::pair<std::string, uint32_t>, Sample> previous_;
  // shoal_events_delivered_total and shoal_consumer_busy_seconds_total (nullopt: not exported)
  // as the previous Observe read them, keyed by (pod, group); guarded by observe_mu_.
  struct Delivered {
    double count = 0;
    std::chrono::steady_clock::time_point at;
    std::optional<double> busy;
  };
  std::map<std::pair<std::string, std::string>, Delivered> previous_delivered_;
};

}  // namespace shoal::control
