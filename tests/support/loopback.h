// A loopback block of a test's own (127.X.Y, for pods on 127.X.Y.2, .3, ...), chosen at random so
// that tests running in parallel never share addresses.
#pragma once

#include <random>
#include <string>

namespace shoal::testing {

inline std::string RandomLoopbackPrefix() {
  std::random_device rd;
  std::mt19937 rng(rd());
  return "127." + std::to_string(20 + rng() % 200) + "." + std::to_string(rng() % 250);
}

}  // namespace shoal::testing
