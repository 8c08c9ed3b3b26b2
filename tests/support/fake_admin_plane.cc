#include "support/fake_admin_plane.h"

#include "shoal/common/json.h"

namespace shoal::testing {

Status FakeAdminPlane::EnterLocked(const std::string& admin, Kind kind, const std::string& what) {
  Pod& pod = pods_[admin];
  ++pod.attempts[kind];
  calls_.push_back(what);
  if (hook_) hook_(what);
  if (!pod.reachable) return Status::Unavailable(admin + ": connection refused");
  auto& queue = pod.scripted[kind];
  if (!queue.empty()) {
    Status st = queue.front();
    queue.erase(queue.begin());
    return st;
  }
  return Status::Ok();
}

Result<PartitionMap> FakeAdminPlane::GetMap(const std::string& admin) {
  std::lock_guard<std::mutex> lock(mu_);
  SHOAL_RETURN_IF_ERROR(EnterLocked(admin, Kind::kGetMap, "getmap " + admin));
  const Pod& pod = pods_[admin];
  if (!pod.held) return Status::NotFound(admin + " holds no map");
  return *pod.held;
}

Result<client::InstallOutcome> FakeAdminPlane::InstallMap(const std::string& admin,
                                                          const PartitionMap& map) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string e = std::to_string(map.epoch().value());
  SHOAL_RETURN_IF_ERROR(EnterLocked(admin, Kind::kInstall, "install " + admin + " e" + e));
  Pod& pod = pods_[admin];
  if (pod.held) {
    const uint64_t held = pod.held->epoch().value();
    if (held > map.epoch().value()) {
      return Status::StaleEpoch(admin + " holds epoch " + std::to_string(held));
    }
    if (held == map.epoch().value()) {
      if (pod.held->Digest() == map.Digest()) return client::InstallOutcome::kAlreadyHeld;
      return Status::Conflict(admin + " holds another map of epoch " + e);
    }
  }
  pod.held = map;
  return client::InstallOutcome::kInstalled;
}

Status FakeAdminPlane::Prepare(const std::string& admin, const PartitionMap& map) {
  std::lock_guard<std::mutex> lock(mu_);
  return EnterLocked(admin, Kind::kPrepare,
                     "prepare " + admin + " e" + std::to_string(map.epoch().value()));
}

Result<uint64_t> FakeAdminPlane::Seal(const std::string& admin, const PartitionMap& target,
                                      PartitionId partition) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string p = std::to_string(partition.value());
  SHOAL_RETURN_IF_ERROR(EnterLocked(
      admin, Kind::kSeal,
      "seal " + admin + " p" + p + " e" + std::to_string(target.epoch().value())));
  Pod& pod = pods_[admin];
  auto it = pod.seals.find(partition.value());
  if (it != pod.seals.end()) {
    const Sealed& s = it->second;
    if (s.epoch == target.epoch() && s.digest == target.Digest()) return s.end;
    if (target.epoch().value() < s.epoch.value()) {
      return Status::StaleEpoch("partition " + p + " is sealed at a newer epoch");
    }
    // A seal for a change that was abandoned (this pod never held a map of its epoch) is made
    // over for a newer change, at the same end; any other is another change's.
    const bool abandoned = !pod.held || pod.held->epoch().value() < s.epoch.value();
    if (target.epoch().value() == s.epoch.value() || !abandoned) {
      return Status::Conflict("partition " + p + " is sealed for another change");
    }
    it->second = Sealed{target.epoch(), target.Digest(), s.end};
    return s.end;
  }
  if (pod.held && pod.held->epoch().value() > target.epoch().value()) {
    return Status::StaleEpoch(admin + " holds a newer epoch");
  }
  const uint64_t end = pod.ends.count(partition.value()) ? pod.ends[partition.value()] : 0;
  pod.seals[partition.value()] = Sealed{target.epoch(), target.Digest(), end};
  return end;
}

