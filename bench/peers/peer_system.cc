#include "peer_system.h"

#include "shoal/common/hash.h"
#include "shoal/common/partition_map.h"
#include "shoal/harness/batch_driver.h"

namespace shoal::bench {

Result<std::vector<std::vector<BenchBatch>>> BuildBatches(int connections, int per_connection,
                                                          int batch, uint64_t keys, int value_bytes,
                                                          uint32_t partitions) {
  auto map = PartitionMap::Initial("bench", partitions, PodName("bench"));
  if (!map.ok()) return map.status();
  std::vector<std::vector<BenchBatch>> out(static_cast<size_t>(connections));
  uint64_t n = 0;
  for (auto& conn : out) {
    conn.resize(static_cast<size_t>(per_connection));
    for (auto& b : conn) {
      b.resize(static_cast<size_t>(batch));
      for (auto& e : b) {
        e.key = harness::BenchKey(n, keys);
        e.value = harness::BenchValue(n, value_bytes);
        e.partition = map->Route(KeyHash(e.key)).id.value();
        ++n;
      }
    }
  }
  return out;
}

std::optional<ShoalVariant> ShoalVariantOf(const std::string& name) {
  for (bool binary : {false, true}) {
    for (bool tls : {false, true}) {
      for (bool rf3 : {false, true}) {
        for (bool routed : {false, true}) {
          if (routed && !rf3) continue;
          ShoalVariant v{.tls = tls, .binary = binary, .rf3 = rf3, .routed = routed};
          if (v.Name() == name) return v;
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace shoal::bench
