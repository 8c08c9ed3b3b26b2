// shoal-bench-peers: Shoal against Redis Streams and NATS JetStream, side by side in one run on
// this machine (issue 8). Every system gets the same events (keyed ~100-byte JSON values), the
// same number of connections and one batch in flight per connection (peer_system.h), on a fresh
// server of its own for each phase:
//   1. produce: every connection sends pre-built batches as fast as the acknowledgements come,
//      for --duration seconds after a warm-up: events/s;
//   2. read back: as many consumers as connections read every produced event through the
//      system's consumer group; the count must equal what was acknowledged;
//   3. end-to-end latency at fixed offered loads, the same for every system: half of Shoal's
//      produce maximum, and half the slowest system's (a load all of them should take). Paced
//      open-loop producers stamp each batch with its scheduled send time, consumers read
//      meanwhile, and latency is the consumer's clock minus the stamp (one process, one steady
//      clock), so queueing anywhere, producer side included, counts;
//   4. the highest end-to-end rate each system sustains (MeasureSustained: paced runs up from
//      half its produce maximum, then bisected), and the latency at half of it.
// Then the elastic case (flash_sale.h). It prints a table (or, with --json, one object) with the
// ratio of Shoal's produce throughput to each peer's. Speed is reported, never judged: the exit
// code is non-zero only when something failed (a server that cannot start, a failed batch, a
// read-back count that does not match).
#include <signal.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "flash_sale.h"
#include "peer_system.h"
#include "server_process.h"
#include "shoal/common/logging.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::bench {

namespace {

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

struct Options {
  std::string systems = "shoal,redis,jetstream";
  double duration_s = 10;
  double warmup_s = 2;
  double latency_duration_s = 10;
  int connections = 4;
  int batch = 1000;
  // Events per batch of the latency runs at fixed moderate loads (common and first rate): what a
  // producer that batches by linger time sends at such a load, rather than the throughput runs'
  // full batches. The same for every system. 0: --batch.
  int latency_batch = 100;
  uint32_t partitions = 4;
  int value_bytes = 100;
  uint64_t keys = 100000;
  bool common_load = true;  // latency also at half the slowest system's maximum
  bool sustained = true;    // search each system's highest sustained end-to-end rate
  double sustained_duration_s = 4;  // of each run of that search, after the warm-up
  int sustained_runs = 7;           // runs of the search at most
  double latency_rate = 0;  // the first latency run's offered load; 0: half Shoal's maximum
  bool flash_sale = true;
  FlashSaleOptions flash;
  std::string data_dir;
  bool keep = false;
  bool json = false;
  bool smoke = false;
};

// End-to-end latency at one offered load.
struct LatencyRun {
  double offered = 0;   // events/s
  double achieved = 0;  // events/s acknowledged in the measured window
  uint64_t unsent_batches = 0;
  uint64_t produced = 0, consumed = 0;
  uint64_t samples = 0;  // events stamped in the measured window
  double drain_s = 0;    // from the producers' end until the consumers read the last event
  double p50_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
  // The producers fell behind the schedule, or the consumers behind the producers.
  bool saturated() const {
    return unsent_batches > 0 || achieved < 0.95 * offered || drain_s > 1.0;
  }
};

// The highest rate a system takes end to end (producers and consumers together) with its lag
// bounded: the highest offered load of the search whose run was not saturated.
struct SustainedSearch {
  double events_per_sec = 0;  // achieved in that run
  double offered = 0;
  std::vector<LatencyRun> runs;  // in the order run
};

struct SystemResult {
  std::string name, describe, error;
  double produce_eps = 0;
  double produce_p99_ms = 0;  // per batch, closed loop
  uint64_t produced = 0, read_back = 0;
  double read_eps = 0;
  LatencyRun at_half_shoal, at_common;
  SustainedSearch sustained;
  LatencyRun at_half_sustained;  // half of its own sustained rate
};

// The Shoal result the others are compared with (shoal/x): the first Shoal system listed.
const SystemResult* ReferenceShoal(const std::vector<SystemResult>& results) {
  for (const auto& r : results) {
    if (r.name.rfind("shoal", 0) == 0) return &r;
  }
  return nullptr;
}

std::string Commas(double v) {
  std::string s = std::to_string(static_cast<long long>(std::llround(v)));
  for (int i = static_cast<int>(s.size()) - 3; i > (s[0] == '-' ? 1 : 0); i -= 3) s.insert(i, ",");
  return s;
}

// Consumers of one system in threads of their own: each polls until told to stop, counting what
// it reads and, for stamps at or after `measure_from_ns`, recording end-to-end latency.
class ConsumerPool {
 public:
  ConsumerPool(std::vector<std::unique_ptr<PeerConsumer>>& consumers, size_t max,
               uint64_t measure_from_ns)
      : measure_from_ns_(measure_from_ns) {
    for (auto& c : consumers) {
      threads_.emplace_back([this, c = c.get(), max] { Run(*c, max); });
    }
  }
  ~ConsumerPool() { Stop(); }

