// shoal torture: the change protocol under fire. Starts N sidecar processes on loopback, runs
// idempotent producers and consumer groups of different kinds (torture_groups.h), applies random
// splits, merges and moves, retires what every group consumed, and kill -9s, SIGSTOPs and restarts
// sidecars at random moments while a rogue coordinator replays old plans; then verifies what each
// group saw against what the producers had acknowledged (invariants 4, 6, 7), while a checker
// asks every sidecar for its map and accepting partitions between changes (invariants 1, 2, 5).
// With --replication N every partition has N-1 followers (replication::PlaceReplicas); the
// harness then fails over, as the control loop does (failover.h), the partitions of a leader
// killed, paused or wiped for longer than --failover-after-ms, and checks that no two sidecars
// acknowledge writes of one partition at once (invariants 9, 10). --wipes empties a sidecar's
// volume: with copies it is failed over and catches up as a follower; without, its partitions
// are declared lost and the verifier reports the events lost. --fills fills a sidecar's volume
// (then each pod's data directory is a tmpfs the harness mounts) to its last byte for a while.
#include <fcntl.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>

#include "cmd/commands.h"
#include "cmd/scrape.h"
#include "cmd/torture_groups.h"
#include "shoal/client/admin_client.h"
#include "shoal/common/json.h"
#include "shoal/common/map_transition.h"
#include "shoal/common/metrics.h"
#include "shoal/common/replication.h"
#include "shoal/control/admin_partitions.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/change_probe.h"
#include "shoal/control/failover.h"
#include "shoal/control/process.h"
#include "shoal/control/retirement.h"
#include "shoal/harness/workload.h"

namespace shoal::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct TortureOptions {
  int sidecars = 3;
  int changes = 20;
  int kills = 1;
  double duration_s = 30;
  uint64_t seed = 1;
  bool json = false;
  std::string fsync = "always";
  int producers = 4;
  double rate = 2000;
  int keys = 64;
  int batch = 20;
  std::string dir;
  bool keep = false;
  int groups = 1;            // fast, slow, stop-resume, then more fast ones
  bool late_group = false;   // one more group that first reads in the middle of the run
  // One more group that reads nothing from 5% to 60% of the run, while the partitions change,
  // then drains the parents' backlog through their successors.
  bool backlog_group = false;
  bool skew = false;         // most keys in two narrow ranges: most partitions stay empty
  int pauses = 0;            // SIGSTOP/SIGCONT of a sidecar, 0.5 to 3 s each
  bool rogue = false;        // a deposed coordinator that wakes with old plans
  bool retire = true;        // retire sealed partitions every group consumed
  int replication = 1;       // copies of every partition (1: no followers)
  std::string acks = "quorum";
  int failover_after_ms = 2000;  // a leader unreachable this long is failed over
  int wipes = 0;             // kill -9, empty the data directory, restart
  int fills = 0;             // a sidecar's volume filled to its last byte for 1-4 s
  int volume_mb = 192;       // with --fills: each pod's tmpfs
};

// With --fills, each pod's data directory is a tmpfs of its own (a volume that can fill):
// mounted before the sidecars start; at the end each sidecar's log is copied beside the
// directory (pod-N.sidecar.log) and the tmpfs unmounted, after the sidecars stopped (declare
// it before them).
class PodVolumes {
 public:
  PodVolumes() = default;
  PodVolumes(const PodVolumes&) = delete;
  PodVolumes& operator=(const PodVolumes&) = delete;
  ~PodVolumes() {
    for (const auto& dir : mounted_) {
      std::error_code ec;
      std::filesystem::copy_file(dir + "/sidecar.log", dir + ".sidecar.log",
                                 std::filesystem::copy_options::overwrite_existing, ec);
      ::umount2(dir.c_str(), MNT_DETACH);
    }
  }
  Status Mount(const std::string& dir, uint64_t bytes) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string opts = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      return Status::FailedPrecondition("mounting a tmpfs on " + dir + ": " + std::strerror(errno) +
                                        " (--fills needs CAP_SYS_ADMIN: run as root)");
    }
    mounted_.push_back(dir);
    return Status::Ok();
  }

 private:
  std::vector<std::string> mounted_;
};

// Writes `path` until its file system has no byte left (ENOSPC at the smallest write); returns
// the bytes written.
uint64_t FillVolume(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  static const std::string kZeros(1 << 20, '\0');
  uint64_t written = 0;
  for (size_t chunk = kZeros.size(); chunk > 0; chunk /= 16) {
    for (;;) {
      const ssize_t n = ::write(fd, kZeros.data(), chunk);
      if (n <= 0) break;
      written += static_cast<uint64_t>(n);
    }
  }
  ::close(fd);
  return written;
}

// The groups' roles by index (torture_groups.h): fast, slow, stop-resume, then fast again.
std::string RoleOf(int index) {
  static const char* kRoles[] = {"fast", "slow", "stop-resume"};
  return index < 3 ? kRoles[index] : "fast";
}

struct Pause {
  std::string kind;
  double pause_ms;
  double total_ms;
};

std::string Stats(const std::vector<double>& v) {
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"count\":%zu,\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f}",
                s.size(), Percentile(s, 0.5), Percentile(s, 0.99), s.empty() ? 0.0 : s.back());
  return buf;
}

// Picks one random change of the current map: a split, a merge of neighbours, or a move.
Result<std::pair<std::string, PartitionMap>> RandomChange(const PartitionMap& m, int pods,
                                                          std::mt19937_64& rng) {
  std::vector<const PartitionInfo*> active;
  for (const auto& p : m.partitions()) {
    if (p.active()) active.push_back(&p);
  }
  std::sort(active.begin(), active.end(),
            [](auto* a, auto* b) { return a->range.lo < b->range.lo; });
  const size_t n = active.size();
  for (int attempt = 0; attempt < 20; ++attempt) {
    int kind = static_cast<int>(rng() % 3);
    if (kind == 0 && n >= static_cast<size_t>(4 * pods)) kind = 1;
    if (kind == 1 && n <= static_cast<size_t>(pods)) kind = 0;
    if (kind == 2 && pods < 2) kind = 0;
    if (kind == 0) {
      const PartitionInfo* p = active[rng() % n];
      const uint64_t w = p->range.Width();
      if (w < (1u << 16)) continue;
      const uint64_t at = p->range.lo + w / 4 + rng() % (w / 2);
      auto next = m.Split(p->id, at);
      if (next.ok()) return std::make_pair(std::string("split"), std::move(next).value());
    } else if (kind == 1) {
      if (n < 2) continue;
      const size_t i = rng() % (n - 1);
      auto next = m.Merge(active[i]->id, active[i + 1]->id);
      if (next.ok()) return std::make_pair(std::string("merge"), std::move(next).value());
    } else {
      const PartitionInfo* p = active[rng() % n];
      PodName to("pod-" + std::to_string(rng() % static_cast<uint64_t>(pods)));
      if (to == p->owner) continue;
      auto next = m.Move(p->id, to);
      if (next.ok()) return std::make_pair(std::string("move"), std::move(next).value());
    }
  }
  return Status::FailedPrecondition("no change fits the map");
}

// What every pod's admin plane reports, for the retirement rule; nullopt when one did not answer.
std::optional<std::map<std::string, control::AdminPartitionsReport>> Reports(
    client::AdminClient& admin, const std::vector<control::LocalSidecar>& pods) {
  std::map<std::string, control::AdminPartitionsReport> out;
  for (size_t i = 0; i < pods.size(); ++i) {
    auto body = admin.Get(pods[i].admin_address(), "/v1/admin/partitions", true);
    if (!body.ok()) return std::nullopt;
    auto report = control::ParseAdminPartitions(*body);
    if (!report.ok()) return std::nullopt;
    out.emplace("pod-" + std::to_string(i), std::move(report).value());
  }
  return out;
}

// A change the torture made: the map it started from and the target it applied (a deposed
// coordinator's "old plan" is one of these, replayed).
struct PastChange {
  PartitionMap from, target;
};

