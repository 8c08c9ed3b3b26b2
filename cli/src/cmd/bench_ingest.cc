// shoal bench ingest: drives a real sidecar with batches of keyed ~100-byte events from
// concurrent keep-alive connections and prints events/s and produce latency percentiles.
//
// The load generator shares the machine with the sidecar, so it spends as little CPU per
// request as it can: request bodies are built once before the clock starts and sent over raw
// sockets (RawHttpConnection); answers are checked by status and result count. With --rate it
// offers a fixed load instead of the maximum, and latency is measured from each batch's
// scheduled send time so that a stalled server cannot hide its stall (no coordinated omission).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "cmd/commands.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/certificates.h"
#include "shoal/common/raw_http.h"
#include "shoal/common/tls.h"
#include "shoal/control/process.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::cli {

namespace {

struct IngestOptions : BenchRunOptions {
  int connections = 4;
  int batch = 1000;
  double rate = 0;  // events/s offered in total; 0: as fast as the sidecar answers
  std::string data_dir;
};

double CpuSecondsOf(pid_t pid) {
  auto t = control::ProcessCpuTime(pid);
  return t ? std::chrono::duration<double>(*t).count() : 0;
}

int Run(const IngestOptions& o) {
  std::optional<control::LocalSidecar> sidecar;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string data_dir = o.data_dir;
  TlsClientFiles tls;
  if (o.tls && !o.target.empty()) {
    std::cerr << "shoal bench ingest: --tls starts a sidecar of its own; it does not go with "
                 "--target\n";
    return 2;
  }
  if (o.target.empty()) {
    auto started = StartBenchSidecar({o.topic, o.partitions, o.fsync, o.data_dir, o.tls});
    if (!started.ok()) {
      std::cerr << "shoal bench ingest: " << started.status().message() << "\n";
      return 1;
    }
    data_dir = started->data_dir;
    tls = started->client_tls;
    sidecar.emplace(std::move(started->sidecar));
    host = sidecar->host;
    port = sidecar->port;
  } else {
    auto colon = o.target.rfind(':');
    if (colon == std::string::npos) {
      std::cerr << "shoal bench ingest: --target must be host:port\n";
      return 2;
    }
    host = o.target.substr(0, colon);
    port = static_cast<uint16_t>(std::stoi(o.target.substr(colon + 1)));
  }

  // Bodies are built before the clock starts: 16 per connection, each with its own keys.
  constexpr int kBodies = 16;
  std::vector<std::vector<std::string>> bodies(o.connections);
  uint64_t n = 0;
  for (int c = 0; c < o.connections; ++c) {
    for (int b = 0; b < kBodies; ++b) {
      std::vector<client::OutgoingEvent> events(o.batch);
      for (auto& e : events) {
        e.key = harness::BenchKey(n, o.keys);
        e.value_json = harness::BenchValue(n, o.value_bytes);
        ++n;
      }
      bodies[c].push_back(client::EncodeProduceBody(events));
    }
  }
  const std::string path = "/v1/topics/" + o.topic + "/events";

  double cpu_at_measure = sidecar ? CpuSecondsOf(sidecar->process.pid()) : 0;
  std::vector<std::unique_ptr<RawHttpConnection>> conns;
  std::vector<std::string> answers(o.connections);
  for (int c = 0; c < o.connections; ++c) {
    RawHttpOptions ro;
    ro.tls = tls;
    conns.push_back(std::make_unique<RawHttpConnection>(host, port, ro));
  }
  harness::DriveOptions drive;
  drive.connections = o.connections;
  drive.batch = o.batch;
  drive.warmup_s = o.warmup_s;
  drive.duration_s = o.duration_s;
  drive.rate = o.rate;
  const auto report = harness::DriveBatches(
      drive,
      [&](int c, uint64_t i, uint64_t) {
        return harness::PostProduceBody(*conns[c], path, bodies[c][i % kBodies],
                                        static_cast<size_t>(o.batch), &answers[c]);
      },
      [&] {
        if (sidecar) cpu_at_measure = CpuSecondsOf(sidecar->process.pid());
      });
  if (report.failed_batches > 0) {
    std::cerr << "shoal bench ingest: " << report.failed_batches
              << " batches failed; the first: " << report.first_error << "\n";
  }
  const double cpu_after = sidecar ? CpuSecondsOf(sidecar->process.pid()) : 0;
  const std::vector<double>& all = report.latencies_ms;
  const uint64_t errors = report.failed_batches;
  const double eps = report.events_per_sec(o.duration_s);
  const double cores = sidecar ? (cpu_after - cpu_at_measure) / o.duration_s : 0;
  if (sidecar) sidecar->process.Stop(std::chrono::seconds(10));
  if (o.json) {
    std::cout << "{\"events_per_sec\":" << static_cast<uint64_t>(eps)
              << ",\"batches\":" << all.size() << ",\"p50_ms\":" << Percentile(all, 0.50)
              << ",\"p99_ms\":" << Percentile(all, 0.99)
              << ",\"max_ms\":" << (all.empty() ? 0 : all.back()) << ",\"errors\":" << errors
              << ",\"connections\":" << o.connections << ",\"batch\":" << o.batch
              << ",\"value_bytes\":" << o.value_bytes << ",\"partitions\":" << o.partitions
              << ",\"fsync\":\"" << o.fsync << "\",\"tls\":" << (o.tls ? "true" : "false")
              << ",\"offered_rate\":" << o.rate << ",\"duration_s\":" << o.duration_s
              << ",\"sidecar_cpu_cores\":" << cores << "}\n";
  } else {
    std::printf(
        "ingest: %.0f events/s  produce p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%zu batches of %d, "
        "%d connections, %d-byte values, fsync %s, %u partitions, %s, %d errors, sidecar %.2f "
        "cores)\n",
        eps, Percentile(all, 0.5), Percentile(all, 0.99), all.empty() ? 0.0 : all.back(),
        all.size(), o.batch, o.connections, o.value_bytes, o.fsync.c_str(), o.partitions,
        o.tls ? "TLS" : "plain HTTP", static_cast<int>(errors), cores);
  }
  if (o.target.empty() && o.data_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(data_dir, ec);
  }
  return errors ? 1 : 0;
}

}  // namespace

