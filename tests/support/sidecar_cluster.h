// SidecarCluster: a topic served by n real `shoal-sidecar` processes (pod-0 .. pod-{n-1}) on
// loopback, started with --wait-for-map, with the test playing the operator: `current()` is the
// map the test last installed with its ChangeExecutor. For integration tests of the change
// protocol and of the guarantees.
//
// Start from the test's main thread (the children die with it). Not thread-safe; owned by the
// test. Every wait has a deadline: a pod that does not come back fails the test, not hangs it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shoal/client/admin_client.h"
#include "shoal/common/partition_map.h"
#include "shoal/control/change_executor.h"
#include "support/sidecar_process.h"

namespace shoal::testing {

struct SidecarClusterOptions {
  std::string binary;  // SHOAL_SIDECAR_BIN; a test run may point elsewhere (SHOAL_SIDECAR_BIN_UNDER_TEST)
  size_t pods = 2;
  uint32_t partitions_per_pod = 2;
  std::string topic = "orders";
  std::string token = "sidecar-cluster-admin-token";
  std::string fsync = "always";
  std::vector<std::string> extra_args;  // for every sidecar
  // Copies of every partition (common/replication.h: PlaceReplicas on the epoch-1 map).
  uint32_t replication = 1;
  std::chrono::milliseconds step_timeout = std::chrono::seconds(20);
  // The test's admin calls over TLS (the pods' ports are TLS only when extra_args give them the
  // topic's CA): the CA, the operator's certificate and the topic's peer name.
  TlsClientFiles admin_tls;
};

// The binary to run: SHOAL_SIDECAR_BIN_UNDER_TEST when set (to show that a regression test fails
// against an earlier build), else `built`.
std::string SidecarBinaryUnderTest(const std::string& built);

class SidecarCluster {
 public:
  explicit SidecarCluster(SidecarClusterOptions options);

  // Starts the pods and installs epoch 1 everywhere: partitions_per_pod partitions per pod over
  // equal ranges, owners round robin (p0 pod-0, p1 pod-1, p2 pod-0, ...).
  Status Start();
  // Applies `target` (made from current() by Split/Merge/Move/MapChange) with the executor.
  Status Apply(const PartitionMap& target, control::ChangeTiming* timing = nullptr);

  static PodName Pod(size_t i) { return PodName("pod-" + std::to_string(i)); }
  SidecarProcess& pod(size_t i) { return *pods_.at(i); }
  size_t size() const { return pods_.size(); }
  const PartitionMap& current() const { return current_; }
  void set_current(PartitionMap m) { current_ = std::move(m); }
  client::AdminClient& admin() { return admin_; }
  // Per pod, the volume it held its first map on (recorded by Start, as a coordinator does).
  const std::map<std::string, uint64_t>& first_volumes() const { return first_volumes_; }
  control::ChangeExecutor& executor() { return executor_; }
  std::string admin_address(size_t i) const;
  std::string data_address(size_t i) const;
  const SidecarClusterOptions& options() const { return opts_; }
  std::string Describe(size_t lines = 40) const;

 private:
  SidecarClusterOptions opts_;
  std::vector<std::unique_ptr<SidecarProcess>> pods_;
  client::AdminClient admin_;
  control::ChangeExecutor executor_;
  PartitionMap current_;
  std::map<std::string, uint64_t> first_volumes_;
};

}  // namespace shoal::testing
