// Injected time. Production code asks a Clock; tests hand in a ManualClock (tests/support) and
// move it by hand, so nothing waits on wall time to see a timeout or an age.
// Implementations are thread-safe; a Clock is owned by main (or the test) and outlives its users.
#pragma once

#include <chrono>
#include <cstdint>

namespace shoal {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall time in milliseconds since the Unix epoch: record timestamps, ages.
  virtual int64_t NowMs() const = 0;
  // Monotonic time: deadlines and durations.
  virtual std::chrono::steady_clock::time_point SteadyNow() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::now();
  }
  // A process-wide instance for mains.
  static SystemClock& Instance() {
    static SystemClock c;
    return c;
  }
};

}  // namespace shoal