  uint64_t read() const { return read_.load(); }
  // Waits until `expected` events were read, or nothing came for `idle`, or an interruption.
  void WaitFor(uint64_t expected, std::chrono::seconds idle) {
    uint64_t last = read();
    auto last_progress = std::chrono::steady_clock::now();
    while (read() < expected && error().empty() && !g_interrupted.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the counters
      const uint64_t now = read();
      if (now != last) {
        last = now;
        last_progress = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_progress > idle) {
        return;
      }
    }
  }
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  std::string error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  // Sorted latencies; call after Stop.
  std::vector<double> TakeLatencies() {
    std::lock_guard<std::mutex> lock(mu_);
    std::sort(latencies_ms_.begin(), latencies_ms_.end());
    return std::move(latencies_ms_);
  }

 private:
  void Run(PeerConsumer& c, size_t max) {
    std::vector<uint64_t> stamps;
    std::vector<double> mine;
    while (!stop_.load()) {
      stamps.clear();
      auto n = c.Poll(max, 100, &stamps);
      const uint64_t now = harness::StampNow();
      if (!n.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.empty()) error_ = n.status().message();
        break;
      }
      for (uint64_t s : stamps) {
        if (s >= measure_from_ns_ && s <= now) mine.push_back(static_cast<double>(now - s) / 1e6);
      }
      read_.fetch_add(*n);
    }
    std::lock_guard<std::mutex> lock(mu_);
    latencies_ms_.insert(latencies_ms_.end(), mine.begin(), mine.end());
  }

  const uint64_t measure_from_ns_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> read_{0};
  mutable std::mutex mu_;
  std::string error_;                 // guarded by mu_
  std::vector<double> latencies_ms_;  // guarded by mu_
  std::vector<std::thread> threads_;
};

// The producer and consumer connections of a started system.
struct Clients {
  std::vector<std::unique_ptr<PeerProducer>> producers;
  std::vector<std::unique_ptr<PeerConsumer>> consumers;

  Status Open(const Options& o, PeerSystem& sys,
              const std::vector<std::vector<BenchBatch>>& batches) {
    for (const auto& b : batches) {
      auto p = sys.NewProducer(b);
      if (!p.ok()) return p.status();
      producers.push_back(std::move(p).value());
    }
    for (int c = 0; c < o.connections; ++c) {
      auto consumer = sys.NewConsumer(c);
      if (!consumer.ok()) return consumer.status();
      consumers.push_back(std::move(consumer).value());
    }
    return Status::Ok();
  }
  // DriveBatches' send function; with `stamp` each batch carries its scheduled send time.
  harness::SendBatchFn Send(bool stamp) {
    return [this, stamp](int c, uint64_t i, uint64_t scheduled_ns) {
      return producers[static_cast<size_t>(c)]->Send(i, stamp ? scheduled_ns : 0);
    };
  }
};

harness::DriveOptions DriveFor(const Options& o) {
  harness::DriveOptions drive;
  drive.connections = o.connections;
  drive.batch = o.batch;
  drive.warmup_s = o.warmup_s;
  drive.duration_s = o.duration_s;
  return drive;
}

// Phases 1 and 2 on a started system: produce as fast as the acknowledgements come, then read
// everything back.
Status MeasureThroughput(const Options& o, PeerSystem& sys,
                         const std::vector<std::vector<BenchBatch>>& batches, SystemResult* r) {
  Clients clients;
  SHOAL_RETURN_IF_ERROR(clients.Open(o, sys, batches));
  const auto produced = harness::DriveBatches(DriveFor(o), clients.Send(false));
  if (produced.failed_batches > 0) {
    return Status::Unavailable(std::to_string(produced.failed_batches) +
                               " produce batches failed; the first: " + produced.first_error);
  }
  r->produce_eps = produced.events_per_sec(o.duration_s);
  r->produce_p99_ms = harness::Percentile(produced.latencies_ms, 0.99);
  r->produced = produced.total_events;
  if (g_interrupted.load()) return Status::Unavailable("interrupted");

  const auto start = std::chrono::steady_clock::now();
  ConsumerPool pool(clients.consumers, static_cast<size_t>(o.batch), UINT64_MAX);
  pool.WaitFor(produced.total_events, std::chrono::seconds(15));
  // Timed before Stop, which waits for the consumers' last (empty) polls.
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  pool.Stop();
  r->read_back = pool.read();
  r->read_eps = s > 0 ? static_cast<double>(r->read_back) / s : 0;
  if (!pool.error().empty()) return Status::Unavailable("reading back: " + pool.error());
  if (r->read_back != r->produced) {
    return Status::Internal("read back " + std::to_string(r->read_back) + " events of the " +
                            std::to_string(r->produced) + " acknowledged");
  }
  return Status::Ok();
}