int Run(const TortureOptions& o) {
  std::string dir = o.dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/shoal-torture-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::cerr << "shoal torture: cannot create a temp directory\n";
      return 1;
    }
    dir = tmpl;
  }
  auto say = [&](const std::string& s) {
    if (!o.json) std::cout << s << std::endl;
  };
  // What the harness did and decided, by time from the start: the faults it caused, and the
  // coordinator's failovers and changes with their outcomes (kept in the run's directory).
  std::error_code dir_error;
  std::filesystem::create_directories(dir, dir_error);
  std::ofstream coordinator_log(dir + "/coordinator.log");
  std::mutex log_mu;
  const auto log_start = std::chrono::steady_clock::now();
  auto note_log = [&](const std::string& s) {
    std::lock_guard<std::mutex> lock(log_mu);
    coordinator_log
        << std::fixed << std::setprecision(3)
        << std::chrono::duration<double>(std::chrono::steady_clock::now() - log_start).count()
        << " " << s << std::endl;
  };
  const std::string token = "torture-admin-token";
  control::LocalSidecarOptions base;
  base.fsync = o.fsync;
  const bool replicated = o.replication > 1;
  // Faults the change protocol alone does not survive without a coordinator that recovers
  // (failover, declaring a wiped pod's partitions lost): a change that fails is then retried or
  // superseded rather than counted as a violation.
  const bool recovering = replicated || o.wipes > 0;
  if (replicated) {
    // A produce waits at most 1 s for a quorum of copies (then a retryable 503): a leader whose
    // copies are fenced answers the producer soon, which retries at the new leader.
    base.extra_args = {"--acks", o.acks, "--replication-timeout-ms", "1000"};
  }
  PodVolumes volumes;
  if (o.fills > 0) {
    for (int i = 0; i < o.sidecars; ++i) {
      Status st = volumes.Mount(dir + "/pod-" + std::to_string(i), uint64_t(o.volume_mb) << 20);
      if (!st.ok()) {
        std::cerr << "shoal torture: " << st.message() << "\n";
        return 2;
      }
    }
    // A reserve that fits the small volume: produce is refused (507) before the volume is
    // full, and commits, seals and retirement keep working when another writer fills it.
    base.extra_args.insert(base.extra_args.end(),
                           {"--disk-reserve-bytes", std::to_string(8 << 20)});
  }
  auto started = control::StartPods(o.sidecars, dir, base, token, "info");
  if (!started.ok()) {
    std::cerr << "shoal torture: " << started.status().message() << "\n";
    return 1;
  }
  std::vector<control::LocalSidecar> pods = std::move(started).value();
  // Epoch 1: 2 partitions per pod over equal ranges, owners round robin.
  std::vector<PartitionInfo> parts;
  const uint32_t count = static_cast<uint32_t>(2 * o.sidecars);
  for (uint32_t i = 0; i < count; ++i) {
    PartitionInfo p;
    p.id = PartitionId(i);
    p.range = {kHashSpace * i / count, kHashSpace * (i + 1) / count};
    p.owner = PodName("pod-" + std::to_string(i % o.sidecars));
    // Made by the map of epoch 1 (PartitionMap::Initial's too): a wiped pod refuses a later map
    // that gives it one of them (its data is gone) instead of starting it empty.
    p.born = Epoch(1);
    parts.push_back(p);
  }
  std::vector<PodName> pod_names;
  for (int i = 0; i < o.sidecars; ++i) pod_names.push_back(PodName("pod-" + std::to_string(i)));
  // Followers on every target the torture applies, as the control loop's WithReplicas.
  auto placed = [&](const PartitionMap& m) -> Result<PartitionMap> {
    if (!replicated) return m;
    return replication::PlaceReplicas(m, pod_names, static_cast<uint32_t>(o.replication));
  };
  PartitionMap current = control::WithPeers(PartitionMap("orders", Epoch(1), parts), pods);
  if (auto with_copies = placed(current); with_copies.ok()) {
    current = std::move(with_copies).value();
  } else {
    std::cerr << "shoal torture: placing followers: " << with_copies.status().message() << "\n";
    return 1;
  }
  client::AdminClient admin(token);
  // With a coordinator that recovers, a step waiting on a down pod gives up soon: the failover
  // of that pod's partitions runs between the attempts of a change (the change is retried, or
  // superseded by the failover map).
  control::ChangeExecutor::Options eo;
  if (recovering) eo.step_timeout = std::chrono::milliseconds(std::max(1000, o.failover_after_ms));
  control::ChangeExecutor executor(admin, eo);
  control::ChangeProbe change_probe("orders");
  if (auto st = executor.InstallEverywhere(current); !st.ok()) {
    std::cerr << "shoal torture: installing the first map: " << st.message() << "\n";
    return 1;
  }
  const int group_count = o.groups + (o.late_group ? 1 : 0) + (o.backlog_group ? 1 : 0);
  say("torture: " + std::to_string(o.sidecars) + " sidecars, " + std::to_string(count) +
      " partitions, " + std::to_string(group_count) + " groups, " + std::to_string(o.changes) +
      " changes, " + std::to_string(o.kills) + " kills, " + std::to_string(o.pauses) +
      " pauses, " + std::to_string(o.wipes) + " wipes, replication " +
      std::to_string(o.replication) + (replicated ? " (acks " + o.acks + ")" : "") + " over " + std::to_string(static_cast<int>(o.duration_s)) + " s" +
      (o.skew ? ", skewed keys" : "") + (o.rogue ? ", a rogue coordinator" : "") + ", seed " +
      std::to_string(o.seed) + ", data in " + dir);

  std::vector<std::string> targets;
  for (auto& p : pods) targets.push_back(p.base_url());
  // The slow group reads at 40% of the produce rate in total while the load runs.
  const double slow_rate = o.rate > 0 ? 0.4 * o.rate / o.sidecars : 200;
  std::vector<std::unique_ptr<TortureGroup>> groups;
  for (int g = 0; g < o.groups; ++g) {
    const std::string role = RoleOf(g);
    groups.push_back(std::make_unique<TortureGroup>(
        g < 3 ? role : role + "-" + std::to_string(g), role, targets));
    groups.back()->Start(role == "slow" ? slow_rate : 0);
  }
  if (o.late_group) groups.push_back(std::make_unique<TortureGroup>("late", "late", targets));
  if (o.backlog_group) {
    groups.push_back(std::make_unique<TortureGroup>("backlog", "backlog", targets));
    groups.back()->Start(0);
  }

  harness::LoadOptions lo;
  lo.targets = targets;
  lo.producers = o.producers;
  lo.rate = o.rate;
  lo.keys = o.keys;
  lo.batch = o.batch;
  lo.seed = o.seed;
  lo.skew = o.skew;
  harness::LoadGenerator load(lo);
  load.Start();

  std::mutex change_mu;  // one change at a time; the checker looks between changes
  std::vector<Pause> pauses;
  std::vector<PastChange> history;  // guarded by change_mu
  int retirements = 0, retired_partitions = 0;
  std::map<std::string, int> failed;
  std::map<std::string, std::string> failed_why;  // per kind: the last refusal that dropped one
  std::mutex violations_mu;
  std::vector<std::string> violations;  // guarded by violations_mu
  auto violation = [&](std::string v) {
    std::lock_guard<std::mutex> lock(violations_mu);
    violations.push_back(std::move(v));
  };
  std::vector<bool> down(pods.size(), false), paused(pods.size(), false);
  // A pod whose volume was emptied and that holds no map since (the coordinator decides what it
  // gets: its led partitions failed over, the rest declared lost, then the current map).
  std::vector<bool> wiped(pods.size(), false);
  // When the pod was last killed, paused or wiped (the start of a failover's time).
  std::vector<Clock::time_point> fault_at(pods.size());
  std::mutex pods_mu;  // guards down[], paused[], wiped[], fault_at[] and restarts and signals
  const auto t0 = Clock::now();
  auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  // Every map the coordinator made, by epoch (guarded by change_mu): what a sidecar that says
  // it holds epoch e holds, for the acknowledgement check.
  std::map<uint64_t, PartitionMap> maps_by_epoch;
  maps_by_epoch[current.epoch().value()] = current;
  auto index_of = [](const PodName& pod) {
    return static_cast<size_t>(std::stoul(pod.value().substr(4)));
  };

  // The retirement of what every group consumed, one holder's partitions per change
  // (retirement.h), as the control loop plans it: the rule that loses a slow group's events if it
  // forgets that group. Carried out as a change (the coordinator's thread retries it until every
  // pod holds it: the holder installs it first, and a holder that refuses changes nothing).
  uint64_t max_tried_epoch = current.epoch().value();  // guarded by change_mu
  auto retirement_of_consumed = [&]() -> std::optional<PartitionMap> {
    auto reports = Reports(admin, pods);
    if (!reports) return std::nullopt;  // a pod is down or paused: its groups are unknown
    auto ids = control::OneHoldersRetirement(current,
                                             control::RetirablePartitions(current, *reports));
    if (ids.empty()) return std::nullopt;
    MapChange change(current);
    for (PartitionId id : ids) (void)change.Retire(id);
    auto target = change.Build();
    if (!target.ok()) return std::nullopt;
    return std::move(target).value();
  };

  // Failovers: one entry per failover map (the leaders it moved and how long it took).
  struct Failover {
    size_t partitions = 0;
    double ms = 0;  // from the fault of the old leader to the map installed on the new leaders
  };
  std::vector<Failover> failovers;       // guarded by change_mu
  int lost_partitions = 0;               // declared lost (a wiped pod's), guarded by change_mu
  std::string lost_detail;               // which, guarded by change_mu
  std::vector<std::string> failover_notes;  // the last failovers that could not finish at once
  // Per pod behind the current map: why its last catch-up install was refused (cleared once it
  // holds the current map).
  std::map<std::string, std::string> install_refusals;

  // The coordinator: what the control loop's Tick does, one step at a time on one thread. Each
  // tick (100 ms) it (1) fails over the replicated partitions of a leader unreachable for
  // --failover-after-ms (at once for a wiped one back without its data), (2) brings pods behind
  // to the current map, (3) declares lost what a wiped pod owns that no copy can take over, and
  // (4) at the scheduled moments applies a random split, merge or move (and now and then a
  // retirement); a change a down pod holds up is retried at the next tick (or superseded by a
  // failover map, whose epoch is above every target tried: its seals are void under it).
  std::thread changer([&] {
    std::mt19937_64 rng(o.seed);
    std::optional<PartitionMap> pending;  // the change in progress, made from `current`
    std::string pending_kind;
    bool pending_new = false;
    std::map<uint32_t, uint64_t> fenced;  // partition -> leader epoch its copies were fenced at
    std::vector<std::optional<Clock::time_point>> down_since(pods.size());
    int next_change = 0;
    auto last_catch_up = Clock::now();
    // The admin address of a pod the coordinator can reach (not killed, paused or wiped).
    std::vector<bool> reach(pods.size(), false), is_wiped(pods.size(), false);
    control::FirstVolumes first_volumes;  // per pod, the volume first seen holding a map
    auto reachable = [&](const PodName& pod) -> const PeerAddress* {
      const size_t i = index_of(pod);
      if (i >= pods.size() || !reach[i] || is_wiped[i]) return nullptr;
      return current.Peer(pod);
    };
    auto apply_pending = [&] {
      // A new target goes above every epoch tried before (a change dropped or superseded may
      // have left seals or maps at its epoch); a retry is the same target (every step is
      // idempotent).
      if (pending_new && pending->epoch().value() <= max_tried_epoch) {
        *pending = pending->WithEpoch(Epoch(max_tried_epoch + 1));
      }
      pending_new = false;
      max_tried_epoch = std::max(max_tried_epoch, pending->epoch().value());
      maps_by_epoch[pending->epoch().value()] = *pending;
      control::ChangeTiming timing;
      const PartitionMap before = current;
      // The ends of the seals a quorum held stay with the change (ChangeExecutor::Apply).
      const PartitionMap tried = *pending;
      auto installed = executor.Apply(current, tried, &timing, [&](const PartitionMap& ends) {
        *pending = ends;
        return Status::Ok();
      });
      note_log("change " + pending_kind + " to epoch " + std::to_string(pending->epoch().value()) +
               " from " + std::to_string(current.epoch().value()) + ": " +
               (installed.ok() ? std::string("applied") : installed.status().ToString()));
      if (!installed.ok()) {
        const Status& st = installed.status();
        if (pending_kind == "retire" && (st.code() == Status::Code::kConflict || !recovering)) {
          // The holder refused (it learnt of a group that has not consumed them, or could not
          // ask a peer), before any other pod saw the map: not a violation, the rule is checked
          // again later.
          failed["retire"]++;
          pending.reset();
          return;
        }
        if (!recovering) {  // today's behaviour: every change completes
          failed[pending_kind]++;
          change_probe.Failed(pending_kind);
          violation("change failed: " + st.message());
          pending.reset();
          return;
        }
        if (st.code() == Status::Code::kDataLost) {
          // A pod the change needs lost its data: its partitions are declared lost on top of
          // the change, which goes on as one (parts of it may have taken effect), as the
          // control loop's RunChange does.
          for (size_t i = 0; i < pods.size(); ++i) {
            const PodName pod = pod_names[i];
            if (!is_wiped[i] || !reach[i]) continue;
            if (PartitionsMadeBefore(*pending, pod, pending->epoch()).empty()) continue;
            auto composed = pending->DeclareLost(pod, /*in_change=*/true);
            if (composed.ok()) composed = placed(*composed);
            if (composed.ok()) {
              pending = std::move(composed).value();
              pending_kind = "declare-lost";
              maps_by_epoch[pending->epoch().value()] = *pending;
              max_tried_epoch = std::max(max_tried_epoch, pending->epoch().value());
              break;
            }
          }
          return;  // retried at the next tick
        }
        if (st.code() == Status::Code::kUnavailable) return;  // a pod is down: next tick
        // A volume full past its reserve (the copies' appends write inside it too): retried at
        // the next tick, as the control loop retries a failed step, once space is freed.
        if (st.code() == Status::Code::kNoSpace) {
          failed_why[pending_kind + "-no-space"] = st.ToString();
          return;
        }
        // A seal at a wiped owner (it holds nothing): its recovery comes first, then the
        // change is superseded or retried.
        if (st.code() == Status::Code::kNotFound &&
            std::find(is_wiped.begin(), is_wiped.end(), true) != is_wiped.end()) {
          return;
        }
        // Refused (a rogue's map, a seal for another change): dropped; the next change is at a
        // later epoch than this one.
        failed[pending_kind]++;
        failed_why[pending_kind] = st.ToString();
        change_probe.Failed(pending_kind);
        if (st.code() != Status::Code::kConflict && st.code() != Status::Code::kStaleEpoch) {
          violation("change failed: " + st.message());
        }
        pending.reset();
        return;
      }
      history.push_back({current, *installed});
      current = std::move(installed).value();
      maps_by_epoch[current.epoch().value()] = current;
      for (const auto& p : current.partitions()) {
        const PartitionInfo* was = before.Find(p.id);
        if (p.lost && was && !was->lost) {
          ++lost_partitions;
          lost_detail += (lost_detail.empty() ? "p" : ", p") + std::to_string(p.id.value()) +
                         " of " + p.owner.value();
        }
      }
      if (pending_kind == "retire") {
        ++retirements;
        for (const auto& p : before.partitions()) retired_partitions += !current.Find(p.id);
      } else if (pending_kind != "declare-lost") {
        change_probe.Applied(pending_kind, timing.pause_ms / 1000, timing.total_ms / 1000,
                             current.epoch().value());
        pauses.push_back({pending_kind, timing.pause_ms, timing.total_ms});
      }
      pending.reset();
    };
    while (Clock::now() < at(o.duration_s)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the coordinator's tick
      if (!recovering && next_change >= o.changes) break;
      std::lock_guard<std::mutex> lock(change_mu);
      const auto now = Clock::now();
      std::vector<Clock::time_point> faults(pods.size());
      {
        std::lock_guard<std::mutex> plock(pods_mu);
        for (size_t i = 0; i < pods.size(); ++i) {
          reach[i] = !down[i] && !paused[i];
          is_wiped[i] = wiped[i];
          faults[i] = fault_at[i];
        }
      }
      // 1. Failover (ControlLoop::MaybeFailOver).
      if (replicated) {
        for (size_t i = 0; i < pods.size(); ++i) {
          if (reach[i] && !is_wiped[i]) {
            down_since[i].reset();
          } else if (!down_since[i]) {
            down_since[i] = faults[i];
          }
        }
        std::vector<PartitionId> ids;
        std::set<size_t> old_leaders;
        uint64_t floor = std::max(current.epoch().value(), max_tried_epoch) + 1;
        // A change tried already (parts of it may have taken effect: a parent sealed for it and
        // confirmed by a successor) whose parents still to seal have a leader that answers or
        // copies: the failover goes into the change's map and the change goes on from there, as
        // the control loop does. Otherwise into the current map, superseding it.
        const auto leader_down = [&](const PodName& pod) {
          const size_t i = index_of(pod);
          return !reach[i] || is_wiped[i] ||
                 (down_since[i] &&
                  now - *down_since[i] >= std::chrono::milliseconds(o.failover_after_ms));
        };
        std::optional<PartitionMap> change;
        if (pending && !pending_new) {
          bool parents_answer = true;
          for (const auto& p : pending->partitions()) {
            const PartitionInfo* was = current.Find(p.id);
            // A parent led by a pod that is down is failed over inside the change when it has
            // copies (the copy made its leader is sealed for the change, Topic::Seal).
            if (!p.active() && !p.lost && was && was->active() && leader_down(was->owner) &&
                p.replicas.empty()) {
              parents_answer = false;
            }
          }
          if (parents_answer) {
            change = *pending;
            floor = std::max(floor, pending->epoch().value() + 1);
          }
        }
        const PartitionMap& base = change ? *change : current;
        for (const auto& p : base.partitions()) {
          if (p.lost || p.replicas.empty()) continue;  // active or sealed
          const size_t i = index_of(p.owner);
          bool due;
          if (auto f = fenced.find(p.id.value()); f != fenced.end()) {
            // Copies fenced for a failover that did not finish: it goes on.
            due = p.LeaderEpoch().value() < f->second;
            if (!due) fenced.erase(f);
            if (due) floor = std::max(floor, f->second);
          } else {
            due = (is_wiped[i] && reach[i]) ||
                  (down_since[i] &&
                   now - *down_since[i] >= std::chrono::milliseconds(o.failover_after_ms));
          }
          if (!due) continue;
          ids.push_back(p.id);
          old_leaders.insert(i);
        }
        if (!ids.empty()) {
          std::string why;
          std::set<PartitionId> fenced_now;
          auto leaders = control::FenceAndChooseLeaders(admin, base, ids, reachable, Epoch(floor),
                                                        first_volumes, &why, &fenced_now);
          {
            std::string line =
                "failover at epoch " + std::to_string(floor) +
                (change ? " into the change of epoch " + std::to_string(change->epoch().value())
                        : " into the current map") +
                ":";
            for (PartitionId id : ids) line += " " + std::to_string(id.value());
            if (leaders.ok()) {
              line += "; leaders";
              for (const auto& [id, leader] : *leaders) {
                line += " " + std::to_string(id.value()) + "->" + leader.value();
              }
            }
            if (!why.empty()) line += "; not yet: " + why;
            note_log(line);
          }
          for (PartitionId id : fenced_now) {
            fenced[id.value()] = std::max(fenced[id.value()], floor);
          }
          max_tried_epoch = std::max(max_tried_epoch, floor);
          if (!why.empty()) {  // the last 20
            if (failover_notes.size() == 20) failover_notes.erase(failover_notes.begin());
            failover_notes.push_back("epoch " + std::to_string(floor) + ": " + why);
          }
          Result<PartitionMap> target = leaders.ok()
                                            ? control::FailOverMap(base, *leaders, Epoch(floor))
                                            : Result<PartitionMap>(leaders.status());
          if (target.ok() && change) target = target->CarryingChange(change->epoch());
          if (target.ok() && change) {
            // The change's target now; its next try carries it out (parents sealed, then the
            // map installed everywhere).
            maps_by_epoch[target->epoch().value()] = *target;
            max_tried_epoch = std::max(max_tried_epoch, target->epoch().value());
            const auto done = Clock::now();
            double ms = 0;
            for (size_t i : old_leaders) {
              ms =
                  std::max(ms, std::chrono::duration<double, std::milli>(done - faults[i]).count());
            }
            failovers.push_back({leaders->size(), ms});
            for (const auto& [id, leader] : *leaders) fenced.erase(id.value());
            for (size_t i : old_leaders) down_since[i].reset();
            pending = std::move(target).value();
          } else if (target.ok()) {
            maps_by_epoch[target->epoch().value()] = *target;
            std::string not_installed;
            control::InstallFailOverMap(admin, *target, *leaders, reachable, &not_installed);
            const auto done = Clock::now();
            double ms = 0;
            for (size_t i : old_leaders) {
              ms = std::max(ms, std::chrono::duration<double, std::milli>(done - faults[i]).count());
            }
            failovers.push_back({leaders->size(), ms});
            current = std::move(target).value();
            max_tried_epoch = std::max(max_tried_epoch, current.epoch().value());
            for (const auto& [id, leader] : *leaders) fenced.erase(id.value());
            for (size_t i : old_leaders) down_since[i].reset();
            if (pending) {
              // Superseded: resolved again on the new map at the next slot.
              failed[pending_kind + "-superseded"]++;
              pending.reset();
            }
          }
        }
      }
      // 2. Pods behind the current map get it (ControlLoop::InstallOnLaggingPods); a wiped pod
      //    that owns nothing any more gets it too and follows from then on.
      if (now - last_catch_up > std::chrono::milliseconds(500)) {
        last_catch_up = now;
        for (size_t i = 0; i < pods.size(); ++i) {
          if (!reach[i]) continue;
          auto held = admin.GetMap(pods[i].admin_address());
          // The volume it first holds a map on (ControlLoop::InstallOnLaggingPods does the same).
          if (held.ok()) {
            (void)control::RecordFirstVolume(admin, pod_names[i], pods[i].admin_address(),
                                             &first_volumes);
          }
          if (!held.ok()) {
            if (held.status().code() != Status::Code::kNotFound) continue;
            if (!PartitionsMadeBefore(current, pod_names[i], Epoch(current.epoch().value() + 1))
                     .empty()) {
              continue;  // it lost partitions: declared lost first (3)
            }
          } else if (held->epoch() >= current.epoch()) {
            install_refusals.erase(pod_names[i].value());
            if (is_wiped[i]) {
              std::lock_guard<std::mutex> plock(pods_mu);
              wiped[i] = false;
            }
            continue;
          }
          auto installed = admin.InstallMap(pods[i].admin_address(), current);
          if (installed.ok()) {
            install_refusals.erase(pod_names[i].value());
          } else {
            const std::string why = installed.status().ToString();
            if (install_refusals[pod_names[i].value()].find(why) == std::string::npos) {
              note_log("catching up " + pod_names[i].value() + " to epoch " +
                       std::to_string(current.epoch().value()) + " refused: " + why);
            }
            install_refusals[pod_names[i].value()] = "epoch " +
                                                     std::to_string(current.epoch().value()) +
                                                     ": " + installed.status().ToString();
          }
        }
      }
      // 3. A wiped pod's partitions that no failover moves are declared lost (its only copy of
      //    them is gone).
      if (recovering && !pending) {
        for (size_t i = 0; i < pods.size(); ++i) {
          if (!is_wiped[i] || !reach[i] || !executor.HoldsNoMap(*current.Peer(pod_names[i]))) {
            continue;
          }
          bool declarable = false, waits = false;
          for (const auto& p : current.partitions()) {
            if (p.owner != pod_names[i] || p.lost) continue;
            (!p.replicas.empty() ? waits : declarable) = true;
          }
          if (!declarable || waits) continue;  // its led copies are failed over first
          auto lost = current.DeclareLost(pod_names[i]);
          if (lost.ok()) lost = placed(*lost);
          if (!lost.ok()) continue;
          pending = std::move(lost).value();
          pending_kind = "declare-lost";
          pending_new = true;
          break;
        }
      }
      // 4. The scheduled change.
      const bool due = next_change < o.changes &&
                       now >= at(o.duration_s * (next_change + 1) / (o.changes + 1));
      // Recovery first (ControlLoop::PutRecoveryFirst): no new change while a wiped pod still
      // owns partitions that are not lost (a change would seal them at a pod that holds nothing).
      bool recovering_pod = false;
      for (size_t i = 0; i < pods.size(); ++i) {
        recovering_pod |= is_wiped[i] && !PartitionsMadeBefore(current, pod_names[i],
                                                               Epoch(current.epoch().value() + 1))
                                              .empty();
      }
      if (!pending && due && !recovering_pod) {
        ++next_change;
        if (o.retire && rng() % 3 == 0) {
          if (auto retirement = retirement_of_consumed()) {
            pending = std::move(retirement);
            pending_kind = "retire";
            pending_new = true;
            apply_pending();
            if (pending) continue;  // retried at the next tick, before any other change
          }
        }
        auto change = RandomChange(current, o.sidecars, rng);
        if (!change.ok()) continue;
        auto target = placed(change->second);
        if (!target.ok()) {
          violation("placing followers: " + target.status().message());
          continue;
        }
        pending = std::move(target).value();
        pending_kind = change->first;
        pending_new = true;
      }
      if (pending) apply_pending();
    }
    if (pending) failed[pending_kind + "-unfinished"]++;
  });

  // kill -9 of pod `victim` once it is neither paused nor down (waiting for that), marked down
  // (and wiped, for a wipe) from then on.
  auto kill9 = [&](size_t victim, bool wipe) {
    for (;;) {
      std::unique_lock<std::mutex> lock(pods_mu);
      if (!paused[victim] && !down[victim]) {
        pods[victim].process.Signal(SIGKILL);
        pods[victim].process.Wait(std::chrono::seconds(10));
        note_log(std::string(wipe ? "wipe" : "kill") + " pod-" + std::to_string(victim));
        down[victim] = true;
        wiped[victim] = wiped[victim] || wipe;
        fault_at[victim] = Clock::now();
        return;
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // until it is back
    }
  };
  std::thread killer([&] {
    std::mt19937_64 rng(o.seed ^ 0x5bd1e995);
    for (int k = 0; k < o.kills; ++k) {
      std::this_thread::sleep_until(at(o.duration_s * (k + 0.5) / std::max(1, o.kills)));
      const size_t victim = rng() % pods.size();
      kill9(victim, false);
      // Down time: with copies, up to twice the failover timeout (some kills are failed over,
      // some come back first).
      const uint64_t down_ms =
          replicated ? 100 + rng() % static_cast<uint64_t>(2 * o.failover_after_ms)
                     : 100 + rng() % 400;
      std::this_thread::sleep_for(std::chrono::milliseconds(down_ms));
      Status st;
      bool was_wiped;
      {
        std::lock_guard<std::mutex> lock(pods_mu);
        st = pods[victim].Restart();
        down[victim] = false;
        was_wiped = wiped[victim];
        note_log("restart pod-" + std::to_string(victim) + (was_wiped ? " (wiped)" : ""));
      }
      if (!st.ok()) {
        violation("restart of pod-" + std::to_string(victim) + " failed: " + st.message());
        continue;
      }
      // Rejoin: bring it to the current map (it recovered its own from disk). A wiped one is
      // left to the coordinator.
      if (was_wiped) continue;
      std::lock_guard<std::mutex> lock(change_mu);
      if (recovering) {
        (void)admin.InstallMap(pods[victim].admin_address(), current);  // else its next tick
      } else {
        (void)executor.InstallOn(PodName("pod-" + std::to_string(victim)), current);
      }
    }
  });

  // Wipes: kill -9, the data directory emptied (its log kept), restarted holding no map.
  int wipes_done = 0;
  std::thread wiper([&] {
    std::mt19937_64 rng(o.seed ^ 0x85ebca6b);
    for (int w = 0; w < o.wipes; ++w) {
      std::this_thread::sleep_until(at(o.duration_s * (w + 0.6) / (o.wipes + 1)));
      const size_t victim = rng() % pods.size();
      kill9(victim, true);
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(pods[victim].data_dir, ec)) {
        if (entry.path() == std::filesystem::path(pods[victim].log_path)) continue;
        std::filesystem::remove_all(entry.path(), ec);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a new volume
      Status st;
      {
        std::lock_guard<std::mutex> lock(pods_mu);
        st = pods[victim].Restart();
        down[victim] = false;
        note_log("restart pod-" + std::to_string(victim) + " (wiped)");
      }
      ++wipes_done;
      if (!st.ok()) {
        violation("restart of wiped pod-" + std::to_string(victim) + " failed: " + st.message());
      }
    }
  });

  // Fills: another writer takes every byte of a sidecar's volume for 1 to 4 s, then frees it.
  std::atomic<int> fills_done{0};
  std::thread filler([&] {
    std::mt19937_64 rng(o.seed ^ 0x9e3779b9);
    for (int f = 0; f < o.fills; ++f) {
      std::this_thread::sleep_until(at(o.duration_s * (f + 0.45) / (o.fills + 0.5)));
      const size_t victim = rng() % pods.size();
      const auto hold = std::chrono::milliseconds(1000 + rng() % 3000);
      const std::string path = pods[victim].data_dir + "/filler";
      const uint64_t bytes = FillVolume(path);
      note_log("fill pod-" + std::to_string(victim) + ": " + std::to_string(bytes >> 20) +
               " MiB written, its volume full");
      std::this_thread::sleep_for(hold);
      std::error_code ec;
      std::filesystem::remove(path, ec);
      note_log("free pod-" + std::to_string(victim));
      ++fills_done;
    }
  });

  // SIGSTOP of a sidecar for 0.5 to 3 s: forwarding to it, seals and installs wait on it.
  std::thread pauser([&] {
    std::mt19937_64 rng(o.seed ^ 0x27d4eb2f);
    for (int k = 0; k < o.pauses; ++k) {
      std::this_thread::sleep_until(at(o.duration_s * (k + 0.3) / std::max(1, o.pauses)));
      const size_t victim = rng() % pods.size();
      const auto length = std::chrono::milliseconds(500 + rng() % 2500);
      {
        std::lock_guard<std::mutex> lock(pods_mu);
        if (down[victim]) continue;
        pods[victim].process.Signal(SIGSTOP);
        note_log("pause pod-" + std::to_string(victim));
        paused[victim] = true;
        fault_at[victim] = Clock::now();
      }
      std::this_thread::sleep_for(length);  // the pause
      std::lock_guard<std::mutex> lock(pods_mu);
      pods[victim].process.Signal(SIGCONT);
      note_log("resume pod-" + std::to_string(victim));
      paused[victim] = false;
    }
  });

  // A deposed coordinator that wakes with an old plan: it replays a change the torture made
  // earlier, with an executor of its own, while the real one goes on. Every sidecar must refuse
  // it (stale epoch, or its seals answer the old change's end again) or, a pod that came back
  // with an older map, take the old map on its way to the current one; it must never complete.
  std::map<std::string, int> rogue_refused;
  int rogue_wakes = 0;
  std::thread rogue([&] {
    if (!o.rogue) return;
    std::mt19937_64 rng(o.seed ^ 0x9e3779b9);
    client::AdminClient rogue_admin(token);
    control::ChangeExecutor::Options ro;
    ro.step_timeout = std::chrono::seconds(5);
    control::ChangeExecutor rogue_executor(rogue_admin, ro);
    const int wakes = std::max(3, o.changes / 20);
    for (int k = 0; k < wakes; ++k) {
      std::this_thread::sleep_until(at(o.duration_s * (k + 0.7) / wakes));
      std::optional<PastChange> plan;
      {
        std::lock_guard<std::mutex> lock(change_mu);
        if (history.size() >= 2) plan = history[rng() % (history.size() - 1)];  // not the last
      }
      if (!plan) continue;
      ++rogue_wakes;
      auto done = rogue_executor.Apply(plan->from, plan->target, nullptr);
      if (done.ok()) {
        violation("a deposed coordinator's old plan (epoch " +
                  std::to_string(plan->target.epoch().value()) + ") was applied again");
      } else {
        rogue_refused[std::string(done.status().code_name())]++;
      }
    }
  });

  // The groups' schedule: stop-resume stops at 30% and resumes at 55%; late joins at 45%;
  // backlog stops at 5% and resumes at 60%, when the parents it has not read are deep.
  std::thread scheduler([&] {
    struct Step {
      double at;
      std::function<void()> act;
    };
    std::vector<Step> steps;
    for (auto& g : groups) {
      TortureGroup* group = g.get();
      if (group->role() == "stop-resume") {
        steps.push_back({0.30, [group] { group->Stop(); }});
        steps.push_back({0.55, [group] { group->Start(0); }});
      } else if (group->role() == "late") {
        steps.push_back({0.45, [group] { group->Start(0); }});
      } else if (group->role() == "backlog") {
        steps.push_back({0.05, [group] { group->Stop(); }});
        steps.push_back({0.60, [group] { group->Start(0); }});
      }
    }
    std::sort(steps.begin(), steps.end(), [](auto& a, auto& b) { return a.at < b.at; });
    for (auto& s : steps) {
      std::this_thread::sleep_until(at(o.duration_s * s.at));  // the group's moment
      s.act();
    }
  });

  // How much each group read through successors, from ancestors held on the same pod or by
  // peers: the sidecars' shoal_events_read_through_total, sampled as the run goes so that what a
  // killed sidecar had counted is kept (a counter that went down started over).
  struct ReadThrough {
    std::mutex mu;
    std::map<std::pair<size_t, std::string>, double> last;  // (pod, group|from) -> last value
    std::map<std::string, std::map<std::string, double>> total;  // group -> from -> events
    void Sample(size_t pod, const control::LocalSidecar& p) {
      const auto samples = Scrape(p.host, p.metrics_port);
      if (samples.empty()) return;
      std::lock_guard<std::mutex> lock(mu);
      for (const char* from : {"local", "peer"}) {
        for (const auto& [g, v] : SumBy(samples, "shoal_events_read_through_total", "group",
                                        {{"from", from}})) {
          double& was = last[{pod, g + "|" + from}];
          total[g][from] += v >= was ? v - was : v;
          was = v;
        }
      }
    }
  } read_through;
  std::atomic<bool> checking{true};
  uint64_t checks = 0;
  // Two writers, by what the sidecars acknowledged. Every 500 ms each reachable sidecar's
  // /metrics gives, under one lock, the epoch of the map it holds and, for every partition it
  // leads, its acknowledged frontier: the high watermark with --acks quorum (a produce is
  // answered once it passes the event), the log's end with --acks leader or one copy. The map
  // of that epoch (the coordinator made every map, maps_by_epoch) gives the leader epoch the
  // pod leads the partition at. When a pod's frontier for a partition passes the highest one any
  // pod showed for it, that pod acknowledged new events at that leader epoch between its
  // previous scrape's start and this scrape's end. Checked:
  //   - one pod per (partition, leader epoch) ever acknowledges (a leader epoch names one leader);
  //   - no pod acknowledges at a leader epoch below one whose leader was seen acknowledging
  //     before this pod's interval began (a deposed leader that goes on acknowledging while the
  //     new one does: under --acks quorum its fenced copies make that impossible, invariant 10;
  //     under --acks leader it is the known cost and only counted).
  // Sound, not complete: only advances past the highest frontier count (a new leader catching
  // up to what its predecessor acknowledged, a restart reloading its log, are not new
  // acknowledgements), and intervals that overlap are never ordered.
  struct AckCheck {
    std::map<uint32_t, uint64_t> frontier;  // partition -> highest frontier seen
    // partition -> leader epoch -> (pod, end of the interval of its first observed advance)
    std::map<uint32_t, std::map<uint64_t, std::pair<size_t, Clock::time_point>>> leaders;
    std::vector<std::optional<Clock::time_point>> last_scrape;
    uint64_t samples = 0, advances = 0, stale = 0;
  } acks;
  acks.last_scrape.resize(pods.size());
  const bool quorum_acks = replicated && o.acks == "quorum";
  auto check_acks = [&](size_t i) {  // with change_mu held (maps_by_epoch)
    const auto from = acks.last_scrape[i];
    const auto t_start = Clock::now();
    const auto samples = Scrape(pods[i].host, pods[i].metrics_port);
    const auto t_end = Clock::now();
    if (samples.empty()) return;
    acks.last_scrape[i] = t_start;
    if (!from) return;
    const auto epochs = SumBy(samples, "shoal_epoch", "topic");
    auto e = epochs.find("orders");
    if (e == epochs.end()) return;
    auto m = maps_by_epoch.find(static_cast<uint64_t>(e->second));
    if (m == maps_by_epoch.end()) return;
    ++acks.samples;
    const char* name = replicated && o.acks == "quorum" ? "shoal_partition_high_watermark"
                                                        : "shoal_partition_end_offset";
    for (const auto& [pid_text, value] : SumBy(samples, name, "partition")) {
      const uint32_t pid = static_cast<uint32_t>(std::stoul(pid_text));
      const PartitionInfo* info = m->second.Find(PartitionId(pid));
      if (!info || info->owner != pod_names[i]) continue;
      const uint64_t v = static_cast<uint64_t>(value);
      uint64_t& top = acks.frontier[pid];
      if (v <= top) continue;
      top = v;
      ++acks.advances;
      const uint64_t le = info->LeaderEpoch().value();
      auto& by = acks.leaders[pid];
      auto it = by.find(le);
      if (it == by.end()) {
        by.emplace(le, std::make_pair(i, t_end));
      } else if (it->second.first != i) {
        violation("two writers: partition " + pid_text + " acknowledged at leader epoch " +
                  std::to_string(le) + " by pod-" + std::to_string(it->second.first) +
                  " and pod-" + std::to_string(i));
      }
      for (auto later = by.upper_bound(le); later != by.end(); ++later) {
        if (later->second.second >= *from) continue;
        ++acks.stale;
        if (quorum_acks) {
          violation("two writers: pod-" + std::to_string(i) + " acknowledged partition " +
                    pid_text + " at leader epoch " + std::to_string(le) + " after pod-" +
                    std::to_string(later->second.first) + " had at leader epoch " +
                    std::to_string(later->first));
        }
        break;
      }
    }
  };
  std::thread checker([&] {
    std::map<size_t, uint64_t> last_epoch;
    simdjson::dom::parser parser;
    for (uint64_t round = 0; checking.load(); ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));  // sampling period
      if (round % 4 == 0) {
        for (size_t i = 0; i < pods.size(); ++i) {
          {
            std::lock_guard<std::mutex> plock(pods_mu);
            if (down[i] || paused[i]) continue;
          }
          read_through.Sample(i, pods[i]);
        }
      }
      std::lock_guard<std::mutex> lock(change_mu);
      std::vector<std::tuple<HashRange, std::string, uint64_t>> accepting;
      for (size_t i = 0; i < pods.size(); ++i) {
        {
          std::lock_guard<std::mutex> plock(pods_mu);
          if (down[i] || paused[i]) continue;
        }
        if (round % 2 == 0) check_acks(i);
        auto map = admin.GetMap(pods[i].admin_address());
        if (!map.ok()) {
          if (map.status().code() == Status::Code::kInvalidArgument) {
            violation("pod-" + std::to_string(i) + " holds a bad map: " +
                      map.status().message());  // invariant 1 (cover)
          }
          continue;
        }
        // Invariant 5: a sidecar never goes back to an older map, restarts included.
        if (map->epoch().value() < last_epoch[i]) {
          violation("pod-" + std::to_string(i) + " went back from epoch " +
                    std::to_string(last_epoch[i]) + " to " +
                    std::to_string(map->epoch().value()));
        }
        last_epoch[i] = std::max(last_epoch[i], map->epoch().value());
        auto view = admin.Get(pods[i].data_address(), "/v1/topics/orders", false);
        if (!view.ok()) continue;
        simdjson::dom::element doc;
        simdjson::dom::array arr;
        if (parser.parse(*view).get(doc) || doc["partitions"].get(arr)) continue;
        for (auto p : arr) {
          bool acc = false;
          uint64_t lo = 0, hi = 0, id = 0;
          if (p["accepting"].get(acc) || !acc || p["lo"].get(lo) ||
              p["hi"].get(hi) || p["id"].get(id)) {
            continue;
          }
          accepting.push_back({HashRange{lo, hi},
                               "pod-" + std::to_string(i) + "/p" + std::to_string(id),
                               map->epoch().value()});
        }
      }
      // Invariant 2: at most one accepting partition per hash point, across all sidecars. With
      // copies, among sidecars that hold the same map: a deposed leader that has not got the
      // failover map yet still calls its partition accepting, but its fenced copies keep it
      // from acknowledging anything (the acknowledgement check above).
      std::sort(accepting.begin(), accepting.end(),
                [](auto& a, auto& b) { return std::get<0>(a).lo < std::get<0>(b).lo; });
      for (size_t i = 0; i < accepting.size(); ++i) {
        for (size_t j = i + 1; j < accepting.size(); ++j) {
          if (std::get<0>(accepting[j]).lo >= std::get<0>(accepting[i]).hi) break;
          if (replicated && std::get<2>(accepting[i]) != std::get<2>(accepting[j])) continue;
          violation("two writers for one hash point: " + std::get<1>(accepting[i]) + " and " +
                    std::get<1>(accepting[j]));
        }
      }
      ++checks;
    }
  });

  changer.join();
  killer.join();
  wiper.join();
  filler.join();
  pauser.join();
  rogue.join();
  scheduler.join();
  std::this_thread::sleep_until(at(o.duration_s));  // the run's length
  checking = false;
  checker.join();
  load.Stop();
  const uint64_t acked_count = load.acked();
  say("load stopped: " + std::to_string(acked_count) + " events acknowledged, " +
      std::to_string(load.retries()) + " retried batches; draining the groups");
  // Drain: every group reads at full speed until each has been quiet for 2 s, having seen at
  // least the acked count (a late group: what it can find).
  for (auto& g : groups) g->SetRate(0);
  const auto drain_deadline = Clock::now() + std::chrono::seconds(180);
  std::vector<uint64_t> last_seen(groups.size(), 0);
  auto quiet_since = Clock::now();
  while (Clock::now() < drain_deadline) {
    bool moved = false, short_of_acked = false;
    for (size_t i = 0; i < groups.size(); ++i) {
      const uint64_t n = groups[i]->seen();
      moved = moved || n != last_seen[i];
      last_seen[i] = n;
      short_of_acked = short_of_acked || (groups[i]->role() != "late" && n < acked_count);
    }
    if (moved) {
      quiet_since = Clock::now();
    } else if (!short_of_acked && Clock::now() - quiet_since > std::chrono::seconds(2)) {
      break;
    } else if (lost_partitions > 0 && Clock::now() - quiet_since > std::chrono::seconds(5)) {
      break;  // partitions were declared lost: a group may never see all that was acked
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling progress counters
  }
  // While the sidecars still run: what the groups committed on their last batches.
  const std::vector<harness::AckedEvent> acked = load.TakeAcked();
  std::vector<harness::VerifyReport> reports;
  harness::VerifyReport total;
  for (auto& g : groups) {
    // The examples' times count from the start of coordinator.log.
    reports.push_back(
        g->Verify(acked, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   log_start.time_since_epoch())
                                                   .count())));
    total.acked = acked.size();
    total.seen += reports.back().seen;
    total.lost += reports.back().lost;
    total.reordered += reports.back().reordered;
    total.duplicated += reports.back().duplicated;
    total.redelivered_uncommitted += reports.back().redelivered_uncommitted;
    total.unacked_seen += reports.back().unacked_seen;
  }
  for (size_t i = 0; i < pods.size(); ++i) read_through.Sample(i, pods[i]);  // the drain's too
  auto through = [&](const std::string& g, const char* from) {
    std::lock_guard<std::mutex> lock(read_through.mu);
    return static_cast<uint64_t>(read_through.total[g][from]);
  };
  {
    // The control plane's change metrics, as the operator will export them.
    std::ofstream m(dir + "/change-metrics.prom");
    m << metrics::Serialize({change_probe.registry()});
  }
  for (auto& p : pods) p.process.Stop(std::chrono::seconds(10));

  std::vector<double> failover_ms;
  size_t failed_over_partitions = 0;
  for (const auto& f : failovers) {
    failover_ms.push_back(f.ms);
    failed_over_partitions += f.partitions;
  }
  std::sort(failover_ms.begin(), failover_ms.end());
  char failover_json[256];
  std::snprintf(failover_json, sizeof failover_json,
                "{\"count\":%zu,\"partitions\":%zu,\"failover_ms\":{\"p50\":%.1f,\"p99\":%.1f,"
                "\"max\":%.1f}}",
                failovers.size(), failed_over_partitions, Percentile(failover_ms, 0.5),
                Percentile(failover_ms, 0.99), failover_ms.empty() ? 0.0 : failover_ms.back());
  std::map<std::string, std::vector<double>> by_kind;
  for (const auto& p : pauses) by_kind[p.kind].push_back(p.pause_ms);
  // A failover moves a partition away from the consumers that hold a batch of it: its new leader
  // hands that batch out again unless their commit reaches it first (at-least-once, as a Kafka
  // rebalance does). Such redeliveries are allowed after a failover; a committed event read
  // again never is, and without a failover no redelivery is expected.
  const uint64_t committed_again = total.duplicated - total.redelivered_uncommitted;
  const bool ok = total.lost == 0 && total.reordered == 0 && committed_again == 0 &&
                  (total.redelivered_uncommitted == 0 || !failovers.empty()) &&
                  violations.empty();
  if (o.json) {
    std::string out =
        "{\"seed\":" + std::to_string(o.seed) + ",\"sidecars\":" + std::to_string(o.sidecars) +
        ",\"changes_applied\":" + std::to_string(pauses.size()) +
        ",\"retirements\":" + std::to_string(retirements) +
        ",\"retired_partitions\":" + std::to_string(retired_partitions) +
        ",\"kills\":" + std::to_string(o.kills) + ",\"pauses\":" + std::to_string(o.pauses) +
        ",\"wipes\":" + std::to_string(wipes_done) + ",\"fills\":" + std::to_string(fills_done) +
        ",\"replication\":" + std::to_string(o.replication) + ",\"acks\":\"" + o.acks + "\"" +
        ",\"failovers\":" + failover_json +
        ",\"declared_lost_partitions\":" + std::to_string(lost_partitions) +
        ",\"ack_check\":{\"samples\":" + std::to_string(acks.samples) +
        ",\"advances\":" + std::to_string(acks.advances) +
        ",\"stale_leader_acks\":" + std::to_string(acks.stale) + "}" +
        ",\"acked\":" + std::to_string(acked.size()) +
        ",\"abandoned\":" + std::to_string(load.abandoned()) +
        ",\"lost\":" + std::to_string(total.lost) +
        ",\"reordered\":" + std::to_string(total.reordered) +
        ",\"duplicated\":" + std::to_string(total.duplicated) +
        ",\"redelivered_uncommitted\":" + std::to_string(total.redelivered_uncommitted) +
        ",\"groups\":[";
    for (size_t i = 0; i < groups.size(); ++i) {
      if (i) out += ',';
      const auto& r = reports[i];
      out += "{\"name\":";
      json::AppendString(out, groups[i]->name());
      out += ",\"role\":";
      json::AppendString(out, groups[i]->role());
      out += ",\"seen\":" + std::to_string(r.seen) + ",\"lost\":" + std::to_string(r.lost) +
             ",\"reordered\":" + std::to_string(r.reordered) +
             ",\"duplicated\":" + std::to_string(r.duplicated) +
             ",\"redelivered_uncommitted\":" + std::to_string(r.redelivered_uncommitted) +
             ",\"unacked_seen\":" + std::to_string(r.unacked_seen) +
             ",\"before_join\":" + std::to_string(r.before_join) +
             ",\"read_through_local\":" + std::to_string(through(groups[i]->name(), "local")) +
             ",\"read_through_peer\":" + std::to_string(through(groups[i]->name(), "peer")) +
             ",\"consumer_starts\":" + std::to_string(groups[i]->instances()) +
             ",\"committed_at_stop\":" + (groups[i]->committed_all() ? "true" : "false") +
             ",\"examples\":[";
      for (size_t e = 0; e < r.examples.size(); ++e) {
        if (e) out += ',';
        json::AppendString(out, r.examples[e]);
      }
      out += "]}";
    }
    out += "],\"rogue\":{\"wakes\":" + std::to_string(rogue_wakes) + ",\"refused\":{";
    bool first = true;
    for (const auto& [code, n] : rogue_refused) {
      if (!first) out += ',';
      first = false;
      out += "\"" + code + "\":" + std::to_string(n);
    }
    // A JSON object of strings.
    const auto append_reasons = [&out](const std::map<std::string, std::string>& reasons) {
      out += '{';
      bool first_reason = true;
      for (const auto& [key, why] : reasons) {
        if (!first_reason) out += ',';
        first_reason = false;
        json::AppendString(out, key);
        out += ':';
        json::AppendString(out, why);
      }
      out += '}';
    };
    out += "}},\"install_refusals\":";
    append_reasons(install_refusals);
    out += ",\"failover_notes\":[";
    for (size_t i = 0; i < failover_notes.size(); ++i) {
      if (i) out += ',';
      json::AppendString(out, failover_notes[i]);
    }
    out += "],\"failed_changes\":{";
    first = true;
    for (const auto& [kind, n] : failed) {
      if (!first) out += ',';
      first = false;
      out += "\"" + kind + "\":" + std::to_string(n);
    }
    out += "},\"failed_change_reasons\":";
    append_reasons(failed_why);
    out += ",\"invariant_checks\":" + std::to_string(checks) + ",\"violations\":[";
    for (size_t i = 0; i < violations.size(); ++i) {
      if (i) out += ',';
      json::AppendString(out, violations[i]);
    }
    out += "],\"write_pauses\":{";
    first = true;
    for (const auto& [k, v] : by_kind) {
      if (!first) out += ',';
      first = false;
      out += "\"" + k + "\":" + Stats(v);
    }
    out += "},\"pauses_ms\":[";
    for (size_t i = 0; i < pauses.size(); ++i) {
      if (i) out += ',';
      char buf[96];
      std::snprintf(buf, sizeof buf, "{\"kind\":\"%s\",\"pause_ms\":%.2f}", pauses[i].kind.c_str(),
                    pauses[i].pause_ms);
      out += buf;
    }
    out += "],\"ok\":" + std::string(ok ? "true" : "false") + "}";
    std::cout << out << std::endl;
  } else {
    std::cout << "changes applied: " << pauses.size() << " (";
    for (const auto& [k, v] : by_kind) std::cout << k << " " << v.size() << " ";
    std::cout << "), retirements: " << retirements << " (" << retired_partitions
              << " partitions), kills: " << o.kills << ", pauses: " << o.pauses
              << ", wipes: " << wipes_done << ", fills: " << fills_done
              << ", invariant checks: " << checks << "\n";
    if (replicated) {
      std::cout << "replication " << o.replication << " (acks " << o.acks << "): failovers "
                << failover_json << ", acknowledgement check: " << acks.samples
                << " samples, " << acks.advances << " advances, " << acks.stale
                << " acknowledged by a deposed leader\n";
      for (const auto& n : failover_notes) std::cout << "failover not finished at once: " << n << "\n";
      for (const auto& [pod, why] : install_refusals) {
        std::cout << "behind the current map at the end: " << pod << " (" << why << ")\n";
      }
    }
    if (lost_partitions > 0) {
      std::cout << "declared lost: " << lost_partitions << " partition(s) (" << lost_detail
                << ") of wiped pods\n";
    }
    if (o.rogue) {
      std::cout << "rogue coordinator: " << rogue_wakes << " old plans replayed, refused:";
      for (const auto& [code, n] : rogue_refused) std::cout << " " << code << " " << n;
      std::cout << "\n";
    }
    for (const auto& [k, v] : by_kind) std::cout << "write pause " << k << ": " << Stats(v) << "\n";
    for (size_t i = 0; i < groups.size(); ++i) {
      std::cout << "group " << groups[i]->name() << " (" << groups[i]->role()
                << "): " << reports[i].ToText() << "; read through successors "
                << through(groups[i]->name(), "local") << " from ancestors on their own pod, "
                << through(groups[i]->name(), "peer") << " from peers\n";
    }
    for (const auto& v : violations) std::cout << "VIOLATION: " << v << "\n";
    std::cout << (ok ? "torture ok" : "torture FAILED") << std::endl;
  }
  if (ok && !o.keep && o.dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return ok ? 0 : 1;
}

}  // namespace

