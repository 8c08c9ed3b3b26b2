// CommitStore: where each consumer group stands in one partition, and the batches handed out
// through hash ranges (read leases), kept in an append-only file (`commits.log`) that is replayed
// on open and compacted into a fresh file when it grows. A torn last record after a crash is
// ignored.
//
// A group's position is a RangeStanding over the partition's hash range (common/range_standing.h):
// a whole-partition commit raises every point, a range commit the points of its ranges. Both
// only raise: a commit below the group's current position is a no-op. Get() and All() give the
// lowest standing (the partition is consumed below it everywhere), what retirement, retention and
// the views use.
//
// Records: u32 length, u32 crc32, payload. A whole-partition commit's payload is u16 group length,
// group, u64 offset (the format of earlier sidecars); the others start with u16 0xFFFF and a kind
// byte: 1 a range commit (u16 glen, group, u64 lo, u64 hi, u64 offset), 2 a read lease (u16 glen,
// group, u16 reader length, reader, u64 last, u64 scanned_to, u8 complete, u32 n, n x (u64 lo,
// u64 hi)). Deleting a group appends a tombstone (offset 2^64-1, never a commit: offsets stay
// below the partition's end) that forgets its position and its leases; a later commit starts it
// again.
//
// A failed fdatasync is final for the store (as for the log, see DiskLog): later writes fail.
//
// Thread-safe (one internal mutex). Owned by its Partition.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/range_standing.h"
#include "shoal/common/status.h"
#include "shoal/common/thread_annotations.h"

namespace shoal::storage {

class File;
class FileSystem;

// A batch of one group's events handed out through hash ranges to the consumers of one pod (the
// reader): what a commit of that pod's consumers covers. The last one per (group, reader) is
// kept, so that a commit that arrives after a restart (of either side) still names its ranges.
struct ReadLease {
  std::string reader;
  std::vector<HashRange> ranges;  // normalized (NormalizeRanges)
  uint64_t last = 0;              // one past the last event handed out
  uint64_t scanned_to = 0;        // no event of `ranges` lies in [last, scanned_to)
  bool complete = false;          // committed through `last`
  bool operator==(const ReadLease&) const = default;
};

class CommitStore {
 public:
  ~CommitStore();
  // `fs`: where the file lives; null: the real file system. `domain`: the partition's hash range.
  static Result<std::unique_ptr<CommitStore>> Open(const std::string& dir, FileSystem* fs = nullptr,
                                                   HashRange domain = HashRange{});

  // Raises every point of `group` to `offset`. With sync, fdatasyncs the file before returning.
  // Returns whether the position moved.
  Result<bool> Commit(const std::string& group, Offset offset, bool sync);
  // Raises the points of `ranges` (within the domain) to `offset`.
  Result<bool> CommitRanges(const std::string& group, const std::vector<HashRange>& ranges,
                            Offset offset, bool sync);
  // Forgets `group` (durably with sync): its position and its leases. Returns whether it had a
  // position.
  Result<bool> Delete(const std::string& group, bool sync);
  // Brings every position above `end` down to it, durably (a rewrite of the file): after a crash
  // under fsync interval|never the log may end below what groups committed.
  Status ClampTo(Offset end);
  // The group's lowest standing over the domain; nullopt for a group without a commit.
  std::optional<Offset> Get(const std::string& group) const;
  std::map<std::string, Offset> All() const;
  // The group's standing per hash point; nullopt for a group without a commit.
  std::optional<RangeStanding> Standing(const std::string& group) const;
  std::map<std::string, RangeStanding> AllStandings() const;

  // Records the lease of `group` for `lease.reader`, replacing the one before.
  Status PutLease(const std::string& group, const ReadLease& lease, bool sync);
  std::optional<ReadLease> Lease(const std::string& group, const std::string& reader) const;
  // Cheap questions for the read path (no copy): whether `group` has leases, and whether some
  // part of its range stands above the rest.
  bool HasLeases(const std::string& group) const;
  bool HasRaised(const std::string& group) const;
  // The leases of `group`, by reader.
  std::map<std::string, ReadLease> LeasesOf(const std::string& group) const;
  // Every lease, by group and reader.
  std::map<std::string, std::map<std::string, ReadLease>> AllLeases() const;

  Status Sync();

  // Replication (docs/replication.md): a follower's copy mirrors its leader's store whole.
  // `version` moves with every change since the store was opened, and `incarnation` tells two
  // opens apart (versions start over at a restart), so (incarnation, version) names one state.
  struct State {
    uint64_t incarnation = 0;
    uint64_t version = 0;
    std::string records;  // the records Compact writes
  };
  State Snapshot() const;
  uint64_t version() const;
  uint64_t incarnation() const { return incarnation_; }
  // Replaces every position and lease with those of `records` (a leader's Snapshot), durably
  // (one atomic rewrite). Corruption, changing nothing, for records that do not parse whole.
  Status Mirror(std::string_view records);

 private:
  CommitStore() = default;
  std::string EncodeState() const REQUIRES(mu_);
  Status Compact() REQUIRES(mu_);
  Status Append(const std::string& rec, bool sync) REQUIRES(mu_);
  Status SyncLocked() REQUIRES(mu_);
  // Appends the record and compacts when the file has grown.
  Status Write(const std::string& rec, bool sync) REQUIRES(mu_);
  RangeStanding& StandingOf(const std::string& group) REQUIRES(mu_);

  mutable Mutex mu_;
  FileSystem* fs_ = nullptr;
  std::string path_;
  HashRange domain_;
  std::unique_ptr<File> file_ GUARDED_BY(mu_);
  Status failure_ GUARDED_BY(mu_);  // a failed sync, final
  uint64_t file_size_ GUARDED_BY(mu_) = 0;
  bool dirty_ GUARDED_BY(mu_) = false;
  std::map<std::string, RangeStanding> standings_ GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, ReadLease>> leases_ GUARDED_BY(mu_);
  uint64_t incarnation_ = 0;  // set at Open
  uint64_t version_ GUARDED_BY(mu_) = 0;
};

}  // namespace shoal::storage
