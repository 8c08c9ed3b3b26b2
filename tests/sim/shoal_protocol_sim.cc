// shoal-protocol-sim: runs the deterministic protocol simulation (protocol_sim.h) over many
// seeds, in parallel threads, and prints what it found. A failing seed is printed with the
// command that replays it with its whole trace.
//
//   shoal-protocol-sim --seeds 100000 --jobs 2          # seeds 1..100000
//   shoal-protocol-sim --seed 4711 --trace              # replay one, every action printed
//   shoal-protocol-sim --seeds 1000 --replicated on     # only replicated topics
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "sim/protocol_sim.h"
#include "shoal/common/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"shoal-protocol-sim: the change protocol under seeded random schedules"};
  uint64_t seeds = 1000, first = 1, one = 0;
  int steps = 250, jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool trace = false, json = false, known_gaps = false, pods_leave = false;
  std::string log_level = "off", replicated = "auto";
  app.add_option("--seeds", seeds, "How many schedules (seeds first, first+1, ...)");
  app.add_option("--first", first, "The first seed");
  app.add_option("--seed", one, "Run only this seed (with --trace: print every action)");
  app.add_option("--steps", steps, "Actions per schedule")->check(CLI::Range(1, 100000));
  app.add_option("--jobs", jobs, "Threads")->check(CLI::Range(1, 64));
  app.add_flag("--trace", trace, "Print the trace of each failing (or the one) schedule");
  app.add_flag("--json", json, "Print one JSON object");
  app.add_option("--log-level", log_level, "The sidecars' log level (off by default)");
  app.add_option("--replicated", replicated,
                 "Replicated topics: auto (the seed decides, about half), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_flag("--pods-leave", pods_leave,
               "In replicated seeds, changes place copies off one pod at a time (a pod that "
               "leaves), so that copies are dropped and added to partitions that hold events");
  app.add_flag("--tolerate-known-gaps", known_gaps,
               "Count instead of failing what replication does not cover yet: a group given "
               "again after a failover what it had committed (commits are not replicated), and "
               "a sealed partition with copies declared lost when its leader's volume is wiped");
  CLI11_PARSE(app, argc, argv);
  if (auto st = shoal::InitLogging(log_level); !st.ok()) {
    std::cerr << st.message() << "\n";
    return 2;
  }
  if (one) {
    first = one;
    seeds = 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<uint64_t> next{0};
  std::mutex mu;
  std::vector<shoal::sim::ScheduleResult> failed;
  uint64_t acked = 0, changes = 0, crashes = 0, coordinator_crashes = 0, fenced = 0, rogue = 0,
           retired = 0, seen = 0, abandoned = 0, done = 0, remote = 0, wipes = 0;
  uint64_t replicated_seeds = 0, failovers = 0, live_replaced = 0, fetch_rounds = 0, cut = 0, quorum_refusals = 0,
           isolations = 0, zombie = 0, redelivered = 0, lost_with_copies = 0, joined = 0;
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) {
    threads.emplace_back([&] {
      while (true) {
        const uint64_t i = next.fetch_add(1);
        if (i >= seeds) return;
        shoal::sim::ScheduleOptions o;
        o.seed = first + i;
        o.steps = steps;
        o.trace = trace && seeds == 1;
        o.replicated = replicated == "auto" ? -1 : replicated == "on" ? 1 : 0;
        o.tolerate_known_gaps = known_gaps;
        o.pods_leave = pods_leave ? 1 : 0;
        auto r = shoal::sim::RunSchedule(o);
        std::lock_guard<std::mutex> lock(mu);
        acked += r.acked;
        changes += r.changes;
        crashes += r.crashes;
        wipes += r.wipes;
        coordinator_crashes += r.coordinator_crashes;
        fenced += r.fenced;
        rogue += r.rogue_changes;
        retired += r.retired;
        seen += r.seen;
        remote += r.remote_read;
        abandoned += r.abandoned;
        replicated_seeds += r.replicated ? 1 : 0;
        failovers += r.failovers;
        live_replaced += r.live_leaders_replaced;
        fetch_rounds += r.fetch_rounds;
        cut += r.cut_entries;
        quorum_refusals += r.quorum_refusals;
        isolations += r.isolations;
        zombie += r.zombie_appends;
        redelivered += r.redelivered_after_failover;
        lost_with_copies += r.lost_with_copies;
        joined += r.copies_joined;
        ++done;
        if (!r.ok()) failed.push_back(std::move(r));
        if (!json && done % 1000 == 0) {
          std::fprintf(stderr, "%llu schedules, %zu failed\n",
                       static_cast<unsigned long long>(done), failed.size());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::sort(failed.begin(), failed.end(),
            [](const auto& a, const auto& b) { return a.seed < b.seed; });
  if (json) {
    std::printf(
        "{\"schedules\":%llu,\"first_seed\":%llu,\"failed\":%zu,\"seconds\":%.1f,\"acked\":%llu,"
        "\"seen\":%llu,\"read_from_peers\":%llu,\"changes\":%llu,\"retired\":%llu,\"sidecar_crashes\":%llu,"
        "\"coordinator_crashes\":%llu,\"fenced\":%llu,\"rogue_changes\":%llu,\"abandoned\":%llu,"
        "\"replicated\":%llu,\"failovers\":%llu,\"live_leaders_replaced\":%llu,\"fetch_rounds\":%llu,\"cut_entries\":%llu,"
        "\"quorum_refusals\":%llu,\"isolations\":%llu,\"zombie_appends\":%llu,"
        "\"redelivered_after_failover\":%llu,\"lost_with_copies\":%llu,\"copies_joined\":%llu,"
        "\"failed_seeds\":[",
        static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(first),
        failed.size(), seconds, static_cast<unsigned long long>(acked),
        static_cast<unsigned long long>(seen), static_cast<unsigned long long>(remote),
        static_cast<unsigned long long>(changes),
        static_cast<unsigned long long>(retired), static_cast<unsigned long long>(crashes),
        static_cast<unsigned long long>(coordinator_crashes),
        static_cast<unsigned long long>(fenced), static_cast<unsigned long long>(rogue),
        static_cast<unsigned long long>(abandoned),
        static_cast<unsigned long long>(replicated_seeds),
        static_cast<unsigned long long>(failovers),
        static_cast<unsigned long long>(live_replaced),
        static_cast<unsigned long long>(fetch_rounds), static_cast<unsigned long long>(cut),
        static_cast<unsigned long long>(quorum_refusals),
        static_cast<unsigned long long>(isolations), static_cast<unsigned long long>(zombie),
        static_cast<unsigned long long>(redelivered),
        static_cast<unsigned long long>(lost_with_copies), static_cast<unsigned long long>(joined));
    for (size_t i = 0; i < failed.size(); ++i) {
      std::printf("%s%llu", i ? "," : "", static_cast<unsigned long long>(failed[i].seed));
    }
    std::printf("]}\n");
  } else {
    std::printf(
        "%llu schedules (seeds %llu..%llu) in %.1f s: %zu failed. %llu events acknowledged, "
        "%llu delivered (%llu of them read through a successor from a peer), %llu changes, %llu partitions retired, %llu sidecar crashes, %llu "
        "volumes wiped, %llu coordinator crashes, %llu fencing refusals, %llu changes of the second coordinator, "
        "%llu events given up (sequence_unknown)\n",
        static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(first),
        static_cast<unsigned long long>(first + seeds - 1), seconds, failed.size(),
        static_cast<unsigned long long>(acked), static_cast<unsigned long long>(seen),
        static_cast<unsigned long long>(remote),
        static_cast<unsigned long long>(changes), static_cast<unsigned long long>(retired),
        static_cast<unsigned long long>(crashes), static_cast<unsigned long long>(wipes),
        static_cast<unsigned long long>(coordinator_crashes),
        static_cast<unsigned long long>(fenced), static_cast<unsigned long long>(rogue),
        static_cast<unsigned long long>(abandoned));
    std::printf(
        "Replicated: %llu schedules, %llu partitions failed over (%llu of them from a leader "
        "still running), %llu fetch rounds, %llu entries cut from "
        "divergent tails, %llu events taken by replaced leaders, %llu produces refused without a "
        "quorum, %llu sidecars isolated from the coordinators, %llu copies added to partitions "
        "holding events; %llu redeliveries after a "
        "failover and %llu partitions with copies declared lost (known gaps%s)\n",
        static_cast<unsigned long long>(replicated_seeds),
        static_cast<unsigned long long>(failovers),
        static_cast<unsigned long long>(live_replaced),
        static_cast<unsigned long long>(fetch_rounds), static_cast<unsigned long long>(cut),
        static_cast<unsigned long long>(zombie),
        static_cast<unsigned long long>(quorum_refusals),
        static_cast<unsigned long long>(isolations), static_cast<unsigned long long>(joined),
        static_cast<unsigned long long>(redelivered),
        static_cast<unsigned long long>(lost_with_copies),
        known_gaps ? ", tolerated" : "");
    for (const auto& r : failed) {
      std::printf("seed %llu FAILED%s%s (replay: %s --seed %llu --steps %d --replicated %s%s%s --trace)\n",
                  static_cast<unsigned long long>(r.seed),
                  r.hand_rogue ? " [with a coordinator that ignores the record]" : "",
                  r.replicated ? " [replicated]" : "", argv[0],
                  static_cast<unsigned long long>(r.seed), steps, r.replicated ? "on" : "off",
                  pods_leave ? " --pods-leave" : "", known_gaps ? " --tolerate-known-gaps" : "");
      for (const auto& v : r.violations) std::printf("  %s\n", v.c_str());
      if (trace || seeds == 1) {
        for (const auto& t : r.trace) std::printf("    | %s\n", t.c_str());
      }
    }
    if (failed.empty() && seeds == 1 && trace) {
      shoal::sim::ScheduleOptions o;
      o.seed = first;
      o.steps = steps;
      o.trace = true;
      o.replicated = replicated == "auto" ? -1 : replicated == "on" ? 1 : 0;
      o.tolerate_known_gaps = known_gaps;
      for (const auto& t : shoal::sim::RunSchedule(o).trace) std::printf("    | %s\n", t.c_str());
    }
  }
  return failed.empty() ? 0 : 1;
}
