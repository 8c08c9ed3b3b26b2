// The status of a PartitionedTopic as a pure function of what the operator observed: the pod
// counts, the partition map's shape, whether a plan is in progress and whether the control state
// could be read. TopicOperator gathers the inputs and writes the result; this file decides it,
// so every condition has a table test (tests/unit/operator/reconciler/topic_status_test.cc).
//
// The conditions follow Kubernetes' conventions (docs/kubernetes.md "Status"):
//   Degraded    True while the operator cannot run the topic as specified (an unreadable
//               control state, an invalid spec: InvalidStatus below; a pod that cannot
//               start or keep running: its reason, e.g. ErrImagePull or CrashLoopBackOff);
//   Progressing True while a plan changes partitions or pods, or pods are starting;
//   Ready       True when a map is installed and every active partition's owner is ready (pods
//               still starting during a scale-up show under Progressing, not here);
//   Paused      True while the annotation shoal.dev/paused is "true" (as KEDA's and Strimzi's
//               pause annotations): no scaling decisions, no pod template changes.
// Values; thread-safe.
#pragma once

#include <cpprest/json.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/ids.h"

namespace shoal::reconciler {

enum class ConditionType { kDegraded, kProgressing, kReady, kPaused };
enum class ConditionStatus { kTrue, kFalse };

const char* ToString(ConditionType type);
const char* ToString(ConditionStatus status);

struct Condition {
  ConditionType type;
  ConditionStatus status;
  std::string reason;  // CamelCase, stable: what tools match on
  std::string message;
  bool operator==(const Condition&) const = default;
};

struct TopicObservation {
  uint32_t desired_pods = 0;
  uint32_t ready_pods = 0;
  Epoch epoch{0};           // 0: no map installed yet
  uint32_t active = 0;      // active partitions of the map
  uint32_t sealed = 0;      // sealed partitions not retired yet
  uint32_t unserved = 0;    // active partitions whose owner is not ready
  bool plan_in_progress = false;
  bool paused = false;      // the shoal.dev/paused annotation
  std::string start_error;  // why the control loop could not start (its state unreadable)
  // Pods that came back without their data, with the partitions they held (ControlLoop::
  // pods_without_data).
  std::map<std::string, std::vector<PartitionId>> pods_without_data;
  // Losses declared by the loop whose lost partitions are still in the map (ControlLoop::
  // losses): said as a condition until those partitions retire.
  struct Loss {
    std::string pod;
    std::vector<PartitionId> partitions;
    uint64_t events = 0;
  };
  std::vector<Loss> losses;
  // Pods whose data volume is under pressure: (free bytes, reserve bytes, reserve in use).
  struct Disk {
    double free_bytes = 0, reserve_bytes = 0;
    bool reserve_in_use = false;
  };
  std::map<std::string, Disk> disk_pressure;
  // Pods that cannot start or keep running, as their status says (PodProblems): an image that
  // cannot be pulled, a container in a crash loop, a pod the scheduler cannot place.
  struct PodProblem {
    std::string pod;
    std::string reason;   // ErrImagePull, ImagePullBackOff, CrashLoopBackOff, Unschedulable, ...
    std::string message;  // "container consumer: <the kubelet's message>"
  };
  std::vector<PodProblem> pod_problems;
};

// What the topic's pods (as the API lists them) report that keeps them from starting or running,
// one entry per pod and cause. A pod that only starts slowly reports nothing.
std::vector<TopicObservation::PodProblem> PodProblems(const std::vector<web::json::value>& pods);

struct TopicStatus {
  uint32_t replicas = 0, ready_replicas = 0;
  // Set once a map is installed.
  std::optional<Epoch> epoch;
  std::optional<uint32_t> partitions, sealed_partitions;
  std::vector<Condition> conditions;  // Degraded, Progressing, Ready, Paused, in that order
};

TopicStatus ComputeTopicStatus(const TopicObservation& o);

// The annotation that pauses a topic ("true"; anything else or absent: not paused).
inline constexpr const char* kPausedAnnotation = "shoal.dev/paused";

// The conditions of a topic whose spec (or pod template) was refused: `message` says what to fix.
std::vector<Condition> InvalidConditions(const std::string& message);
// The conditions of a topic stopped by an object of its objects' names that is not its own.
std::vector<Condition> NotOwnedConditions(const std::string& message);

}  // namespace shoal::reconciler
