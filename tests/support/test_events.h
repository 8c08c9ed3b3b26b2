// Helpers for tests that produce and consume through real sidecars: keys a map routes to a
// given partition, an idempotent producer whose events the verifier understands (per-key
// counters in the value), and the conversion of consumed events into the verifier's SeenEvents.
// Values and free functions; a TestProducer is not thread-safe (one test thread uses it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/wire.h"
#include "shoal/harness/verifier.h"

namespace shoal::testing {

// `n` keys (prefix-0, prefix-1, ...) that `map` routes to partition `p`; fewer when none are
// found in the first ten million candidates.
std::vector<std::string> KeysOf(const PartitionMap& map, PartitionId p, size_t n,
                                const std::string& prefix = "key");

// Events of one idempotent producer: seqs 0, 1, 2, ... and a per-key counter n in each value
// ({"p":id,"k":key,"n":n}), which is what the verifier orders by.
class TestProducer {
 public:
  explicit TestProducer(std::string id) : id_(std::move(id)) {}
  // The next events for `keys` (`per_key` each, keys interleaved); not yet acknowledged.
  std::vector<client::OutgoingEvent> Next(const std::vector<std::string>& keys, int per_key);
  // Records `batch` as acknowledged.
  void Acked(const std::vector<client::OutgoingEvent>& batch);
  const std::vector<harness::AckedEvent>& acked() const { return acked_; }
  const std::string& id() const { return id_; }

 private:
  const std::string id_;
  uint64_t seq_ = 0;
  std::map<std::string, uint64_t> counter_;
  std::vector<harness::AckedEvent> acked_;
};

// Consumed events of TestProducer/LoadGenerator format as the verifier's SeenEvents (others
// are left out).
std::vector<harness::SeenEvent> ToSeen(const std::vector<wire::ConsumedEvent>& events);

}  // namespace shoal::testing
