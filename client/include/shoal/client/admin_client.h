// AdminClient: the admin plane of sidecars (docs/admin-api.md) over cpprestsdk, addressed by
// "host:port": the HTTP AdminPlane, used by the change executor, the control loop, the operator,
// the torture harness and the CLI. Outcomes are decoded from the answer's "error" field
// (wire::ErrorFromAnswer). Thread-safe; clients per address are created on first use and kept.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "shoal/client/admin_plane.h"
#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"
#include "shoal/common/tls.h"

namespace web::http::client {
class http_client;
}

namespace shoal::client {

class AdminClient final : public AdminPlane {
 public:
  // With `tls`: every call is HTTPS, this client's certificate shown and the sidecar's checked
  // (shoal/common/tls.h).
  explicit AdminClient(std::string token, TlsClientFiles tls = {});
  ~AdminClient() override;
  AdminClient(const AdminClient&) = delete;
  AdminClient& operator=(const AdminClient&) = delete;

  Result<PartitionMap> GetMap(const std::string& admin) override;
  Result<InstallOutcome> InstallMap(const std::string& admin, const PartitionMap& map) override;
  Status Prepare(const std::string& admin, const PartitionMap& map) override;
  Result<uint64_t> Seal(const std::string& admin, const PartitionMap& target,
                        PartitionId partition) override;
  // A seal with an explicit intent (tests that play a coordinator by hand). `leader` and
  // `leader_epoch`: the partition's leader in the change's map, when a failover gave it one
  // (leader epoch above 0). `sealed_end`: the end the change's seal of the partition was
  // answered with before, at a leader a failover replaced since (PartitionInfo::end_known).
  Result<uint64_t> SealFor(const std::string& admin, Epoch epoch, PartitionId partition,
                           const std::string& digest, const std::string& successors_json,
                           std::optional<HashRange> range = std::nullopt,
                           const std::string& leader = "", Epoch leader_epoch = Epoch(0),
                           std::optional<uint64_t> sealed_end = std::nullopt);
  Result<std::string> DeleteGroup(const std::string& admin, const std::string& group,
                                  bool force) override;
  Result<std::string> Get(const std::string& host_port, const std::string& path,
                          bool admin) override;
  Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> FenceCopies(
      const std::string& admin, const std::vector<PartitionId>& partitions,
      Epoch leader_epoch) override;
  Result<uint64_t> VolumeOf(const std::string& admin) override;
  Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> FollowedCopies(
      const std::string& admin) override;

 private:
  Result<std::string> Call(const std::string& host_port, const std::string& method,
                           const std::string& path, const std::string& body, bool admin);

  const std::string token_;
  const TlsClientFiles tls_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<web::http::client::http_client>> clients_;
};

// The copies a GET /v1/admin/replica answer lists ("followed"), as AdminPlane::FollowedCopies
// returns them; Unavailable for an answer without that list.
Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> ParseFollowedCopies(
    const std::string& answer);

}  // namespace shoal::client
