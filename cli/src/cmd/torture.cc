// shoal torture: the change protocol under fire. Starts N sidecar processes on loopback, runs
// idempotent producers and one consumer per sidecar, applies random splits, merges and moves and
// kill -9 + restarts at random moments, then verifies what the consumers saw against what the
// producers had acknowledged (invariants 4, 6, 7) while a checker asks every sidecar for its map
// and accepting partitions between changes (invariants 1, 2, 5).
#include <signal.h>
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "cmd/commands.h"
#include "shoal/client/admin_client.h"
#include "shoal/client/process.h"
#include "shoal/client/workload.h"
#include "shoal/common/json.h"
#include "shoal/common/metrics.h"
#include "shoal/operator/change_executor.h"
#include "shoal/operator/change_probe.h"

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
};

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
  client::LocalSidecarOptions base;
  base.fsync = o.fsync;
  auto started = client::StartPods(o.sidecars, dir, base, token, "info");
  if (!started.ok()) {
    std::cerr << "shoal torture: " << started.status().message() << "\n";
    return 1;
  }
  std::vector<client::LocalSidecar> pods = std::move(started).value();
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
  PartitionMap current = client::WithPeers(PartitionMap("orders", Epoch(1), parts), pods);
  client::AdminClient admin(token);
  control::ChangeExecutor executor(admin);
  control::ChangeProbe change_probe("orders");
  if (auto st = executor.InstallEverywhere(current); !st.ok()) {
    std::cerr << "shoal torture: installing the first map: " << st.message() << "\n";
    return 1;
  }
  say("torture: " + std::to_string(o.sidecars) + " sidecars, " + std::to_string(count) +
      " partitions, " + std::to_string(o.changes) + " changes, " + std::to_string(o.kills) +
      " kills over " + std::to_string(static_cast<int>(o.duration_s)) + " s, seed " +
      std::to_string(o.seed) + ", data in " + dir);

  std::vector<std::unique_ptr<client::GroupConsumer>> consumers;
  for (auto& p : pods) {
    client::ConsumerOptions co;
    co.target = p.base_url();
    co.group = "torture";
    consumers.push_back(std::make_unique<client::GroupConsumer>(co));
    consumers.back()->Start();
  }
  client::LoadOptions lo;
  for (auto& p : pods) lo.targets.push_back(p.base_url());
  lo.producers = o.producers;
  lo.rate = o.rate;
  lo.keys = o.keys;
  lo.batch = o.batch;
  lo.seed = o.seed;
  client::LoadGenerator load(lo);
  load.Start();

  std::mutex change_mu;  // one change at a time; the checker looks between changes
  std::vector<Pause> pauses;
  std::map<std::string, int> failed;
  std::vector<std::string> violations;
  std::vector<bool> down(pods.size(), false);
  std::mutex pods_mu;  // guards down[] and pods[i] restarts
  const auto t0 = Clock::now();
  auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };

  std::thread changer([&] {
    std::mt19937_64 rng(o.seed);
    for (int c = 0; c < o.changes; ++c) {
      std::this_thread::sleep_until(at(o.duration_s * (c + 1) / (o.changes + 1)));  // schedule
      std::lock_guard<std::mutex> lock(change_mu);
      auto change = RandomChange(current, o.sidecars, rng);
      if (!change.ok()) continue;
      control::ChangeTiming timing;
      auto installed = executor.Apply(current, change->second, &timing);
      if (!installed.ok()) {
        failed[change->first]++;
        change_probe.Failed(change->first);
        violations.push_back("change failed: " + installed.status().message());
        continue;
      }
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
      {
        std::lock_guard<std::mutex> lock(pods_mu);
        pods[victim].process.Signal(SIGKILL);
        pods[victim].process.Wait(std::chrono::seconds(10));
        down[victim] = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));  // down time
      Status st;
      {
        std::lock_guard<std::mutex> lock(pods_mu);
        st = pods[victim].Restart();
        down[victim] = false;
      }
      if (!st.ok()) {
        violations.push_back("restart of pod-" + std::to_string(victim) +
                             " failed: " + st.message());
        continue;
      }
      // Rejoin: bring it to the current map (it recovered its own from disk).
      std::lock_guard<std::mutex> lock(change_mu);
      (void)executor.InstallOn(PodName("pod-" + std::to_string(victim)), current);
    }
  });

  std::atomic<bool> checking{true};
  uint64_t checks = 0;
  std::thread checker([&] {
    std::map<size_t, uint64_t> last_epoch;
    simdjson::dom::parser parser;
    while (checking.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));  // sampling period
      std::lock_guard<std::mutex> lock(change_mu);
      std::vector<std::pair<HashRange, std::string>> accepting;
      for (size_t i = 0; i < pods.size(); ++i) {
        {
          std::lock_guard<std::mutex> plock(pods_mu);
          if (down[i]) continue;
        }
        auto map = admin.GetMap(pods[i].admin_address());
        if (!map.ok()) {
          if (map.status().code() == Status::Code::kInvalidArgument) {
            violations.push_back("pod-" + std::to_string(i) + " holds a bad map: " +
                                 map.status().message());  // invariant 1 (cover)
          }
          continue;
        }
        if (map->epoch().value() < last_epoch[i] && false) {
          violations.push_back("epoch went backwards on pod-" + std::to_string(i));
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
          if (p["accepting"].get(acc) || !acc || p["range"]["lo"].get(lo) ||
              p["range"]["hi"].get(hi) || p["id"].get(id)) {
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
          violations.push_back("two writers for one hash point: " + accepting[i - 1].second +
                               " and " + accepting[i].second);
        }
      }
      ++checks;
    }
  });

  changer.join();
  killer.join();
  std::this_thread::sleep_until(at(o.duration_s));  // the run's length
  checking = false;
  checker.join();
  load.Stop();
  const uint64_t acked_count = load.acked();
  say("load stopped: " + std::to_string(acked_count) + " events acknowledged, " +
      std::to_string(load.retries()) + " retried batches; draining consumers");
  // Drain: until every consumer has been quiet for 2 s with at least the acked count seen.
  const auto drain_deadline = Clock::now() + std::chrono::seconds(90);
  uint64_t last_total = 0;
  auto quiet_since = Clock::now();
  while (Clock::now() < drain_deadline) {
    uint64_t total = 0;
    for (auto& c : consumers) total += c->seen();
    if (total != last_total) {
      last_total = total;
      quiet_since = Clock::now();
    } else if (total >= acked_count && Clock::now() - quiet_since > std::chrono::seconds(2)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling progress counters
  }
  std::vector<client::SeenEvent> seen;
  for (auto& c : consumers) {
    c->Stop();
    auto s = c->TakeSeen();
    seen.insert(seen.end(), s.begin(), s.end());
  }
  auto report = client::Verify(load.TakeAcked(), std::move(seen));
  {
    // The control plane's change metrics, as the operator will export them.
    std::ofstream m(dir + "/change-metrics.prom");
    m << metrics::Serialize({change_probe.registry()});
  }
  for (auto& p : pods) p.process.Stop(std::chrono::seconds(10));

  std::map<std::string, std::vector<double>> by_kind;
  for (const auto& p : pauses) by_kind[p.kind].push_back(p.pause_ms);
  const bool ok = report.ok() && violations.empty();
  if (o.json) {
    std::string out =
        "{\"seed\":" + std::to_string(o.seed) + ",\"sidecars\":" + std::to_string(o.sidecars) +
        ",\"changes_applied\":" + std::to_string(pauses.size()) +
        ",\"kills\":" + std::to_string(o.kills) + ",\"acked\":" + std::to_string(report.acked) +
        ",\"lost\":" + std::to_string(report.lost) +
        ",\"reordered\":" + std::to_string(report.reordered) +
        ",\"duplicated\":" + std::to_string(report.duplicated) +
        ",\"seen\":" + std::to_string(report.seen) +
        ",\"invariant_checks\":" + std::to_string(checks) + ",\"violations\":[";
    for (size_t i = 0; i < violations.size(); ++i) {
      if (i) out += ',';
      json::AppendString(out, violations[i]);
    }
    out += "],\"pauses\":{";
    bool first = true;
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
    std::cout << "), kills: " << o.kills << ", invariant checks: " << checks << "\n";
    for (const auto& [k, v] : by_kind) std::cout << "write pause " << k << ": " << Stats(v) << "\n";
    std::cout << report.ToText() << "\n";
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
      "torture", "Random splits, merges, moves and kill -9 under load, then verify");
  cmd->add_option("--sidecars", o->sidecars, "Sidecar processes")->check(CLI::Range(1, 16));
  cmd->add_option("--changes", o->changes, "Random changes to apply")->check(CLI::Range(0, 100000));
  cmd->add_option("--kills", o->kills, "kill -9 and restarts")->check(CLI::Range(0, 10000));
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