// Phase 3 on a started system: end-to-end latency at a fixed offered load, consumers reading
// while paced producers send.
Status MeasureLatency(const Options& o, PeerSystem& sys,
                      const std::vector<std::vector<BenchBatch>>& batches, double rate,
                      LatencyRun* out) {
  Clients clients;
  SHOAL_RETURN_IF_ERROR(clients.Open(o, sys, batches));
  out->offered = rate;
  harness::DriveOptions paced = DriveFor(o);
  paced.duration_s = o.latency_duration_s;
  paced.rate = rate;
  // A system slower than the offered load falls behind its schedule; it gets the run's length
  // again before the rest of the schedule is dropped (and counted as unsent).
  paced.max_behind_s = o.latency_duration_s;
  const uint64_t measure_from = harness::StampNow() + static_cast<uint64_t>(o.warmup_s * 1e9);
  ConsumerPool pool(clients.consumers, static_cast<size_t>(o.batch), measure_from);
  const auto sent = harness::DriveBatches(paced, clients.Send(true));
  const auto produced_at = std::chrono::steady_clock::now();
  pool.WaitFor(sent.total_events, std::chrono::seconds(15));
  out->drain_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - produced_at).count();
  pool.Stop();
  if (sent.failed_batches > 0) {
    return Status::Unavailable(std::to_string(sent.failed_batches) +
                               " paced batches failed; the first: " + sent.first_error);
  }
  if (!pool.error().empty()) return Status::Unavailable("consuming: " + pool.error());
  out->achieved = sent.events_per_sec(std::max(o.latency_duration_s, sent.elapsed_s));
  out->unsent_batches = sent.unsent_batches;
  out->produced = sent.total_events;
  out->consumed = pool.read();
  const auto lat = pool.TakeLatencies();
  out->samples = lat.size();
  out->p50_ms = harness::Percentile(lat, 0.50);
  out->p99_ms = harness::Percentile(lat, 0.99);
  out->p999_ms = harness::Percentile(lat, 0.999);
  out->max_ms = lat.empty() ? 0 : lat.back();
  if (out->consumed != out->produced) {
    return Status::Internal("the latency run consumed " + std::to_string(out->consumed) +
                            " events of the " + std::to_string(out->produced) + " acknowledged");
  }
  return Status::Ok();
}

// Phase 4 on a started system: its highest sustained end-to-end rate. Paced runs of
// `sustained_duration_s` from half its produce maximum: up by a quarter while a run keeps up
// (no unsent batches, at least 95% of the offered rate acknowledged, everything consumed within
// a second of the producers' end: lag bounded), then halving the interval between the highest
// run that kept up and the lowest that did not, until they are within 5% or the runs are spent.
Status MeasureSustained(const Options& o, PeerSystem& sys,
                        const std::vector<std::vector<BenchBatch>>& batches, double produce_max,
                        SustainedSearch* out) {
  Options run = o;
  run.latency_duration_s = o.sustained_duration_s;
  run.warmup_s = std::min(o.warmup_s, 1.0);
  double ok = 0, bad = 0;  // highest rate that kept up, lowest that did not (0: none yet)
  double rate = 0.5 * produce_max;
  for (int i = 0; i < o.sustained_runs && !g_interrupted.load(); ++i) {
    LatencyRun l;
    SHOAL_RETURN_IF_ERROR(MeasureLatency(run, sys, batches, rate, &l));
    out->runs.push_back(l);
    if (!l.saturated()) {
      ok = rate;
      if (l.achieved > out->events_per_sec) {
        out->events_per_sec = l.achieved;
        out->offered = rate;
      }
    } else {
      bad = rate;
    }
    if (bad > 0 && ok > 0 && bad - ok < 0.05 * bad) break;
    if (bad == 0) {
      if (rate >= produce_max) break;  // took its whole produce maximum
      rate = std::min(rate * 1.25, produce_max);
    } else {
      rate = ok > 0 ? (ok + bad) / 2 : bad * 0.6;
    }
  }
  return Status::Ok();
}

