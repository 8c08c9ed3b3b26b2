// CommitStore: the consumer-group commit positions of one partition, kept in an append-only file
// (`commits.log`: records of u32 length, u32 crc32, u16 group length, group, u64 offset) that is
// replayed on open and compacted into a fresh file when it grows. A torn last record after a crash
// is ignored. Commits are monotonic: a commit below the group's current position is a no-op.
// Deleting a group appends a tombstone (offset 2^64-1, never a commit: offsets stay below the
// partition's end); a later commit of the group starts it again.
//
// A failed fdatasync is final for the store (as for the log, see DiskLog): later commits fail.
//
// Thread-safe (one internal mutex). Owned by its Partition.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "shoal/common/ids.h"
#include "shoal/common/status.h"
#include "shoal/common/thread_annotations.h"

namespace shoal::storage {

class File;
class FileSystem;

class CommitStore {
 public:
  ~CommitStore();
  // `fs`: where the file lives; null: the real file system.
  static Result<std::unique_ptr<CommitStore>> Open(const std::string& dir,
                                                   FileSystem* fs = nullptr);

  // Records `offset` for `group` if it is above the current one. With sync, fdatasyncs the file
  // before returning. Returns whether the position moved.
  Result<bool> Commit(const std::string& group, Offset offset, bool sync);
  // Forgets `group` (durably with sync). Returns whether it had a position.
  Result<bool> Delete(const std::string& group, bool sync);
  // Brings every position above `end` down to it, durably (a rewrite of the file): after a crash
  // under fsync interval|never the log may end below what groups committed.
  Status ClampTo(Offset end);
  std::optional<Offset> Get(const std::string& group) const;
  std::map<std::string, Offset> All() const;
  Status Sync();

 private:
  CommitStore() = default;
  Status Compact() REQUIRES(mu_);
  Status Append(const std::string& rec, bool sync) REQUIRES(mu_);
  Status SyncLocked() REQUIRES(mu_);

  mutable Mutex mu_;
  FileSystem* fs_ = nullptr;
  std::string path_;
  std::unique_ptr<File> file_ GUARDED_BY(mu_);
  Status failure_ GUARDED_BY(mu_);  // a failed sync, final
  uint64_t file_size_ GUARDED_BY(mu_) = 0;
  bool dirty_ GUARDED_BY(mu_) = false;
  std::map<std::string, Offset> commits_ GUARDED_BY(mu_);
};

}  // namespace shoal::storage
