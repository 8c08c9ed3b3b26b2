// shoal bench drain: how fast a split drains the backlog that built up before it.
//
// k sidecars (pod-0 .. pod-(k-1)). Partition 0 on pod-0 is filled with --backlog events (keys
// spread over the hash space, an idempotent producer's, in the load generator's value format)
// that nobody has consumed. Then one change seals it and gives its range to k successors of
// equal width, successor i on pod-i, and one consumer per pod (service time per event, as a
// consumer that waits for a database) reads the group from its own sidecar, as an application
// container reads from localhost. Measured: the time from the consumers' start until every
// backlog event was handed to them and committed.
//
// With range reads (the default sidecar), each successor's pod reads its range of the parent at
// once, so the backlog drains at k pods' rate. Without them (--range-reads false, the rule of
// Kinesis and Pravega), the successors wait until the parent is consumed whole, by the one pod
// that holds it. Every run verifies per-key order, loss and duplicates over the group.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cmd/commands.h"
#include "cmd/scrape.h"
#include "shoal/client/admin_client.h"
#include "shoal/common/json.h"
#include "shoal/common/raw_http.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/process.h"
#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"

namespace shoal::cli {

namespace {

struct DrainOptions {
  uint64_t backlog = 20000;
  std::vector<int> successors{2, 4, 8};
  int64_t service_us = 1000;
  int concurrency = 1;
  size_t max = 100;
  std::string fsync = "interval";
  double timeout_s = 600;
  bool json = false;
};

struct DrainRun {
  int k = 0;
  bool range_reads = true;
  double drain_s = 0;
  harness::VerifyReport report;
  uint64_t read_from_peers = 0;
};

Result<DrainRun> RunOnce(const DrainOptions& o, int k, bool range_reads) {
  char tmpl[] = "/tmp/shoal-drain-XXXXXX";
  if (!mkdtemp(tmpl)) return Status::IoError("mkdtemp");
  const std::string dir = tmpl, token = "bench-token", topic = "drain";
  control::LocalSidecarOptions base;
  base.topic = topic;
  base.fsync = o.fsync;
  base.extra_args = {"--range-reads", range_reads ? "true" : "false"};
  auto started = control::StartPods(k, dir, base, token, "warn");
  if (!started.ok()) return started.status();
  std::vector<control::LocalSidecar> pods = std::move(started).value();
  auto cleanup = [&] {
    for (auto& p : pods) p.process.Stop(std::chrono::seconds(10));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  };
  PartitionInfo parent;
  parent.id = PartitionId(0);
  parent.owner = PodName("pod-0");
  parent.born = Epoch(1);  // made by the first map (PartitionMap::Initial's too)
  PartitionMap current = control::WithPeers(PartitionMap(topic, Epoch(1), {parent}), pods);
  client::AdminClient admin(token);
  control::ChangeExecutor executor(admin);
  if (auto st = executor.InstallEverywhere(current); !st.ok()) {
    cleanup();
    return st;
  }
  // The backlog: an idempotent producer's events over 10,000 keys, in the value format the
  // verifier reads ({"p","k","n"}), in batches of 1,000.
  std::vector<harness::AckedEvent> acked;
  std::map<std::string, uint64_t> per_key;
  {
    RawHttpConnection conn(pods[0].host, pods[0].port);
    for (uint64_t sent = 0; sent < o.backlog;) {
      std::string body = "{\"events\":[";
      const uint64_t n = std::min<uint64_t>(1000, o.backlog - sent);
      for (uint64_t i = 0; i < n; ++i, ++sent) {
        const std::string key = "key-" + std::to_string(sent % 10000);
        const uint64_t count = ++per_key[key];
        if (i) body += ',';
        body += "{\"key\":";
        json::AppendString(body, key);
        body += ",\"value\":{\"p\":\"drain\",\"k\":";
        json::AppendString(body, key);
        body += ",\"n\":" + std::to_string(count) + ",\"pad\":\"" + std::string(40, 'x') +
                "\"},\"producer\":\"drain\",\"seq\":" + std::to_string(sent) + "}";
        acked.push_back({"drain", key, sent, count, 0});
      }
      body += "]}";
      auto code = conn.Request("POST", "/v1/topics/" + topic + "/events", body, nullptr);
      if (!code.ok() || *code != 200) {
        cleanup();
        return Status::Unavailable("filling the backlog failed");
      }
    }
  }
  // One change: the parent sealed, k successors of equal width, successor i on pod-i.
  std::vector<PartitionInfo> parts;
  PartitionInfo sealed = parent;
  sealed.state = PartitionState::kSealed;
  parts.push_back(sealed);
  for (int i = 0; i < k; ++i) {
    PartitionInfo s;
    s.id = PartitionId(static_cast<uint32_t>(i + 1));
    s.range = {kHashSpace * static_cast<uint64_t>(i) / static_cast<uint64_t>(k),
               kHashSpace * static_cast<uint64_t>(i + 1) / static_cast<uint64_t>(k)};
    s.owner = PodName("pod-" + std::to_string(i));
    s.parents = {parent.id};
    parts.push_back(s);
  }
  PartitionMap target = control::WithPeers(PartitionMap(topic, Epoch(2), parts), pods);
  control::ChangeTiming timing;
  auto installed = executor.Apply(current, target, &timing);
  if (!installed.ok()) {
    cleanup();
    return installed.status();
  }
  // One consumer per pod, reading from its own sidecar.
  std::vector<std::unique_ptr<harness::GroupConsumer>> consumers;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& pod : pods) {
    harness::ConsumerOptions co;
    co.target = pod.base_url();
    co.topic = topic;
    co.group = "drain";
    co.max = o.max;
    co.wait_ms = 50;
    co.service_us_per_event = o.service_us;
    co.concurrency = o.concurrency;
    consumers.push_back(std::make_unique<harness::GroupConsumer>(co));
    if (auto st = consumers.back()->Start(); !st.ok()) {
      cleanup();
      return st;
    }
  }
  auto seen = [&] {
    uint64_t n = 0;
    for (const auto& c : consumers) n += c->seen();
    return n;
  };
  const auto deadline = t0 + std::chrono::duration<double>(o.timeout_s);
  while (seen() < o.backlog && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling the consumers' count
  }
  DrainRun run;
  run.k = k;
  run.range_reads = range_reads;
  run.drain_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<harness::SeenEvent> all;
  for (auto& c : consumers) {
    c->Stop();
    auto s = c->TakeSeen();
    all.insert(all.end(), s.begin(), s.end());
  }
  for (const auto& pod : pods) {
    for (const auto& [group, n] : SumBy(Scrape(pod.host, pod.metrics_port),
                                        "shoal_events_read_through_total", "group",
                                        {{"from", "peer"}})) {
      run.read_from_peers += static_cast<uint64_t>(n);
    }
  }
  run.report = harness::Verify(acked, std::move(all));
  cleanup();
  if (run.report.seen < o.backlog) {
    return Status::Unavailable("the backlog did not drain within " +
                               std::to_string(o.timeout_s) + " s: " + run.report.ToText());
  }
  return run;
}

int Run(const DrainOptions& o) {
  std::vector<DrainRun> runs;
  bool ok = true;
  for (int k : o.successors) {
    for (bool range_reads : {true, false}) {
      if (!o.json) {
        std::fprintf(stderr, "k=%d, range reads %s: draining %llu events...\n", k,
                     range_reads ? "on" : "off", static_cast<unsigned long long>(o.backlog));
      }
      auto r = RunOnce(o, k, range_reads);
      if (!r.ok()) {
        std::cerr << "shoal bench drain: k=" << k << ": " << r.status().message() << "\n";
        return 1;
      }
      ok = ok && r->report.ok();
      runs.push_back(std::move(r).value());
    }
  }
  const double per_pod = o.concurrency * 1e6 / static_cast<double>(std::max<int64_t>(1, o.service_us));
  if (o.json) {
    std::printf("{\"backlog\":%llu,\"service_us_per_event\":%lld,\"concurrency\":%d,\"runs\":[",
                static_cast<unsigned long long>(o.backlog), static_cast<long long>(o.service_us),
                o.concurrency);
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      std::printf(
          "%s{\"successors\":%d,\"range_reads\":%s,\"drain_s\":%.3f,\"read_from_peers\":%llu,"
          "\"verify\":%s}",
          i ? "," : "", r.k, r.range_reads ? "true" : "false", r.drain_s,
          static_cast<unsigned long long>(r.read_from_peers), r.report.ToJson().c_str());
    }
    std::printf("]}\n");
  } else {
    std::printf(
        "backlog %llu events, consumers of %lld us per event in %d lane(s) (%.0f events/s per "
        "pod)\n",
        static_cast<unsigned long long>(o.backlog), static_cast<long long>(o.service_us),
        o.concurrency, per_pod);
    std::printf("%-11s %-22s %-22s %-8s %s\n", "successors", "range reads: drained", 
                "parent whole: drained", "speedup", "verified (lost/reordered/duplicated)");
    for (size_t i = 0; i + 1 < runs.size(); i += 2) {
      const auto& on = runs[i];
      const auto& off = runs[i + 1];
      std::printf("%-11d %7.2f s (%6llu peer) %14.2f s %7.2fx  %llu/%llu/%llu, %llu/%llu/%llu\n",
                  on.k, on.drain_s, static_cast<unsigned long long>(on.read_from_peers),
                  off.drain_s, off.drain_s / on.drain_s,
                  static_cast<unsigned long long>(on.report.lost),
                  static_cast<unsigned long long>(on.report.reordered),
                  static_cast<unsigned long long>(on.report.duplicated),
                  static_cast<unsigned long long>(off.report.lost),
                  static_cast<unsigned long long>(off.report.reordered),
                  static_cast<unsigned long long>(off.report.duplicated));
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

void RegisterBenchDrain(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<DrainOptions>();
  auto* cmd = bench.add_subcommand(
      "drain", "Time to drain a parent's backlog after a split into k successors on k pods, "
               "with and without reads through ranges");
  cmd->add_option("--backlog", o->backlog, "Unconsumed events in the parent before the split")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  cmd->add_option("--successors", o->successors, "Successor counts (one pod each) to measure")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--service-us", o->service_us, "Microseconds a consumer waits per event")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}));
  cmd->add_option("--concurrency", o->concurrency, "Lanes a consumer waits in at once")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--max", o->max, "Events per consume request")->check(CLI::Range(1, 10000));
  cmd->add_option("--fsync", o->fsync, "fsync policy of the sidecars")
      ->check(CLI::IsMember({"always", "interval", "never"}));
  cmd->add_option("--timeout", o->timeout_s, "Seconds a drain may take before it fails");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace shoal::cli