std::string LatencyJson(const LatencyRun& l) {
  std::ostringstream out;
  out << "{\"offered_events_per_sec\":" << std::llround(l.offered)
      << ",\"achieved_events_per_sec\":" << std::llround(l.achieved)
      << ",\"saturated\":" << (l.saturated() ? "true" : "false")
      << ",\"unsent_batches\":" << l.unsent_batches << ",\"events\":" << l.produced
      << ",\"latency_samples\":" << l.samples << ",\"drain_s\":" << l.drain_s
      << ",\"p50_ms\":" << l.p50_ms << ",\"p99_ms\":" << l.p99_ms << ",\"p999_ms\":" << l.p999_ms
      << ",\"max_ms\":" << l.max_ms << "}";
  return out.str();
}

std::string FlashJson(const FlashSaleResult& f) {
  std::ostringstream out;
  out << "{\"acked\":" << f.acked << ",\"consumed\":" << f.consumed
      << ",\"peak_lag\":" << std::llround(f.peak_lag) << ",\"peak_lag_at_s\":" << f.peak_lag_at_s
      << ",\"recovered_after_surge_s\":" << f.recovered_s
      << ",\"produce_p99_ms\":" << f.produce_p99_ms << ",\"partitions\":[" << f.partitions_start
      << "," << f.partitions_max << "]"
      << ",\"consumers\":[" << f.pods_start << "," << f.pods_max << "],\"lag\":[";
  for (size_t i = 0; i < f.samples.size(); ++i) {
    out << (i ? "," : "") << std::llround(f.samples[i].lag);
  }
  out << "]}";
  return out.str();
}

void PrintJson(const Options& o, const std::vector<SystemResult>& results,
               const std::vector<Result<FlashSaleResult>>& flash) {
  const double shoal = ReferenceShoal(results) ? ReferenceShoal(results)->produce_eps : 0;
  std::ostringstream out;
  out << "{\"connections\":" << o.connections << ",\"batch\":" << o.batch
      << ",\"latency_batch\":" << o.latency_batch << ",\"partitions\":" << o.partitions
      << ",\"value_bytes\":" << o.value_bytes << ",\"keys\":" << o.keys
      << ",\"duration_s\":" << o.duration_s << ",\"warmup_s\":" << o.warmup_s
      << ",\"latency_duration_s\":" << o.latency_duration_s << ",\"systems\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    out << (i ? "," : "") << "{\"name\":\"" << r.name
        << "\",\"ok\":" << (r.error.empty() ? "true" : "false");
    if (!r.error.empty()) {
      std::string e = r.error;
      for (auto& c : e) c = (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 32) ? ' ' : c;
      out << ",\"error\":\"" << e << "\"";
    }
    out << ",\"produce_events_per_sec\":" << std::llround(r.produce_eps)
        << ",\"produce_batch_p99_ms\":" << r.produce_p99_ms << ",\"produced\":" << r.produced
        << ",\"read_back\":" << r.read_back
        << ",\"read_events_per_sec\":" << std::llround(r.read_eps)
        << ",\"shoal_ratio\":" << (r.produce_eps > 0 ? shoal / r.produce_eps : 0)
        << ",\"latency_at_half_shoal\":" << LatencyJson(r.at_half_shoal)
        << ",\"latency_at_common_load\":" << LatencyJson(r.at_common)
        << ",\"e2e_sustained_events_per_sec\":" << std::llround(r.sustained.events_per_sec)
        << ",\"e2e_sustained_offered_events_per_sec\":" << std::llround(r.sustained.offered)
        << ",\"e2e_sustained_runs\":[";
    for (size_t k = 0; k < r.sustained.runs.size(); ++k) {
      out << (k ? "," : "") << LatencyJson(r.sustained.runs[k]);
    }
    out << "],\"latency_at_half_sustained\":" << LatencyJson(r.at_half_sustained) << "}";
  }
  out << "]";
  if (!flash.empty()) {
    out << ",\"flash_sale\":{\"rate\":" << o.flash.rate << ",\"duration_s\":" << o.flash.duration_s
        << ",\"consumer_cpu_us\":" << o.flash.consumer_cpu_us
        << ",\"routed\":" << (o.flash.route_by_map ? "true" : "false")
        << ",\"redis_streams\":" << o.flash.redis_streams
        << ",\"redis_consumers\":" << o.flash.redis_consumers;
    for (const auto& f : flash) {
      if (f.ok()) out << ",\"" << f->system << "\":" << FlashJson(*f);
    }
    out << "}";
  }
  out << "}\n";
  std::cout << out.str();
}

