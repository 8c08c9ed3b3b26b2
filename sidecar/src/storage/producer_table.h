// ProducerTable: the idempotent-producer state of one partition (invariant 6).
//
// For each producer id it remembers the sequence numbers of its last kWindow events appended to
// this partition, with their offsets. A (producer, seq) inside the window is a duplicate and is
// answered with the original offset; a seq newer than the window is new; a seq older than the
// whole window is treated as a duplicate (a retry that old has been acknowledged long ago; see
// docs/data-plane.md). Sequence numbers of one producer may be sparse in a partition (the other
// seqs went to other partitions) and may arrive slightly out of order from pipelining clients.
//
// The table is rebuilt after a restart from a snapshot plus a replay of the log tail past it.
// Not thread-safe: the owning Partition serializes access under its append mutex.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::storage {

class ProducerTable {
 public:
  static constexpr size_t kWindow = 256;
  static constexpr size_t kMaxProducers = 100000;

  // The offset the event was appended at, if (producer, seq) counts as already appended.
  std::optional<uint64_t> Find(std::string_view producer, uint64_t seq) const;
  void Record(std::string_view producer, uint64_t seq, uint64_t offset, int64_t now_ms);
  // Forgets producers idle for longer than idle_ms.
  size_t Expire(int64_t now_ms, int64_t idle_ms);
  // Drops every entry at or past `end` (the log was truncated below them).
  void TruncateFrom(uint64_t end);

  size_t producer_count() const { return producers_.size(); }

  // Binary snapshot with CRC; Load rejects a damaged one (the caller then replays the whole log).
  std::string Serialize() const;
  static Result<ProducerTable> Deserialize(std::string_view bytes);

 private:
  struct Entry {
    uint64_t seq;
    uint64_t offset;
  };
  struct Window {
    std::vector<Entry> entries;  // sorted by seq, at most kWindow
    int64_t last_ms = 0;
  };
  std::unordered_map<std::string, Window> producers_;
};

}  // namespace shoal::storage
