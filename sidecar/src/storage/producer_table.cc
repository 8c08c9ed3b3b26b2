#include "storage/producer_table.h"

#include <algorithm>
#include <cstring>

#include "shoal/common/hash.h"

namespace shoal::storage {

std::optional<ProducerTable::Location> ProducerTable::Find(std::string_view producer,
                                                           uint64_t seq) const {
  auto it = producers_.find(std::string(producer));
  if (it == producers_.end()) return std::nullopt;
  const Window& w = it->second;
  const auto& e = w.entries;
  if (!e.empty() && seq <= e.back().seq) {
    auto pos = std::lower_bound(e.begin(), e.end(), seq,
                                [](const Entry& a, uint64_t s) { return a.seq < s; });
    if (pos->seq == seq) return Location{pos->partition, pos->offset};
  }
  // Not in the window. Forgotten (so a duplicate) if evicted, or older than a full window.
  const bool forgotten =
      (w.evicted && seq <= w.evicted->seq) || (e.size() == kWindow && seq < e.front().seq);
  if (!forgotten) return std::nullopt;  // new: above the window, or a gap in it
  const Entry& oldest = e.empty() ? *w.evicted : e.front();
  return Location{oldest.partition, oldest.offset};
}

ProducerTable::Window& ProducerTable::WindowOf(std::string_view producer) {
  auto [it, inserted] = producers_.try_emplace(std::string(producer));
  if (inserted && producers_.size() > kMaxProducers) {
    // Bound memory: evict the producer idle the longest.
    auto victim = producers_.end();
    for (auto p = producers_.begin(); p != producers_.end(); ++p) {
      if (p != it && (victim == producers_.end() || p->second.last_ms < victim->second.last_ms)) {
        victim = p;
      }
    }
    if (victim != producers_.end()) producers_.erase(victim);
  }
  return it->second;
}

void ProducerTable::NoteEvicted(Window& w, const Entry& entry) {
  if (!w.evicted || entry.seq > w.evicted->seq) w.evicted = entry;
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
    NoteEvicted(w, e.front());
    e.erase(e.begin());
  }
}

void ProducerTable::Record(std::string_view producer, uint64_t seq, Location at, int64_t now_ms) {
  Window& w = WindowOf(producer);
  w.last_ms = now_ms;
  Insert(w, {seq, at.offset, at.partition});
}

size_t ProducerTable::Expire(int64_t now_ms, int64_t idle_ms) {
  return std::erase_if(producers_,
                       [&](const auto& kv) { return kv.second.last_ms < now_ms - idle_ms; });
}

void ProducerTable::Inherit(const ProducerTable& parent) {
  for (const auto& [name, pw] : parent.producers_) {
    Window& w = WindowOf(name);
    // Inheriting is not activity: keep the newer of the two idle clocks.
    w.last_ms = std::max(w.last_ms, pw.last_ms);
    for (const auto& e : pw.entries) Insert(w, e);
    if (pw.evicted) NoteEvicted(w, *pw.evicted);
  }
}

void ProducerTable::TruncateFrom(uint32_t partition, uint64_t end) {
  for (auto it = producers_.begin(); it != producers_.end();) {
    Window& w = it->second;
    std::erase_if(w.entries,
                  [&](const Entry& e) { return e.partition == partition && e.offset >= end; });
    // The evicted mark stays even if its own record was cut off: lowering it would turn seqs
    // acknowledged long ago back into new ones (see the header).
    it = (w.entries.empty() && !w.evicted) ? producers_.erase(it) : std::next(it);
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
void PutEntry(std::string& out, uint64_t seq, uint64_t offset, uint32_t partition) {
  Put<uint64_t>(out, seq);
  Put<uint64_t>(out, offset);
  Put<uint32_t>(out, partition);
}
// "SHPV": entries carry their partition, and each producer its evicted mark. Older snapshots are
// rejected, so the partition replays its log instead.
constexpr uint32_t kMagic = 0x53485056;
}  // namespace

// Format: u32 magic, u32 crc of the rest, u64 producer count, then per producer:
// u16 name length, name, i64 last_ms, u32 entry count, entries, u8 has evicted (0 or 1), and the
// evicted entry if it has one; an entry is (u64 seq, u64 offset, u32 partition).
std::string ProducerTable::Serialize() const {
  std::string body;
  Put<uint64_t>(body, producers_.size());
  for (const auto& [name, w] : producers_) {
    Put<uint16_t>(body, static_cast<uint16_t>(name.size()));
    body += name;
    Put<int64_t>(body, w.last_ms);
    Put<uint32_t>(body, static_cast<uint32_t>(w.entries.size()));
    for (const auto& e : w.entries) PutEntry(body, e.seq, e.offset, e.partition);
    Put<uint8_t>(body, w.evicted ? 1 : 0);
    if (w.evicted) PutEntry(body, w.evicted->seq, w.evicted->offset, w.evicted->partition);
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
  ProducerTable t;
  auto take_entry = [&in](Entry* e) {
    return Take(in, &e->seq) && Take(in, &e->offset) && Take(in, &e->partition);
  };
  uint64_t n = 0;
  if (!Take(in, &n)) return Status::Corruption("producer snapshot truncated");
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t len = 0;
    if (!Take(in, &len) || in.size() < len)
      return Status::Corruption("producer snapshot truncated");
    std::string name(in.substr(0, len));
    in.remove_prefix(len);
    Window w;
    uint32_t count = 0;
    if (!Take(in, &w.last_ms) || !Take(in, &count) || count > kWindow) {
      return Status::Corruption("producer snapshot truncated");
    }
    w.entries.resize(count);
    for (auto& e : w.entries) {
      if (!take_entry(&e)) return Status::Corruption("producer snapshot truncated");
    }
    uint8_t has_evicted = 0;
    if (!Take(in, &has_evicted)) return Status::Corruption("producer snapshot truncated");
    if (has_evicted > 1) return Status::Corruption("producer snapshot has a bad evicted flag");
    if (has_evicted) {
      Entry e{};
      if (!take_entry(&e)) return Status::Corruption("producer snapshot truncated");
      w.evicted = e;
    }
    t.producers_.emplace(std::move(name), std::move(w));
  }
  return t;
}

}  // namespace shoal::storage
