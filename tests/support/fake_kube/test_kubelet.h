// TestKubelet: the node side of a test cluster beside FakeApiServer, so that the operator under
// test cannot tell the pair from a cluster. It plays the components below, all over the fake's HTTP
// API with the admin token (system components bypass RBAC), knowing nothing of Shoal:
//
//   - the StatefulSet controller (apps/v1): pods <sts>-0..N-1 with the template's labels plus
//     statefulset.kubernetes.io/pod-name, apps.kubernetes.io/pod-index and
//     controller-revision-hash, a controlling ownerReference, hostname/subdomain, nodeName, and
//     a persistentVolumeClaim volume per volumeClaimTemplate (claim "<template>-<pod>");
//     podManagementPolicy Parallel creates and removes at once, OrderedReady one at a time
//     (a new ordinal once the lower ones are Ready; the highest ordinal first on scale down);
//     a pod that disappears is created again; status (replicas, readyReplicas,
//     currentReplicas, updatedReplicas, availableReplicas, observedGeneration, revisions) is
//     written when it changes. Template changes are NOT rolled out to existing pods, as with
//     updateStrategy OnDelete: a pod gets the new template when it is created again.
//     When the StatefulSet is gone its pods are removed (the garbage collector's part).
//   - the kubelet: every pod of a served namespace with spec.nodeName == node_name runs each of
//     its spec.containers as a real process: command[0] is "the image", looked up in
//     `images` (unknown: waiting ErrImagePull, never Ready); argv = [binary] + command[1:] +
//     args with $(VAR) expanded from the container's env (unknown $(X) stays, $$ is $; not in
//     lifecycle hook commands, which run with the container's env as written); env
//     from value and valueFrom.fieldRef / secretKeyRef, also given to the process. Mount
//     namespaces are emulated by rewriting paths: a volumeMount's mountPath, where it appears
//     in argv, env values and workingDir, becomes the volume's host directory (PVC:
//     work_dir/pvc/<claim>, kept across restarts and re-creation, deleted after scale down or
//     StatefulSet deletion when persistentVolumeClaimRetentionPolicy says Delete; secret:
//     work_dir/pods/<pod>/secret-<volume>/<key>, re-synced when the Secret changes; emptyDir:
//     per pod; hostPath: the path itself). Network namespaces likewise: the pod's own
//     "localhost", "127.0.0.1" and "0.0.0.0", as hosts in argv and env values, become its IP. Each process runs in a session of its own; its
//     stdout and stderr go to work_dir/pods/<pod>/<container>.log (pods and claims of the
//     other served namespaces under pods/<ns>/ and pvc/<ns>/). Pods get ip_prefix.N
//     (N = 2, 3, ...; the same name gets the same address back). restartPolicy Always (and
//     OnFailure) restarts an exited container with exponential backoff (restartCount + 1).
//     Readiness: readinessProbe httpGet or tcpSocket on the pod IP every periodSeconds (or
//     `probe_period`); no probe: ready once running. Status is written with PUT .../status
//     when it changes. Deletion (scale down, owner gone, or the Pod object deleted by anyone):
//     preStop exec hooks, SIGTERM to the containers, then to "shoal-sidecar" last (as with
//     native sidecars), SIGKILL at the end of terminationGracePeriodSeconds, then DELETE of the
//     Pod object (uid precondition).
//   - the Deployment controller (apps/v1), without ReplicaSet objects: the Deployment owns its
//     pods <deploy>-<template hash>-<5 letters> (labels pod-template-hash), creates the
//     missing ones of the current template, removes the old template's pods once the new ones
//     are Ready (RollingUpdate; Recreate removes them first) and the surplus on scale down;
//     status (observedGeneration, replicas, updatedReplicas, readyReplicas,
//     availableReplicas, unavailableReplicas, conditions Available and Progressing) is what
//     `kubectl rollout status` and Helm's kstatus wait read.
//   - DNS and kube-proxy for Services: "<svc>.<ns>.svc" (and ".svc.cluster.local") in argv
//     and env values becomes the IP of a Ready pod the Service selects, and a ":<port>" after
//     it the port's targetPort (a number or the pod's named container port); with no Ready
//     endpoint the name stays as written (it does not resolve).
//   - metrics-server: every metrics_interval, PodMetrics (metrics.k8s.io/v1beta1) for every pod
//     whose containers run, through FakeApiServer::Seed (the resource is read-only over HTTP):
//     CPU from /proc/<pid>/stat over the window, memory from VmRSS; a pod that is gone loses
//     its PodMetrics (FakeApiServer::Unseed). Needs `api`.
//
// A pod with restartPolicy Never (or OnFailure, once every container exited 0) whose containers
// all exited has phase Succeeded (every exit code 0) or Failed, as `helm test` waits for.
//
// Not done: init containers (also native sidecars declared as restartable init containers),
// liveness and startup probes, exec readiness probes (treated as no probe), configMap,
// downwardAPI and projected volumes (treated as emptyDir), PersistentVolumeClaim objects (the
// fake serves none: a claim is a directory), scheduling beyond "every unplaced pod of the
// default scheduler goes to this node" (the Binding subresource), StatefulSet rolling updates,
// Deployment maxSurge/maxUnavailable (all new pods first, then the old ones go), graceful deletion in the API (the Pod object stays as it is while its
// containers stop, then goes away at once), resource limits.
//
// Lifecycle: construct, Start(), Stop() (or the destructor) kills every process it started
// (SIGKILL to each process group) and waits for them; Pod objects are left in the API. Should
// the test process die instead, each container's main process gets SIGKILL from the kernel
// (PR_SET_PDEATHSIG; what it forked itself may outlive it). The
// FakeApiServer given as `api` must outlive the kubelet. Thread-safe: one background thread
// polls and acts, one short-lived thread per terminating pod; the test hooks may be called
// from any thread. Owned by the test. Not copyable.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::testing {

