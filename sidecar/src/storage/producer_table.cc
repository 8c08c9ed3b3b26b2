#include "storage/producer_table.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "shoal/common/hash.h"

namespace shoal::storage {

ProducerTable::ProducerTable(uint32_t partition, HashRange range) { ranges_[partition] = range; }

bool ProducerTable::Covers(uint32_t partition, uint32_t hash) const {
  if (partition == kAnyPartition) return true;
  auto it = ranges_.find(partition);
  // A partition whose range is not known could have held any key: judge conservatively.
  return it == ranges_.end() || it->second.Contains(hash);
}

ProducerTable::Lookup ProducerTable::Find(std::string_view producer, uint64_t seq,
                                          uint32_t hash) const {
  auto it = producers_.find(std::string(producer));
  if (it == producers_.end()) return {};
  const Window& w = it->second;
  const auto& e = w.entries;
  if (!e.empty() && seq <= e.back().seq) {
    auto pos = std::lower_bound(e.begin(), e.end(), seq,
                                [](const Entry& a, uint64_t s) { return a.seq < s; });
    if (pos != e.end() && pos->seq == seq) {
      return {Verdict::kDuplicate, Location{pos->partition, pos->offset}};
    }
  }
  // Not in the window: new unless a partition the key could have gone to forgot a seq this old.
  for (const Mark& m : w.marks) {
    if (seq <= m.seq && Covers(m.partition, hash)) return {Verdict::kUnknown, {}};
  }
  return {};
}

ProducerTable::Window& ProducerTable::WindowOf(std::string_view producer) {
  auto [it, inserted] = producers_.try_emplace(std::string(producer));
  if (!inserted || producers_.size() <= kMaxProducers) return it->second;
  // Bound memory: forget the idlest 1% in one pass, so that the cost per new producer stays
  // constant (a scan per insert made inheriting two full tables quadratic, inside a change's
  // write pause). The new producer is never among them.
  const std::string keep = it->first;
  std::vector<std::pair<int64_t, const std::string*>> idle;
  idle.reserve(producers_.size());
  for (const auto& [name, w] : producers_) {
    if (name != keep) idle.emplace_back(w.last_ms, &name);
  }
  const size_t drop = std::max<size_t>(1, kMaxProducers / 100);
  std::nth_element(idle.begin(), idle.begin() + static_cast<std::ptrdiff_t>(drop - 1), idle.end());
  std::vector<std::string> victims;
  for (size_t i = 0; i < drop; ++i) victims.push_back(*idle[i].second);
  for (const auto& v : victims) producers_.erase(v);
  evicted_producers_ += victims.size();
  return producers_.find(keep)->second;
}

void ProducerTable::RaiseMark(Window& w, uint32_t partition, uint64_t seq) {
  for (Mark& m : w.marks) {
    if (m.partition == partition) {
      m.seq = std::max(m.seq, seq);
      return;
    }
  }
  w.marks.push_back({partition, seq});
  if (w.marks.size() > kMaxMarks) {
    // Collapse: one mark over the whole hash space, as high as the highest. Conservative: a seq
    // decided as new before may now be unknown, never the other way round.
    uint64_t top = 0;
    for (const Mark& m : w.marks) top = std::max(top, m.seq);
    w.marks.assign(1, Mark{kAnyPartition, top});
  }
}

void ProducerTable::Insert(Window& w, const Entry& entry) {
  auto& e = w.entries;
  if (e.empty() || entry.seq > e.back().seq) {
    e.push_back(entry);
  } else {
    auto pos = std::lower_bound(e.begin(), e.end(), entry.seq,
                                [](const Entry& a, uint64_t s) { return a.seq < s; });
    if (pos->seq == entry.seq) return;  // already known: the first location stays
    e.insert(pos, entry);
  }
  if (e.size() > kWindow) {
    RaiseMark(w, e.front().partition, e.front().seq);
    e.erase(e.begin());
  }
}

void ProducerTable::Record(std::string_view producer, uint64_t seq, Location at, int64_t now_ms) {
  Window& w = WindowOf(producer);
  w.last_ms = now_ms;
  Insert(w, {seq, at.offset, at.partition});
}

size_t ProducerTable::Expire(int64_t now_ms, int64_t idle_ms) {
  const size_t n = std::erase_if(
      producers_, [&](const auto& kv) { return kv.second.last_ms < now_ms - idle_ms; });
  if (n > 0) {
    // Ranges nothing names any more (the oldest of the lineage, once its producers went idle).
    std::set<uint32_t> named;
    for (const auto& [name, w] : producers_) {
      for (const Entry& e : w.entries) named.insert(e.partition);
      for (const Mark& m : w.marks) named.insert(m.partition);
    }
    // The newest range is this table's own partition's: kept even when nothing names it yet.
    const uint32_t own = ranges_.empty() ? 0 : ranges_.rbegin()->first;
    std::erase_if(ranges_, [&](const auto& r) { return r.first != own && !named.count(r.first); });
  }
  return n;
}

void ProducerTable::Inherit(const ProducerTable& parent) {
  for (const auto& [id, range] : parent.ranges_) ranges_.emplace(id, range);
  for (const auto& [name, pw] : parent.producers_) {
    Window& w = WindowOf(name);
    // Inheriting is not activity: keep the newer of the two idle clocks.
    w.last_ms = std::max(w.last_ms, pw.last_ms);
    for (const auto& e : pw.entries) Insert(w, e);
    for (const auto& m : pw.marks) RaiseMark(w, m.partition, m.seq);
  }
}

void ProducerTable::TruncateFrom(uint32_t partition, uint64_t end) {
  for (auto it = producers_.begin(); it != producers_.end();) {
    Window& w = it->second;
    std::erase_if(w.entries,
                  [&](const Entry& e) { return e.partition == partition && e.offset >= end; });
    // Marks stay even if their own records were cut off: lowering one would turn seqs that may
    // be stored back into new ones.
    it = (w.entries.empty() && w.marks.empty()) ? producers_.erase(it) : std::next(it);
  }
}

namespace {
template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <typename T>
bool Take(std::string_view& in, T* v) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(v, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return true;
}
// "SHPW": ranges, and marks per partition. Older snapshots are rejected, so the partition
// replays its log instead.
constexpr uint32_t kMagic = 0x53485057;
}  // namespace

// Format: u32 magic, u32 crc of the rest; u32 range count, ranges (u32 partition, u64 lo,
// u64 hi); u64 producer count, then per producer: u16 name length, name, i64 last_ms, u32 entry
// count, entries (u64 seq, u64 offset, u32 partition), u32 mark count, marks (u32 partition,
// u64 seq).
std::string ProducerTable::Serialize() const {
  std::string body;
  Put<uint32_t>(body, static_cast<uint32_t>(ranges_.size()));
  for (const auto& [id, r] : ranges_) {
    Put<uint32_t>(body, id);
    Put<uint64_t>(body, r.lo);
    Put<uint64_t>(body, r.hi);
  }
  Put<uint64_t>(body, producers_.size());
  // In name order: the same table always makes the same bytes (snapshots compare, the protocol
  // simulation replays exactly).
  std::vector<const std::pair<const std::string, Window>*> sorted;
  sorted.reserve(producers_.size());
  for (const auto& kv : producers_) sorted.push_back(&kv);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const auto* kv : sorted) {
    const std::string& name = kv->first;
    const Window& w = kv->second;
    Put<uint16_t>(body, static_cast<uint16_t>(name.size()));
    body += name;
    Put<int64_t>(body, w.last_ms);
    Put<uint32_t>(body, static_cast<uint32_t>(w.entries.size()));
    for (const auto& e : w.entries) {
      Put<uint64_t>(body, e.seq);
      Put<uint64_t>(body, e.offset);
      Put<uint32_t>(body, e.partition);
    }
    Put<uint32_t>(body, static_cast<uint32_t>(w.marks.size()));
    for (const auto& m : w.marks) {
      Put<uint32_t>(body, m.partition);
      Put<uint64_t>(body, m.seq);
    }
  }
  std::string out;
  Put<uint32_t>(out, kMagic);
  Put<uint32_t>(out, Crc32(body.data(), body.size()));
  return out + body;
}