void PrintSystems(const Options& o, const std::vector<SystemResult>& results) {
  const double shoal = ReferenceShoal(results) ? ReferenceShoal(results)->produce_eps : 0;
  std::printf(
      "shoal-bench-peers: %d connections with one batch of %d events in flight each, %d-byte "
      "values, %s keys, %u partitions; produce %g s after %g s of warm-up, latency runs of "
      "%g s at fixed loads with batches of %d\n",
      o.connections, o.batch, o.value_bytes, Commas(static_cast<double>(o.keys)).c_str(),
      o.partitions, o.duration_s, o.warmup_s, o.latency_duration_s, o.latency_batch);
  for (const auto& r : results) std::printf("  %-24s %s\n", r.name.c_str(), r.describe.c_str());
  double half_shoal = 0, common = 0;
  for (const auto& r : results) {
    if (r.at_half_shoal.offered > 0) half_shoal = r.at_half_shoal.offered;
    if (r.at_common.offered > 0) common = r.at_common.offered;
  }
  std::printf(
      "\n%-24s %12s %10s %12s | %-32s | %-32s | %7s\n", "system", "produce ev/s", "read back",
      "read ev/s", ("e2e at " + Commas(half_shoal) + " ev/s: ev/s p50 p99").c_str(),
      (common > 0 ? "e2e at " + Commas(common) + " ev/s" : std::string("e2e at a common load"))
          .c_str(),
      "shoal/x");
  for (const auto& r : results) {
    if (!r.error.empty()) {
      std::printf("%-24s FAILED: %s\n", r.name.c_str(), r.error.c_str());
      continue;
    }
    auto lat = [](const LatencyRun& l) -> std::string {
      if (l.produced == 0) return "(not run)";
      char buf[96];
      if (l.samples == 0) {
        // Even the first measured batches were never sent: far behind the schedule.
        std::snprintf(buf, sizeof buf, "%9s %7s %7s    SAT", Commas(l.achieved).c_str(), "-", "-");
        return buf;
      }
      std::snprintf(buf, sizeof buf, "%9s %7.1f %7.1f ms%s", Commas(l.achieved).c_str(), l.p50_ms,
                    l.p99_ms, l.saturated() ? " SAT" : "");
      return std::string(buf);
    };
    std::printf(
        "%-24s %12s %10s %12s | %-32s | %-32s | %7.2f\n", r.name.c_str(),
        Commas(r.produce_eps).c_str(),
        (r.read_back == r.produced ? "all" : Commas(static_cast<double>(r.read_back))).c_str(),
        Commas(r.read_eps).c_str(), lat(r.at_half_shoal).c_str(), lat(r.at_common).c_str(),
        r.produce_eps > 0 ? shoal / r.produce_eps : 0.0);
  }
  std::printf(
      "(e2e: end-to-end latency, produce to consume, with consumers reading while paced "
      "producers offer half Shoal's produce maximum, then half the slowest system's; SAT: the "
      "system could not take the offered load (its producers or its consumers fell behind), its "
      "latency is then the queue's)\n");
  bool any = false;
  for (const auto& r : results) any = any || !r.sustained.runs.empty();
  if (!any) return;
  const double shoal_sustained =
      ReferenceShoal(results) ? ReferenceShoal(results)->sustained.events_per_sec : 0;
  std::printf("\n%-24s %16s %6s | %-36s | %7s\n", "system", "e2e sustained/s", "runs",
              "at half of it: ev/s p50 p99 p999", "shoal/x");
  for (const auto& r : results) {
    if (!r.error.empty() || r.sustained.runs.empty()) continue;
    const auto& h = r.at_half_sustained;
    char half[96] = "(not run)";
    if (h.produced > 0) {
      std::snprintf(half, sizeof half, "%9s %6.1f %6.1f %6.1f ms%s", Commas(h.achieved).c_str(),
                    h.p50_ms, h.p99_ms, h.p999_ms, h.saturated() ? " SAT" : "");
    }
    std::printf(
        "%-24s %16s %6zu | %-36s | %7.2f\n", r.name.c_str(),
        Commas(r.sustained.events_per_sec).c_str(), r.sustained.runs.size(), half,
        r.sustained.events_per_sec > 0 ? shoal_sustained / r.sustained.events_per_sec : 0.0);
  }
  std::printf(
      "(e2e sustained: the highest offered load of paced runs of %g s, producers and consumers "
      "together, that the system took whole with everything consumed within a second of the "
      "producers' end)\n",
      o.sustained_duration_s);
}

