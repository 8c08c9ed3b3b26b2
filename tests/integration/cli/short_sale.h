// What the `shoal up` tests share: a topic that reacts within a short run, and reading a file.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace shoal::testing {

// A topic that reacts within a short run (300 ev/s per partition, no scale-up window), written to
// dir/orders.yaml; `replication` is spec.replication's flow mapping, if any.
inline std::string WriteShortSaleTopic(const std::string& dir, const std::string& replication = "",
                                       int scale_down_window_s = 6) {
  const std::string topic = dir + "/orders.yaml";
  std::ofstream out(topic);
  out << R"(apiVersion: shoal.dev/v1alpha1
kind: PartitionedTopic
metadata: {name: orders}
spec:
  partitions: {min: 2, max: 16, initial: 2}
  replicas: {min: 1, max: 4}
  scaling:
    targetEventsPerSecondPerPartition: 300
    targetPartitionsPerReplica: 4
    targetConsumerLag: 5000
  behavior:
    scaleUp: {stabilizationWindowSeconds: 0, tolerance: 0.1}
)"
      << "    scaleDown: {stabilizationWindowSeconds: " << scale_down_window_s
      << ", tolerance: 0.1}\n";
  if (!replication.empty()) out << "  replication: " << replication << "\n";
  return topic;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace shoal::testing
