// TopicSpec: the PartitionedTopic spec of docs/kubernetes.md (crds/) as a type, with
// YAML and JSON codecs (yaml-cpp reads both: JSON is YAML) and a validation whose messages name
// the field and the fix. The operator, `shoal up` and the simulator read topics through this.
// Values: copyable, not synchronized.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/schedule.h"
#include "shoal/common/status.h"

namespace shoal {

struct ScaleBehavior {
  uint32_t stabilization_window_seconds = 0;
  double tolerance = 0.1;                // HPA-like: no change while within ±10% of the target
  uint32_t max_partitions_per_step = 0;  // 0: reach the needed count in one step
  // Scale-up only: size for the rate a rising trend will have reached when the change has taken
  // effect (the policy's prediction), not only for the present one.
  bool predictive = true;
};

struct TopicSpec {
  std::string name;
  std::string namespace_name = "default";
  struct {
    uint32_t min = 1;
    uint32_t max = 64;  // the hard cap
    uint32_t initial = 4;
  } partitions;
  struct {
    uint32_t min = 1;
    uint32_t max = 16;
  } replicas;
  struct {
    double events_per_second_per_partition = 5000;
    uint32_t cpu_utilization_percent = 70;
    uint64_t consumer_lag_events = 10000;
    uint32_t partitions_per_replica = 4;  // active partitions one consumer pod takes on
    // A backlog above consumer_lag_events is sized for as arrivals of backlog / drain_seconds
    // more: the partitions and pods to consume it within this long, besides what arrives.
    uint32_t drain_seconds = 30;
    // Windows of capacity held whatever the load (a flash sale announced for noon).
    std::vector<ScheduleSpec> schedules;
  } scaling;
  ScaleBehavior scale_up{0, 0.1, 0};
  ScaleBehavior scale_down{300, 0.1, 0};
  std::string fsync = "interval";
  // Copies of every partition on distinct pods (on distinct nodes and zones where known), the
  // leader's included; fewer while the topic has fewer pods. `acks`: quorum acknowledges an
  // event once a majority of the copies holds it; leader once the leader does (faster, and a
  // failover can lose what was acknowledged and not yet copied).
  struct {
    uint32_t factor = 1;
    std::string acks = "quorum";
  } replication;
  struct {
    uint64_t bytes = 0;  // per partition; 0: unlimited
    int64_t ms = 7LL * 24 * 3600 * 1000;
  } retention;
  // The sidecars' volume claims; empty: the operator's --data-volume-size / --storage-class.
  struct {
    std::string size;           // a Kubernetes quantity, e.g. 20Gi
    std::string storage_class;  // storageClassName
    // Space each sidecar keeps on its volume for commits, group registrations, seals and
    // retirement (a quantity); empty: the sidecar's default, 64Mi.
    std::string reserve;
  } storage;
  std::string consumer_template_yaml;  // the user's pod template, kept as written
  // Empty: the operator's own image (shoal-operator --sidecar-image).
  std::string sidecar_image;
  std::map<std::string, std::string> sidecar_resources;  // e.g. requests.cpu -> 100m
  // Who may reach the topic's pods, and how (docs/security.md). `tls`: the pods speak TLS only
  // (between themselves and to every caller outside them) with certificates of the topic's own
  // CA; unset: on when `principals` lists any, else the operator's default (--tls-default; the
  // chart's is on). `principals`: callers
  // outside the topic's pods, each issued a client certificate (Secret <topic>-client-<name>)
  // and granted produce and the groups listed (a trailing * is a prefix).
  struct Principal {
    std::string name;
    bool produce = false;
    std::vector<std::string> groups;
  };
  struct {
    std::optional<bool> tls;
    std::vector<Principal> principals;
  } security;
};

// Parses a whole PartitionedTopic document (apiVersion shoal.dev/v1alpha1, kind, metadata, spec),
// YAML or JSON, then validates it. Missing fields take the defaults above; unknown fields are
// errors naming their path.
Result<TopicSpec> ParseTopic(std::string_view text);
Status ValidateTopic(const TopicSpec& spec);
// Bytes of a Kubernetes quantity ("20Gi", "500M", "1073741824"); InvalidArgument otherwise.
Result<uint64_t> QuantityBytes(const std::string& quantity);
// Whether a volume of `size` holds retention.bytes of every partition copy one pod can hold (the
// most a pod holds: targetPartitionsPerReplica times replication.factor, or partitions.max
// times the factor spread over replicas.max when that is more; never more than partitions.max,
// one copy of each). Ok when retention.bytes is 0 (time-bound only); otherwise InvalidArgument
// naming `field` and the numbers.
Status RetentionFits(const TopicSpec& spec, const std::string& size, const std::string& field);
std::string TopicToYaml(const TopicSpec& spec);
std::string TopicToJson(const TopicSpec& spec);

}  // namespace shoal
