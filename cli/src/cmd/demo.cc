// shoal demo: the local sidecar demo of the README's first command. Starts a real shoal-sidecar,
// produces keyed events with an idempotent producer, retries a batch, consumes everything as a
// group with commits, restarts the sidecar, checks that nothing was lost, reordered or duplicated,
// and prints what happened at each step.
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "cmd/commands.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/raw_http.h"
#include "shoal/control/process.h"

namespace shoal::cli {

namespace {

struct DemoOptions {
  uint64_t events = 5000;
  uint64_t keys = 50;
  uint32_t partitions = 4;
  size_t batch = 250;
  std::string fsync = "always";
  std::string data_dir;
  bool keep = false;
};

void Step(const std::string& s) { std::cout << "\n== " << s << "\n"; }

int Run(const DemoOptions& o) {
  std::string dir = o.data_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/shoal-demo-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::cerr << "shoal demo: cannot create a temp directory\n";
      return 1;
    }
    dir = tmpl;
  }
  control::LocalSidecarOptions so;
  so.partitions = o.partitions;
  so.data_dir = dir;
  so.fsync = o.fsync;
  Step("starting shoal-sidecar (topic orders, " + std::to_string(o.partitions) +
       " partitions, fsync " + o.fsync + ")");
  auto started = control::LocalSidecar::Start(so);
  if (!started.ok()) {
    std::cerr << "shoal demo: " << started.status().message() << "\n";
    return 1;
  }
  control::LocalSidecar sidecar = std::move(started).value();
  std::cout << "data plane " << sidecar.base_url() << "  metrics http://" << sidecar.host << ":"
            << sidecar.metrics_port << "/metrics\ndata dir " << dir << "  log " << sidecar.log_path
            << "\n";
  client::ShoalClient c(sidecar.base_url(), "orders");

  Step("producing " + std::to_string(o.events) + " events over " + std::to_string(o.keys) +
       " keys in batches of " + std::to_string(o.batch) + " (producer demo, seq 0..)");
  std::map<uint32_t, uint64_t> per_partition;
  std::vector<uint64_t> next_n(o.keys, 0);
  std::vector<client::OutgoingEvent> last;
  std::vector<double> latencies;
  for (uint64_t i = 0; i < o.events;) {
    std::vector<client::OutgoingEvent> batch;
    for (; i < o.events && batch.size() < o.batch; ++i) {
      const uint64_t k = i % o.keys;
      batch.push_back(
          {"customer_" + std::to_string(k),
           "{\"order\":" + std::to_string(i) + ",\"n\":" + std::to_string(++next_n[k]) + "}",
           "demo", i});
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.Produce(batch);
    latencies.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!r.ok()) {
      std::cerr << "shoal demo: produce failed: " << r.status().message() << "\n";
      return 1;
    }
    for (const auto& res : *r) per_partition[res.partition]++;
    last = batch;
  }
  std::sort(latencies.begin(), latencies.end());
  std::cout << "acknowledged " << o.events << " events; per partition:";
  for (auto [p, n] : per_partition) std::cout << " p" << p << "=" << n;
  std::cout << "\nproduce latency per batch: p50 " << Percentile(latencies, 0.5) << " ms, p99 "
            << Percentile(latencies, 0.99) << " ms\n";

  Step("retrying the last batch with the same (producer, seq): an idempotent producer's retry");
  auto retry = c.Produce(last);
  size_t dups = 0;
  if (retry.ok()) {
    for (const auto& r : *retry) dups += r.duplicate ? 1 : 0;
  }
  std::cout << dups << " of " << last.size() << " answered duplicate: true, none appended twice\n";

  auto consume_all = [&](client::ShoalClient& cl, const std::string& group, uint64_t want,
                         std::chrono::seconds limit) {
    std::vector<wire::ConsumedEvent> seen;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (seen.size() < want && std::chrono::steady_clock::now() < deadline) {
      auto got = cl.Consume(group, 1000, 200);
      if (!got.ok()) {
        std::cerr << "consume failed: " << got.status().message() << "\n";
        break;
      }
      if (got->empty() && want == 0) break;
      std::map<uint32_t, uint64_t> commit;
      for (auto& e : *got) {
        commit[e.partition] = std::max(commit[e.partition], e.offset + 1);
        seen.push_back(std::move(e));
      }
      std::vector<wire::CommitOffset> offsets;
      for (auto [p, off] : commit) offsets.push_back({PartitionId(p), Offset(off)});
      if (!offsets.empty()) {
        if (auto st = cl.Commit(group, offsets); !st.ok()) {
          std::cerr << "commit failed: " << st.message() << "\n";
        }
      }
    }
    return seen;
  };

