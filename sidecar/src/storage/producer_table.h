// ProducerTable: the idempotent-producer state of one partition (invariant 6).
//
// For each producer id it remembers the sequence numbers of its last kWindow events appended to
// this partition (or inherited from its sealed parents), with where each was appended. A
// (producer, seq) inside the window is a duplicate and is answered with the original location; a
// seq newer than the window is new. A seq below the window counts as a duplicate when it is at or
// below the highest seq the window ever pushed out (`evicted`), or when the window is full and the
// seq is older than all of it: a retry that old was acknowledged long ago (see docs/data-plane.md).
// Its original location is not known any more, so it is answered with the oldest location the
// table still knows (the window's oldest entry, or the evicted one once the window is empty).
//
// The evicted high-water mark is what keeps that rule true when the window shrinks: TruncateFrom
// (records a crash took back) and Inherit (a merge of windows) can leave a window partly or wholly
// empty, and without it an old, acknowledged seq would count as new and be appended twice. It only
// grows, is kept while the producer is known, survives snapshots, and Inherit takes the higher of
// the two. Sequence numbers of one producer may be sparse in a partition (the other seqs went to
// other partitions) and may arrive slightly out of order from pipelining clients.
//
// The table is rebuilt after a restart from a snapshot plus a replay of the log tail past it.
// A value; not thread-safe: the owning Partition serializes access under its append mutex.
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

  // Where an event was appended: inherited entries name a parent partition.
  struct Location {
    uint32_t partition;
    uint64_t offset;
    bool operator==(const Location&) const = default;
  };
  // Where the event was appended, if (producer, seq) counts as already appended.
  std::optional<Location> Find(std::string_view producer, uint64_t seq) const;
  // Remembers (producer, seq) at `at`; a seq already in the window keeps its original location.
  void Record(std::string_view producer, uint64_t seq, Location at, int64_t now_ms);
  // Adds every entry of `parent` (a sealed parent's final table): a successor inherits the dedup
  // state of its lineage (invariant 6), so a retry of an event appended to the parent before the
  // change is still a duplicate after it. Windows stay capped at kWindow (the newest seqs win) and
  // the evicted high-water mark is the higher of the two.
  void Inherit(const ProducerTable& parent);
  // Forgets producers idle for longer than idle_ms.
  size_t Expire(int64_t now_ms, int64_t idle_ms);
  // Drops every entry of `partition` at or past `end` (the log was truncated below them); entries
  // of other partitions and the evicted high-water mark stay. A producer is forgotten only when
  // nothing is left of it.
  void TruncateFrom(uint32_t partition, uint64_t end);

  size_t producer_count() const { return producers_.size(); }

  // Binary snapshot with CRC; Load rejects a damaged one (the caller then replays the whole log).
  std::string Serialize() const;
  static Result<ProducerTable> Deserialize(std::string_view bytes);

 private:
  struct Entry {
    uint64_t seq;
    uint64_t offset;
    uint32_t partition;
  };
  struct Window {
    std::vector<Entry> entries;  // sorted by seq, at most kWindow
    // The entry with the highest seq ever pushed out of `entries`; seqs at or below it that are
    // not in `entries` are duplicates.
    std::optional<Entry> evicted;
    int64_t last_ms = 0;
  };
  // The producer's window, created if new (evicting the idlest producer past kMaxProducers).
  Window& WindowOf(std::string_view producer);
  // Inserts unless the seq is already there, then caps the window at kWindow.
  static void Insert(Window& w, const Entry& entry);
  static void NoteEvicted(Window& w, const Entry& entry);

  std::unordered_map<std::string, Window> producers_;
};

}  // namespace shoal::storage