void PrintFlashSale(const Options& o, const std::vector<Result<FlashSaleResult>>& flash) {
  std::printf(
      "flash sale: %s ev/s, %s ev/s from %g s to %g s of %g s; consumers spend %lld us "
      "of CPU per event\n",
      Commas(o.flash.rate).c_str(), Commas(10 * o.flash.rate).c_str(),
      SurgeWindow().first * o.flash.duration_s, SurgeWindow().second * o.flash.duration_s,
      o.flash.duration_s, static_cast<long long>(o.flash.consumer_cpu_us));
  for (const auto& f : flash) {
    if (!f.ok()) {
      std::printf("  FAILED: %s\n", f.status().message().c_str());
      continue;
    }
    char caught[64] = "lag not back to 0";
    if (f->recovered_s >= 0) {
      std::snprintf(caught, sizeof caught, "lag back to 0 %.0f s after the surge", f->recovered_s);
    }
    if (f->system == "shoal") {
      std::printf(
          "  %-6s %s: partitions %u -> %u, pods %u -> %u; peak lag %s events at t=%.0f s; %s; "
          "produce p99 %.1f ms (%s)\n",
          f->system.c_str(), o.flash.topic_file.c_str(), f->partitions_start, f->partitions_max,
          f->pods_start, f->pods_max, Commas(f->peak_lag).c_str(), f->peak_lag_at_s, caught,
          f->produce_p99_ms, o.flash.route_by_map ? "routed by the map" : "through one pod");
    } else {
      std::printf(
          "  %-6s %u streams, %u consumers (fixed); peak lag %s events at t=%.0f s; %s; produce "
          "p99 %.1f ms\n",
          f->system.c_str(), f->partitions_start, f->pods_start, Commas(f->peak_lag).c_str(),
          f->peak_lag_at_s, caught, f->produce_p99_ms);
    }
  }
}

