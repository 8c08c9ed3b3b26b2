// WaitFor: polls `done` every 20 ms until it holds or `limit` passes; whether it held. For tests
// that wait on a condition with a deadline, never a bare sleep.
#pragma once

#include <chrono>
#include <thread>

namespace shoal::testing {

template <typename F>
bool WaitFor(F done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace shoal::testing
