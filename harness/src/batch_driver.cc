#include "shoal/harness/batch_driver.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "shoal/common/wire.h"
#include "shoal/harness/workload.h"

namespace shoal::harness {

namespace {

constexpr std::string_view kStampField = "\"ts\":\"";
constexpr size_t kStampDigits = 20;  // the digits of UINT64_MAX

using Clock = std::chrono::steady_clock;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

uint64_t Ns(Clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

}  // namespace

std::string BenchKey(uint64_t n, uint64_t keys) {
  return "user_" + std::to_string((n * 2654435761u) % std::max<uint64_t>(1, keys));
}

std::string BenchValue(uint64_t n, int value_bytes) {
  std::string v = "{" + std::string(kStampField) + std::string(kStampDigits, '0') +
                  "\",\"n\":" + std::to_string(n) + ",\"pad\":\"";
  const int pad = std::max(0, value_bytes - static_cast<int>(v.size()) - 2);
  v.append(static_cast<size_t>(pad), 'x');
  v += "\"}";
  return v;
}

uint64_t StampNow() { return Ns(Clock::now()); }

std::vector<size_t> FindStamps(std::string_view encoded) {
  std::vector<size_t> at;
  for (size_t p = encoded.find(kStampField); p != std::string_view::npos;
       p = encoded.find(kStampField, p + kStampField.size())) {
    at.push_back(p + kStampField.size());
  }
  return at;
}

void StampAt(std::string& encoded, const std::vector<size_t>& stamps, uint64_t ns) {
  char digits[kStampDigits];
  for (size_t i = kStampDigits; i-- > 0; ns /= 10) digits[i] = static_cast<char>('0' + ns % 10);
  for (size_t at : stamps) std::memcpy(encoded.data() + at, digits, kStampDigits);
}

uint64_t ReadStamp(std::string_view value) {
  const size_t p = value.find(kStampField);
  if (p == std::string_view::npos || p + kStampField.size() + kStampDigits > value.size()) return 0;
  uint64_t ns = 0;
  for (char c : value.substr(p + kStampField.size(), kStampDigits)) {
    if (c < '0' || c > '9') return 0;
    ns = ns * 10 + static_cast<uint64_t>(c - '0');
  }
  return ns;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto idx = static_cast<size_t>(p * static_cast<double>(sorted.size()));
  return sorted[std::min(idx, sorted.size() - 1)];
}

Status PostProduceBody(RawHttpConnection& conn, const std::string& path, std::string_view body,
                       size_t events, std::string* answer) {
  auto code = conn.Request("POST", path, body, answer);
  if (!code.ok()) return code.status();
  if (*code != 200) {
    return Status::Unavailable("produce answered " + std::to_string(*code) + ": " +
                               answer->substr(0, 200));
  }
  // A cheap check that every event got a result: a binary answer's count, or the number of a
  // JSON answer's offsets.
  size_t results = 0;
  const bool binary = answer->starts_with(wire::kResultsMagic);
  if (binary) {
    auto parsed = wire::ParseBinaryProduceResponse(*answer);
    if (!parsed.ok()) return parsed.status();
    results = parsed->size();
  }
  const char* end = answer->data() + answer->size();
  for (const char* p = answer->data();
       !binary &&
       (p = static_cast<const char*>(memmem(p, static_cast<size_t>(end - p), "\"offset\"", 8)));
       p += 8) {
    ++results;
  }
  if (results != events) {
    return Status::Internal("produce answered " + std::to_string(results) + " results for " +
                            std::to_string(events) + " events");
  }
  return Status::Ok();
}

DriveReport DriveBatches(const DriveOptions& o, const SendBatchFn& send,
                         const std::function<void()>& on_measure_start) {
  const int n = std::max(1, o.connections);
  const auto start = Clock::now();
  const auto measure_from = start + Seconds(o.warmup_s);
  const auto end = measure_from + Seconds(o.duration_s);
  struct PerConnection {
    uint64_t measured = 0, total = 0, failed = 0, unsent = 0;
    std::vector<double> latencies_ms;
    std::string error;
    Clock::time_point last_answer{};
  };
  std::vector<PerConnection> per(static_cast<size_t>(n));
  std::once_flag measuring;
  std::vector<std::thread> threads;
  for (int c = 0; c < n; ++c) {
    threads.emplace_back([&, c] {
      PerConnection& me = per[static_cast<size_t>(c)];
      // Under a rate, connection c sends its batches on a schedule of its own, staggered.
      const double batches_per_s = o.rate / n / std::max(1, o.batch);
      auto period = [&](Clock::time_point at) {
        const double t = std::chrono::duration<double>(at - start).count();
        return Seconds(1.0 /
                       (batches_per_s * ProfileFactor(o.profile, t, o.warmup_s + o.duration_s)));
      };
      auto scheduled = start;
      if (batches_per_s > 0) scheduled += period(start) * c / n;
      for (uint64_t i = 0;; ++i) {
        Clock::time_point t0;
        if (batches_per_s > 0) {
          scheduled += period(scheduled);
          if (scheduled >= end) break;
          if (o.max_behind_s > 0 && Clock::now() - scheduled > Seconds(o.max_behind_s)) {
            for (; scheduled < end; scheduled += period(scheduled)) ++me.unsent;
            break;
          }
          std::this_thread::sleep_until(scheduled);  // the offered load's schedule
          t0 = scheduled;
        } else {
          t0 = Clock::now();
          if (t0 >= end) break;
        }
        const bool measured = t0 >= measure_from;
        if (measured && on_measure_start) std::call_once(measuring, on_measure_start);
        Status st = send(c, i, Ns(t0));
        const auto t1 = Clock::now();
        if (!st.ok()) {
          ++me.failed;
          if (me.error.empty()) me.error = st.message();
          continue;
        }
        me.total += static_cast<uint64_t>(o.batch);
        if (measured) {
          me.measured += static_cast<uint64_t>(o.batch);
          me.latencies_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          me.last_answer = t1;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  DriveReport r;
  auto last = measure_from;
  for (auto& p : per) {
    r.measured_events += p.measured;
    r.total_events += p.total;
    r.failed_batches += p.failed;
    r.unsent_batches += p.unsent;
    if (r.first_error.empty()) r.first_error = p.error;
    r.latencies_ms.insert(r.latencies_ms.end(), p.latencies_ms.begin(), p.latencies_ms.end());
    last = std::max(last, p.last_answer);
  }
  std::sort(r.latencies_ms.begin(), r.latencies_ms.end());
  r.elapsed_s = std::chrono::duration<double>(last - measure_from).count();
  return r;
}

}  // namespace shoal::harness