class FakeApiServer;

struct TestKubeletOptions {
  // The API server: the fake (for base_url, Seed and Unseed), or only a URL (no metrics).
  FakeApiServer* api = nullptr;
  std::string api_url;  // empty: api->base_url()
  std::string admin_token;
  std::vector<std::string> namespaces = {"default"};
  std::string node_name = "test-node";
  // The node's topology.kubernetes.io/zone label (empty: none). Start registers the node.
  std::string zone;
  // Pod directories, logs and volumes live here; it must exist or be creatable.
  std::string work_dir;
  // Pods get ip_prefix + ".2", ".3", ...; the node (hostIP) is ip_prefix + ".1". Tests pass
  // RandomLoopbackPrefix() (support/loopback.h).
  std::string ip_prefix = "127.0.0";
  // Image (a container's command[0]) -> the host binary that plays it.
  std::map<std::string, std::string> images;
  // Files the images hold: a path inside every container (e.g. /opt/shoal/python) -> the host
  // directory that plays it, rewritten in argv and env values like a volume mount.
  std::map<std::string, std::string> image_paths;
  // How often the StatefulSets, Pods and Secrets are listed and acted upon.
  std::chrono::milliseconds poll_interval{100};
  // How often PodMetrics are seeded (also their window).
  std::chrono::milliseconds metrics_interval{1000};
  // Readiness probes run this often instead of periodSeconds, when set (tests).
  std::optional<std::chrono::milliseconds> probe_period;
  // When a pod has no terminationGracePeriodSeconds (Kubernetes: 30 s).
  std::chrono::milliseconds default_grace{30000};
  // Restart backoff of an exited container: min, doubled per restart up to max; back to min
  // after a container ran for backoff_reset.
  std::chrono::milliseconds backoff_min{10};
  std::chrono::milliseconds backoff_max{5000};
  std::chrono::milliseconds backoff_reset{10000};

  // In-cluster clients, as a real node gives every pod: when api_service_host is set, each
  // container gets KUBERNETES_SERVICE_HOST/PORT (and KUBERNETES_PORT*), and a pod whose
  // automountServiceAccountToken is not false gets its ServiceAccount's token (TokenRequest,
  // POST .../serviceaccounts/NAME/token), `api_ca_file` as ca.crt and its namespace at
  // /var/run/secrets/kubernetes.io/serviceaccount: a real bind mount in a mount namespace of
  // the container's own (root only), since programs read that path without it appearing in
  // their argv. The kubelet then also plays the ServiceAccount controller ("default" in every
  // served namespace). A pod whose ServiceAccount does not exist waits in ContainerCreating.
  std::string api_service_host;
  int api_service_port = 0;
  std::string api_ca_file;
  // An ended pod's emptyDir volumes are kept, renamed <volume>.ended-<uid> beside the next
  // incarnation's, instead of deleted as a real kubelet does: end-to-end scripts read what a
  // restarted pod's consumer recorded there (as `kubectl logs --previous` keeps a log).
  bool keep_ended_empty_dirs = false;
};

// What one container of a pod is doing now.
struct TestContainerState {
  std::string name;
  pid_t pid = -1;  // -1 when not running
  int restarts = 0;
  bool ready = false;
  std::string waiting_reason;  // when not running: ErrImagePull, CrashLoopBackOff, ...
};

// One pod the kubelet runs (or is stopping).
struct TestPodState {
  std::string ns, name, uid, ip;
  bool ready = false;
  bool terminating = false;
  std::vector<TestContainerState> containers;

  const TestContainerState* container(const std::string& name) const;
};

class TestKubelet {
 public:
  explicit TestKubelet(TestKubeletOptions options);
  // Stop().
  ~TestKubelet();
  TestKubelet(const TestKubelet&) = delete;
  TestKubelet& operator=(const TestKubelet&) = delete;

  // Checks the options, creates work_dir and starts the background thread.
  Status Start();
  // Stops the background threads, SIGKILLs every process it started and waits for them. Pod
  // and StatefulSet objects stay in the API as they are. Idempotent.
  void Stop();

  // --- Test hooks -------------------------------------------------------------------------

  // The pods it runs now, by namespace and name.
  std::vector<TestPodState> Pods() const;
  // One pod (namespace of the first served namespace when `ns` is empty), or nullopt.
  std::optional<TestPodState> Pod(const std::string& name, const std::string& ns = "") const;
  // Sends `signal` to the process group of a running container (SIGKILL: the kubelet starts it
  // again as after a crash). NotFound when the pod or container does not run.
  Status KillContainer(const std::string& pod, const std::string& container, int signal,
                       const std::string& ns = "");
  // The host directory behind a volume of a pod it runs ("" when unknown).
  std::string HostPath(const std::string& pod, const std::string& volume,
                       const std::string& ns = "") const;
  // Where a PersistentVolumeClaim of the first served namespace keeps its data (whether or not
  // a pod uses it now).
  std::string ClaimPath(const std::string& claim) const;
  // Waits until `predicate` holds, re-checking after each sync of the background thread; false
  // at the deadline. The predicate may call the hooks above.
  bool WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) const;
  // Completed syncs (list, act, write status) so far.
  uint64_t syncs() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoal::testing