void AddBenchRunFlags(CLI::App* cmd, BenchRunOptions& o) {
  cmd->add_option("--target", o.target, "host:port of a running sidecar (default: start one)");
  cmd->add_option("--topic", o.topic, "Topic name");
  cmd->add_option("--partitions", o.partitions, "Partitions of the started sidecar");
  cmd->add_option("--fsync", o.fsync, "fsync policy of the started sidecar")
      ->check(CLI::IsMember({"always", "interval", "never"}));
  cmd->add_option("--value-bytes", o.value_bytes, "Bytes of each event's JSON value")
      ->check(CLI::Range(16, 1 << 20));
  cmd->add_option("--keys", o.keys, "Distinct keys")->check(CLI::Range(1, 100000000));
  cmd->add_option("--duration", o.duration_s, "Seconds measured")->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--warmup", o.warmup_s, "Seconds before measuring")
      ->check(CLI::Range(0.0, 600.0));
  cmd->add_flag("--json", o.json, "Print one JSON object");
  cmd->add_flag("--tls", o.tls,
                "TLS with client certificates, as a topic's pods require it (a CA made for the "
                "run)");
}

Result<BenchSidecar> StartBenchSidecar(const BenchSidecarOptions& o) {
  std::string data_dir = o.data_dir;
  const bool made_dir = data_dir.empty();
  if (made_dir) {
    char tmpl[] = "/tmp/shoal-bench-XXXXXX";
    if (!mkdtemp(tmpl)) return Status::IoError("cannot create a temp directory");
    data_dir = tmpl;
  }
  control::LocalSidecarOptions so;
  TlsClientFiles client_tls;
  if (o.tls) {
    auto pki = WriteLocalPki(data_dir + "/tls", o.topic, "bench");
    if (!pki.ok()) return pki.status();
    client_tls = pki->client;
    so.extra_args = pki->sidecar_args;
  }
  so.topic = o.topic;
  so.partitions = o.partitions;
  so.data_dir = data_dir;
  so.fsync = o.fsync;
  auto s = control::LocalSidecar::Start(so);
  if (!s.ok()) return s.status();
  return BenchSidecar{std::move(s).value(), data_dir, made_dir, client_tls};
}

double Percentile(const std::vector<double>& sorted, double p) {
  return harness::Percentile(sorted, p);
}

void RegisterBenchIngest(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<IngestOptions>();
  auto* cmd = bench.add_subcommand("ingest", "HTTP ingest throughput and produce latency");
  AddBenchRunFlags(cmd, *o);
  cmd->add_option("--connections", o->connections, "Concurrent connections")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--batch", o->batch, "Events per request")->check(CLI::Range(1, 100000));
  cmd->add_option("--rate", o->rate, "Offered events/s in total (0: maximum)");
  cmd->add_option("--data-dir", o->data_dir, "Data directory of the started sidecar (kept)");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace shoal::cli
