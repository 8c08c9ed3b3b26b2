#include "flash_sale.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <thread>

#include "peer_system.h"
#include "shoal/common/topic_spec.h"
#include "shoal/harness/batch_driver.h"
#include "shoal/harness/local_topic.h"
#include "shoal/harness/workload.h"

namespace shoal::bench {

namespace {

using SteadyClock = std::chrono::steady_clock;

// What the sampler reads from one side of the flash sale.
struct Probe {
  std::function<bool()> loading;  // false once the producers are done
  std::function<uint64_t()> acked, consumed;
  std::function<void(LagSample*)> shape;  // partitions and pods
};

// Samples once a second while the load runs, then until the consumers caught up or the drain
// deadline passed; fills the result's samples, peak and recovery time.
void SampleUntilCaughtUp(const FlashSaleOptions& o, const Probe& p, FlashSaleResult* r) {
  const double surge_end_s = SurgeWindow().second * o.duration_s;
  const auto start = SteadyClock::now();
  std::optional<SteadyClock::time_point> load_end;
  uint64_t last_acked = 0;
  for (int s = 1;; ++s) {
    std::this_thread::sleep_until(start + std::chrono::seconds(s));  // one sample a second
    if (!load_end && !p.loading()) load_end = SteadyClock::now();
    LagSample x;
    x.t = s;
    const uint64_t consumed = p.consumed();  // before acked: a lag is never made negative
    const uint64_t acked = p.acked();
    x.acked = static_cast<double>(acked - last_acked);
    last_acked = acked;
    x.lag = acked > consumed ? static_cast<double>(acked - consumed) : 0;
    p.shape(&x);
    r->samples.push_back(x);
    if (x.lag > r->peak_lag) {
      r->peak_lag = x.lag;
      r->peak_lag_at_s = x.t;
    }
    if (r->recovered_s < 0 && x.t >= surge_end_s && x.lag == 0) r->recovered_s = x.t - surge_end_s;
    r->partitions_max = std::max(r->partitions_max, x.partitions);
    r->pods_max = std::max(r->pods_max, x.pods);
    if (o.progress && s % 5 == 0) {
      std::fprintf(stderr, "  %s t=%3ds  acked %6.0f/s  lag %8.0f  partitions %u  pods %u\n",
                   r->system.c_str(), s, x.acked, x.lag, x.partitions, x.pods);
    }
    if (load_end) {
      const double after = std::chrono::duration<double>(SteadyClock::now() - *load_end).count();
      if (x.lag == 0 || after > o.drain_timeout_s) break;
    }
  }
  r->acked = p.acked();
  r->consumed = p.consumed();
}

std::string RandomLoopbackPrefix() {
  // Pods bind <prefix>.2, .3, ... on fixed ports; a random 127.x.y keeps them clear of a
  // `shoal up` running beside the benchmark.
  std::mt19937 rng(std::random_device{}());
  return "127." + std::to_string(20 + rng() % 200) + "." + std::to_string(rng() % 250);
}

}  // namespace

std::pair<double, double> SurgeWindow() {
  const harness::LoadOptions defaults;
  return {defaults.surge_from, defaults.surge_until};
}

Result<FlashSaleResult> RunShoalFlashSale(const FlashSaleOptions& o) {
  std::FILE* f = std::fopen(o.topic_file.c_str(), "r");
  if (!f) {
    return Status::NotFound("cannot read " + o.topic_file +
                            " (run from the repository root, or give --flash-sale-file)");
  }
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  auto spec = ParseTopic(text);
  if (!spec.ok()) return spec.status().Annotate(o.topic_file);

  harness::LocalTopic::Options to;
  to.spec = *spec;
  to.platform = harness::LocalPlatformOptionsFor(*spec, o.dir + "/shoal", o.shoal_cli);
  to.platform.sidecar_binary = o.sidecar;
  to.platform.ip_prefix = RandomLoopbackPrefix();
  to.platform.cpu_us_per_event = o.consumer_cpu_us;
  to.platform.cpu_request_cores = o.consumer_cpu_request;
  to.platform.log_level = "warn";
  to.platform.sidecar_args.push_back("--redelivery-ms=5000");
  auto topic = harness::LocalTopic::Start(to);
  if (!topic.ok()) return topic.status().Annotate("starting the Shoal topic");
  harness::LocalTopic& t = **topic;

  FlashSaleResult r;
  r.system = "shoal";
  r.partitions_start = static_cast<uint32_t>(t.loop().map().active_count());
  r.pods_start = t.platform().DesiredPods();

  harness::LoadOptions lo;
  lo.targets = {t.data_url()};
  lo.topic = spec->name;
  lo.rate = o.rate;
  lo.profile = "surge";
  lo.duration_s = o.duration_s;
  lo.keys = static_cast<int>(o.keys);
  lo.producers = o.producers;
  lo.batch = o.batch;
  lo.producer_prefix = "peers-flash-sale";
  lo.route_by_map = o.route_by_map;
  harness::LoadGenerator load(lo);
  const auto start = SteadyClock::now();
  load.Start();
  Probe p;
  p.loading = [&] {
    if (SteadyClock::now() - start < std::chrono::duration<double>(o.duration_s)) return true;
    load.Stop();  // its producers end at the profile's end; this joins them
    return false;
  };
  p.acked = [&] { return load.acked(); };
  p.consumed = [&] { return t.SeenEvents(); };
  p.shape = [&](LagSample* x) {
    x->partitions = static_cast<uint32_t>(t.loop().map().active_count());
    x->pods = t.platform().DesiredPods();
  };
  SampleUntilCaughtUp(o, p, &r);
  load.Stop();
  auto latencies = load.TakeLatenciesMs();
  std::sort(latencies.begin(), latencies.end());
  r.produce_p99_ms = harness::Percentile(latencies, 0.99);
  const std::string last_error = load.last_error();
  if (Status st = t.Stop(); !st.ok()) return st.Annotate("stopping the Shoal topic");
  if (r.acked == 0) {
    return Status::Unavailable("the Shoal topic acknowledged no event (last error: " + last_error +
                               ")");
  }
  return r;
}

Result<FlashSaleResult> RunRedisFlashSale(const FlashSaleOptions& o) {
  auto redis = NewRedisSystem(o.redis_server);
  PeerConfig config;
  config.dir = o.dir + "/redis";
  config.partitions = o.redis_streams;
  config.consumers = o.redis_consumers;
  SHOAL_RETURN_IF_ERROR(redis->Start(config));
  auto batches = BuildBatches(o.producers, 16, o.batch, o.keys, o.value_bytes, o.redis_streams);
  if (!batches.ok()) return batches.status();
  std::vector<std::unique_ptr<PeerProducer>> producers;
  for (const auto& b : *batches) {
    auto p = redis->NewProducer(b);
    if (!p.ok()) return p.status();
    producers.push_back(std::move(p).value());
  }
  std::vector<std::unique_ptr<PeerConsumer>> consumers;
  for (int c = 0; c < o.redis_consumers; ++c) {
    auto consumer = redis->NewConsumer(c);
    if (!consumer.ok()) return consumer.status();
    consumers.push_back(std::move(consumer).value());
  }

  FlashSaleResult r;
  r.system = "redis";
  r.partitions_start = r.partitions_max = o.redis_streams;
  r.pods_start = r.pods_max = static_cast<uint32_t>(o.redis_consumers);
  std::atomic<uint64_t> acked{0}, consumed{0};
  std::atomic<bool> stop_consumers{false}, loading{true};
  std::string consumer_error;
  std::mutex error_mu;
  std::vector<std::thread> consumer_threads;
  for (auto& c : consumers) {
    consumer_threads.emplace_back([&, consumer = c.get()] {
      std::vector<uint64_t> stamps;
      while (!stop_consumers.load()) {
        stamps.clear();
        auto n = consumer->Poll(500, 100, &stamps);
        if (!n.ok()) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (consumer_error.empty()) consumer_error = n.status().message();
          return;
        }
        // The same work per event as a Shoal pod's consumer, done before it counts.
        harness::BurnCpu(o.consumer_cpu_us * static_cast<int64_t>(*n));
        consumed.fetch_add(*n);
      }
    });
  }
  harness::DriveOptions drive;
  drive.connections = o.producers;
  drive.batch = o.batch;
  drive.duration_s = o.duration_s;
  drive.rate = o.rate;
  drive.profile = "surge";
  harness::DriveReport report;
  std::thread producer([&] {
    report = harness::DriveBatches(drive, [&](int c, uint64_t i, uint64_t scheduled_ns) {
      Status st = producers[static_cast<size_t>(c)]->Send(i, scheduled_ns);
      if (st.ok()) acked.fetch_add(static_cast<uint64_t>(o.batch));
      return st;
    });
    loading.store(false);
  });
  Probe p;
  p.loading = [&] { return loading.load(); };
  p.acked = [&] { return acked.load(); };
  p.consumed = [&] { return consumed.load(); };
  p.shape = [&](LagSample* x) {
    x->partitions = o.redis_streams;
    x->pods = static_cast<uint32_t>(o.redis_consumers);
  };
  SampleUntilCaughtUp(o, p, &r);
  producer.join();
  stop_consumers.store(true);
  for (auto& t : consumer_threads) t.join();
  r.produce_p99_ms = harness::Percentile(report.latencies_ms, 0.99);
  consumers.clear();
  producers.clear();
  redis->Stop();
  if (!consumer_error.empty()) return Status::Unavailable("redis consumer: " + consumer_error);
  if (report.failed_batches > 0) {
    return Status::Unavailable("redis: " + std::to_string(report.failed_batches) +
                               " batches failed; the first: " + report.first_error);
  }
  return r;
}

}  // namespace shoal::bench
