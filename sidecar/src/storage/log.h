// storage::Log: one partition's append-only log of records with dense offsets.
//
// A Log is safe for concurrent use: appends are serialized inside, reads may run beside appends
// and beside each other. Offsets [start_offset(), end_offset()) are readable; start_offset() moves
// up only through retention. Records are durable after Sync() returns (or per the fsync policy
// of the caller, see Partition). A Log is owned by its Partition; not copyable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::storage {

// What an append writes; views must live until Append returns.
struct AppendEntry {
  std::string_view key;
  std::string_view value;
  std::string_view producer;
  std::optional<uint64_t> seq;
  int64_t timestamp_ms = 0;
  bool raw = false;  // the value is opaque bytes, not JSON text (record::kRawValue)
};

// A record read back; views point into the ReadBatch that holds it.
struct RecordView {
  uint64_t offset = 0;
  int64_t timestamp_ms = 0;
  std::string_view key;
  std::string_view value;
  std::string_view producer;
  std::optional<uint64_t> seq;
  bool raw = false;
};

struct ReadBatch {
  std::vector<RecordView> records;
  std::vector<std::unique_ptr<char[]>> buffers;  // owns the bytes the views point into
  size_t bytes = 0;                              // encoded size of the records read
  // When set, the records read are also appended here as they are stored (a follower's fetch
  // copies them without encoding them again), and their CRCs are not computed here: the one who
  // takes them checks them (Log::AppendCopied).
  std::string* stored = nullptr;
};

class FileSystem;

struct LogOptions {
  std::string dir;                       // one directory per partition, created if missing
  FileSystem* fs = nullptr;              // where the files live; null: the real file system
  uint64_t segment_bytes = 64ull << 20;  // roll to a new segment file past this size
  uint32_t index_interval_bytes = 4096;  // one offset-index entry per this many log bytes
  // Called with the duration in seconds of every fdatasync of a segment (metrics).
  std::function<void(double)> fsync_observer;
};

struct RetentionPolicy {
  uint64_t max_bytes = 0;     // 0: no size limit
  int64_t max_age_ms = 0;     // 0: no age limit
  uint64_t floor_offset = 0;  // never remove a record at or above this offset (commits)
};

class Log {
 public:
  virtual ~Log() = default;

  // Appends the entries as consecutive records. Returns the offset of the first one. On error
  // nothing of the call is visible (the file is truncated back).
  virtual Result<uint64_t> Append(std::span<const AppendEntry> entries) = 0;

  // Appends records copied as stored from another replica's log (a follower's fetch): `bytes`
  // holds whole encoded records with consecutive offsets from `first`, which must be this log's
  // end (FailedPrecondition otherwise). Each record's length, CRC and offset are checked before
  // anything is written (Corruption, InvalidArgument); the bytes are written as they came. The
  // records as checked go to `records` when given (views into `bytes`), so that a caller that
  // needs them does not decode them again.
  virtual Result<uint64_t> AppendCopied(uint64_t first, std::string_view bytes,
                                        std::vector<RecordView>* records = nullptr) = 0;

  // Makes every record appended before the call durable (fdatasync). Thread-safe; concurrent
  // callers share one fdatasync where they can (group commit). Returns the durable end offset.
  // A failed fdatasync is final: that call and every later Append and Sync fail.
  virtual Result<uint64_t> Sync() = 0;

  // Removes every record at `offset` and after, durably before it returns (a follower's tail
  // that left its leader's log; invariant 11). At or past the end: nothing to do. Below
  // start_offset(): InvalidArgument.
  virtual Status TruncateTo(uint64_t offset) = 0;

  // Removes every record and starts the log again, empty, at `offset`, durably before it
  // returns: a follower whose end fell below its leader's oldest record copies from there on.
  // Below end_offset(): InvalidArgument (only a log that holds nothing at or past `offset`).
  // A crash part way leaves a suffix of the old segments, or an empty log at 0.
  virtual Status StartAfresh(uint64_t offset) = 0;

  // Reads records with offsets in [from, limit), at most max_records and about max_bytes (at
  // least one record is returned if any is in range). `from` below start_offset() is NotFound.
  virtual Status Read(uint64_t from, uint64_t limit, size_t max_records, size_t max_bytes,
                      ReadBatch* out) const = 0;

  virtual uint64_t start_offset() const = 0;
  virtual uint64_t end_offset() const = 0;
  virtual uint64_t durable_offset() const = 0;
  virtual uint64_t size_bytes() const = 0;
  virtual size_t segment_count() const = 0;

  // Removes whole closed segments per the policy; returns how many were removed.
  virtual Result<size_t> ApplyRetention(const RetentionPolicy& policy, int64_t now_ms) = 0;

  // Marks a clean shutdown: syncs, writes the active segment's index. The log stays usable.
  virtual Status Close() = 0;
};

// Opens (creating or recovering) the log in options.dir. Recovery scans the last segment, checks
// every record's length, CRC and offset, and truncates a torn tail left by a crash.
Result<std::unique_ptr<Log>> OpenDiskLog(const LogOptions& options);

}  // namespace shoal::storage
