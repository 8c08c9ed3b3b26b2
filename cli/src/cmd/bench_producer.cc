// shoal bench producer: what an application gets from client::Producer against a real sidecar:
// application threads call Send for each event (keyed ~100-byte values), the producer batches
// them by size and linger and sends up to --in-flight batches at once; prints the events/s
// acknowledged and the latency from each event's Send to its acknowledgement (a sample of one
// event in 16), with the producer's requests, retries and the most batches it had in flight.
//
// With --rate each thread calls Send on a schedule and an event's latency counts from its
// scheduled time, so that a Send that blocked (the producer's buffer full) is not hidden; without
// it the threads send as fast as Send returns. Only events whose Send fell in the measured window
// (after --warmup, for --duration) count.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "cmd/commands.h"
#include "shoal/client/admin_client.h"
#include "shoal/client/producer.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/process.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct ProducerBenchOptions : BenchRunOptions {
  ProducerBenchOptions() {
    duration_s = 5;
    warmup_s = 1;
  }
  int threads = 2;
  size_t in_flight = 4;
  size_t batch = 256;
  double linger_ms = 2;
  bool binary = false;
  double rate = 0;  // events/s over all threads; 0: as fast as Send returns
  int pods = 1;     // more: a topic of that many sidecars, the producer given pod-0
  bool route = false;
};

// What the callbacks record, from the producer's sender threads.
struct Tally {
  std::atomic<uint64_t> acked{0};   // events in the window acknowledged
  std::atomic<uint64_t> failed{0};  // events (any) failed
  std::mutex mu;
  std::vector<double> latencies_ms;  // the sampled events', guarded by mu
  std::string first_error;           // guarded by mu
};