Result<ProducerTable> ProducerTable::Deserialize(std::string_view in) {
  uint32_t magic = 0, crc = 0;
  if (!Take(in, &magic) || !Take(in, &crc) || magic != kMagic ||
      crc != Crc32(in.data(), in.size())) {
    return Status::Corruption("producer snapshot has a bad header or checksum");
  }
  const Status truncated = Status::Corruption("producer snapshot truncated");
  ProducerTable t;
  uint32_t ranges = 0;
  if (!Take(in, &ranges)) return truncated;
  for (uint32_t i = 0; i < ranges; ++i) {  // bounded by the bytes: each takes 20
    uint32_t id = 0;
    HashRange r;
    if (!Take(in, &id) || !Take(in, &r.lo) || !Take(in, &r.hi)) return truncated;
    if (r.lo >= r.hi || r.hi > kHashSpace) {
      return Status::Corruption("producer snapshot has a bad range");
    }
    t.ranges_[id] = r;
  }
  uint64_t n = 0;
  if (!Take(in, &n)) return truncated;
  for (uint64_t i = 0; i < n; ++i) {  // bounded by the bytes: each producer takes 18 or more
    uint16_t len = 0;
    if (!Take(in, &len) || in.size() < len) return truncated;
    std::string name(in.substr(0, len));
    in.remove_prefix(len);
    Window w;
    uint32_t count = 0;
    if (!Take(in, &w.last_ms) || !Take(in, &count) || count > kWindow) return truncated;
    w.entries.resize(count);
    for (auto& e : w.entries) {
      if (!Take(in, &e.seq) || !Take(in, &e.offset) || !Take(in, &e.partition)) return truncated;
    }
    uint32_t marks = 0;
    if (!Take(in, &marks) || marks > kMaxMarks) return truncated;
    w.marks.resize(marks);
    for (auto& m : w.marks) {
      if (!Take(in, &m.partition) || !Take(in, &m.seq)) return truncated;
    }
    t.producers_.emplace(std::move(name), std::move(w));
  }
  return t;
}

}  // namespace shoal::storage
