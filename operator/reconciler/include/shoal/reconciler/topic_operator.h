// TopicOperator: reconciles PartitionedTopics into the objects that run them and runs one
// control loop per topic on the Kubernetes platform, while this operator leads.
//
// Level-based and idempotent: informers (topics, and the StatefulSets and pods the operator
// manages) keep local copies; any change of a topic or of something it owns puts the topic's
// key ("ns/name") on a work queue, and so does a periodic resync. Reconciling one key reads the
// whole observed state and makes the world match it:
//   - a topic being deleted: stop its loop, delete its StatefulSet, Service and Secret, remove
//     the finalizer shoal.dev/cleanup;
//   - otherwise: add the finalizer; read and check the spec (ReadTopic, and the operator's own
//     partition cap): an invalid one is reported as Degraded (condition and Warning Event) and
//     nothing else changes; create or update the Secret (admin token, created once), the
//     headless Service and the StatefulSet (its replicas belong to the control loop, which
//     sets them through the scale subresource); start the topic's control loop or hand it the
//     new spec; write status (observedGeneration, counts, selector, conditions Ready,
//     Progressing, Degraded) with a conflict retry.
// A failing reconcile is retried with per-key exponential backoff (WorkQueue) and says why
// (ReconcileResult). Only the leader reconciles and runs loops; the others keep their informers
// warm to take over at once. Events go through an EventRecorder (series, as client-go's).
//
// Thread-safe. Run() owns the threads until stop; StartLeading/StopLeading come from the
// elector's thread. Owned by main (or the test); the client and clock outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/clock.h"
#include "shoal/common/thread_annotations.h"
#include "shoal/common/tls.h"
#include "shoal/control/control_loop.h"
#include "shoal/control/get_only_port.h"
#include "shoal/kubeapi/informer.h"
#include "shoal/kubeapi/kube_client.h"
#include "shoal/reconciler/event_recorder.h"
#include "shoal/reconciler/manifests.h"
#include "shoal/reconciler/reconcile_result.h"
#include "shoal/reconciler/topic_status.h"
#include "shoal/reconciler/work_queue.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace shoal::reconciler {

