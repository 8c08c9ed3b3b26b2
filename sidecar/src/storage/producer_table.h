// ProducerTable: the idempotent-producer state of one partition and its lineage (invariant 6).
//
// For each producer id it remembers the sequence numbers of its newest kWindow events appended
// to this partition or inherited from its sealed parents, with where each was appended. A seq
// in the window is a duplicate, answered with its original location.
//
// What the window no longer holds is summed up by marks: for each partition of the lineage that
// lost entries of the producer from a window, the highest seq it lost. Every event of the
// producer stored in partition X with a seq above X's mark is in the window, so a seq that is in
// no window is decided by the marks of the partitions whose hash range contains the event's key
// hash, the partitions that key's events can have gone to:
//   - above all of them: new (never stored in the key's lineage), appended;
//   - at or below one: unknown. It may have been stored and forgotten, so it is neither appended
//     (a second copy) nor answered "duplicate" (which would claim it is stored when it may be
//     nowhere); the request is refused with sequence_unknown (Kafka's OutOfOrderSequence).
// A producer's seqs may be sparse in a partition (the other seqs went to other partitions) and
// may arrive slightly out of order from pipelining clients; both are decided exactly while they
// are above the marks. Marks are kept per partition because after a merge one window holds the
// entries of two parents: a seq that went to the lower range must not be judged by what the
// upper range forgot (docs/producer-state.md tells the whole model).
//
// Memory is bounded: kWindow entries and kMaxMarks marks per producer (more marks collapse into
// one over the whole hash space, which only turns more old seqs into unknown), kMaxProducers
// producers (beyond it the idlest are forgotten in bulk and counted: a forgotten producer's old
// seqs read as new, like Kafka's expired producer ids).
//
// The table is rebuilt after a restart from a snapshot plus a replay of the log tail past it.
// A value; not thread-safe: the owning Partition serializes access under its append mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal::storage {

class ProducerTable {
 public:
  static constexpr size_t kWindow = 256;
  static constexpr size_t kMaxMarks = 32;
  static constexpr size_t kMaxProducers = 100000;
  // The partition a collapsed mark belongs to: its range is the whole hash space.
  static constexpr uint32_t kAnyPartition = UINT32_MAX;

  // Where an event was appended: inherited entries name a parent partition.
  struct Location {
    uint32_t partition = 0;
    uint64_t offset = 0;
    bool operator==(const Location&) const = default;
  };
  enum class Verdict { kNew, kDuplicate, kUnknown };
  struct Lookup {
    Verdict verdict = Verdict::kNew;
    Location at;  // for kDuplicate: where it was appended
  };

  ProducerTable() = default;
  // The table of partition `partition`, which owns `range`: what Record appends is there.
  ProducerTable(uint32_t partition, HashRange range);

  // How (producer, seq) of an event whose key hashes to `hash` stands, see the header.
  Lookup Find(std::string_view producer, uint64_t seq, uint32_t hash) const;
  // Remembers (producer, seq) at `at`; a seq already in the window keeps its original location.
  void Record(std::string_view producer, uint64_t seq, Location at, int64_t now_ms);
  // Adds every entry and mark of `parent` (a sealed parent's final table): a successor inherits
  // the dedup state of its lineage (invariant 6), so a retry of an event appended to the parent
  // before the change is still a duplicate after it. Windows stay capped at kWindow (the newest
  // seqs win; what falls out raises its partition's mark).
  void Inherit(const ProducerTable& parent);
  // Forgets producers idle for longer than idle_ms.
  size_t Expire(int64_t now_ms, int64_t idle_ms);
  // Drops every entry of `partition` at or past `end` (the log was truncated below them); entries
  // of other partitions and the marks stay. A producer is forgotten only when nothing is left.
  void TruncateFrom(uint32_t partition, uint64_t end);

  size_t producer_count() const { return producers_.size(); }
  // Producers forgotten by the kMaxProducers cap since this table was created (not persisted).
  uint64_t evicted_producers() const { return evicted_producers_; }

  // Binary snapshot with CRC; Deserialize rejects a damaged one (the caller then replays the log).
  std::string Serialize() const;
  static Result<ProducerTable> Deserialize(std::string_view bytes);

 private:
  struct Entry {
    uint64_t seq;
    uint64_t offset;
    uint32_t partition;
  };
  struct Mark {
    uint32_t partition;  // kAnyPartition for a collapsed mark
    uint64_t seq;        // the highest seq of this partition's entries that left the window
  };
  struct Window {
    std::vector<Entry> entries;  // sorted by seq, at most kWindow
    std::vector<Mark> marks;     // one per partition, at most kMaxMarks
    int64_t last_ms = 0;
  };
  // The producer's window, created if new (forgetting the idlest producers past kMaxProducers).
  Window& WindowOf(std::string_view producer);
  // Inserts unless the seq is already there, then caps the window at kWindow.
  static void Insert(Window& w, const Entry& entry);
  static void RaiseMark(Window& w, uint32_t partition, uint64_t seq);
  bool Covers(uint32_t partition, uint32_t hash) const;

  std::unordered_map<std::string, Window> producers_;
  // The hash range of every partition an entry or a mark names (the lineage's, fixed per id).
  std::map<uint32_t, HashRange> ranges_;
  uint64_t evicted_producers_ = 0;
};

}  // namespace shoal::storage
