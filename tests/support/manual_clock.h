// ManualClock: a Clock that moves only when the test says so. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>

#include "shoal/common/clock.h"

namespace shoal::testing {

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::time_point(std::chrono::milliseconds(now_ms_.load()));
  }
  void AdvanceMs(int64_t ms) { now_ms_.fetch_add(ms); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace shoal::testing
