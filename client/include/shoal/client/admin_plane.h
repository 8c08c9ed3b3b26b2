// AdminPlane: what a coordinator asks of sidecars' admin planes (docs/admin-api.md), as an
// interface with typed outcomes, so that the change executor and the control loop decide from
// the outcome the sidecar named ("already_held", "stale_epoch", "conflict") and never from an
// HTTP status, and so that tests and the protocol simulation can put their own transport under
// them. AdminClient is the HTTP implementation; tests/support has in-process ones.
//
// Addresses are a sidecar's admin "host:port". Implementations are thread-safe. Owned by the
// caller of the executor or loop that uses it, and outlive them.
#pragma once

#include <string>

#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/replication.h"
#include "shoal/common/status.h"

namespace shoal::client {

// What an install did when the sidecar did not refuse it.
enum class InstallOutcome {
  kInstalled,    // the sidecar moved to this map
  kAlreadyHeld,  // it held exactly this map already (an earlier attempt landed)
};

class AdminPlane {
 public:
  virtual ~AdminPlane() = default;

  virtual Result<PartitionMap> GetMap(const std::string& admin) = 0;
  // Installs `map`. Refusals: StaleEpoch (the sidecar holds a newer epoch), Conflict (it holds
  // another map of this epoch, or the map disagrees with its seals), InvalidArgument (a malformed
  // map), Unavailable (try again).
  virtual Result<InstallOutcome> InstallMap(const std::string& admin, const PartitionMap& map) = 0;
  // Opens ahead of a change the partitions `map` gives the pod (best effort, idempotent).
  virtual Status Prepare(const std::string& admin, const PartitionMap& map) = 0;
  // Seals `partition` for the change that makes `target` (its epoch, digest and the successors
  // it gives the partition); the partition's final end offset. The same seal again answers the
  // same end; StaleEpoch or Conflict when the partition is sealed for another change.
  virtual Result<uint64_t> Seal(const std::string& admin, const PartitionMap& target,
                                PartitionId partition) = 0;
  // Forgets a consumer group on that sidecar (DELETE /v1/admin/groups/{group}); the answer
  // {"group","partitions":[...]}. FailedPrecondition while the group looks alive there, unless
  // `force`.
  virtual Result<std::string> DeleteGroup(const std::string& admin, const std::string& group,
                                          bool force) = 0;
  // GET of any path on a data or admin address; the raw answer.
  virtual Result<std::string> Get(const std::string& host_port, const std::string& path,
                                  bool admin) = 0;
  // Fences the copies of `partitions` that sidecar follows, for a failover to leader epoch
  // `leader_epoch` (POST /v1/admin/replica/fence, invariant 10): they take nothing more from an
  // older leader. What each copy held then, by partition (the pod left empty); copies it does
  // not hold are missing from the answer.
  virtual Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> FenceCopies(
      const std::string& admin, const std::vector<PartitionId>& partitions, Epoch leader_epoch) {
    (void)admin;
    (void)partitions;
    (void)leader_epoch;
    return Status::Unavailable("this admin plane does not fence copies");
  }
  // The volume the sidecar keeps the topic on (GET /v1/admin/replica, "volume"): an emptied or
  // replaced volume has a new one.
  virtual Result<uint64_t> VolumeOf(const std::string& admin) {
    (void)admin;
    return Status::Unavailable("this admin plane does not name volumes");
  }
  // The copies the sidecar follows (GET /v1/admin/replica, "followed"), by partition: what each
  // holds (`end`, `last_epoch`) and whether it is `joining` or `refetching` still (the pod left
  // empty). A coordinator that moves copies off a pod waits on it before it drops the old ones.
  virtual Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> FollowedCopies(
      const std::string& admin) {
    (void)admin;
    return Status::Unavailable("this admin plane does not list copies");
  }
};

}  // namespace shoal::client
