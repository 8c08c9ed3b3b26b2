#include "loop/control_probe.h"

#include "shoal/common/metrics.h"

namespace shoal::control {

namespace {

prometheus::Gauge& TopicGauge(prometheus::Registry& r, const std::string& name,
                              const std::string& help, const std::string& topic,
                              std::map<std::string, std::string> labels = {}) {
  labels["topic"] = topic;
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels);
}

prometheus::Counter& TopicCounter(prometheus::Registry& r, const std::string& name,
                                  const std::string& help, const std::string& topic) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({{"topic", topic}});
}

// Every kind a decision or a plan step can have (policy.cc's Decide; StepKind in
// control_loop.cc). Their counters exist from the start at 0, so that rate() and increase() see
// a topic's first split or first failed step: a series that appears at 1 looks like no change.
constexpr const char* kDecisionKinds[] = {"split", "merge", "pods_up", "pods_down", "hold"};
constexpr const char* kStepKinds[] = {"split",    "merge",      "move",          "retire",
                                      "set_pods", "wait_ready", "wait_consumed", "drain"};

}  // namespace

ControlProbe::ControlProbe(prometheus::Registry& r, const std::string& topic)
    : topic_(topic),
      decisions_(prometheus::BuildCounter()
                     .Name("shoal_control_decisions_total")
                     .Help("Scaling decisions by kind (split, merge, pods_up, pods_down, hold)")
                     .Register(r)),
      steps_(prometheus::BuildCounter()
                 .Name("shoal_control_plan_steps_total")
                 .Help("Plan steps carried out, by kind and outcome (ok, failed)")
                 .Register(r)),
      step_seconds_(prometheus::BuildHistogram()
                        .Name("shoal_control_plan_step_duration_seconds")
                        .Help("Time one plan step took, by kind")
                        .Register(r)),
      last_decision_(TopicGauge(r, "shoal_control_last_decision_timestamp_seconds",
                                "Unix time of the last decision that changed something", topic)),
      arrival_(TopicGauge(r, "shoal_control_arrival_rate_events_per_second",
                          "Arrival rate over the topic's active partitions, as last observed",
                          topic)),
      lag_(TopicGauge(r, "shoal_control_consumer_lag_events",
                      "Consumer lag summed over the topic's partitions, as last observed", topic)),
      missing_(TopicGauge(r, "shoal_control_observation_missing",
                          "What the last observation could not see (partitions or pods)", topic)),
      active_(TopicGauge(r, "shoal_control_partitions", "Partitions of the topic's map, by state",
                         topic, {{"state", "active"}})),
      sealed_(TopicGauge(r, "shoal_control_partitions", "Partitions of the topic's map, by state",
                         topic, {{"state", "sealed"}})),
      desired_pods_(TopicGauge(r, "shoal_control_pods", "Pods of the topic, desired and ready",
                               topic, {{"state", "desired"}})),
      ready_pods_(TopicGauge(r, "shoal_control_pods", "Pods of the topic, desired and ready", topic,
                             {{"state", "ready"}})),
      in_progress_(TopicGauge(r, "shoal_control_plan_in_progress",
                              "1 while a plan is being carried out", topic)),
      max_partitions_(TopicGauge(r, "shoal_control_partitions_max",
                                 "Most active partitions the topic's spec allows (partitions.max)",
                                 topic)),
      hot_keys_(TopicGauge(r, "shoal_control_hot_keys",
                           "Partitions held back by one key that alone carries more than a "
                           "partition's target (no split can spread it), at the last decision",
                           topic)),
      hot_key_rate_(TopicGauge(r, "shoal_control_hot_key_events_per_second",
                               "Events/s of the hottest such key (0 without one)", topic)),
      hot_key_hash_(TopicGauge(r, "shoal_control_hot_key_hash",
                               "crc32 hash of the hottest such key, never the key itself (0 "
                               "without one)",
                               topic)),
      pods_without_data_(TopicGauge(r, "shoal_control_pods_without_data",
                                    "Pods of the map that came back without their data (an "
                                    "emptied or new volume): their partitions take no writes",
                                    topic)),
      partitions_without_data_(TopicGauge(r, "shoal_control_partitions_without_data",
                                          "Partitions of the map whose owner came back without "
                                          "its data",
                                          topic)),
      partitions_lost_(TopicCounter(r, "shoal_control_partitions_lost_total",
                                    "Partitions declared lost because their pod came back "
                                    "without its data (their ranges took new partitions)",
                                    topic)),
      events_lost_(TopicCounter(r, "shoal_control_events_lost_total",
                                "Events those partitions had taken, as last observed",
                                topic)),
      failovers_(prometheus::BuildCounter()
                     .Name("shoal_control_failovers_total")
                     .Help("Failovers of the partitions a pod that stopped answering led, by "
                           "outcome (ok, failed)")
                     .Register(r)),
      failed_over_partitions_(TopicCounter(r, "shoal_control_failed_over_partitions_total",
                                           "Partitions whose leadership a failover moved",
                                           topic)),
      failover_seconds_(TopicGauge(r, "shoal_control_failover_seconds",
                                   "The last failover's time from the leader's first missed "
                                   "answer to the new map installed on the new leaders",
                                   topic)) {
  for (const char* outcome : {"ok", "failed"}) {
    failovers_.Add({{"topic", topic_}, {"outcome", outcome}});
  }
  for (const char* kind : kDecisionKinds) decisions_.Add({{"topic", topic_}, {"kind", kind}});
  for (const char* kind : kStepKinds) {
    for (const char* outcome : {"ok", "failed"}) {
      steps_.Add({{"topic", topic_}, {"kind", kind}, {"outcome", outcome}});
    }
  }
}