int Run(const ProducerBenchOptions& o) {
  std::optional<control::LocalSidecar> sidecar;
  std::string url = "http://" + o.target;
  std::string data_dir;
  TlsClientFiles tls;
  if (o.tls && !o.target.empty()) {
    std::cerr << "shoal bench producer: --tls starts a sidecar of its own; it does not go with "
                 "--target\n";
    return 2;
  }
  std::vector<control::LocalSidecar> pods;
  if (o.pods > 1 && (o.tls || !o.target.empty())) {
    std::cerr << "shoal bench producer: --pods starts a topic of its own, in plain HTTP\n";
    return 2;
  }
  if (o.pods > 1) {
    char tmpl[] = "/tmp/shoal-bench-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::cerr << "shoal bench producer: cannot create a temp directory\n";
      return 1;
    }
    data_dir = tmpl;
    const std::string token = "bench-token";
    control::LocalSidecarOptions base;
    base.topic = o.topic;
    base.fsync = o.fsync;
    auto started = control::StartPods(o.pods, data_dir, base, token, "warn");
    std::vector<PodName> owners;
    for (int i = 0; i < o.pods; ++i) owners.push_back(PodName("pod-" + std::to_string(i)));
    auto initial = PartitionMap::Initial(o.topic, o.partitions, owners);
    Status st = !started.ok() ? started.status() : initial.status();
    if (st.ok()) {
      pods = std::move(started).value();
      client::AdminClient admin(token);
      control::ChangeExecutor executor(admin);
      st = executor.InstallEverywhere(control::WithPeers(std::move(initial).value(), pods));
    }
    if (!st.ok()) {
      std::cerr << "shoal bench producer: " << st.message() << "\n";
      return 1;
    }
    url = pods[0].base_url();
  } else if (o.target.empty()) {
    auto started = StartBenchSidecar({o.topic, o.partitions, o.fsync, "", o.tls});
    if (!started.ok()) {
      std::cerr << "shoal bench producer: " << started.status().message() << "\n";
      return 1;
    }
    data_dir = started->data_dir;
    tls = started->client_tls;
    sidecar.emplace(std::move(started->sidecar));
    url = (o.tls ? "https://" : "http://") + sidecar->host + ":" + std::to_string(sidecar->port);
  }

  client::ProducerOptions po;
  po.batch_events = o.batch;
  po.linger = std::chrono::microseconds(static_cast<int64_t>(o.linger_ms * 1000));
  po.max_in_flight = o.in_flight;
  po.format = o.binary ? wire::Format::kBinary : wire::Format::kJson;
  po.retry_for = std::chrono::seconds(10);
  po.tls = tls;
  po.route_by_map = o.route;
  auto producer = std::make_unique<client::Producer>(url, o.topic, po);

  // Values built before the clock starts (an application has its values at hand; building them
  // here would be the benchmark's cost, not the producer's): each Send copies one.
  constexpr size_t kValues = 4096;
  std::vector<std::string> values;
  values.reserve(kValues);
  for (size_t n = 0; n < kValues; ++n) values.push_back(harness::BenchValue(n, o.value_bytes));

  Tally tally;
  const auto start = Clock::now();
  const auto measure_from =
      start + std::chrono::microseconds(static_cast<int64_t>(o.warmup_s * 1e6));
  const auto measure_until =
      measure_from + std::chrono::microseconds(static_cast<int64_t>(o.duration_s * 1e6));
  std::vector<pid_t> pids;
  if (sidecar) pids.push_back(sidecar->process.pid());
  for (const auto& p : pods) pids.push_back(p.process.pid());
  auto cpu_at = [&]() -> double {  // of every sidecar
    double total = 0;
    for (pid_t pid : pids) {
      if (auto t = control::ProcessCpuTime(pid)) total += std::chrono::duration<double>(*t).count();
    }
    return total;
  };
  std::atomic<bool> measuring{false};
  double cpu_from = 0;

  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      const double per_thread = o.rate / o.threads;
      uint64_t i = 0;
      while (true) {
        Clock::time_point stamp = Clock::now();
        if (per_thread > 0) {
          const auto due = start + std::chrono::nanoseconds(static_cast<int64_t>(
                                       static_cast<double>(i) * 1e9 / per_thread));
          if (due > stamp) std::this_thread::sleep_until(due);  // the schedule of a paced sender
          stamp = due;
        }
        if (stamp >= measure_until) return;
        const uint64_t n = i * static_cast<uint64_t>(o.threads) + static_cast<uint64_t>(t);
        const bool counted = stamp >= measure_from;
        const bool sampled = counted && n % 16 == 0;
        producer->Send(
            harness::BenchKey(n, o.keys), values[n % kValues],
            [&tally, stamp, counted, sampled](const Result<wire::ProduceResult>& r) {
              if (!r.ok()) {
                if (tally.failed.fetch_add(1) == 0) {
                  std::lock_guard<std::mutex> lock(tally.mu);
                  tally.first_error = r.status().ToString();
                }
                return;
              }
              if (counted) tally.acked.fetch_add(1, std::memory_order_relaxed);
              if (sampled) {
                const double ms =
                    std::chrono::duration<double, std::milli>(Clock::now() - stamp).count();
                std::lock_guard<std::mutex> lock(tally.mu);
                tally.latencies_ms.push_back(ms);
              }
            });
        if (counted && !measuring.exchange(true)) cpu_from = cpu_at();
        ++i;
      }
    });
  }
  for (auto& th : threads) th.join();
  producer->Flush();
  const double elapsed = std::chrono::duration<double>(Clock::now() - measure_from).count();
  const double cpu_used = cpu_at() - cpu_from;
  const uint64_t requests = producer->requests(), retries = producer->retries();
  const size_t peak = producer->peak_in_flight();
  const uint64_t routed = producer->routed();
  producer.reset();
  if (sidecar) sidecar->process.Stop(std::chrono::seconds(10));
  for (auto& p : pods) p.process.Stop(std::chrono::seconds(10));
  if (!data_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(data_dir, ec);
  }

  std::vector<double> all;
  {
    std::lock_guard<std::mutex> lock(tally.mu);
    all = tally.latencies_ms;
  }
  std::sort(all.begin(), all.end());
  const uint64_t acked = tally.acked.load(), failed = tally.failed.load();
  const double eps = static_cast<double>(acked) / o.duration_s;
  const double cores = pids.empty() ? 0 : cpu_used / elapsed;
  if (failed > 0) {
    std::cerr << "shoal bench producer: " << failed
              << " events failed; the first: " << tally.first_error << "\n";
  }
  if (o.json) {
    std::cout << "{\"events_per_sec\":" << static_cast<uint64_t>(eps) << ",\"acked\":" << acked
              << ",\"failed\":" << failed << ",\"p50_ms\":" << Percentile(all, 0.50)
              << ",\"p99_ms\":" << Percentile(all, 0.99)
              << ",\"p999_ms\":" << Percentile(all, 0.999)
              << ",\"max_ms\":" << (all.empty() ? 0 : all.back()) << ",\"requests\":" << requests
              << ",\"retries\":" << retries << ",\"peak_in_flight\":" << peak
              << ",\"in_flight\":" << o.in_flight << ",\"batch\":" << o.batch
              << ",\"linger_ms\":" << o.linger_ms << ",\"format\":\""
              << (o.binary ? "binary" : "json") << "\",\"threads\":" << o.threads
              << ",\"offered_rate\":" << o.rate << ",\"duration_s\":" << o.duration_s
              << ",\"tls\":" << (o.tls ? "true" : "false") << ",\"pods\":" << o.pods
              << ",\"route\":" << (o.route ? "true" : "false") << ",\"routed\":" << routed
              << ",\"sidecar_cpu_cores\":" << cores << "}\n";
  } else {
    std::printf(
        "producer: %.0f events/s acknowledged  send-to-ack p50 %.2f ms  p99 %.2f ms  p999 %.2f ms  "
        "(%d threads, in flight %zu (peak %zu), batches of %zu, linger %.1f ms, %s, %llu "
        "requests, %llu retries, %llu failed, %s, %d pod(s)%s, sidecars %.2f cores)\n",
        eps, Percentile(all, 0.5), Percentile(all, 0.99), Percentile(all, 0.999), o.threads,
        o.in_flight, peak, o.batch, o.linger_ms, o.binary ? "binary" : "JSON",
        static_cast<unsigned long long>(requests), static_cast<unsigned long long>(retries),
        static_cast<unsigned long long>(failed), o.tls ? "TLS" : "plain HTTP", o.pods,
        o.route ? (", routed: " + std::to_string(routed) + " events sent to their owner").c_str()
                : "",
        cores);
  }
  return failed ? 1 : 0;
}

}  // namespace

void RegisterBenchProducer(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<ProducerBenchOptions>();
  auto* cmd = bench.add_subcommand(
      "producer", "client::Producer's throughput and send-to-ack latency against a sidecar");
  AddBenchRunFlags(cmd, *o);
  cmd->add_option("--threads", o->threads, "Application threads calling Send")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--in-flight", o->in_flight, "The producer's batches in flight at once")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--batch", o->batch, "Events per request at most")->check(CLI::Range(1, 256));
  cmd->add_option("--linger-ms", o->linger_ms, "How long a partial batch waits")
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_flag("--binary", o->binary, "Binary batches instead of JSON");
  cmd->add_option("--pods", o->pods,
                  "Sidecars of the started topic (partitions round robin); the producer is given "
                  "pod-0, which forwards the others' events")
      ->check(CLI::Range(1, 16));
  cmd->add_flag("--route", o->route,
                "Route each event to its partition's owner by the map (Producer's route_by_map)");
  cmd->add_option("--rate", o->rate,
                  "Events/s offered over all threads (0: as fast as Send returns)")
      ->check(CLI::Range(0.0, 1e8));
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace shoal::cli