  Step("consuming as group demo-consumers (long-poll GETs, committing after each)");
  auto seen = consume_all(c, "demo-consumers", o.events, std::chrono::seconds(60));
  std::set<uint64_t> seqs;
  uint64_t duplicated = 0, reordered = 0;
  std::map<std::string, uint64_t> last_n;
  simdjson::dom::parser parser;
  for (const auto& e : seen) {
    if (e.seq && !seqs.insert(*e.seq).second) ++duplicated;
    simdjson::dom::element v;
    uint64_t n = 0;
    if (!parser.parse(e.value).get(v) && !v["n"].get(n)) {
      if (n <= last_n[e.key]) ++reordered;
      last_n[e.key] = n;
    }
  }
  const uint64_t lost = o.events - std::min<uint64_t>(o.events, seqs.size());
  std::cout << "consumed " << seen.size() << ": lost " << lost << ", reordered " << reordered
            << ", duplicated " << duplicated << "\n";

  Step("restarting the sidecar (SIGTERM, then start on the same data dir)");
  const int code = sidecar.process.Stop(std::chrono::seconds(10));
  std::cout << "stopped with exit code " << code << "\n";
  so.data_dir = dir;
  auto again = control::LocalSidecar::Start(so);
  if (!again.ok()) {
    std::cerr << "shoal demo: restart failed: " << again.status().message() << "\n";
    return 1;
  }
  sidecar = std::move(again).value();
  client::ShoalClient c2(sidecar.base_url(), "orders");
  auto after = consume_all(c2, "demo-consumers", 0, std::chrono::seconds(5));
  auto retry2 = c2.Produce(last);
  size_t dups2 = 0;
  if (retry2.ok()) {
    for (const auto& r : *retry2) dups2 += r.duplicate ? 1 : 0;
  }
  std::cout << "the group resumed from its commits: " << after.size()
            << " events left to consume; the retried batch: " << dups2 << " of " << last.size()
            << " still duplicate after the restart\n";

  Step("the topic view (GET " + sidecar.base_url() + "/v1/topics/orders)");
  if (auto view = c2.TopicView(); view.ok()) {
    simdjson::dom::element doc;
    simdjson::dom::array parts;
    if (!parser.parse(*view).get(doc) && !doc["partitions"].get(parts)) {
      for (auto p : parts) {
        uint64_t id = 0, lo = 0, hi = 0, end = 0;
        if (p["id"].get(id) || p["lo"].get(lo) || p["hi"].get(hi) ||
            p["end_offset"].get(end)) {
          continue;
        }
        std::printf("  partition %llu  hash [%10llu, %10llu)  end offset %llu\n",
                    (unsigned long long)id, (unsigned long long)lo, (unsigned long long)hi,
                    (unsigned long long)end);
      }
    }
  }
  std::string metrics;
  RawHttpConnection mc(sidecar.host, sidecar.metrics_port);
  if (auto m = mc.Request("GET", "/metrics", "", &metrics); m.ok()) {
    Step("a few of its metrics (http://" + sidecar.host + ":" +
         std::to_string(sidecar.metrics_port) + "/metrics)");
    std::istringstream lines(metrics);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.starts_with("shoal_events_appended_total") ||
          line.starts_with("shoal_duplicate_events_total") ||
          line.starts_with("shoal_consumer_lag_events")) {
        std::cout << "  " << line << "\n";
      }
    }
  }
  sidecar.process.Stop(std::chrono::seconds(10));
  const bool ok = lost == 0 && reordered == 0 && duplicated == 0 && dups == last.size() &&
                  dups2 == last.size() && after.empty();
  Step(ok ? "demo ok: 0 lost, 0 reordered, 0 duplicated" : "demo FAILED");
  if (!o.keep && o.data_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return ok ? 0 : 1;
}

}  // namespace

void RegisterDemo(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand("demo", "Run a local sidecar, produce, consume, restart, verify");
  cmd->add_option("--events", o->events, "Events to produce")->check(CLI::Range(1, 10000000));
  cmd->add_option("--keys", o->keys, "Distinct keys")->check(CLI::Range(1, 1000000));
  cmd->add_option("--partitions", o->partitions, "Partitions")->check(CLI::Range(1, 1024));
  cmd->add_option("--batch", o->batch, "Events per produce request")->check(CLI::Range(1, 10000));
  cmd->add_option("--fsync", o->fsync, "always | interval | never")
      ->check(CLI::IsMember({"always", "interval", "never"}));
  cmd->add_option("--data-dir", o->data_dir, "Keep the sidecar's data here");
  cmd->add_flag("--keep", o->keep, "Keep the temporary data directory");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace shoal::cli
