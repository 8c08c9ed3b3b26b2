#include "shoal/client/workload.h"

#include <simdjson.h>

#include <chrono>
#include <cmath>
#include <random>

#include "shoal/client/shoal_client.h"

namespace shoal::client {

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

double ProfileFactor(const std::string& profile, double t, double d) {
  if (profile == "surge") {
    if (d <= 0) return 1;
    return (t >= d / 3 && t < 2 * d / 3) ? 10.0 : 1.0;
  }
  if (profile == "sawtooth") {
    const double period = d > 0 ? d / 3 : 10.0;
    const double phase = std::fmod(t, period) / period;
    return 1.0 + 9.0 * phase;
  }
  return 1.0;
}

LoadGenerator::LoadGenerator(LoadOptions options) : opts_(std::move(options)) {}
LoadGenerator::~LoadGenerator() { Stop(); }

void LoadGenerator::Start() {
  for (int i = 0; i < opts_.producers; ++i) threads_.emplace_back([this, i] { Run(i); });
}

void LoadGenerator::Stop() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
}

std::vector<AckedEvent> LoadGenerator::TakeAcked() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(acked_events_);
}

std::string LoadGenerator::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void LoadGenerator::Run(int index) {
  const std::string id = opts_.producer_prefix + "-" + std::to_string(index);
  std::mt19937_64 rng(opts_.seed * 1000003 + static_cast<uint64_t>(index));
  std::vector<std::unique_ptr<ShoalClient>> clients;
  for (const auto& t : opts_.targets) {
    clients.push_back(std::make_unique<ShoalClient>(t, opts_.topic, std::chrono::seconds(10)));
  }
  std::map<std::string, uint64_t> counter;
  uint64_t seq = 0;
  size_t target = static_cast<size_t>(index) % clients.size();
  const auto start = std::chrono::steady_clock::now();
  auto next_send = start;
  while (!stop_.load()) {
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (opts_.duration_s > 0 && t >= opts_.duration_s) break;
    std::vector<OutgoingEvent> batch;
    std::vector<AckedEvent> meta;
    for (int b = 0; b < opts_.batch; ++b) {
      const std::string key = "key-" + std::to_string(rng() % static_cast<uint64_t>(opts_.keys));
      const uint64_t n = ++counter[key];
      batch.push_back(
          {key, "{\"p\":\"" + id + "\",\"k\":\"" + key + "\",\"n\":" + std::to_string(n) + "}", id,
           seq});
      meta.push_back({id, key, seq, n});
      ++seq;
    }
    // Send until acknowledged, rotating over sidecars; the same (producer, seq) every time.
    auto backoff = std::chrono::milliseconds(5);
    bool acked = false;
    while (!stop_.load()) {
      auto r = clients[target]->Produce(batch);
      if (r.ok()) {
        acked = true;
        break;
      }
      retries_.fetch_add(1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_error_ = r.status().message();
      }
      target = (target + 1) % clients.size();
      std::this_thread::sleep_for(backoff);  // backoff before retrying a refused batch
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
    if (!acked) break;
    acked_.fetch_add(meta.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      acked_events_.insert(acked_events_.end(), meta.begin(), meta.end());
    }
    if (opts_.rate > 0) {
      const double factor = ProfileFactor(opts_.profile, t, opts_.duration_s);
      const double per_producer = opts_.rate * factor / opts_.producers;
      next_send += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(opts_.batch / per_producer));
      const auto now = std::chrono::steady_clock::now();
      if (next_send < now - std::chrono::seconds(1)) next_send = now;  // do not burst to catch up
      std::this_thread::sleep_until(next_send);  // the offered rate's schedule
    }
  }
}

GroupConsumer::GroupConsumer(ConsumerOptions options) : opts_(std::move(options)) {}
GroupConsumer::~GroupConsumer() { Stop(); }

void GroupConsumer::Start() {
  thread_ = std::thread([this] { Run(); });
}

void GroupConsumer::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<SeenEvent> GroupConsumer::TakeSeen() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(seen_);
}

void GroupConsumer::Run() {
  ShoalClient client(opts_.target, opts_.topic, std::chrono::seconds(10));
  std::map<uint32_t, uint64_t> next;  // per partition: the offset after the last one recorded
  std::vector<wire::CommitOffset> pending;
  simdjson::dom::parser parser;
  auto backoff = std::chrono::milliseconds(5);
  auto wait_a_little = [&] {
    std::this_thread::sleep_for(backoff);  // the sidecar is down or restarting
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  };
  while (!stop_.load()) {
    if (!pending.empty()) {
      // Commit what was recorded before taking more: after a sidecar restart the group resumes
      // from its commits, and offsets already recorded are skipped below.
      if (client.Commit(opts_.group, pending).ok()) {
        pending.clear();
      } else {
        wait_a_little();
        continue;
      }
    }
    auto got = client.Consume(opts_.group, opts_.max, opts_.wait_ms);
    if (!got.ok()) {
      wait_a_little();
      continue;
    }
    backoff = std::chrono::milliseconds(5);
    std::vector<SeenEvent> batch;
    for (const auto& e : *got) {
      auto& nx = next[e.partition];
      if (e.offset < nx) continue;  // handed out again after a restart; recorded already
      nx = e.offset + 1;
      simdjson::dom::element v;
      std::string_view p, k;
      uint64_t n = 0;
      if (parser.parse(e.value).get(v) || v["p"].get(p) || v["k"].get(k) || v["n"].get(n) ||
          !e.seq) {
        continue;  // not a load generator's event
      }
      batch.push_back(
          {std::string(p), std::string(k), *e.seq, n, MonotonicNs(), e.partition, e.offset});
    }
    std::map<uint32_t, uint64_t> touched;
    for (const auto& e : *got) touched[e.partition] = next[e.partition];
    for (auto [p, o] : touched) pending.push_back({p, o});
    seen_count_.fetch_add(batch.size());
    std::lock_guard<std::mutex> lock(mu_);
    seen_.insert(seen_.end(), batch.begin(), batch.end());
  }
}

}  // namespace shoal::client
