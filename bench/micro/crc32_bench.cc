// Throughput of shoal::Crc32 (carry-less-multiply folding, common/src/hash.cc) against zlib's
// crc32_z, which it replaced and must equal, on 100-byte (a record), 1 KiB and 64 KiB buffers.
// A plain main(): build/bench/micro/shoal_micro_crc32_bench
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "shoal/common/hash.h"

namespace {

// MB/s of `crc(data, size, seed)` over about 1 GB of calls, best of 5 runs. Each call's result
// seeds the next, so the calls cannot overlap or be skipped.
template <typename F>
double MegabytesPerSecond(F crc, const unsigned char* data, size_t size) {
  const size_t calls = (size_t{1} << 30) / size;
  double best = 0;
  uint32_t sink = 0;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    uint32_t c = 0;
    for (size_t i = 0; i < calls; ++i) c = crc(data, size, c);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    sink ^= c;
    const double mbps = static_cast<double>(calls * size) / took.count() / 1e6;
    if (mbps > best) best = mbps;
  }
  if (sink == 0x5EED) std::puts("");  // keeps the results alive
  return best;
}

}  // namespace

int main() {
  std::vector<unsigned char> buf(64 * 1024 + 1);
  std::mt19937_64 rng(1);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  // One byte in: record buffers are not 16-byte aligned either.
  const unsigned char* data = buf.data() + 1;

  const auto zlib = [](const unsigned char* p, size_t n, uint32_t c) {
    return static_cast<uint32_t>(crc32_z(c, p, static_cast<z_size_t>(n)));
  };
  const auto shoal = [](const unsigned char* p, size_t n, uint32_t c) {
    return shoal::Crc32(p, n, c);
  };

  std::printf("%-8s %14s %14s %8s\n", "size", "crc32_z MB/s", "Crc32 MB/s", "speedup");
  for (size_t size : {size_t{100}, size_t{1024}, size_t{64 * 1024}}) {
    if (shoal::Crc32(data, size, 7) != zlib(data, size, 7)) {
      std::fprintf(stderr, "Crc32 differs from crc32_z at size %zu\n", size);
      return EXIT_FAILURE;
    }
    const double old_mbps = MegabytesPerSecond(zlib, data, size);
    const double new_mbps = MegabytesPerSecond(shoal, data, size);
    std::printf("%-8zu %14.0f %14.0f %7.1fx\n", size, old_mbps, new_mbps, new_mbps / old_mbps);
  }
  return EXIT_SUCCESS;
}
