#include "shoal/common/range_standing.h"

#include <algorithm>

namespace shoal {

std::vector<HashRange> NormalizeRanges(std::vector<HashRange> ranges) {
  std::erase_if(ranges, [](const HashRange& r) { return Empty(r); });
  std::sort(ranges.begin(), ranges.end(),
            [](const HashRange& a, const HashRange& b) { return a.lo < b.lo; });
  std::vector<HashRange> out;
  for (const auto& r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<HashRange> SubtractRanges(const std::vector<HashRange>& a,
                                      const std::vector<HashRange>& b) {
  std::vector<HashRange> out;
  size_t j = 0;
  for (HashRange r : a) {
    while (j < b.size() && b[j].hi <= r.lo) ++j;
    size_t k = j;
    while (k < b.size() && b[k].lo < r.hi) {
      if (b[k].lo > r.lo) out.push_back({r.lo, b[k].lo});
      r.lo = std::max(r.lo, b[k].hi);
      if (r.lo >= r.hi) break;
      ++k;
    }
    if (r.lo < r.hi) out.push_back(r);
  }
  return out;
}

RangeStanding::RangeStanding(HashRange domain, uint64_t base,
                             const std::vector<RangeOffset>& raised)
    : domain_(domain), base_(base) {
  for (const auto& p : raised) Raise({p.lo, p.hi}, p.offset);
}

uint64_t RangeStanding::Low() const {
  // Covered end to end by raised pieces: the lowest of them; any gap stands at the base.
  uint64_t covered_to = domain_.lo;
  uint64_t low = UINT64_MAX;
  for (const auto& p : raised_) {
    if (p.lo != covered_to) return base_;
    covered_to = p.hi;
    low = std::min(low, p.offset);
  }
  if (covered_to != domain_.hi || raised_.empty()) return base_;
  return low;
}

uint64_t RangeStanding::MinOver(const HashRange& r) const {
  const HashRange in = Intersect(r, domain_);
  if (Empty(in)) return base_;
  uint64_t covered_to = in.lo;
  uint64_t low = UINT64_MAX;
  for (const auto& p : raised_) {
    if (p.hi <= in.lo) continue;
    if (p.lo >= in.hi) break;
    if (p.lo > covered_to) return base_;  // a gap at the base
    covered_to = p.hi;
    low = std::min(low, p.offset);
  }
  if (covered_to < in.hi) return base_;
  return low;
}

uint64_t RangeStanding::At(uint32_t hash) const {
  auto it = std::upper_bound(raised_.begin(), raised_.end(), uint64_t{hash},
                             [](uint64_t h, const RangeOffset& p) { return h < p.lo; });
  if (it == raised_.begin()) return base_;
  --it;
  return hash < it->hi ? it->offset : base_;
}

std::vector<RangeOffset> RangeStanding::Pieces() const {
  std::vector<RangeOffset> out;
  uint64_t at = domain_.lo;
  for (const auto& p : raised_) {
    if (p.lo > at) out.push_back({at, p.lo, base_});
    out.push_back(p);
    at = p.hi;
  }
  if (at < domain_.hi) out.push_back({at, domain_.hi, base_});
  return out;
}

bool RangeStanding::RaiseAll(uint64_t offset) {
  if (offset <= base_) return false;
  const uint64_t was = Low();
  bool moved = offset > was;
  for (const auto& p : raised_) moved = moved || p.offset < offset;
  base_ = offset;
  Normalize();
  return moved;
}

bool RangeStanding::Raise(const HashRange& r, uint64_t offset) {
  const HashRange in = Intersect(r, domain_);
  if (Empty(in) || offset <= base_) return false;
  // Rebuild the pieces: outside `in` as they were, inside it each point at max(its, offset).
  std::vector<RangeOffset> out;
  out.reserve(raised_.size() + 2);
  bool moved = false;
  uint64_t at = in.lo;  // next point of `in` not yet placed
  for (const auto& p : raised_) {
    if (p.hi <= in.lo || p.lo >= in.hi) {
      if (p.lo >= in.hi && at < in.hi) {
        out.push_back({at, in.hi, offset});
        moved = true;
        at = in.hi;
      }
      out.push_back(p);
      continue;
    }
    if (p.lo < in.lo) out.push_back({p.lo, in.lo, p.offset});
    const uint64_t lo = std::max(p.lo, in.lo), hi = std::min(p.hi, in.hi);
    if (lo > at) {
      out.push_back({at, lo, offset});  // a gap at the base, now raised
      moved = true;
    }
    if (p.offset < offset) moved = true;
    out.push_back({lo, hi, std::max(p.offset, offset)});
    at = hi;
    if (p.hi > in.hi) out.push_back({in.hi, p.hi, p.offset});
  }
  if (at < in.hi) {
    out.push_back({at, in.hi, offset});
    moved = true;
  }
  raised_ = std::move(out);
  Normalize();
  return moved;
}

bool RangeStanding::ClampTo(uint64_t end) {
  bool changed = false;
  if (base_ > end) {
    base_ = end;
    changed = true;
  }
  for (auto& p : raised_) {
    if (p.offset > end) {
      p.offset = end;
      changed = true;
    }
  }
  Normalize();
  return changed;
}

double RangeStanding::LagEstimate(uint64_t end) const {
  const double width = static_cast<double>(domain_.Width());
  if (width <= 0) return 0;
  double lag = 0;
  for (const auto& p : Pieces()) {
    if (p.offset >= end) continue;
    lag += static_cast<double>(end - p.offset) * static_cast<double>(p.hi - p.lo) / width;
  }
  return lag;
}

void RangeStanding::Normalize() {
  std::vector<RangeOffset> out;
  out.reserve(raised_.size());
  for (const auto& p : raised_) {
    if (p.offset <= base_ || p.lo >= p.hi) continue;
    if (!out.empty() && out.back().hi == p.lo && out.back().offset == p.offset) {
      out.back().hi = p.hi;
    } else {
      out.push_back(p);
    }
  }
  raised_ = std::move(out);
  // Raised end to end over the whole domain: the lowest piece is the new base.
  const uint64_t low = Low();
  if (low > base_) {
    base_ = low;
    std::erase_if(raised_, [&](const RangeOffset& p) { return p.offset <= base_; });
  }
}

}  // namespace shoal