Result<std::string> FakeAdminPlane::DeleteGroup(const std::string& admin, const std::string& group,
                                                bool force) {
  std::lock_guard<std::mutex> lock(mu_);
  SHOAL_RETURN_IF_ERROR(EnterLocked(admin, Kind::kDeleteGroup,
                                    "delete " + admin + " " + group + (force ? " force" : "")));
  std::string out = "{\"group\":";
  json::AppendString(out, group);
  return out + ",\"partitions\":[]}";
}

Result<std::string> FakeAdminPlane::Get(const std::string& host_port, const std::string& path,
                                        bool /*admin*/) {
  std::lock_guard<std::mutex> lock(mu_);
  SHOAL_RETURN_IF_ERROR(EnterLocked(host_port, Kind::kGet, "get " + host_port + path));
  auto it = get_answers_.find(host_port + path);
  if (it == get_answers_.end()) return Status::NotFound(host_port + path);
  return it->second;
}

Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> FakeAdminPlane::FenceCopies(
    const std::string& admin, const std::vector<PartitionId>& partitions, Epoch leader_epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string what = "fence " + admin + " e" + std::to_string(leader_epoch.value());
  for (PartitionId id : partitions) what += " p" + std::to_string(id.value());
  SHOAL_RETURN_IF_ERROR(EnterLocked(admin, Kind::kFence, what));
  std::vector<std::pair<PartitionId, replication::ReplicaState>> out;
  const Pod& pod = pods_[admin];
  for (PartitionId id : partitions) {
    if (auto it = pod.copies.find(id.value()); it != pod.copies.end()) {
      out.emplace_back(id, it->second);
      if (!out.back().second.volume) out.back().second.volume = pod.volume;
    }
  }
  return out;
}

Result<uint64_t> FakeAdminPlane::VolumeOf(const std::string& admin) {
  std::lock_guard<std::mutex> lock(mu_);
  const Pod& pod = pods_[admin];
  if (!pod.reachable) return Status::Unavailable(admin + " does not answer");
  return pod.volume;
}

Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>>
FakeAdminPlane::FollowedCopies(const std::string& admin) {
  std::lock_guard<std::mutex> lock(mu_);
  const Pod& pod = pods_[admin];
  if (!pod.reachable) return Status::Unavailable(admin + " does not answer");
  std::vector<std::pair<PartitionId, replication::ReplicaState>> out;
  for (const auto& [id, held] : pod.copies) out.emplace_back(PartitionId(id), held);
  return out;
}

void FakeAdminPlane::SetCopy(const std::string& admin, PartitionId partition,
                             replication::ReplicaState held) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_[admin].copies[partition.value()] = held;
}

void FakeAdminPlane::Wipe(const std::string& admin) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_[admin].held.reset();
  ++pods_[admin].volume;
}

void FakeAdminPlane::Hold(const std::string& admin, const PartitionMap& map) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_[admin].held = map;
}

void FakeAdminPlane::SetEnd(const std::string& admin, PartitionId partition, uint64_t end) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_[admin].ends[partition.value()] = end;
}

void FakeAdminPlane::Fail(const std::string& admin, Kind kind, Status status, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < times; ++i) pods_[admin].scripted[kind].push_back(status);
}

void FakeAdminPlane::SetReachable(const std::string& admin, bool reachable) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_[admin].reachable = reachable;
}

void FakeAdminPlane::SetGetAnswer(const std::string& host_port, const std::string& path,
                                  std::string body) {
  std::lock_guard<std::mutex> lock(mu_);
  get_answers_[host_port + path] = std::move(body);
}

void FakeAdminPlane::OnCall(std::function<void(const std::string&)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hook_ = std::move(hook);
}

std::optional<PartitionMap> FakeAdminPlane::Held(const std::string& admin) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(admin);
  return it == pods_.end() ? std::nullopt : it->second.held;
}

std::vector<std::string> FakeAdminPlane::Calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

int FakeAdminPlane::Attempts(const std::string& admin, Kind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(admin);
  if (it == pods_.end()) return 0;
  auto k = it->second.attempts.find(kind);
  return k == it->second.attempts.end() ? 0 : k->second;
}

}  // namespace shoal::testing
