// shoal bench consumer: what an application gets from client::Consumer: a sidecar of its own is
// filled with keyed ~100-byte events (through client::Producer), then one Consumer reads them
// all as a group, its handler spending --work-us per event (a busy loop standing for the
// application's processing); prints events/s handed over and committed, with the fetches and
// how the commits went (carried by a fetch or posted). --no-prefetch for the serial loop.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cmd/commands.h"
#include "shoal/client/consumer.h"
#include "shoal/client/producer.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct ConsumerBenchOptions : BenchRunOptions {
  uint64_t events = 500000;
  size_t max_events = 500;
  double work_us = 1;  // per event, in the handler
  bool no_prefetch = false;
  bool binary = false;
};

int Run(const ConsumerBenchOptions& o) {
  if (!o.target.empty()) {
    std::cerr << "shoal bench consumer: it fills a sidecar of its own; --target is not taken\n";
    return 2;
  }
  auto started = StartBenchSidecar({o.topic, o.partitions, o.fsync, "", o.tls});
  if (!started.ok()) {
    std::cerr << "shoal bench consumer: " << started.status().message() << "\n";
    return 1;
  }
  control::LocalSidecar& sidecar = started->sidecar;
  const std::string url =
      (o.tls ? "https://" : "http://") + sidecar.host + ":" + std::to_string(sidecar.port);
  uint64_t failed = 0;
  {
    client::ProducerOptions po;
    po.tls = started->client_tls;
    po.format = wire::Format::kBinary;
    client::Producer producer(url, o.topic, po);
    for (uint64_t n = 0; n < o.events; ++n) {
      producer.Send(harness::BenchKey(n, o.keys), harness::BenchValue(n, o.value_bytes),
                    [&failed](const Result<wire::ProduceResult>& r) { failed += !r.ok(); });
    }
    producer.Flush();
  }
  if (failed > 0) {
    std::cerr << "shoal bench consumer: " << failed << " events were not stored\n";
    return 1;
  }

  client::ConsumerOptions co;
  co.max_events = o.max_events;
  co.wait_ms = 100;
  co.prefetch = !o.no_prefetch;
  co.format = o.binary ? wire::Format::kBinary : wire::Format::kJson;
  co.tls = started->client_tls;
  client::Consumer consumer(url, o.topic, "bench", co);
  uint64_t seen = 0, batches = 0;
  const auto work = std::chrono::nanoseconds(static_cast<int64_t>(o.work_us * 1000));
  const auto start = Clock::now();
  const Status done = consumer.Run([&](const std::vector<wire::ConsumedEvent>& events) {
    const auto until = Clock::now() + work * static_cast<int64_t>(events.size());
    while (Clock::now() < until) {
    }  // the application's processing, on this thread's core
    seen += events.size();
    ++batches;
    if (seen >= o.events) consumer.Stop();
    return Status::Ok();
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  sidecar.process.Stop(std::chrono::seconds(10));
  if (started->made_dir) {
    std::error_code ec;
    std::filesystem::remove_all(started->data_dir, ec);
  }
  if (!done.ok()) {
    std::cerr << "shoal bench consumer: " << done.ToString() << "\n";
    return 1;
  }
  const double eps = static_cast<double>(seen) / seconds;
  if (o.json) {
    std::cout << "{\"events_per_sec\":" << static_cast<uint64_t>(eps) << ",\"events\":" << seen
              << ",\"batches\":" << batches << ",\"fetches\":" << consumer.fetches()
              << ",\"carried\":" << consumer.carried()
              << ",\"commit_posts\":" << consumer.commit_posts()
              << ",\"prefetch\":" << (o.no_prefetch ? "false" : "true")
              << ",\"work_us\":" << o.work_us << ",\"max_events\":" << o.max_events
              << ",\"format\":\"" << (o.binary ? "binary" : "json") << "\",\"seconds\":" << seconds
              << "}\n";
  } else {
    std::printf(
        "consumer: %.0f events/s handled and committed (%llu events in %.2f s, %llu batches, %llu "
        "fetches, %llu carried commits, %llu posted; %s, %.1f us of work per event, %s)\n",
        eps, static_cast<unsigned long long>(seen), seconds,
        static_cast<unsigned long long>(batches),
        static_cast<unsigned long long>(consumer.fetches()),
        static_cast<unsigned long long>(consumer.carried()),
        static_cast<unsigned long long>(consumer.commit_posts()),
        o.no_prefetch ? "no prefetch" : "prefetch", o.work_us, o.binary ? "binary" : "JSON");
  }
  return 0;
}

}  // namespace

void RegisterBenchConsumer(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<ConsumerBenchOptions>();
  auto* cmd = bench.add_subcommand(
      "consumer", "client::Consumer's events/s with a handler that works per event");
  AddBenchRunFlags(cmd, *o);
  cmd->add_option("--events", o->events, "Events stored, then read")
      ->check(CLI::Range(1, 100000000));
  cmd->add_option("--max-events", o->max_events, "Events per fetch at most")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--work-us", o->work_us, "Microseconds of work per event in the handler")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_flag("--no-prefetch", o->no_prefetch, "Fetch only when the handler is done");
  cmd->add_flag("--binary", o->binary, "Binary answers instead of JSON");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

}  // namespace shoal::cli
