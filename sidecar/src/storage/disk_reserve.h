// DiskReserve: room kept back on the data volume, so that a full disk can recover (Redpanda's
// storage_min_free_bytes, MongoDB's and Elasticsearch's ballast files).
//
// A full volume must not stop what frees it: consumers commit, new groups register, seals,
// maps and retirement are written, and retention and retirement then free space. So produce,
// the only writer that fills the volume, is refused first (Status::NoSpace, HTTP 507, with the
// free space and the reserve in the reason), while everything else writes on inside the reserve.
//
// The reserve is held by a ballast file of its size (`<data dir>/reserve.ballast`), so that it
// holds against other writers of the volume too, and against a restart on a full volume:
//   - produce is admitted while the ballast is held and the volume has at least the reserve's
//     eighth free beside it (slack for the appends already admitted);
//   - a write that finds the volume full (ENOSPC, EDQUOT) through WithReserve's file system
//     releases the ballast and is tried once more: the reserve's bytes are now free for it;
//   - Tick() takes the ballast back once the volume has twice the reserve free, so that produce
//     resumes with room to spare rather than releasing it again at once.
// A released ballast means produce is refused until it is back.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "shoal/common/status.h"
#include "shoal/common/thread_annotations.h"
#include "storage/file_system.h"

namespace shoal::storage {

class DiskReserve {
 public:
  // Free bytes of the volume that holds `dir` for an unprivileged writer (statvfs f_bavail).
  using FreeBytesFn = std::function<Result<uint64_t>(const std::string& dir)>;
  static Result<uint64_t> StatvfsFree(const std::string& dir);

  // `reserve_bytes` 0: no reserve (produce is refused only by the volume itself).
  DiskReserve(std::string dir, uint64_t reserve_bytes, FreeBytesFn free_bytes = StatvfsFree);
  DiskReserve(const DiskReserve&) = delete;
  DiskReserve& operator=(const DiskReserve&) = delete;

  // Takes the ballast if the volume has room for it (an existing ballast file is kept).
  Status Start();
  // Whether `bytes` more may be appended by produce; NoSpace with the reason when not.
  Status AdmitProduce(uint64_t bytes);
  // The volume was found full: frees the ballast. Returns whether that freed anything (the
  // failed write is worth trying again).
  bool Release();
  // Takes the ballast back when the volume has twice the reserve free; refreshes free_bytes().
  void Tick();

  uint64_t reserve_bytes() const { return reserve_; }
  // The volume's free bytes at the last look (beside the ballast).
  uint64_t free_bytes() const { return free_.load(std::memory_order_relaxed); }
  // The bytes the ballast holds now (the reserve, or 0 once released).
  uint64_t ballast_bytes() const { return ballast_.load(std::memory_order_relaxed); }
  // How often the ballast was released.
  uint64_t releases() const { return releases_.load(std::memory_order_relaxed); }
  std::string ballast_path() const { return path_; }

 private:
  Status TakeLocked() REQUIRES(mu_);
  void Look();

  const std::string dir_;
  const std::string path_;
  const uint64_t reserve_;
  const FreeBytesFn free_fn_;
  Mutex mu_;  // taking and releasing the ballast
  std::atomic<uint64_t> free_{0};
  std::atomic<uint64_t> ballast_{0};
  std::atomic<uint64_t> releases_{0};
};

// A file system over `inner` whose writes that find the volume full release `reserve`'s ballast
// and are tried once more. Both must outlive it.
std::unique_ptr<FileSystem> WithReserve(FileSystem& inner, DiskReserve& reserve);

}  // namespace shoal::storage