int Run(Options o) {
  if (o.smoke) {
    o.duration_s = 1;
    o.warmup_s = 0.3;
    o.latency_duration_s = 1;
    o.connections = 2;
    o.batch = 200;
    o.latency_batch = 50;
    o.keys = 10000;
    o.common_load = false;
    o.sustained_duration_s = 0.5;
    o.sustained_runs = 2;
    o.flash.duration_s = 6;
    o.flash.rate = 200;
    o.flash.drain_timeout_s = 20;
  }
  std::vector<std::string> names;
  {
    std::stringstream ss(o.systems);
    for (std::string n; std::getline(ss, n, ',');) {
      if (!ShoalVariantOf(n) && n != "redis" && n != "jetstream") {
        std::cerr << "shoal-bench-peers: unknown system " << n
                  << " (--systems takes redis, jetstream, and shoal followed by any of -binary, "
                     "-tls, -rf3 in that order, and -routed after -rf3: shoal, shoal-binary, "
                     "shoal-tls, shoal-rf3, shoal-binary-rf3, shoal-binary-rf3-routed, ...)\n";
        return 2;
      }
      names.push_back(n);
    }
  }
  // A pod serves its consumers the partitions it leads: with three pods (-rf3) each needs one of
  // the connections' consumers (connection i reads through pod i % 3).
  const bool three_pods = std::any_of(names.begin(), names.end(), [](const std::string& n) {
    auto v = ShoalVariantOf(n);
    return v && v->rf3;
  });
  if (three_pods && o.connections < 3) {
    if (!o.smoke) {
      std::cerr << "shoal-bench-peers: the -rf3 variants run three pods, each read by a "
                   "connection's consumer: give --connections 3 or more\n";
      return 2;
    }
    o.connections = 3;
  }
  // Every program the run needs is looked for before anything starts.
  const std::string sidecar = FindProjectBinary("shoal-sidecar", "SHOAL_SIDECAR", "sidecar");
  std::string redis_server, nats_server;
  const bool need_redis = o.flash_sale || std::count(names.begin(), names.end(), "redis");
  const bool need_nats = std::count(names.begin(), names.end(), "jetstream") > 0;
  for (auto [need, program, package, out] :
       {std::tuple{need_redis, "redis-server", "redis-server", &redis_server},
        std::tuple{need_nats, "nats-server", "nats-server", &nats_server}}) {
    if (!need) continue;
    auto found = FindServerBinary(program, package);
    if (!found.ok()) {
      std::cerr << "shoal-bench-peers: " << found.status().message() << "\n";
      return 2;
    }
    *out = *found;
  }
  o.flash.sidecar = sidecar;
  o.flash.redis_server = redis_server;
  if (o.flash.shoal_cli.empty()) o.flash.shoal_cli = FindProjectBinary("shoal", "SHOAL_CLI", "cli");

  std::string root = o.data_dir;
  if (root.empty()) {
    char tmpl[] = "/tmp/shoal-bench-peers-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::cerr << "shoal-bench-peers: cannot create a temp directory\n";
      return 1;
    }
    root = tmpl;
  }
  signal(SIGINT, OnInterrupt);
  signal(SIGTERM, OnInterrupt);
  KillServersOnCrash();
  auto batches = BuildBatches(o.connections, 16, o.batch, o.keys, o.value_bytes, o.partitions);
  if (o.latency_batch <= 0) o.latency_batch = o.batch;
  Options small = o;  // the fixed moderate loads' runs
  small.batch = o.latency_batch;
  auto small_batches =
      BuildBatches(o.connections, 16, o.latency_batch, o.keys, o.value_bytes, o.partitions);
  if (batches.ok() && !small_batches.ok()) batches = small_batches.status();
  if (!batches.ok()) {
    std::cerr << "shoal-bench-peers: " << batches.status().message() << "\n";
    return 2;
  }

  auto make_system = [&](const std::string& name) {
    if (auto v = ShoalVariantOf(name)) return NewShoalSystem(sidecar, *v);
    return name == "redis" ? NewRedisSystem(redis_server) : NewJetStreamSystem(nats_server);
  };
  // Each phase on a fresh server, stopped (and its data removed) before the next starts: the
  // systems never share the machine with each other.
  auto with_server = [&](const std::string& name, const std::string& phase, SystemResult* r,
                         const std::function<Status(PeerSystem&)>& measure) {
    if (!o.json) std::cerr << "shoal-bench-peers: " << name << ": " << phase << "\n";
    std::unique_ptr<PeerSystem> sys = make_system(name);
    PeerConfig config;
    config.dir = root + "/" + name + "-" + phase;
    config.partitions = o.partitions;
    config.consumers = o.connections;
    Status st = sys->Start(config);
    r->describe = sys->Describe();
    if (st.ok()) st = measure(*sys);
    sys->Stop();
    if (!o.keep) {
      std::error_code ec;
      std::filesystem::remove_all(config.dir, ec);  // Shoal's log alone can be gigabytes
    }
    if (!st.ok()) {
      r->error = phase + ": " + st.message();
      std::cerr << "shoal-bench-peers: " << name << ": " << r->error << "\n";
    }
    return st.ok();
  };

  int exit_code = 0;
  std::vector<SystemResult> results;
  for (const auto& name : names) {
    if (g_interrupted.load()) break;
    SystemResult r;
    r.name = name;
    if (!with_server(name, "produce", &r,
                     [&](PeerSystem& sys) { return MeasureThroughput(o, sys, *batches, &r); })) {
      exit_code = 1;
    }
    results.push_back(std::move(r));
  }
  // The offered loads of the latency runs: half Shoal's produce maximum (the figure the issue
  // asks for), and half the slowest system's, a load every system should take.
  double shoal_max = 0, slowest = 0;
  for (const auto& r : results) {
    if (!r.error.empty()) continue;
    if (&r == ReferenceShoal(results)) shoal_max = r.produce_eps;
    slowest = slowest == 0 ? r.produce_eps : std::min(slowest, r.produce_eps);
  }
  if (shoal_max == 0) shoal_max = slowest;  // without Shoal: the slowest's, once
  const double first_rate = o.latency_rate > 0 ? o.latency_rate : 0.5 * shoal_max;
  for (auto& r : results) {
    if (g_interrupted.load() || !r.error.empty()) continue;
    if (!with_server(r.name, "latency", &r, [&](PeerSystem& sys) -> Status {
          SHOAL_RETURN_IF_ERROR(
              MeasureLatency(small, sys, *small_batches, first_rate, &r.at_half_shoal));
          if (!o.common_load || slowest >= shoal_max || g_interrupted.load()) return Status::Ok();
          return MeasureLatency(small, sys, *small_batches, 0.5 * slowest, &r.at_common);
        })) {
      exit_code = 1;
    }
  }

  for (auto& r : results) {
    if (!o.sustained || g_interrupted.load() || !r.error.empty()) continue;
    if (!with_server(r.name, "sustained", &r, [&](PeerSystem& sys) -> Status {
          SHOAL_RETURN_IF_ERROR(MeasureSustained(o, sys, *batches, r.produce_eps, &r.sustained));
          if (r.sustained.events_per_sec <= 0 || g_interrupted.load()) return Status::Ok();
          return MeasureLatency(o, sys, *batches, 0.5 * r.sustained.events_per_sec,
                                &r.at_half_sustained);
        })) {
      exit_code = 1;
    }
  }

  std::vector<Result<FlashSaleResult>> flash;
  if (o.flash_sale && !g_interrupted.load()) {
    o.flash.dir = root + "/flash-sale";
    o.flash.progress = !o.json;
    if (!o.json) std::cerr << "shoal-bench-peers: flash sale on shoal...\n";
    flash.push_back(RunShoalFlashSale(o.flash));
    if (!g_interrupted.load()) {
      if (!o.json) std::cerr << "shoal-bench-peers: flash sale on redis...\n";
      flash.push_back(RunRedisFlashSale(o.flash));
    }
    for (const auto& f : flash) {
      if (!f.ok()) {
        std::cerr << "shoal-bench-peers: flash sale: " << f.status().message() << "\n";
        exit_code = 1;
      }
    }
  }
  if (o.json) {
    PrintJson(o, results, flash);
  } else {
    if (!results.empty()) PrintSystems(o, results);
    if (!results.empty() && !flash.empty()) std::printf("\n");
    if (!flash.empty()) PrintFlashSale(o, flash);
  }
  if (!o.keep && o.data_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  if (g_interrupted.load()) return 130;
  return exit_code;
}

}  // namespace

}  // namespace shoal::bench

