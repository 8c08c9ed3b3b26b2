// shoal torture: the change protocol under fire. Starts N sidecar processes on loopback, runs
// idempotent producers and consumer groups of different kinds (torture_groups.h), applies random
// splits, merges and moves, retires what every group consumed, and kill -9s, SIGSTOPs and restarts
// sidecars at random moments while a rogue coordinator replays old plans; then verifies what each
// group saw against what the producers had acknowledged (invariants 4, 6, 7), while a checker
// asks every sidecar for its map and accepting partitions between changes (invariants 1, 2, 5).
#include <signal.h>
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <optional>
#include <set>
#include <functional>

#include "cmd/commands.h"
#include "cmd/scrape.h"
#include "cmd/torture_groups.h"
#include "shoal/client/admin_client.h"
#include "shoal/control/process.h"
#include "shoal/client/workload.h"
#include "shoal/common/json.h"
#include "shoal/common/metrics.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/admin_partitions.h"
#include "shoal/control/change_probe.h"
#include "shoal/control/retirement.h"

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
};

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
  const std::string token = "torture-admin-token";
  control::LocalSidecarOptions base;
  base.fsync = o.fsync;
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
    parts.push_back(p);
  }
  PartitionMap current = control::WithPeers(PartitionMap("orders", Epoch(1), parts), pods);
  client::AdminClient admin(token);
  control::ChangeExecutor executor(admin);
  control::ChangeProbe change_probe("orders");
  if (auto st = executor.InstallEverywhere(current); !st.ok()) {
    std::cerr << "shoal torture: installing the first map: " << st.message() << "\n";
    return 1;
  }
  const int group_count = o.groups + (o.late_group ? 1 : 0) + (o.backlog_group ? 1 : 0);
  say("torture: " + std::to_string(o.sidecars) + " sidecars, " + std::to_string(count) +
      " partitions, " + std::to_string(group_count) + " groups, " + std::to_string(o.changes) +
      " changes, " + std::to_string(o.kills) + " kills, " + std::to_string(o.pauses) +
      " pauses over " + std::to_string(static_cast<int>(o.duration_s)) + " s" +
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

  client::LoadOptions lo;
  lo.targets = targets;
  lo.producers = o.producers;
  lo.rate = o.rate;
  lo.keys = o.keys;
  lo.batch = o.batch;
  lo.seed = o.seed;
  lo.skew = o.skew;
  client::LoadGenerator load(lo);
  load.Start();

  std::mutex change_mu;  // one change at a time; the checker looks between changes
  std::vector<Pause> pauses;
  std::vector<PastChange> history;  // guarded by change_mu
  int retirements = 0, retired_partitions = 0;
  std::map<std::string, int> failed;
  std::mutex violations_mu;
  std::vector<std::string> violations;  // guarded by violations_mu
  auto violation = [&](std::string v) {
    std::lock_guard<std::mutex> lock(violations_mu);
    violations.push_back(std::move(v));
  };
  std::vector<bool> down(pods.size(), false), paused(pods.size(), false);
  std::mutex pods_mu;  // guards down[], paused[] and pods[i] restarts and signals
  const auto t0 = Clock::now();
  auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };

  // Retires what every group consumed, one holder's partitions per change (retirement.h), as the
  // control loop does: the rule that loses a slow group's events if it forgets that group.
  auto retire_consumed = [&]() {
    auto reports = Reports(admin, pods);
    if (!reports) return;  // a pod is down or paused: its groups are unknown
    auto ids = control::OneHoldersRetirement(current,
                                             control::RetirablePartitions(current, *reports));
    if (ids.empty()) return;
    MapChange change(current);
    for (PartitionId id : ids) (void)change.Retire(id);
    auto target = change.Build();
    if (!target.ok()) return;
    control::ChangeTiming timing;
    auto installed = executor.Apply(current, *target, &timing);
    if (!installed.ok()) {
      // A holder refused (it learnt of a group that has not consumed them): not a violation,
      // the rule is checked again at the next change.
      failed["retire"]++;
      return;
    }
    history.push_back({current, *installed});
    current = std::move(installed).value();
    ++retirements;
    retired_partitions += static_cast<int>(ids.size());
  };

  std::thread changer([&] {
    std::mt19937_64 rng(o.seed);
    for (int c = 0; c < o.changes; ++c) {
      std::this_thread::sleep_until(at(o.duration_s * (c + 1) / (o.changes + 1)));  // schedule
      std::lock_guard<std::mutex> lock(change_mu);
      if (o.retire && rng() % 3 == 0) retire_consumed();
      auto change = RandomChange(current, o.sidecars, rng);
      if (!change.ok()) continue;
      control::ChangeTiming timing;
      auto installed = executor.Apply(current, change->second, &timing);
      if (!installed.ok()) {
        failed[change->first]++;
        change_probe.Failed(change->first);
        violation("change failed: " + installed.status().message());
        continue;
      }
      history.push_back({current, *installed});
      current = std::move(installed).value();
      change_probe.Applied(change->first, timing.pause_ms / 1000, timing.total_ms / 1000,
                           current.epoch().value());
      pauses.push_back({change->first, timing.pause_ms, timing.total_ms});
    }
  });

  std::thread killer([&] {
    std::mt19937_64 rng(o.seed ^ 0x5bd1e995);
    for (int k = 0; k < o.kills; ++k) {
      std::this_thread::sleep_until(at(o.duration_s * (k + 0.5) / std::max(1, o.kills)));
      const size_t victim = rng() % pods.size();
      for (;;) {
        std::unique_lock<std::mutex> lock(pods_mu);
        if (!paused[victim]) {
          pods[victim].process.Signal(SIGKILL);
          pods[victim].process.Wait(std::chrono::seconds(10));
          down[victim] = true;
          break;
        }
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // until its pause ends
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));  // down time
      Status st;
      {
        std::lock_guard<std::mutex> lock(pods_mu);
        st = pods[victim].Restart();
        down[victim] = false;
      }
      if (!st.ok()) {
        violation("restart of pod-" + std::to_string(victim) + " failed: " + st.message());
        continue;
      }
      // Rejoin: bring it to the current map (it recovered its own from disk).
      std::lock_guard<std::mutex> lock(change_mu);
      (void)executor.InstallOn(PodName("pod-" + std::to_string(victim)), current);
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
        paused[victim] = true;
      }
      std::this_thread::sleep_for(length);  // the pause
      std::lock_guard<std::mutex> lock(pods_mu);
      pods[victim].process.Signal(SIGCONT);
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
      std::vector<std::pair<HashRange, std::string>> accepting;
      for (size_t i = 0; i < pods.size(); ++i) {
        {
          std::lock_guard<std::mutex> plock(pods_mu);
          if (down[i] || paused[i]) continue;
        }
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
          accepting.push_back(
              {HashRange{lo, hi}, "pod-" + std::to_string(i) + "/p" + std::to_string(id)});
        }
      }
      // Invariant 2: at most one accepting partition per hash point, across all sidecars.
      std::sort(accepting.begin(), accepting.end(),
                [](auto& a, auto& b) { return a.first.lo < b.first.lo; });
      for (size_t i = 1; i < accepting.size(); ++i) {
        if (accepting[i].first.lo < accepting[i - 1].first.hi) {
          violation("two writers for one hash point: " + accepting[i - 1].second + " and " +
                    accepting[i].second);
        }
      }
      ++checks;
    }
  });

  changer.join();
  killer.join();
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
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling progress counters
  }
  // While the sidecars still run: what the groups committed on their last batches.
  const std::vector<client::AckedEvent> acked = load.TakeAcked();
  std::vector<client::VerifyReport> reports;
  client::VerifyReport total;
  for (auto& g : groups) {
    reports.push_back(g->Verify(acked));
    total.acked = acked.size();
    total.seen += reports.back().seen;
    total.lost += reports.back().lost;
    total.reordered += reports.back().reordered;
    total.duplicated += reports.back().duplicated;
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

  std::map<std::string, std::vector<double>> by_kind;
  for (const auto& p : pauses) by_kind[p.kind].push_back(p.pause_ms);
  const bool ok = total.ok() && violations.empty();
  if (o.json) {
    std::string out =
        "{\"seed\":" + std::to_string(o.seed) + ",\"sidecars\":" + std::to_string(o.sidecars) +
        ",\"changes_applied\":" + std::to_string(pauses.size()) +
        ",\"retirements\":" + std::to_string(retirements) +
        ",\"retired_partitions\":" + std::to_string(retired_partitions) +
        ",\"kills\":" + std::to_string(o.kills) + ",\"pauses\":" + std::to_string(o.pauses) +
        ",\"acked\":" + std::to_string(acked.size()) +
        ",\"abandoned\":" + std::to_string(load.abandoned()) +
        ",\"lost\":" + std::to_string(total.lost) +
        ",\"reordered\":" + std::to_string(total.reordered) +
        ",\"duplicated\":" + std::to_string(total.duplicated) + ",\"groups\":[";
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
    out += "}},\"failed_changes\":{";
    first = true;
    for (const auto& [kind, n] : failed) {
      if (!first) out += ',';
      first = false;
      out += "\"" + kind + "\":" + std::to_string(n);
    }
    out += "},\"invariant_checks\":" + std::to_string(checks) + ",\"violations\":[";
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
              << ", invariant checks: " << checks << "\n";
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
