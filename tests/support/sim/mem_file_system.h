// MemFileSystem: an in-memory storage::FileSystem that knows what is durable, for the protocol
// simulation and for failure-path tests (LevelDB's FaultInjectionTestEnv, kept in memory so that
// a hundred thousand simulated runs cost no disk).
//
// Every file has what the process sees and what a power cut would leave: File::Sync makes a
// file's contents durable, SyncDir makes the names in a directory (created or removed files)
// durable, WriteFileAtomic is durable when it returns. Crash(prefix) is the power cut for the
// files under `prefix` (one pod's data directory): contents go back to the last sync (with a
// torn write, a random prefix of the unsynced tail survives), files whose names were never made
// durable vanish, and removals that were not made durable are undone. Directories are durable
// as soon as they are created. FailSyncs makes syncs fail with an I/O error, as a disk does;
// FailReads the same for reads (a bad sector under one partition's segment).
//
// Thread-safe (one mutex). Owned by the test; outlives every Topic that uses it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include "shoal/common/clock.h"
#include "storage/file_system.h"

namespace shoal::testing {

class MemFileSystem final : public storage::FileSystem {
 public:
  // `clock` (may be null) gives files their modification times.
  explicit MemFileSystem(const Clock* clock = nullptr) : clock_(clock) {}

  Result<std::unique_ptr<storage::File>> Open(const std::string& path, bool truncate) override;
  Status ReadWholeFile(const std::string& path, std::string* out) override;
  Status WriteFileAtomic(const std::string& path, const std::string& contents) override;
  Status Remove(const std::string& path) override;
  Status RemoveAll(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Result<std::vector<std::string>> List(const std::string& dir) override;
  Status SyncDir(const std::string& dir) override;

  // The power cut under `prefix`; with `torn`, a random prefix of each unsynced tail survives.
  void Crash(const std::string& prefix, std::mt19937_64* torn = nullptr);
  // The kernel writing a file's dirty pages back on its own (no sync asked): its contents become
  // durable, in whatever order relative to other files.
  void Writeback(const std::string& path);
  // The next `count` syncs of files whose path contains `pattern` fail (EIO).
  void FailSyncs(const std::string& pattern, int count);
  // Reads of files whose path contains `pattern` fail (EIO) until FailReads("", 0).
  void FailReads(const std::string& pattern);
  // Bytes of file contents held (what the process sees), for memory bounds in tests.
  uint64_t bytes() const;

  struct Node {
    std::string data;     // what the process sees
    std::string durable;  // what a power cut leaves
    bool exists = true;
    bool durable_exists = false;
    int64_t mtime_ms = 0;
  };

 private:
  friend class MemFile;
  static std::string Parent(const std::string& path);
  int64_t Now() const { return clock_ ? clock_->NowMs() : 0; }
  Status SyncNode(const std::string& path, Node& node);  // requires mu_

  const Clock* clock_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Node>> files_;  // guarded by mu_
  std::set<std::string> dirs_;                          // guarded by mu_
  std::string fail_pattern_;                            // guarded by mu_
  int fail_count_ = 0;                                  // guarded by mu_
  std::string fail_reads_;                              // guarded by mu_
};

}  // namespace shoal::testing
