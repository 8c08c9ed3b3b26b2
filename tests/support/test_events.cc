#include "support/test_events.h"

#include <simdjson.h>

#include "shoal/common/hash.h"
#include "shoal/harness/workload.h"

namespace shoal::testing {

std::vector<std::string> KeysOf(const PartitionMap& map, PartitionId p, size_t n,
                                const std::string& prefix) {
  std::vector<std::string> keys;
  for (uint64_t i = 0; keys.size() < n && i < 10'000'000; ++i) {
    std::string k = prefix + "-" + std::to_string(i);
    if (map.Route(KeyHash(k)).id == p) keys.push_back(std::move(k));
  }
  return keys;
}

std::vector<client::OutgoingEvent> TestProducer::Next(const std::vector<std::string>& keys,
                                                      int per_key) {
  std::vector<client::OutgoingEvent> out;
  for (int r = 0; r < per_key; ++r) {
    for (const auto& k : keys) {
      const uint64_t n = ++counter_[k];
      out.push_back({k, "{\"p\":\"" + id_ + "\",\"k\":\"" + k + "\",\"n\":" + std::to_string(n) + "}",
                     id_, seq_++});
    }
  }
  return out;
}

void TestProducer::Acked(const std::vector<client::OutgoingEvent>& batch) {
  simdjson::dom::parser parser;
  for (const auto& e : batch) {
    // The value's n is the per-key counter the batch was built with.
    simdjson::dom::element v;
    uint64_t n = 0;
    if (parser.parse(simdjson::padded_string(e.value_json)).get(v) || v["n"].get(n)) continue;
    acked_.push_back({id_, e.key, *e.seq, n});
  }
}

std::vector<harness::SeenEvent> ToSeen(const std::vector<wire::ConsumedEvent>& events) {
  std::vector<harness::SeenEvent> out;
  simdjson::dom::parser parser;
  for (const auto& e : events) {
    simdjson::dom::element v;
    std::string_view p, k;
    uint64_t n = 0;
    if (!e.seq || parser.parse(simdjson::padded_string(e.value)).get(v) || v["p"].get(p) ||
        v["k"].get(k) || v["n"].get(n)) {
      continue;
    }
    out.push_back(
        {std::string(p), std::string(k), *e.seq, n, harness::MonotonicNs(), e.partition, e.offset});
  }
  return out;
}

}  // namespace shoal::testing
