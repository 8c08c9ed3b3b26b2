// Routing cost of one event: KeyHash (crc32 of the key) and PartitionMap::Route (binary search
// over the active ranges' starts), over maps of 64, 1024 and 16384 equal ranges. Keys look like
// `user_123456` and are precomputed; each iteration takes the next of 2^20 keys, so the loop
// measures hashing and routing, not key formatting. The routed partition's id is summed so that
// the PartitionInfo the router returns is really read, as the sidecar's router reads it.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "shoal/common/hash.h"
#include "shoal/common/partition_map.h"

namespace shoal {
namespace {

constexpr size_t kKeys = size_t{1} << 20;

const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys = [] {
    std::mt19937_64 rng(42);
    std::vector<std::string> out;
    out.reserve(kKeys);
    for (size_t i = 0; i < kKeys; ++i) out.push_back("user_" + std::to_string(rng() % 1000000));
    return out;
  }();
  return keys;
}

const std::vector<uint32_t>& Hashes() {
  static const std::vector<uint32_t> hashes = [] {
    std::vector<uint32_t> out;
    out.reserve(kKeys);
    for (const auto& k : Keys()) out.push_back(KeyHash(k));
    return out;
  }();
  return hashes;
}

PartitionMap Map(int64_t partitions) {
  auto m = PartitionMap::Initial("bench", static_cast<uint32_t>(partitions), PodName("pod-0"));
  if (!m.ok()) std::abort();
  return std::move(m).value();
}

void BM_KeyHash(benchmark::State& state) {
  const auto& keys = Keys();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(KeyHash(keys[i]));
    i = (i + 1) & (kKeys - 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KeyHash);

void BM_Route(benchmark::State& state) {
  const PartitionMap map = Map(state.range(0));
  const auto& hashes = Hashes();
  size_t i = 0;
  uint64_t sum = 0;
  for (auto _ : state) {
    sum += map.Route(hashes[i]).id.value();
    i = (i + 1) & (kKeys - 1);
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Route)->Arg(64)->Arg(1024)->Arg(16384);

void BM_HashAndRoute(benchmark::State& state) {
  const PartitionMap map = Map(state.range(0));
  const auto& keys = Keys();
  size_t i = 0;
  uint64_t sum = 0;
  for (auto _ : state) {
    sum += map.Route(KeyHash(keys[i])).id.value();
    i = (i + 1) & (kKeys - 1);
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HashAndRoute)->Arg(64)->Arg(1024)->Arg(16384);

}  // namespace
}  // namespace shoal

BENCHMARK_MAIN();