void ControlProbe::Decided(const std::string& kind, double unix_seconds) {
  decisions_.Add({{"topic", topic_}, {"kind", kind}}).Increment();
  if (kind != "hold") last_decision_.Set(unix_seconds);
}

void ControlProbe::StepFinished(const std::string& kind, bool ok, double seconds) {
  steps_.Add({{"topic", topic_}, {"kind", kind}, {"outcome", ok ? "ok" : "failed"}}).Increment();
  if (ok) {
    step_seconds_.Add({{"topic", topic_}, {"kind", kind}}, metrics::LatencyBuckets())
        .Observe(seconds);
  }
}

void ControlProbe::Observed(double arrival_rate, double consumer_lag, size_t missing) {
  arrival_.Set(arrival_rate);
  lag_.Set(consumer_lag);
  missing_.Set(static_cast<double>(missing));
}

void ControlProbe::State(size_t active_partitions, size_t sealed_partitions, uint32_t desired_pods,
                         uint32_t ready_pods, bool plan_in_progress) {
  active_.Set(static_cast<double>(active_partitions));
  sealed_.Set(static_cast<double>(sealed_partitions));
  desired_pods_.Set(desired_pods);
  ready_pods_.Set(ready_pods);
  in_progress_.Set(plan_in_progress ? 1 : 0);
}

void ControlProbe::Limits(uint32_t max_partitions) { max_partitions_.Set(max_partitions); }

void ControlProbe::PodsWithoutData(size_t pods, size_t partitions) {
  pods_without_data_.Set(static_cast<double>(pods));
  partitions_without_data_.Set(static_cast<double>(partitions));
}

void ControlProbe::FailedOver(const std::string& outcome, size_t partitions, double seconds) {
  failovers_.Add({{"topic", topic_}, {"outcome", outcome}}).Increment();
  if (outcome == "ok") {
    failed_over_partitions_.Increment(static_cast<double>(partitions));
    failover_seconds_.Set(seconds);
  }
}

void ControlProbe::PartitionsLost(size_t partitions, uint64_t events) {
  partitions_lost_.Increment(static_cast<double>(partitions));
  events_lost_.Increment(static_cast<double>(events));
}

void ControlProbe::HotKeys(const std::vector<HotKey>& hot) {
  hot_keys_.Set(static_cast<double>(hot.size()));
  hot_key_rate_.Set(hot.empty() ? 0 : hot.front().rate);
  hot_key_hash_.Set(hot.empty() ? 0 : static_cast<double>(hot.front().hash));
}

}  // namespace shoal::control
