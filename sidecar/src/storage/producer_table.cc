#include "storage/producer_table.h"

#include <algorithm>
#include <cstring>

#include "shoal/common/hash.h"

namespace shoal::storage {

std::optional<uint64_t> ProducerTable::Find(std::string_view producer, uint64_t seq) const {
  auto it = producers_.find(std::string(producer));
  if (it == producers_.end() || it->second.entries.empty()) return std::nullopt;
  const auto& e = it->second.entries;
  if (seq > e.back().seq) return std::nullopt;  // the common case: a new, higher seq
  auto pos = std::lower_bound(e.begin(), e.end(), seq,
                              [](const Entry& a, uint64_t s) { return a.seq < s; });
  if (pos != e.end() && pos->seq == seq) return pos->offset;
  if (e.size() == kWindow && seq < e.front().seq) return e.front().offset;  // older than the window
  return std::nullopt;  // inside the window but not seen: an out-of-order arrival, new
}

void ProducerTable::Record(std::string_view producer, uint64_t seq, uint64_t offset,
                           int64_t now_ms) {
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
  auto& w = it->second;
  w.last_ms = now_ms;
  auto& e = w.entries;
  if (e.empty() || seq > e.back().seq) {
    e.push_back({seq, offset});
  } else {
    auto pos = std::lower_bound(e.begin(), e.end(), seq,
                                [](const Entry& a, uint64_t s) { return a.seq < s; });
    if (pos != e.end() && pos->seq == seq) return;
    e.insert(pos, {seq, offset});
  }
  if (e.size() > kWindow) e.erase(e.begin());
}

size_t ProducerTable::Expire(int64_t now_ms, int64_t idle_ms) {
  return std::erase_if(producers_,
                       [&](const auto& kv) { return kv.second.last_ms < now_ms - idle_ms; });
}

void ProducerTable::TruncateFrom(uint64_t end) {
  for (auto it = producers_.begin(); it != producers_.end();) {
    std::erase_if(it->second.entries, [&](const Entry& e) { return e.offset >= end; });
    it = it->second.entries.empty() ? producers_.erase(it) : std::next(it);
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
constexpr uint32_t kMagic = 0x53485054;  // "SHPT"
}  // namespace

// Format: u32 magic, u32 crc of the rest, u64 producer count, then per producer:
// u16 name length, name, i64 last_ms, u32 entry count, (u64 seq, u64 offset) entries.
std::string ProducerTable::Serialize() const {
  std::string body;
  Put<uint64_t>(body, producers_.size());
  for (const auto& [name, w] : producers_) {
    Put<uint16_t>(body, static_cast<uint16_t>(name.size()));
    body += name;
    Put<int64_t>(body, w.last_ms);
    Put<uint32_t>(body, static_cast<uint32_t>(w.entries.size()));
    for (const auto& e : w.entries) {
      Put<uint64_t>(body, e.seq);
      Put<uint64_t>(body, e.offset);
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
  ProducerTable t;
  uint64_t n = 0;
  if (!Take(in, &n)) return Status::Corruption("producer snapshot truncated");
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t len = 0;
    if (!Take(in, &len) || in.size() < len) return Status::Corruption("producer snapshot truncated");
    std::string name(in.substr(0, len));
    in.remove_prefix(len);
    Window w;
    uint32_t count = 0;
    if (!Take(in, &w.last_ms) || !Take(in, &count) || count > kWindow) {
      return Status::Corruption("producer snapshot truncated");
    }
    w.entries.resize(count);
    for (auto& e : w.entries) {
      if (!Take(in, &e.seq) || !Take(in, &e.offset)) {
        return Status::Corruption("producer snapshot truncated");
      }
    }
    t.producers_.emplace(std::move(name), std::move(w));
  }
  return t;
}

}  // namespace shoal::storage
