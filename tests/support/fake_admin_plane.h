// FakeAdminPlane: an in-memory AdminPlane for unit tests of what drives sidecars' admin planes
// (ChangeExecutor, ControlLoop). Each address is a fake sidecar that keeps the two rules a real
// one answers by (docs/admin-api.md):
//   - install: the map held already (same epoch and digest) -> kAlreadyHeld; a newer epoch held
//     -> StaleEpoch; another map of the held epoch -> Conflict; else it is held -> kInstalled;
//   - seal: the first seal of a partition names its change (epoch, digest) and answers the end
//     offset set with SetEnd (default 0); the same seal again answers the same end; a seal of an
//     older epoch -> StaleEpoch, of another change of the same epoch -> Conflict, of a newer
//     epoch -> Conflict unless the sealing change was abandoned (the pod never held its epoch),
//     then the seal is made over at the same end.
// On top, a test scripts answers per address and call kind: Fail(address, kind, status, n)
// answers the next n such calls with `status` instead; SetReachable(address, false) answers
// every call with Unavailable (a pod down), counting the attempts.
//
// Every call is recorded in order ("install a:1 e3", "seal a:1 p0 e3", ...), so a test can check
// the protocol's order. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "shoal/client/admin_plane.h"

namespace shoal::testing {

class FakeAdminPlane final : public client::AdminPlane {
 public:
  enum class Kind { kGetMap, kInstall, kPrepare, kSeal, kDeleteGroup, kGet, kFence };

  Result<PartitionMap> GetMap(const std::string& admin) override;
  Result<client::InstallOutcome> InstallMap(const std::string& admin,
                                            const PartitionMap& map) override;
  Status Prepare(const std::string& admin, const PartitionMap& map) override;
  Result<uint64_t> Seal(const std::string& admin, const PartitionMap& target,
                        PartitionId partition) override;
  Result<std::string> DeleteGroup(const std::string& admin, const std::string& group,
                                  bool force) override;
  Result<std::string> Get(const std::string& host_port, const std::string& path,
                          bool admin) override;
  // Fences the copies set with SetCopy (recorded as "fence <admin> e<epoch> p<id>..."): each
  // answers what SetCopy says it holds.
  Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> FenceCopies(
      const std::string& admin, const std::vector<PartitionId>& partitions,
      Epoch leader_epoch) override;
  // Each address is on volume 1 until Wipe gives it a new one (not recorded among the calls);
  // FenceCopies answers a copy's volume as this unless SetCopy named one.
  Result<uint64_t> VolumeOf(const std::string& admin) override;
  // The copies set with SetCopy, as the sidecar lists them (not recorded among the calls).
  Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> FollowedCopies(
      const std::string& admin) override;

  // Scripting.
  void Hold(const std::string& admin, const PartitionMap& map);  // as if installed earlier
  // As if its volume were emptied: it holds no map, and is on a new volume.
  void Wipe(const std::string& admin);
  void SetEnd(const std::string& admin, PartitionId partition, uint64_t end);
  void Fail(const std::string& admin, Kind kind, Status status, int times = 1);
  void SetReachable(const std::string& admin, bool reachable);
  void SetGetAnswer(const std::string& host_port, const std::string& path, std::string body);
  void SetCopy(const std::string& admin, PartitionId partition, replication::ReplicaState held);
  // Called with each call's record (as Calls() lists it) before it is answered: a test's way to
  // let something happen at that moment (another coordinator saving its record). It must not
  // call this FakeAdminPlane.
  void OnCall(std::function<void(const std::string&)> hook);

  // Inspection.
  std::optional<PartitionMap> Held(const std::string& admin) const;
  std::vector<std::string> Calls() const;
  int Attempts(const std::string& admin, Kind kind) const;

 private:
  struct Sealed {
    Epoch epoch{0};
    std::string digest;
    uint64_t end = 0;
  };
  struct Pod {
    std::optional<PartitionMap> held;
    std::map<uint32_t, uint64_t> ends;
    std::map<uint32_t, Sealed> seals;
    std::map<Kind, std::vector<Status>> scripted;
    std::map<Kind, int> attempts;
    std::map<uint32_t, replication::ReplicaState> copies;  // SetCopy
    uint64_t volume = 1;
    bool reachable = true;
  };
  // Counts the attempt, records it, and answers a scripted or unreachable failure if any.
  Status EnterLocked(const std::string& admin, Kind kind, const std::string& what);

  mutable std::mutex mu_;
  std::map<std::string, Pod> pods_;
  std::map<std::string, std::string> get_answers_;
  std::vector<std::string> calls_;
  std::function<void(const std::string&)> hook_;
};

}  // namespace shoal::testing
