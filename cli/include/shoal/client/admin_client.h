// AdminClient: the admin plane of sidecars (docs/admin-api.md) over cpprestsdk, addressed by
// "host:port". Used by the change executor, the torture harness and later the operator.
// Thread-safe; clients per address are created on first use and kept.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace web::http::client {
class http_client;
}

namespace shoal::client {

class AdminClient {
 public:
  explicit AdminClient(std::string token);
  ~AdminClient();
  AdminClient(const AdminClient&) = delete;
  AdminClient& operator=(const AdminClient&) = delete;

  Result<PartitionMap> GetMap(const std::string& admin);
  // FailedPrecondition when the sidecar already holds this epoch or a newer one.
  Status InstallMap(const std::string& admin, const PartitionMap& map);
  // Opens ahead of a change the partitions `map` gives the pod (best effort, idempotent).
  Status Prepare(const std::string& admin, const PartitionMap& map);
  // The sealed partition's final end offset.
  Result<uint64_t> Seal(const std::string& admin, Epoch epoch, PartitionId partition);
  // DELETE /v1/admin/groups/{group}: forgets a consumer group on that sidecar; the answer
  // {"group","partitions":[...]} (the partitions where it had a commit or a cursor).
  // FailedPrecondition while the group looks alive there, unless `force`.
  Result<std::string> DeleteGroup(const std::string& admin, const std::string& group,
                                  bool force = false);
  // GET of any path on a data or admin address; the raw answer.
  Result<std::string> Get(const std::string& host_port, const std::string& path, bool admin);

 private:
  Result<std::string> Call(const std::string& host_port, const std::string& method,
                           const std::string& path, const std::string& body, bool admin);

  const std::string token_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<web::http::client::http_client>> clients_;
};

}  // namespace shoal::client
