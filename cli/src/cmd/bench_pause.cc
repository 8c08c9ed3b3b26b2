// shoal bench pause: the write pause of a split or a move, with an empty backlog or a large one.
//
// Two sidecars (pod-0, pod-1). Before each change the partition about to change is filled with
// --backlog unconsumed events (over raw HTTP, batches of 1,000), then the change is applied by
// the same ChangeExecutor the torture harness and the operator use. Reported per change:
//  - pause: from the first seal sent to the successors' owner holding the new map (the time
//    during which no partition accepts the range's writes), as the executor measures it;
//  - observed: the longest gap between two acknowledgements of a probe producer that writes one
//    key of the changing range in a loop through pod-0 (forwarded after a move), minus nothing:
//    what a producer sees, including its own retry.
// Seal-and-succeed never copies the backlog, so neither may grow with it.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "cmd/commands.h"
#include "shoal/client/admin_client.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "shoal/common/raw_http.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/process.h"

namespace shoal::cli {

namespace {

struct PauseOptions {
  std::string kind = "split";
  uint64_t backlog = 0;
  int repeats = 20;
  std::string fsync = "interval";
  bool json = false;
};

// A key whose hash falls in [lo, hi).
std::string KeyIn(const HashRange& r, std::mt19937_64& rng) {
  while (true) {
    std::string k = "probe-" + std::to_string(rng());
    if (r.Contains(KeyHash(k))) return k;
  }
}

int Run(const PauseOptions& o) {
  char tmpl[] = "/tmp/shoal-pause-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl, token = "bench-token";
  control::LocalSidecarOptions base;
  base.topic = "bench";
  base.fsync = o.fsync;
  auto started = control::StartPods(2, dir, base, token, "warn");
  if (!started.ok()) {
    std::cerr << "shoal bench pause: " << started.status().message() << "\n";
    return 1;
  }
  std::vector<control::LocalSidecar> pods = std::move(started).value();
  PartitionInfo p0;
  p0.id = PartitionId(0);
  p0.owner = PodName("pod-0");
  p0.born = Epoch(1);  // made by the first map (PartitionMap::Initial's too)
  PartitionMap current = control::WithPeers(PartitionMap("bench", Epoch(1), {p0}), pods);
  client::AdminClient admin(token);
  control::ChangeExecutor executor(admin);
  if (auto st = executor.InstallEverywhere(current); !st.ok()) {
    std::cerr << "shoal bench pause: " << st.message() << "\n";
    return 1;
  }
  std::mt19937_64 rng(7);
  std::string value = "{\"pad\":\"" + std::string(88, 'x') + "\"}";
  std::vector<double> pauses, observed;
  for (int r = 0; r < o.repeats; ++r) {
    // The partition to change: the widest active one (splits narrow them down).
    const PartitionInfo* target = nullptr;
    for (const auto& p : current.partitions()) {
      if (p.active() && (!target || p.range.Width() > target->range.Width())) target = &p;
    }
    const PartitionInfo victim = *target;
    // Fill its backlog: keys of its range, nobody consumes them.
    if (o.backlog > 0) {
      std::vector<std::string> keys;
      for (int k = 0; k < 64; ++k) keys.push_back(KeyIn(victim.range, rng));
      std::string body = "{\"events\":[";
      for (int i = 0; i < 1000; ++i) {
        body += (i ? ",{\"key\":\"" : "{\"key\":\"") + keys[i % keys.size()] +
                "\",\"value\":" + value + "}";
      }
      body += "]}";
      const auto& owner = pods[victim.owner == PodName("pod-0") ? 0 : 1];
      RawHttpConnection conn(owner.host, owner.port);
      for (uint64_t sent = 0; sent < o.backlog; sent += 1000) {
        auto code = conn.Request("POST", "/v1/topics/bench/events", body, nullptr);
        if (!code.ok() || *code != 200) {
          std::cerr << "shoal bench pause: filling the backlog failed\n";
          return 1;
        }
      }
    }
    // The probe: one key of the range, one event per request, through pod-0.
    const std::string probe_key = KeyIn(victim.range, rng);
    std::atomic<bool> stop{false};
    std::atomic<double> max_gap_ms{0};
    std::thread probe([&] {
      RawHttpConnection conn(pods[0].host, pods[0].port);
      const std::string body = "{\"events\":[{\"key\":\"" + probe_key + "\",\"value\":1}]}";
      auto last_ack = std::chrono::steady_clock::now();
      while (!stop.load()) {
        auto code = conn.Request("POST", "/v1/topics/bench/events", body, nullptr);
        const auto now = std::chrono::steady_clock::now();
        if (code.ok() && *code == 200) {
          const double gap = std::chrono::duration<double, std::milli>(now - last_ack).count();
          if (gap > max_gap_ms.load()) max_gap_ms = gap;
          last_ack = now;
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(200));  // retry pacing
        }
      }
    });
    // Let the probe run steady and the backlog settle: a backlog is events at rest waiting for
    // consumers, synced by the fsync policy (the seal's own fdatasync then has little to do).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    max_gap_ms = 0;
    Result<PartitionMap> next = Status::Internal("unset");
    if (o.kind == "split") {
      next = current.Split(victim.id, victim.range.lo + victim.range.Width() / 2);
    } else {
      next = current.Move(victim.id, PodName(victim.owner == PodName("pod-0") ? "pod-1" : "pod-0"));
    }
    if (!next.ok()) {
      std::cerr << "shoal bench pause: " << next.status().message() << "\n";
      return 1;
    }
    control::ChangeTiming timing;
    auto installed = executor.Apply(current, *next, &timing);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the probe see the end
    stop = true;
    probe.join();
    if (!installed.ok()) {
      std::cerr << "shoal bench pause: " << installed.status().message() << "\n";
      return 1;
    }
    current = std::move(installed).value();
    pauses.push_back(timing.pause_ms);
    observed.push_back(max_gap_ms.load());
  }
  for (auto& p : pods) p.process.Stop(std::chrono::seconds(10));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::sort(pauses.begin(), pauses.end());
  std::sort(observed.begin(), observed.end());
  if (o.json) {
    std::printf(
        "{\"kind\":\"%s\",\"backlog\":%llu,\"repeats\":%d,\"fsync\":\"%s\",\"pause_p50_ms\":%.2f,"
        "\"pause_p99_ms\":%.2f,\"pause_max_ms\":%.2f,\"observed_p50_ms\":%.2f,"
        "\"observed_p99_ms\":%.2f}\n",
        o.kind.c_str(), static_cast<unsigned long long>(o.backlog), o.repeats, o.fsync.c_str(),
        Percentile(pauses, 0.5), Percentile(pauses, 0.99), pauses.back(), Percentile(observed, 0.5),
        Percentile(observed, 0.99));
  } else {
    std::printf(
        "%s with a backlog of %llu events (%d changes, fsync %s): write pause p50 %.2f ms, p99 "
        "%.2f ms, max %.2f ms; longest gap a probe producer saw p50 %.2f ms, p99 %.2f ms\n",
        o.kind.c_str(), static_cast<unsigned long long>(o.backlog), o.repeats, o.fsync.c_str(),
        Percentile(pauses, 0.5), Percentile(pauses, 0.99), pauses.back(), Percentile(observed, 0.5),
        Percentile(observed, 0.99));
  }
  return 0;
}

}  // namespace

void RegisterBenchPause(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<PauseOptions>();
  auto* cmd = bench.add_subcommand("pause", "Write pause of a split or a move, by backlog");
  cmd->add_option("--kind", o->kind, "split | move")->check(CLI::IsMember({"split", "move"}));
  cmd->add_option("--backlog", o->backlog, "Unconsumed events in the partition before each change");
  cmd->add_option("--repeats", o->repeats, "Changes measured")->check(CLI::Range(1, 1000));
  cmd->add_option("--fsync", o->fsync, "fsync policy of the sidecars")
      ->check(CLI::IsMember({"always", "interval", "never"}));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace shoal::cli
