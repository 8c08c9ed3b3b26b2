#include "storage/commit_store.h"

#include <cstring>
#include <random>
#include <string_view>

#include "shoal/common/hash.h"
#include "storage/file_system.h"

namespace shoal::storage {

namespace {
constexpr uint64_t kCompactBytes = 1 << 20;
constexpr uint64_t kTombstone = UINT64_MAX;  // the group was deleted
constexpr uint16_t kExtended = 0xFFFF;       // a payload of another kind than a whole commit
constexpr uint8_t kRangeCommit = 1;
constexpr uint8_t kLease = 2;

void Put16(std::string& out, uint16_t v) { out.append(reinterpret_cast<const char*>(&v), 2); }
void Put32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void Put64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void PutString16(std::string& out, const std::string& s) {
  Put16(out, static_cast<uint16_t>(s.size()));
  out += s;
}

void Frame(const std::string& payload, std::string& out) {
  Put32(out, static_cast<uint32_t>(payload.size()));
  Put32(out, Crc32(payload.data(), payload.size()));
  out += payload;
}

void EncodeCommit(const std::string& group, uint64_t offset, std::string& out) {
  std::string payload;
  PutString16(payload, group);
  Put64(payload, offset);
  Frame(payload, out);
}

void EncodeRangeCommit(const std::string& group, const HashRange& r, uint64_t offset,
                       std::string& out) {
  std::string payload;
  Put16(payload, kExtended);
  payload.push_back(static_cast<char>(kRangeCommit));
  PutString16(payload, group);
  Put64(payload, r.lo);
  Put64(payload, r.hi);
  Put64(payload, offset);
  Frame(payload, out);
}

void EncodeLease(const std::string& group, const ReadLease& l, std::string& out) {
  std::string payload;
  Put16(payload, kExtended);
  payload.push_back(static_cast<char>(kLease));
  PutString16(payload, group);
  PutString16(payload, l.reader);
  Put64(payload, l.last);
  Put64(payload, l.scanned_to);
  payload.push_back(l.complete ? 1 : 0);
  Put32(payload, static_cast<uint32_t>(l.ranges.size()));
  for (const auto& r : l.ranges) {
    Put64(payload, r.lo);
    Put64(payload, r.hi);
  }
  Frame(payload, out);
}

// Reads fixed-size fields off a payload; any read past its end marks it bad.
class Cursor {
 public:
  Cursor(const char* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  T Get() {
    T v{};
    if (pos_ + sizeof(T) > n_) {
      bad_ = true;
      return v;
    }
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string String16() {
    const uint16_t len = Get<uint16_t>();
    if (bad_ || pos_ + len > n_) {
      bad_ = true;
      return {};
    }
    std::string s(p_ + pos_, len);
    pos_ += len;
    return s;
  }
  bool ok() const { return !bad_; }
  bool done() const { return pos_ == n_; }
  size_t left() const { return n_ - pos_; }

 private:
  const char* p_;
  size_t n_;
  size_t pos_ = 0;
  bool bad_ = false;
};

// The standing of `group` in `standings`, made (at 0 over `domain`) if it has none.
RangeStanding& StandingIn(std::map<std::string, RangeStanding>& standings, HashRange domain,
                          const std::string& group) {
  auto it = standings.find(group);
  if (it == standings.end()) it = standings.emplace(group, RangeStanding(domain, 0)).first;
  return it->second;
}

// Replays store records into `standings` and `leases`; returns how many bytes of `data` were
// whole records (the rest is a torn tail, or not records at all).
size_t ParseRecords(std::string_view data, HashRange domain,
                    std::map<std::string, RangeStanding>* standings,
                    std::map<std::string, std::map<std::string, ReadLease>>* leases) {
  size_t pos = 0;
  while (pos + 8 <= data.size()) {
    uint32_t len = 0, crc = 0;
    std::memcpy(&len, data.data() + pos, 4);
    std::memcpy(&crc, data.data() + pos + 4, 4);
    if (len < 10 || len > data.size() - pos - 8) break;
    const char* p = data.data() + pos + 8;
    if (Crc32(p, len) != crc) break;
    Cursor c(p, len);
    const uint16_t first = c.Get<uint16_t>();
    if (first != kExtended) {
      if (size_t{first} + 10 != len) break;
      std::string group(p + 2, first);
      uint64_t offset = 0;
      std::memcpy(&offset, p + 2 + first, 8);
      if (offset == kTombstone) {
        standings->erase(group);
        leases->erase(group);
      } else {
        StandingIn(*standings, domain, group).RaiseAll(offset);
      }
    } else {
      const uint8_t kind = c.Get<uint8_t>();
      const std::string group = c.String16();
      if (kind == kRangeCommit) {
        HashRange r;
        r.lo = c.Get<uint64_t>();
        r.hi = c.Get<uint64_t>();
        const uint64_t offset = c.Get<uint64_t>();
        if (!c.ok() || !c.done()) break;
        StandingIn(*standings, domain, group).Raise(r, offset);
      } else if (kind == kLease) {
        ReadLease l;
        l.reader = c.String16();
        l.last = c.Get<uint64_t>();
        l.scanned_to = c.Get<uint64_t>();
        l.complete = c.Get<uint8_t>() != 0;
        const uint32_t n = c.Get<uint32_t>();
        if (!c.ok() || c.left() != size_t{n} * 16) break;
        for (uint32_t i = 0; i < n; ++i) {
          HashRange r;
          r.lo = c.Get<uint64_t>();
          r.hi = c.Get<uint64_t>();
          l.ranges.push_back(r);
        }
        (*leases)[group][l.reader] = std::move(l);
      } else {
        break;
      }
    }
    pos += 8 + len;
  }
  return pos;
}

// Tells two opens of a store apart (a restart starts versions over); never 0, which a follower
// that mirrored nothing sends.
uint64_t NewIncarnation() {
  std::random_device rd;
  const uint64_t v = (uint64_t{rd()} << 32) ^ rd();
  return v ? v : 1;
}
}  // namespace

CommitStore::~CommitStore() = default;

Result<std::unique_ptr<CommitStore>> CommitStore::Open(const std::string& dir, FileSystem* fs,
                                                       HashRange domain) {
  std::unique_ptr<CommitStore> s(new CommitStore());
  s->fs_ = fs ? fs : &PosixFileSystem();
  s->path_ = dir + "/commits.log";
  s->domain_ = domain;
  std::string data;
  Status st = s->fs_->ReadWholeFile(s->path_, &data);
  if (!st.ok() && st.code() != Status::Code::kNotFound) return st;
  MutexLock lock(s->mu_);  // not shared yet; the lock is what the analysis checks
  // A torn tail after a crash is where the replay stops.
  (void)ParseRecords(data, domain, &s->standings_, &s->leases_);
  s->incarnation_ = NewIncarnation();
  // The state as opened is version 1, never 0: a follower that mirrors nothing of this
  // incarnation reports 0, so a commit that changes nothing after a restart (made before it,
  // never held by a quorum) still waits for a follower that mirrors this state.
  s->version_ = 1;
  // Rewrite compactly: drops a torn tail and old entries in one step.
  SHOAL_RETURN_IF_ERROR(s->Compact());
  return s;
}

RangeStanding& CommitStore::StandingOf(const std::string& group) {
  return StandingIn(standings_, domain_, group);
}

std::string CommitStore::EncodeState() const {
  std::string out;
  for (const auto& [g, s] : standings_) {
    EncodeCommit(g, s.base(), out);
    for (const auto& p : s.raised()) EncodeRangeCommit(g, {p.lo, p.hi}, p.offset, out);
  }
  for (const auto& [g, by_reader] : leases_) {
    for (const auto& [reader, l] : by_reader) EncodeLease(g, l, out);
  }
  return out;
}

CommitStore::State CommitStore::Snapshot() const {
  MutexLock lock(mu_);
  return {incarnation_, version_, EncodeState()};
}

Status CommitStore::Mirror(std::string_view records) {
  std::map<std::string, RangeStanding> standings;
  std::map<std::string, std::map<std::string, ReadLease>> leases;
  if (ParseRecords(records, domain_, &standings, &leases) != records.size()) {
    return Status::Corruption("a commit store snapshot that does not parse");
  }
  MutexLock lock(mu_);
  SHOAL_RETURN_IF_ERROR(failure_);
  standings_ = std::move(standings);
  leases_ = std::move(leases);
  ++version_;
  return Compact();
}

uint64_t CommitStore::version() const {
  MutexLock lock(mu_);
  return version_;
}

Status CommitStore::Compact() {
  const std::string out = EncodeState();
  SHOAL_RETURN_IF_ERROR(fs_->WriteFileAtomic(path_, out));
  file_.reset();
  auto file = fs_->Open(path_, /*truncate=*/false);
  if (!file.ok()) return file.status();
  file_ = std::move(file).value();
  file_size_ = out.size();
  dirty_ = false;
  return Status::Ok();
}

Status CommitStore::Append(const std::string& rec, bool sync) {
  SHOAL_RETURN_IF_ERROR(failure_);
  SHOAL_RETURN_IF_ERROR(file_->WriteAt(file_size_, rec.data(), rec.size()));
  file_size_ += rec.size();
  dirty_ = true;
  ++version_;
  if (sync) SHOAL_RETURN_IF_ERROR(SyncLocked());
  return Status::Ok();
}

Status CommitStore::Write(const std::string& rec, bool sync) {
  SHOAL_RETURN_IF_ERROR(Append(rec, sync));
  if (file_size_ > kCompactBytes) SHOAL_RETURN_IF_ERROR(Compact());
  return Status::Ok();
}

Status CommitStore::SyncLocked() {
  SHOAL_RETURN_IF_ERROR(failure_);
  if (!dirty_) return Status::Ok();
  Status st = file_->Sync();
  if (!st.ok()) {
    failure_ = st.Annotate("the commit store takes no more commits until it is reopened");
    return failure_;
  }
  dirty_ = false;
  return Status::Ok();
}

Result<bool> CommitStore::Commit(const std::string& group, Offset offset, bool sync) {
  if (offset.value() == kTombstone) return Status::InvalidArgument("offset 2^64-1 is not an offset");
  MutexLock lock(mu_);
  auto it = standings_.find(group);
  if (it != standings_.end() && it->second.base() >= offset.value()) return false;
  std::string rec;
  EncodeCommit(group, offset.value(), rec);
  SHOAL_RETURN_IF_ERROR(Append(rec, sync));
  StandingOf(group).RaiseAll(offset.value());
  if (file_size_ > kCompactBytes) SHOAL_RETURN_IF_ERROR(Compact());
  return true;
}

Result<bool> CommitStore::CommitRanges(const std::string& group,
                                       const std::vector<HashRange>& ranges, Offset offset,
                                       bool sync) {
  if (offset.value() == kTombstone) return Status::InvalidArgument("offset 2^64-1 is not an offset");
  MutexLock lock(mu_);
  // Only what moves is written: the trial runs on a copy.
  auto it = standings_.find(group);
  RangeStanding next = it == standings_.end() ? RangeStanding(domain_, 0) : it->second;
  std::string rec;
  for (const auto& r : ranges) {
    if (next.Raise(r, offset.value())) EncodeRangeCommit(group, r, offset.value(), rec);
  }
  if (rec.empty()) {
    if (it == standings_.end()) {
      // A first commit that moves nothing (offset 0) still makes the group known here.
      EncodeCommit(group, 0, rec);
    } else {
      return false;
    }
  }
  SHOAL_RETURN_IF_ERROR(Append(rec, sync));
  standings_.insert_or_assign(group, std::move(next));
  if (file_size_ > kCompactBytes) SHOAL_RETURN_IF_ERROR(Compact());
  return true;
}

Result<bool> CommitStore::Delete(const std::string& group, bool sync) {
  MutexLock lock(mu_);
  const bool had = standings_.count(group) > 0;
  if (!had && !leases_.count(group)) return false;
  std::string rec;
  EncodeCommit(group, kTombstone, rec);
  SHOAL_RETURN_IF_ERROR(Write(rec, sync));
  standings_.erase(group);
  leases_.erase(group);
  return had;
}

Status CommitStore::ClampTo(Offset end) {
  MutexLock lock(mu_);
  bool changed = false;
  for (auto& [group, s] : standings_) changed |= s.ClampTo(end.value());
  for (auto& [group, by_reader] : leases_) {
    for (auto& [reader, l] : by_reader) {
      if (l.last > end.value() || l.scanned_to > end.value()) {
        l.last = std::min(l.last, end.value());
        l.scanned_to = std::min(l.scanned_to, end.value());
        changed = true;
      }
    }
  }
  if (!changed) return Status::Ok();
  ++version_;
  return Compact();
}

std::optional<Offset> CommitStore::Get(const std::string& group) const {
  MutexLock lock(mu_);
  auto it = standings_.find(group);
  if (it == standings_.end()) return std::nullopt;
  return Offset(it->second.Low());
}

std::map<std::string, Offset> CommitStore::All() const {
  MutexLock lock(mu_);
  std::map<std::string, Offset> out;
  for (const auto& [g, s] : standings_) out.emplace(g, Offset(s.Low()));
  return out;
}

std::optional<RangeStanding> CommitStore::Standing(const std::string& group) const {
  MutexLock lock(mu_);
  auto it = standings_.find(group);
  if (it == standings_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, RangeStanding> CommitStore::AllStandings() const {
  MutexLock lock(mu_);
  return standings_;
}

Status CommitStore::PutLease(const std::string& group, const ReadLease& lease, bool sync) {
  MutexLock lock(mu_);
  if (auto g = leases_.find(group); g != leases_.end()) {
    if (auto it = g->second.find(lease.reader); it != g->second.end() && it->second == lease) {
      return Status::Ok();
    }
  }
  std::string rec;
  EncodeLease(group, lease, rec);
  SHOAL_RETURN_IF_ERROR(Append(rec, sync));
  leases_[group][lease.reader] = lease;
  if (file_size_ > kCompactBytes) SHOAL_RETURN_IF_ERROR(Compact());
  return Status::Ok();
}

std::optional<ReadLease> CommitStore::Lease(const std::string& group,
                                            const std::string& reader) const {
  MutexLock lock(mu_);
  auto g = leases_.find(group);
  if (g == leases_.end()) return std::nullopt;
  auto it = g->second.find(reader);
  if (it == g->second.end()) return std::nullopt;
  return it->second;
}

bool CommitStore::HasLeases(const std::string& group) const {
  MutexLock lock(mu_);
  auto g = leases_.find(group);
  return g != leases_.end() && !g->second.empty();
}

bool CommitStore::HasRaised(const std::string& group) const {
  MutexLock lock(mu_);
  auto it = standings_.find(group);
  return it != standings_.end() && !it->second.raised().empty();
}

std::map<std::string, ReadLease> CommitStore::LeasesOf(const std::string& group) const {
  MutexLock lock(mu_);
  auto g = leases_.find(group);
  return g == leases_.end() ? std::map<std::string, ReadLease>() : g->second;
}

std::map<std::string, std::map<std::string, ReadLease>> CommitStore::AllLeases() const {
  MutexLock lock(mu_);
  return leases_;
}

Status CommitStore::Sync() {
  MutexLock lock(mu_);
  return SyncLocked();
}

}  // namespace shoal::storage
