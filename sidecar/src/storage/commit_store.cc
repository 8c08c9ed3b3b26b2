#include "storage/commit_store.h"

#include <cstring>

#include "shoal/common/hash.h"
#include "storage/file_system.h"

namespace shoal::storage {

namespace {
constexpr uint64_t kCompactBytes = 1 << 20;
constexpr uint64_t kTombstone = UINT64_MAX;  // the group was deleted

void EncodeCommit(const std::string& group, uint64_t offset, std::string& out) {
  const uint32_t len = static_cast<uint32_t>(2 + group.size() + 8);
  std::string payload;
  const uint16_t glen = static_cast<uint16_t>(group.size());
  payload.append(reinterpret_cast<const char*>(&glen), 2);
  payload += group;
  payload.append(reinterpret_cast<const char*>(&offset), 8);
  const uint32_t crc = Crc32(payload.data(), payload.size());
  out.append(reinterpret_cast<const char*>(&len), 4);
  out.append(reinterpret_cast<const char*>(&crc), 4);
  out += payload;
}
}  // namespace

CommitStore::~CommitStore() = default;

Result<std::unique_ptr<CommitStore>> CommitStore::Open(const std::string& dir, FileSystem* fs) {
  std::unique_ptr<CommitStore> s(new CommitStore());
  s->fs_ = fs ? fs : &PosixFileSystem();
  s->path_ = dir + "/commits.log";
  std::string data;
  Status st = s->fs_->ReadWholeFile(s->path_, &data);
  if (!st.ok() && st.code() != Status::Code::kNotFound) return st;
  MutexLock lock(s->mu_);  // not shared yet; the lock is what the analysis checks
  size_t pos = 0;
  while (pos + 8 <= data.size()) {
    uint32_t len = 0, crc = 0;
    std::memcpy(&len, data.data() + pos, 4);
    std::memcpy(&crc, data.data() + pos + 4, 4);
    if (len < 10 || pos + 8 + len > data.size()) break;
    const char* p = data.data() + pos + 8;
    if (Crc32(p, len) != crc) break;
    uint16_t glen = 0;
    std::memcpy(&glen, p, 2);
    if (size_t{glen} + 10 != len) break;
    uint64_t offset = 0;
    std::memcpy(&offset, p + 2 + glen, 8);
    std::string group(p + 2, glen);
    if (offset == kTombstone) {
      s->commits_.erase(group);
    } else {
      auto& cur = s->commits_[group];
      cur = std::max(cur, Offset(offset));
    }
    pos += 8 + len;
  }
  // Rewrite compactly: drops a torn tail and old entries in one step.
  SHOAL_RETURN_IF_ERROR(s->Compact());
  return s;
}

Status CommitStore::Compact() {
  std::string out;
  for (const auto& [g, o] : commits_) EncodeCommit(g, o.value(), out);
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
  if (sync) SHOAL_RETURN_IF_ERROR(SyncLocked());
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
  auto it = commits_.find(group);
  if (it != commits_.end() && it->second >= offset) return false;
  std::string rec;
  EncodeCommit(group, offset.value(), rec);
  SHOAL_RETURN_IF_ERROR(Append(rec, sync));
  commits_[group] = offset;
  if (file_size_ > kCompactBytes) SHOAL_RETURN_IF_ERROR(Compact());
  return true;
}

Result<bool> CommitStore::Delete(const std::string& group, bool sync) {
  MutexLock lock(mu_);
  if (!commits_.count(group)) return false;
  std::string rec;
  EncodeCommit(group, kTombstone, rec);
  SHOAL_RETURN_IF_ERROR(Append(rec, sync));
  commits_.erase(group);
  if (file_size_ > kCompactBytes) SHOAL_RETURN_IF_ERROR(Compact());
  return true;
}

Status CommitStore::ClampTo(Offset end) {
  MutexLock lock(mu_);
  bool changed = false;
  for (auto& [group, offset] : commits_) {
    if (offset > end) {
      offset = end;
      changed = true;
    }
  }
  return changed ? Compact() : Status::Ok();
}

std::optional<Offset> CommitStore::Get(const std::string& group) const {
  MutexLock lock(mu_);
  auto it = commits_.find(group);
  if (it == commits_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, Offset> CommitStore::All() const {
  MutexLock lock(mu_);
  return commits_;
}

Status CommitStore::Sync() {
  MutexLock lock(mu_);
  return SyncLocked();
}

}  // namespace shoal::storage
