// FileSystem: every file operation the storage layer and the broker make, behind an interface, so
// that a test can put a fault-injecting, in-memory one beneath the real code (LevelDB's Env and
// FaultInjectionTestEnv): tests/support/sim/mem_file_system.h drops what was not synced when it
// "loses power", and fails syncs on demand. PosixFileSystem() is the real one.
//
// Implementations are thread-safe; a File is used by one owner at a time (its DiskLog segment,
// its CommitStore) under that owner's lock. The FileSystem outlives every File it opened and
// every Topic, Partition and Log that uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::storage {

class File {
 public:
  virtual ~File() = default;
  // Reads exactly `len` bytes at `pos` (a short file is an IoError).
  virtual Status ReadAt(uint64_t pos, char* buf, size_t len) const = 0;
  virtual Status WriteAt(uint64_t pos, const char* buf, size_t len) = 0;
  virtual Status Truncate(uint64_t size) = 0;
  // Makes everything written so far durable (fdatasync).
  virtual Status Sync() = 0;
  virtual Result<uint64_t> Size() const = 0;
  // Last modification, in ms since the epoch (retention by age).
  virtual Result<int64_t> ModifiedMs() const = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Opens `path` for reading and writing, creating it when absent; `truncate` empties it. A new
  // file's name is durable only after SyncDir of its directory.
  virtual Result<std::unique_ptr<File>> Open(const std::string& path, bool truncate) = 0;
  // NotFound when `path` does not exist.
  virtual Status ReadWholeFile(const std::string& path, std::string* out) = 0;
  // All or nothing after a crash: a temporary file, synced, renamed over `path`, the directory
  // synced; durable when it returns.
  virtual Status WriteFileAtomic(const std::string& path, const std::string& contents) = 0;
  // Removes a file (absent is fine); durable after SyncDir of its directory.
  virtual Status Remove(const std::string& path) = 0;
  // Removes a directory and everything in it (absent is fine).
  virtual Status RemoveAll(const std::string& path) = 0;
  virtual Status CreateDirs(const std::string& path) = 0;
  // The names in a directory; NotFound when it does not exist.
  virtual Result<std::vector<std::string>> List(const std::string& dir) = 0;
  // Makes the directory's entries (created, renamed, removed files) durable.
  virtual Status SyncDir(const std::string& dir) = 0;
};

// The process's real file system (POSIX calls). A singleton; never destroyed.
FileSystem& PosixFileSystem();

}  // namespace shoal::storage