struct TopicOperatorOptions {
  std::vector<std::string> namespaces;  // watched namespaces; empty: all
  uint32_t max_partitions = 65536;      // the operator's limit on spec.partitions.max
  ManifestOptions manifests;
  control::ControlLoopOptions loop;
  // Every topic is reconciled at least this often (and whenever its loop changes what the
  // status shows).
  std::chrono::milliseconds resync{10'000};
  std::chrono::milliseconds backoff_start{200};
  std::chrono::milliseconds backoff_max{30'000};
  std::string identity = "shoal-operator";  // Events' reportingInstance
  std::chrono::seconds watch_timeout{300};  // informers' watch requests
  // Where the operator keeps its own client certificate of each TLS topic (files, for OpenSSL);
  // empty: a directory of its own under the system's temporary directory.
  std::string cert_dir;
  // Each running topic's live console (docs/console.md), read by ServeConsole: when false, no
  // console reads the sidecars.
  bool console = false;
};

class TopicOperator {
 public:
  TopicOperator(kubeapi::KubeClient& client, TopicOperatorOptions options, Clock& clock);
  ~TopicOperator();
  TopicOperator(const TopicOperator&) = delete;
  TopicOperator& operator=(const TopicOperator&) = delete;

  // Runs the informers and the reconcile worker until `stop`; stops every topic loop on exit.
  void Run(const std::atomic<bool>& stop);
  // Leadership, from the elector: reconcile and run loops only in between. `is_leader` is
  // asked again before every write of the control loops.
  void StartLeading(std::function<bool()> is_leader);
  void StopLeading();

  bool synced() const;  // every informer listed once
  bool leading() const { return leading_.load(); }
  // The operator's metrics and every topic loop's, one exposition.
  std::string MetricsText() const;
  // The consoles of the topics this operator runs (options.console): GET / lists them, GET
  // /t/<namespace>/<name>/... is that topic's console, its API behind the topic's admin token
  // (Secret <name>-admin, key token). Thread-safe.
  control::GetAnswer ServeConsole(const control::GetRequest& request);

 private:
  struct Worker;
  void Enqueue(const std::string& key);
  void EnqueueOwner(const kubeapi::Json& object);
  // While leading: every topic, and every topic whose loop runs, on the queue.
  void Resync();
  // Reconciles one key from the queue, counts it, and tells the queue what next.
  void ProcessKey(const std::string& key);
  // Reconciles one key: what the work queue does with it next.
  ReconcileResult Reconcile(const std::string& key);
  ReconcileResult Cleanup(const kubeapi::Json& topic);
  // `term`: the leadership term the reconcile began in; a loop is started only in that term.
  ReconcileResult Apply(const kubeapi::Json& topic, const TopicObject& t, uint64_t term);
  // The topic's loop, started (in `term` only) if it does not run; nullptr when it cannot
  // start yet (its StatefulSet is not in the cache) or leadership moved on.
  // `tls`: the operator's client files for the topic's sidecars (disabled: plain HTTP).
  std::shared_ptr<Worker> EnsureWorker(const TopicObject& t, const std::string& token,
                                       const TlsClientFiles& tls, uint64_t term);
  // With an invalid spec: the loop runs on the spec the StatefulSet records as last applied, so
  // that a plan in progress is finished (after a restart or a failover) while the user fixes it.
  void ResumeLastApplied(const kubeapi::Json& topic, uint64_t term);
  // The body of a topic's loop thread: Start, then Tick every interval while may_act.
  void RunWorker(Worker& worker, const std::function<bool()>& may_act);
  void ReportInvalid(const kubeapi::Json& topic, const std::string& message);
  // Ok also when the topic is gone (nothing left to write to).
  Status WriteStatus(const kubeapi::Json& topic, const std::function<void(kubeapi::Json&)>& fill);
  void StopWorker(const std::string& key);
  void StopAllWorkers();
  std::optional<kubeapi::Json> CachedTopic(const std::string& key) const;
  // The StatefulSet named so as the informers hold it.
  std::optional<kubeapi::Json> CachedStatefulSet(const std::string& ns,
                                                 const std::string& name) const;
  // Each Ensure* below fails with `not_owned` set (NotOwnedMessage) when an object of the name
  // it makes exists and is not the topic's (OwnedBy): it is then neither changed nor used.
  Result<std::string> EnsureSecret(const kubeapi::Json& topic, const TopicObject& t,
                                   std::string* not_owned);
  // With TLS on (TlsOn): the topic's CA (Secret <topic>-ca), its pods' certificate, the CA and
  // the access file in the admin Secret (which only the sidecars mount), and each principal's
  // client certificate (Secret <topic>-client-<name>), made, or renewed when a third of their
  // life is left, when the CA changed, or when the topic's shoal.dev/rotate-certificates
  // annotation changed. Returns the operator's own client files for the topic; disabled files
  // with TLS off.
  Result<TlsClientFiles> EnsureTls(const kubeapi::Json& topic, const TopicObject& t,
                                   std::string* not_owned);
  // The operator's client certificate for the topic, issued by `ca` (kept while valid) and
  // written under cert_dir; the files.
  Result<TlsClientFiles> OperatorFiles(const TopicObject& t, const std::string& ca_cert,
                                       const std::string& ca_key);
  // The topic's object of `kind` (named like the topic) as it is now; nullopt when it was
  // missing and has been created from `want` (or raced another's create); an error when it
  // could not be read or created. `what` names the kind in the error.
  Result<std::optional<kubeapi::Json>> LiveOrCreate(const kubeapi::ResourceKind& kind,
                                                    const TopicObject& t, const kubeapi::Json& want,
                                                    const char* what, std::string* not_owned);
  Status EnsureService(const TopicObject& t, std::string* not_owned);
  // The topic's PodDisruptionBudget (maxUnavailable 1), made or set back.
  Status EnsurePodDisruptionBudget(const TopicObject& t, std::string* not_owned);
  // `refused`: the API server's message when it refused the object as invalid (422).
  Status EnsureStatefulSet(const kubeapi::Json& topic, const TopicObject& t, std::string* refused,
                           std::string* not_owned);
  // Degraded (ObjectNotOwned) with `message`, and a Warning Event once per message.
  void ReportNotOwned(const kubeapi::Json& topic, const std::string& message);
  // Writes `conditions` into the status (and observedGeneration if `observed`), and a Warning
  // Event `reason` once per (topic, reason, once_per).
  void Report(const kubeapi::Json& topic, const std::string& reason, const std::string& message,
              const std::string& once_per, const std::vector<Condition>& conditions,
              bool observed);

  kubeapi::KubeClient& client_;
  const TopicOperatorOptions opts_;
  Clock& clock_;

  // One of each per watched namespace (one for all when none is named).
  std::vector<std::unique_ptr<kubeapi::Informer>> topics_, statefulsets_, pods_;
  // The pods and StatefulSets informers of a watched namespace.
  kubeapi::Informer& PodsOf(const std::string& ns);
  kubeapi::Informer& SetsOf(const std::string& ns);

  WorkQueue queue_;
  EventRecorder events_;

  mutable Mutex mu_;
  CondVar leading_cv_;  // StartLeading: Run looks at the queue again
  // Shared: a reconcile keeps using a worker that StopWorker took out meanwhile.
  std::map<std::string, std::shared_ptr<Worker>> workers_ GUARDED_BY(mu_);
  // (key, reason) -> what it was warned for (a generation, a message): warned once each.
  std::map<std::pair<std::string, std::string>, std::string> reported_ GUARDED_BY(mu_);
  std::function<bool()> is_leader_ GUARDED_BY(mu_);
  // Per topic key: the operator's client certificate and the CA it was issued by.
  struct OperatorCert {
    std::string ca_cert;
    std::chrono::system_clock::time_point not_after;
    TlsClientFiles files;
  };
  std::map<std::string, OperatorCert> operator_certs_ GUARDED_BY(mu_);
  // Written under mu_, read without it.
  std::atomic<bool> leading_{false};
  // Counts StartLeading and StopLeading calls: a worker belongs to the term that made it.
  std::atomic<uint64_t> term_{0};

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* reconciles_ = nullptr;
  prometheus::Histogram* reconcile_duration_ = nullptr;
  prometheus::Gauge* leader_ = nullptr;
  prometheus::Gauge* topics_gauge_ = nullptr;
};

}  // namespace shoal::reconciler
