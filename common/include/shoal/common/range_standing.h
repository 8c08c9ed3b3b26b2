// RangeStanding: where one consumer group stands in one partition, per hash point.
//
// A group's position in a partition used to be one offset ("processed everything below O").
// After a split, the successors' consumers read their own ranges of the parent's unread events
// at the same time (invariant 3 holds per hash point), so the parent's events are consumed range
// by range: the group stands at different offsets in different parts of the parent's hash range.
// A RangeStanding is that piecewise function over the partition's range (its domain): a base
// offset that holds everywhere, raised over sub-ranges by range commits. Each hash point's
// standing only grows.
//
// The partition counts as consumed by the group to offset O when every point stands at O or
// beyond: Low() is that offset, what retirement, retention and the whole-partition views use.
//
// A value: copyable, not synchronized. The pieces stay few: each range commit adds at most two
// boundaries, pieces at or below the base are dropped and neighbours with one offset are merged.
#pragma once

#include <cstdint>
#include <vector>

#include "shoal/common/partition_map.h"

namespace shoal {

// One piece of a RangeStanding: every hash point of [lo, hi) stands at `offset`.
struct RangeOffset {
  uint64_t lo = 0;
  uint64_t hi = 0;
  uint64_t offset = 0;
  bool operator==(const RangeOffset&) const = default;
};

// The intersection of two ranges (empty when lo >= hi).
inline HashRange Intersect(const HashRange& a, const HashRange& b) {
  HashRange r{a.lo > b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi};
  if (r.lo >= r.hi) r = HashRange{0, 0};
  return r;
}
inline bool Empty(const HashRange& r) { return r.lo >= r.hi; }

// Sorts `ranges`, drops empty ones and merges those that overlap or touch.
std::vector<HashRange> NormalizeRanges(std::vector<HashRange> ranges);
// `a` without the points of `b`; both normalized; the result is normalized.
std::vector<HashRange> SubtractRanges(const std::vector<HashRange>& a,
                                      const std::vector<HashRange>& b);

class RangeStanding {
 public:
  RangeStanding() = default;
  RangeStanding(HashRange domain, uint64_t base) : domain_(domain), base_(base) {}
  // From pieces as Pieces() gives them (they must lie in `domain`; they are normalized here).
  RangeStanding(HashRange domain, uint64_t base, const std::vector<RangeOffset>& raised);

  const HashRange& domain() const { return domain_; }
  // The offset every point stands at, at least.
  uint64_t base() const { return base_; }
  // The lowest standing over the domain: the partition is consumed below it everywhere.
  uint64_t Low() const;
  // The lowest standing over `r` ∩ domain (the base when they do not meet).
  uint64_t MinOver(const HashRange& r) const;
  uint64_t At(uint32_t hash) const;
  // The pieces raised above the base, in hash order, disjoint.
  const std::vector<RangeOffset>& raised() const { return raised_; }
  // The whole function as pieces that cover the domain, in hash order.
  std::vector<RangeOffset> Pieces() const;

  // Raises every point to `offset`. Returns whether some point moved.
  bool RaiseAll(uint64_t offset);
  // Raises every point of `r` ∩ domain to `offset`. Returns whether some point moved.
  bool Raise(const HashRange& r, uint64_t offset);
  // Brings every point above `end` down to it (a crash took back the log's tail).
  bool ClampTo(uint64_t end);
  // Events not consumed yet, if the partition's events below `end` were spread evenly over its
  // hash range: each piece weighs by its width. Exact when nothing is raised.
  double LagEstimate(uint64_t end) const;

  bool operator==(const RangeStanding&) const = default;

 private:
  void Normalize();

  HashRange domain_;
  uint64_t base_ = 0;
  std::vector<RangeOffset> raised_;  // sorted, disjoint, each above base_
};

}  // namespace shoal
