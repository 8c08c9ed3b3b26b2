// KubePlatform: the control loop's Platform in a cluster, for one PartitionedTopic:
//   - pods are the topic's StatefulSet's: SetDesiredPods patches its scale subresource, the
//     StatefulSet controller adds or removes the highest ordinals; the replicas are the loop's,
//     and HoldReplicas sets back a count changed by anyone else (`kubectl scale sts`);
//   - ListPods reads the pods informer's cache (podIP, the Ready condition, deletion) and the
//     app containers' CPU from metrics.k8s.io where metrics-server runs (over the containers'
//     CPU requests; nothing when either is missing);
//   - the control state (partition map, plan in progress, next plan id, last decision) lives in
//     the topic's status (status.partitionMap gzip+base64, status.plan, status.nextPlanId,
//     status.lastDecision), written before the loop acts on it, so another operator that takes
//     over the lease resumes the plan;
//   - DrainPod: the planner emptied the pod; Kubernetes stops its containers when the
//     StatefulSet shrinks, after the sidecar's preStop saw that it owns nothing;
//   - the StatefulSet updates OnDelete: a pod is outdated when its controller-revision-hash is
//     not the set's status.updateRevision (once the controller observed the set's generation),
//     and RestartPod deletes that incarnation (preconditions.uid), which the StatefulSet
//     controller recreates on the new template with the same claim.
// Every write is refused (Unavailable) unless `may_act` says this operator still leads.
//
// Thread-safe. Owned by the operator's topic worker; the client and informer outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "shoal/common/thread_annotations.h"
#include "shoal/kubeapi/informer.h"
#include "shoal/kubeapi/kube_client.h"
#include "shoal/control/platform.h"

namespace shoal::reconciler {

struct KubePlatformOptions {
  std::string ns;
  std::string topic;
  std::string admin_token;
  // True while this operator holds the leader lease (checked before every write).
  std::function<bool()> may_act = [] { return true; };
  // How often metrics.k8s.io is read (its own window is 15 s or more).
  std::chrono::milliseconds metrics_every{5000};
  // How long a node's zone (its topology.kubernetes.io/zone label) is kept before it is read
  // again.
  std::chrono::milliseconds zones_every{60000};
};

class KubePlatform final : public control::Platform {
 public:
  // `pods` is an informer of the operator's pods (label app.kubernetes.io/managed-by); the
  // platform picks this topic's by label. desired_pods: the StatefulSet's spec.replicas now.
  // `sets`: an informer of the operator's StatefulSets (the update revision).
  KubePlatform(kubeapi::KubeClient& client, kubeapi::Informer& pods, kubeapi::Informer& sets,
               KubePlatformOptions options, uint32_t desired_pods);

  Status SetDesiredPods(uint32_t n) override;
  uint32_t DesiredPods() const override;
  // `cached`: the StatefulSet's spec.replicas as the informer saw it; `floor`: the pods that
  // own partitions in the loop's map (highest ordinal + 1), which the count never goes below
  // (raised to it when the loop started from a count scaled down while no operator ran). When
  // `cached` differs from the count, reads the scale (the cache may trail the loop's own last
  // scale) and, if it really differs, writes the count back over that read (a scale written in
  // between is a 409, not overwritten). Returns the count it found and replaced, nullopt when
  // nothing was changed; an error when the read or the write failed.
  Result<std::optional<uint32_t>> HoldReplicas(uint32_t cached, uint32_t floor);
  Result<std::vector<control::PodInfo>> ListPods() override;
  Status DrainPod(const PodName& pod) override;
  Status RestartPod(const control::PodInfo& pod) override;
  Status SaveState(const std::string& json) override;
  Result<std::string> LoadState() override;
  std::string AdminToken() const override { return opts_.admin_token; }

  // The control state as status fields (a merge patch of .status) and back; public for tests.
  static Result<kubeapi::Json> StateToStatus(const std::string& state_json);
  // NotFound when the status holds no partition map and no plan.
  static Result<std::string> StatusToState(const kubeapi::Json& status, const std::string& topic);

 private:
  void RefreshMetrics();
  // Reads the zone of each of `nodes` not read within zones_every (GET of the node: the
  // ClusterRole's nodes get; without it zones stay unknown, said once in the log).
  void RefreshZones(const std::set<std::string>& nodes);

  kubeapi::KubeClient& client_;
  kubeapi::Informer& pods_;
  kubeapi::Informer& sets_;
  const KubePlatformOptions opts_;
  std::atomic<uint32_t> desired_;
  Mutex scale_mu_;  // one scale write at a time: SetDesiredPods against HoldReplicas

  Mutex mu_;
  std::set<std::string> draining_ GUARDED_BY(mu_);
  std::map<std::string, double> cpu_ GUARDED_BY(mu_);  // pod -> utilisation of its app containers
  std::chrono::steady_clock::time_point metrics_at_ GUARDED_BY(mu_){};
  bool metrics_known_ GUARDED_BY(mu_) = false;
  struct Zone {
    std::string name;  // "" when the node has no zone label, or could not be read
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, Zone> zones_ GUARDED_BY(mu_);  // node -> its zone
  bool zones_forbidden_said_ GUARDED_BY(mu_) = false;
  // status.controlRevision as this platform last wrote or loaded it (SaveState's precondition).
  std::optional<int64_t> control_revision_ GUARDED_BY(mu_);
};

// gzip + base64 of text, and back (status.partitionMap.data).
std::string GzipBase64(const std::string& text);
Result<std::string> GunzipBase64(const std::string& data);

}  // namespace shoal::reconciler