void RegisterTorture(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<TortureOptions>();
  auto* cmd = app.add_subcommand(
      "torture",
      "Random splits, merges, moves, retirements, kill -9 and SIGSTOP under load, then verify");
  cmd->add_option("--sidecars", o->sidecars, "Sidecar processes")->check(CLI::Range(1, 16));
  cmd->add_option("--changes", o->changes, "Random changes to apply")->check(CLI::Range(0, 100000));
  cmd->add_option("--kills", o->kills, "kill -9 and restarts")->check(CLI::Range(0, 10000));
  cmd->add_option("--pauses", o->pauses, "SIGSTOP/SIGCONT of a sidecar (0.5 to 3 s each)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--groups", o->groups,
                  "Consumer groups: fast, slow (40% of the rate), stop-resume, then more fast")
      ->check(CLI::Range(1, 16));
  cmd->add_flag("--late-group", o->late_group, "One more group that joins in the middle");
  cmd->add_flag("--backlog-group", o->backlog_group,
                "One more group that reads nothing from 5% to 60% of the run, then drains the "
                "parents' backlog through their successors");
  cmd->add_flag("--skew", o->skew, "Most keys in two narrow ranges (most partitions stay empty)");
  cmd->add_flag("--rogue-coordinator", o->rogue,
                "A deposed coordinator that wakes with old plans and replays them");
  cmd->add_flag("--retire,!--no-retire", o->retire,
                "Retire sealed partitions every group consumed (default on)");
  cmd->add_option("--replication", o->replication,
                  "Copies of every partition (followers placed by PlaceReplicas; 1: none)")
      ->check(CLI::Range(1, 5));
  cmd->add_option("--acks", o->acks,
                  "With --replication > 1: acknowledge once a quorum holds an event, or once "
                  "the leader does")
      ->check(CLI::IsMember({"quorum", "leader"}));
  cmd->add_option("--failover-after-ms", o->failover_after_ms,
                  "Fail a leader's partitions over once it is unreachable this long")
      ->check(CLI::Range(100, 600000));
  cmd->add_option("--wipes", o->wipes,
                  "kill -9, empty the data directory, restart (with one copy: declared lost)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--fills", o->fills,
                  "Fill a sidecar's volume to its last byte for 1-4 s, this many times (each "
                  "pod's data directory is then a tmpfs the harness mounts: needs root)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--volume-mb", o->volume_mb, "With --fills: each pod's tmpfs, in MiB")
      ->check(CLI::Range(32, 65536));
  cmd->add_option("--duration", o->duration_s, "Seconds of load")->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--seed", o->seed, "Random seed");
  cmd->add_option("--fsync", o->fsync, "fsync policy of the sidecars")
      ->check(CLI::IsMember({"always", "interval", "never"}));
  cmd->add_option("--producers", o->producers, "Producer threads")->check(CLI::Range(1, 256));
  cmd->add_option("--rate", o->rate, "Events/s offered in total (0: maximum)");
  cmd->add_option("--keys", o->keys, "Distinct keys")->check(CLI::Range(1, 10000000));
  cmd->add_option("--batch", o->batch, "Events per produce request")->check(CLI::Range(1, 10000));
  cmd->add_option("--dir", o->dir, "Data directory (kept)");
  cmd->add_flag("--keep", o->keep, "Keep the temporary data directory");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace shoal::cli
