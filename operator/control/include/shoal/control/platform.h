// Platform: where a topic's pods run. The control loop (policy, planner, executor) is written
// against this interface so that the same code runs in Kubernetes (pods of a StatefulSet, state in
// the PartitionedTopic's status) and on one machine (LocalPlatform: sidecar processes on loopback
// addresses, state in a directory).
//
// Pods are numbered like a StatefulSet's: <topic>-0 .. <topic>-(n-1). Growing adds the next
// ordinals; shrinking removes the highest ones, which the planner has emptied (moved their
// partitions away, waited until their sealed partitions were consumed) and drained first.
//
// Implementations are thread-safe. The platform is owned by main (or the test) and outlives the
// control loop that uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal::control {

struct PodInfo {
  PodName name;
  uint32_t ordinal = 0;
  std::string ip;         // 127.0.0.N locally, the podIP in a cluster
  PeerAddress address;    // the sidecar's data and admin planes, "ip:port"
  std::string metrics;    // "ip:port" of the sidecar's /metrics
  bool ready = false;     // the sidecar answers /readyz
  bool draining = false;  // DrainPod was called and the pod is not removed yet
  // The pod runs an older template than the platform's current one (a StatefulSet whose
  // template changed: its controller-revision-hash is not the set's updateRevision). The
  // control loop rolls such pods one at a time, each emptied first (planner.h).
  bool outdated = false;
  std::string uid;  // this incarnation of the pod (a restarted pod has another); may be empty
  // Where the pod runs, when the platform knows (Kubernetes: spec.nodeName and that node's
  // topology.kubernetes.io/zone): copies of a partition go to distinct nodes and zones first.
  std::string node;
  std::string zone;
  // The consumer's CPU use over its request (0.7 = 70%), averaged since the previous ListPods;
  // nullopt where the platform cannot measure it.
  std::optional<double> cpu_utilization;
};

class Platform {
 public:
  virtual ~Platform() = default;

  // Asks for n pods. Returns at once; pods become ready later (see ListPods). Removing a pod
  // deletes its data: the planner emptied it first.
  virtual Status SetDesiredPods(uint32_t n) = 0;
  // The number last asked for (0 before the first SetDesiredPods).
  virtual uint32_t DesiredPods() const = 0;
  // Every pod that exists now, ready or not, by ordinal.
  virtual Result<std::vector<PodInfo>> ListPods() = 0;
  // Runs the pod's drain before it is removed: the pod owns no partition any more and its sealed
  // ones are consumed; its consumer finishes, commits and stops. Returns once that is done.
  virtual Status DrainPod(const PodName& pod) = 0;
  // Restarts this incarnation of the pod (`pod.uid`) on the current template, keeping its data;
  // returns once asked. The planner emptied it first. A pod already restarted (another uid) is
  // left alone. Platforms without templates answer FailedPrecondition (they never list a pod as
  // outdated).
  virtual Status RestartPod(const PodInfo& pod) = 0;

  // The control state (the plan and its progress) as one JSON document, stored durably before
  // the loop acts on it, so that a restarted loop resumes.
  virtual Status SaveState(const std::string& json) = 0;
  // NotFound when nothing was saved yet.
  virtual Result<std::string> LoadState() = 0;

  // The bearer token of the sidecars' admin planes.
  virtual std::string AdminToken() const = 0;
};

}  // namespace shoal::control
