#include "shoal/reconciler/topic_status.h"

#include <set>

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
  } else if (!o.pod_problems.empty()) {
    // The first pod's reason names the condition; the message lists every pod.
    std::string msg;
    for (const auto& p : o.pod_problems) {
      if (!msg.empty()) msg += "; ";
      msg += "pod " + p.pod + ": " + p.reason + " (" + p.message + ")";
    }
    s.conditions.push_back({T::kDegraded, S::kTrue, o.pod_problems.front().reason, msg});
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

std::vector<TopicObservation::PodProblem> PodProblems(const std::vector<web::json::value>& pods) {
  using Json = web::json::value;
  // Reasons a container waits with that no wait will mend (a slow pull or start waits with
  // ContainerCreating or PodInitializing instead).
  static const std::set<std::string> kStuck = {
      "ErrImagePull",         "ImagePullBackOff",  "InvalidImageName",
      "ErrImageNeverPull",    "CrashLoopBackOff",  "CreateContainerConfigError",
      "CreateContainerError", "RunContainerError", "ContainerCannotRun"};
  std::vector<TopicObservation::PodProblem> out;
  for (const Json& pod : pods) {
    const std::string name =
        pod.has_object_field("metadata") && pod.at("metadata").has_string_field("name")
            ? pod.at("metadata").at("name").as_string()
            : "";
    if (!pod.has_object_field("status")) continue;
    const Json& status = pod.at("status");
    // Evicted (the node ran out of disk or memory): the pod failed and is not restarted.
    if (status.has_string_field("reason") && status.at("reason").as_string() == "Evicted") {
      out.push_back({name, "Evicted",
                     status.has_string_field("message")
                         ? status.at("message").as_string().substr(0, 300)
                         : "the node evicted it"});
      continue;
    }
    bool found = false;
    if (status.has_array_field("containerStatuses")) {
      for (const Json& c : status.at("containerStatuses").as_array()) {
        if (!c.has_object_field("state") || !c.at("state").has_object_field("waiting")) continue;
        const Json& waiting = c.at("state").at("waiting");
        const std::string reason =
            waiting.has_string_field("reason") ? waiting.at("reason").as_string() : "";
        if (!kStuck.count(reason)) continue;
        std::string message =
            "container " + (c.has_string_field("name") ? c.at("name").as_string() : "?");
        if (waiting.has_string_field("message")) {
          message += ": " + waiting.at("message").as_string().substr(0, 300);
        }
        out.push_back({name, reason, message});
        found = true;
        break;  // one cause per pod
      }
    }
    if (found || !status.has_array_field("conditions")) continue;
    for (const Json& c : status.at("conditions").as_array()) {
      if (c.has_string_field("type") && c.at("type").as_string() == "PodScheduled" &&
          c.has_string_field("status") && c.at("status").as_string() == "False" &&
          c.has_string_field("reason") && c.at("reason").as_string() == "Unschedulable") {
        out.push_back({name, "Unschedulable",
                       c.has_string_field("message") ? c.at("message").as_string().substr(0, 300)
                                                     : "the scheduler cannot place it"});
      }
    }
  }
  return out;
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
