#include "shoal/control/change_executor.h"

#include <map>
#include <thread>

#include "shoal/common/logging.h"

namespace shoal::control {

ChangeExecutor::ChangeExecutor(client::AdminPlane& admin, Options options)
    : admin_(admin), opts_(options) {}

template <typename Fn>
Status ChangeExecutor::Retry(const std::string& what, Fn&& fn, ChangeTiming* timing) {
  const auto deadline = std::chrono::steady_clock::now() + opts_.step_timeout;
  auto backoff = opts_.backoff_start;
  while (true) {
    if (opts_.may_act && !opts_.may_act()) {
      return Status::Unavailable(what + ": stopped, no longer allowed to act (leader lease)");
    }
    Status st = fn();
    // Unavailable: the pod is down, restarting or busy; anything else is an answer.
    if (st.code() != Status::Code::kUnavailable) return st;
    if (std::chrono::steady_clock::now() >= deadline) return st.Annotate(what + ": gave up");
    if (timing) ++timing->retries;
    std::this_thread::sleep_for(backoff);  // backoff between attempts at a down pod
    backoff = std::min(backoff * 2, opts_.backoff_max);
  }
}

Status ChangeExecutor::InstallOn(const PodName& pod, const PartitionMap& map,
                                 ChangeTiming* timing) {
  const PeerAddress* addr = map.Peer(pod);
  if (!addr) return Status::InvalidArgument("the map has no address for pod " + pod.value());
  return InstallAt(pod, *addr, map, timing);
}

Status ChangeExecutor::InstallAt(const PodName& pod, const PeerAddress& address,
                                 const PartitionMap& map, ChangeTiming* timing) {
  const PeerAddress* addr = &address;
  const std::string what =
      "installing epoch " + std::to_string(map.epoch().value()) + " on " + pod.value();
  // Installed or already held (an earlier attempt landed) is done; stale_epoch and conflict are
  // another coordinator's doing and come back as they are.
  return Retry(
      what,
      [&]() -> Status {
        auto r = admin_.InstallMap(addr->admin, map);
        return r.ok() ? Status::Ok() : r.status().Annotate(what);
      },
      timing);
}

bool ChangeExecutor::OnlyFollows(const PartitionMap& map, const PodName& pod) {
  bool follows = false;
  for (const auto& p : map.partitions()) {
    if (p.owner == pod) return false;
    follows |= p.FollowedBy(pod);
  }
  return follows;
}

bool ChangeExecutor::HoldsNoMap(const PeerAddress& address) {
  auto held = admin_.GetMap(address.admin);
  return !held.ok() && held.status().code() == Status::Code::kNotFound;
}

Status ChangeExecutor::InstallEverywhere(const PartitionMap& map, ChangeTiming* timing) {
  for (const auto& [pod, addr] : map.peers()) {
    SHOAL_RETURN_IF_ERROR(InstallOn(PodName(pod), map, timing));
  }
  return Status::Ok();
}

Result<PartitionMap> ChangeExecutor::Apply(const PartitionMap& current, const PartitionMap& target,
                                           ChangeTiming* timing, const OnSealed& on_sealed) {
  ChangeTiming local;
  if (!timing) timing = &local;
  if (target.epoch().value() <= current.epoch().value()) {
    return Status::InvalidArgument("the target map is not newer than the current one");
  }
  // 0: the successors' owners create their files before anything is sealed, so the pause
  // holds no file creation. Best effort: InstallMap opens whatever was not prepared.
  std::set<std::string> first;
  for (const auto& p : target.partitions()) {
    if (p.active() && !current.Find(p.id)) first.insert(p.owner.value());
  }
  // The owners of what the target retires check the retirement against every group the topic
  // knows; they go before anyone else sees the map, so a refused retirement changes nothing.
  // A leaving pod whose peer entry the target drops gets it too, at its current address.
  std::map<std::string, PeerAddress> retiring;
  for (const auto& p : current.partitions()) {
    if (target.Find(p.id)) continue;
    const PeerAddress* addr = target.Peer(p.owner) ? target.Peer(p.owner) : current.Peer(p.owner);
    if (addr) retiring.emplace(p.owner.value(), *addr);
  }
  for (const auto& pod : first) {
    if (const PeerAddress* addr = target.Peer(PodName(pod))) {
      (void)Retry(
          "preparing " + pod, [&] { return admin_.Prepare(addr->admin, target); }, timing);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  PartitionMap installed = target;
  PartitionMap known = target;  // with the ends a quorum held when their seals were answered
  // 1 and 2: seal the parents at their owners, record their final end offsets.
  for (const auto& p : target.partitions()) {
    const PartitionInfo* before = current.Find(p.id);
    // A partition declared lost has no owner left to seal it (its pod came back empty).
    if (p.active() || p.lost || !before || !before->active()) continue;
    const PeerAddress* addr = target.Peer(p.owner);
    if (!addr) return Status::InvalidArgument("no address for pod " + p.owner.value());
    uint64_t end = 0;
    Status st = Retry(
        "sealing partition " + std::to_string(p.id.value()),
        [&]() -> Status {
          auto r = admin_.Seal(addr->admin, target, p.id);
          if (!r.ok()) return r.status();
          end = *r;
          return Status::Ok();
        },
        timing);
    if (!st.ok()) return st;
    if (p.end_known && end != p.end_offset) {
      return Status::FailedPrecondition(
          "partition " + std::to_string(p.id.value()) + " is sealed at " + std::to_string(end) +
          " on " + p.owner.value() + ", but the change's seal of it was answered with " +
          std::to_string(p.end_offset) + " before");
    }
    // Answered once a quorum of its copies held the end when sealed at its leader as `current`
    // has it; a copy a failover carried in the change made the leader is answered at once.
    const bool known_end = before->owner == p.owner || p.end_known;
    auto with_end = installed.WithEndOffset(p.id, end, known_end);
    if (!with_end.ok()) return with_end.status();
    installed = std::move(with_end).value();
    if (known_end) {
      auto kept = known.WithEndOffset(p.id, end);
      if (!kept.ok()) return kept.status();
      known = std::move(kept).value();
    }
  }
  timing->seal_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (on_sealed) SHOAL_RETURN_IF_ERROR(on_sealed(known));
  // 3: the retiring owners, then the successors' owners: from then on the successors take
  // writes.
  for (const auto& [pod, addr] : retiring) {
    SHOAL_RETURN_IF_ERROR(InstallAt(PodName(pod), addr, installed, timing));
  }
  for (const auto& pod : first) {
    if (!retiring.count(pod)) SHOAL_RETURN_IF_ERROR(InstallOn(PodName(pod), installed, timing));
  }
  const auto t_active = std::chrono::steady_clock::now();
  // 4: everyone else. A pod that lost its data (it holds nothing of partitions it should) is
  // left without the map: its ranges take no writes either way, and the coordinator declares
  // its partitions lost next (PartitionMap::DeclareLost).
  for (const auto& [pod, addr] : installed.peers()) {
    if (!first.count(pod) && !retiring.count(pod)) {
      Status st = InstallOn(PodName(pod), installed, timing);
      // Only its own loss: a pod may also refuse because a peer it takes over from lost its.
      if (st.code() == Status::Code::kDataLost && HoldsNoMap(addr)) {
        Logger("control")->warn("msg=\"a pod lost its data; the change goes on without it\" "
                                "pod={} epoch={} reason=\"{}\"",
                                pod, installed.epoch().value(), st.message());
        continue;
      }
      // A pod that does not answer and only follows in this map (it leads nothing, active or
      // sealed) is not waited for: its copies take nothing from a leader the map replaced (the
      // failover fenced them), it gets the map when it answers again (the coordinator brings
      // pods behind up to date), and waiting would hold back a failover carried in the change.
      if (st.code() == Status::Code::kUnavailable && OnlyFollows(installed, PodName(pod))) {
        Logger("control")->warn(
            "msg=\"a pod that only follows does not answer; the change goes "
            "on without it\" pod={} epoch={} reason=\"{}\"",
            pod, installed.epoch().value(), st.message());
        continue;
      }
      SHOAL_RETURN_IF_ERROR(st);
    }
  }
  const auto t_done = std::chrono::steady_clock::now();
  timing->pause_ms = std::chrono::duration<double, std::milli>(t_active - t0).count();
  timing->total_ms = std::chrono::duration<double, std::milli>(t_done - t0).count();
  return installed;
}

}  // namespace shoal::control