int main(int argc, char** argv) {
  shoal::bench::Options o;
  CLI::App app{
      "shoal-bench-peers: Shoal against Redis Streams and NATS JetStream on this machine "
      "(produce events/s, end-to-end latency at half Shoal's maximum, a flash sale)"};
  app.add_option("--systems", o.systems,
                 "Comma-separated: shoal,redis,jetstream, and Shoal's variants: shoal followed by "
                 "any of -binary (the binary batch format), -tls (TLS and client certificates, as "
                 "a topic's pods require it), -rf3 (three pods, three copies, acks quorum), in "
                 "that order, and after -rf3 -routed (each batch straight to the pod that leads "
                 "its partitions, none forwarded); empty: only the flash sale");
  app.add_option("--duration", o.duration_s, "Seconds of each produce run, after the warm-up")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--warmup", o.warmup_s, "Seconds before measuring")->check(CLI::Range(0.0, 600.0));
  app.add_option("--latency-duration", o.latency_duration_s,
                 "Seconds of each fixed-load latency run, after the warm-up")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--connections", o.connections,
                 "Producer connections (and consumers) per system, one batch in flight each")
      ->check(CLI::Range(1, 256));
  app.add_option("--batch", o.batch, "Events per batch")->check(CLI::Range(1, 10000));
  app.add_option("--latency-batch", o.latency_batch,
                 "Events per batch of the latency runs at fixed moderate loads (0: --batch)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--partitions", o.partitions,
                 "Partitions (Shoal), streams (Redis), subject prefixes (JetStream)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--value-bytes", o.value_bytes, "Bytes of each event's JSON value")
      ->check(CLI::Range(64, 1 << 20));
  app.add_option("--keys", o.keys, "Distinct keys")->check(CLI::Range(1, 100000000));
  app.add_option("--latency-rate", o.latency_rate,
                 "Offered events/s of the first latency run (default: half Shoal's maximum)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_flag("!--no-common-load", o.common_load,
               "Skip the latency runs at half the slowest system's maximum");
  app.add_flag("!--no-sustained", o.sustained,
               "Skip the search for each system's highest sustained end-to-end rate");
  app.add_option("--sustained-duration", o.sustained_duration_s,
                 "Seconds of each run of that search, after a warm-up of at most 1 s")
      ->check(CLI::Range(0.5, 600.0));
  app.add_option("--sustained-runs", o.sustained_runs, "Runs of that search at most")
      ->check(CLI::Range(1, 30));
  app.add_flag("!--no-flash-sale", o.flash_sale, "Skip the elastic case");
  app.add_option("--flash-sale-file", o.flash.topic_file, "PartitionedTopic of the elastic case");
  app.add_option("--flash-rate", o.flash.rate, "Events/s at 1x (10x during the surge)")
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--flash-duration", o.flash.duration_s, "Seconds of flash-sale load")
      ->check(CLI::Range(3.0, 3600.0));
  app.add_option("--flash-consumer-cpu-us", o.flash.consumer_cpu_us,
                 "CPU microseconds a consumer spends per event, on both sides")
      ->check(CLI::Range(0, 100000));
  app.add_flag("!--flash-no-route", o.flash.route_by_map,
               "Flash sale: Shoal's producers send every batch to one pod (which forwards) instead "
               "of straight to its keys' pod by the map");
  app.add_option("--redis-streams", o.flash.redis_streams, "Redis's fixed streams (flash sale)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--redis-consumers", o.flash.redis_consumers,
                 "Redis's fixed consumers (flash sale; at most one per stream keeps key order)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--data-dir", o.data_dir,
                 "Where the servers keep their data (default: a temp dir)");
  app.add_flag("--keep", o.keep, "Keep the servers' data and logs");
  app.add_flag("--json", o.json, "Print one JSON object");
  app.add_flag("--smoke", o.smoke, "A run of seconds (CI): checks that everything works");
  CLI11_PARSE(app, argc, argv);
  if (o.flash.redis_consumers > static_cast<int>(o.flash.redis_streams)) {
    std::cerr << "shoal-bench-peers: --redis-consumers must not exceed --redis-streams (one "
                 "consumer per stream keeps per-key order)\n";
    return 2;
  }
  (void)shoal::InitLogging("warn");
  return shoal::bench::Run(o);
}
