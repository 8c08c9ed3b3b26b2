#include "shoal/reconciler/topic_status.h"

namespace shoal::reconciler {

const char* ToString(ConditionType type) {
  switch (type) {
    case ConditionType::kDegraded:
      return "Degraded";
    case ConditionType::kProgressing:
      return "Progressing";
    case ConditionType::kReady:
      return "Ready";
    case ConditionType::kPaused:
      return "Paused";
  }
  return "Unknown";
}

const char* ToString(ConditionStatus status) {
  return status == ConditionStatus::kTrue ? "True" : "False";
}

TopicStatus ComputeTopicStatus(const TopicObservation& o) {
  using T = ConditionType;
  using S = ConditionStatus;
  TopicStatus s;
  s.replicas = o.desired_pods;
  s.ready_replicas = o.ready_pods;
  const bool bootstrapped = o.epoch.value() > 0;
  if (bootstrapped) {
    s.epoch = o.epoch;
    s.partitions = o.active;
    s.sealed_partitions = o.sealed;
  }
  const std::string pods_ready =
      std::to_string(o.ready_pods) + " of " + std::to_string(o.desired_pods) + " pods ready";

  if (!o.start_error.empty()) {
    s.conditions.push_back({T::kDegraded, S::kTrue, "ControlStateUnreadable", o.start_error});
  } else if (!o.pods_without_data.empty()) {
    std::string msg;
    for (const auto& [pod, ids] : o.pods_without_data) {
      if (!msg.empty()) msg += "; ";
      msg += "pod " + pod + " came back without its data (partitions " + JoinIds(ids) + ")";
    }
    msg += ": their events and the groups' positions in them are gone with the volume, and "
           "their ranges take no writes (without replication there is no copy to recover from)";
    s.conditions.push_back({T::kDegraded, S::kTrue, "PodLostData", msg});
  } else if (!o.losses.empty()) {
    std::string msg;
    for (const auto& l : o.losses) {
      if (!msg.empty()) msg += "; ";
      msg += "partitions " + JoinIds(l.partitions) + " were declared lost with pod " + l.pod +
             "'s volume (" + std::to_string(l.events) + " events)";
    }
    msg += ": their ranges took new partitions and take writes again; the lost events and the "
           "groups' positions in them are gone (docs/runbooks.md#shoalpartitionslost)";
    s.conditions.push_back({T::kDegraded, S::kTrue, "PartitionsLost", msg});
  } else if (!o.disk_pressure.empty()) {
    auto mib = [](double b) { return std::to_string(static_cast<uint64_t>(b / (1 << 20))) + " MiB"; };
    std::string msg;
    for (const auto& [pod, d] : o.disk_pressure) {
      if (!msg.empty()) msg += "; ";
      msg += "pod " + pod + "'s data volume " +
             (d.reserve_in_use ? "filled up and its reserve of " + mib(d.reserve_bytes) + " is in use"
                               : "has " + mib(d.free_bytes) + " free, under twice its reserve of " +
                                     mib(d.reserve_bytes));
    }
    msg += ": produce to its partitions is refused once the space beside the reserve runs out; "
           "retention frees only what every group consumed (docs/runbooks.md#shoaldiskpressure)";
    s.conditions.push_back({T::kDegraded, S::kTrue, "DiskPressure", msg});
  } else {
    s.conditions.push_back({T::kDegraded, S::kFalse, "AsExpected", "the spec is valid"});
  }

  if (o.plan_in_progress) {
    s.conditions.push_back({T::kProgressing, S::kTrue, "PlanInProgress",
                            "changing partitions or pods: see status.plan"});
  } else if (o.ready_pods < o.desired_pods || !bootstrapped) {
    s.conditions.push_back({T::kProgressing, S::kTrue, "PodsStarting", pods_ready});
  } else {
    s.conditions.push_back({T::kProgressing, S::kFalse, "Stable", "no change in progress"});
  }

  if (bootstrapped && o.active > 0 && o.unserved == 0) {
    s.conditions.push_back({T::kReady, S::kTrue, "TopicReady",
                            std::to_string(o.active) + " partitions on " +
                                std::to_string(o.ready_pods) + " pods"});
  } else if (!bootstrapped) {
    s.conditions.push_back(
        {T::kReady, S::kFalse, "Starting", pods_ready + "; no partition map installed yet"});
  } else {
    s.conditions.push_back({T::kReady, S::kFalse, "PartitionsUnserved",
                            std::to_string(o.unserved) + " of " + std::to_string(o.active) +
                                " active partitions are on pods that are not ready"});
  }
  if (o.paused) {
    s.conditions.push_back({T::kPaused, S::kTrue, "PausedByAnnotation",
                            std::string(kPausedAnnotation) +
                                " is \"true\": no scaling decisions and no pod template changes "
                                "until it is removed"});
  } else {
    s.conditions.push_back({T::kPaused, S::kFalse, "Active", "scaling as the spec says"});
  }
  return s;
}

std::vector<Condition> InvalidConditions(const std::string& message) {
  return {
      {ConditionType::kDegraded, ConditionStatus::kTrue, "InvalidSpec", message},
      // Not Ready: what the user asked for (this generation) is not what runs; a running topic
      // keeps its last valid spec meanwhile.
      {ConditionType::kReady, ConditionStatus::kFalse, "InvalidSpec",
       "the spec is invalid (see Degraded); a running topic keeps its last valid spec"},
      {ConditionType::kProgressing, ConditionStatus::kFalse, "InvalidSpec",
       "nothing is changed until the spec is fixed"},
  };
}

std::vector<Condition> NotOwnedConditions(const std::string& message) {
  return {
      {ConditionType::kDegraded, ConditionStatus::kTrue, "ObjectNotOwned", message},
      {ConditionType::kReady, ConditionStatus::kFalse, "ObjectNotOwned",
       "an object of the topic's name is not the topic's (see Degraded)"},
      {ConditionType::kProgressing, ConditionStatus::kFalse, "ObjectNotOwned",
       "nothing is created or changed until the object is out of the way"},
  };
}

}  // namespace shoal::reconciler
