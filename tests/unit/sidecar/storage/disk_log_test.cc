// Tests of DiskLog (sidecar/src/storage/disk_log.cc) through the Log interface: segments, the
// sparse offset index, recovery of a torn tail, index rebuild, retention, Sync and concurrency.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/log.h"
#include "storage/record.h"
#include "support/temp_dir.h"

namespace shoal::storage {
namespace {

namespace fs = std::filesystem;

using ::shoal::testing::TempDir;

// The owned contents of one record, deterministic per offset.
struct Rec {
  std::string key, value, producer;
  std::optional<uint64_t> seq;
  int64_t ts = 0;
  bool operator==(const Rec&) const = default;
};

Rec Expected(uint64_t i) {
  Rec r;
  r.key = "key-" + std::to_string(i);
  r.value = std::string(i * 7 % 61, static_cast<char>('a' + i % 26));
  if (i % 3 != 0) r.producer = "p" + std::to_string(i % 5);
  if (i % 2 == 0) r.seq = i * 10;
  r.ts = 1'700'000'000'000 + static_cast<int64_t>(i);
  return r;
}

AppendEntry EntryOf(const Rec& r) { return {r.key, r.value, r.producer, r.seq, r.ts}; }

Rec Own(const RecordView& v) {
  return {std::string(v.key), std::string(v.value), std::string(v.producer), v.seq, v.timestamp_ms};
}

// Appends Expected(first..first+n) as one batch; checks the returned offset.
void AppendRange(Log& log, uint64_t first, uint64_t n) {
  std::vector<Rec> recs;
  std::vector<AppendEntry> entries;
  for (uint64_t i = first; i < first + n; ++i) recs.push_back(Expected(i));
  for (const auto& r : recs) entries.push_back(EntryOf(r));
  auto r = log.Append(entries);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(*r, first);
}

// Appends Expected(0..n) in batches of 1..7 records.
void AppendMany(Log& log, uint64_t n) {
  uint64_t next = log.end_offset();
  uint64_t b = 0;
  while (next < n) {
    const uint64_t k = std::min<uint64_t>(1 + b++ % 7, n - next);
    AppendRange(log, next, k);
    next += k;
  }
}

// Reads everything in [from, limit) with no other limits; checks every record's contents.
void ExpectReads(const Log& log, uint64_t from, uint64_t limit) {
  ReadBatch batch;
  Status st = log.Read(from, limit, SIZE_MAX, SIZE_MAX, &batch);
  ASSERT_TRUE(st.ok()) << "from " << from << ": " << st.ToString();
  const uint64_t end = std::min(limit, log.end_offset());
  ASSERT_EQ(batch.records.size(), end > from ? end - from : 0) << "from " << from;
  for (size_t i = 0; i < batch.records.size(); ++i) {
    ASSERT_EQ(batch.records[i].offset, from + i);
    ASSERT_EQ(Own(batch.records[i]), Expected(from + i)) << "offset " << from + i;
  }
}

void ExpectEveryOffsetReads(const Log& log) {
  for (uint64_t from = log.start_offset(); from <= log.end_offset(); ++from) {
    ExpectReads(log, from, UINT64_MAX);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

std::unique_ptr<Log> MustOpen(const LogOptions& o) {
  auto r = OpenDiskLog(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::vector<std::string> Files(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ext) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t FileSize(const std::string& path) { return fs::file_size(path); }

uint64_t BaseOf(const std::string& path) { return std::stoull(fs::path(path).stem().string()); }

void AppendBytes(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(::close(fd), 0);
}

void Truncate(const std::string& path, uint64_t size) {
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0) << std::strerror(errno);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(::close(fd), 0);
}

std::string ReadBytes(const std::string& path) {
  std::string out(FileSize(path), '\0');
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  ::close(fd);
  return out;
}

void SetMtimeMs(const std::string& path, int64_t ms) {
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = ms / 1000;
  ts[0].tv_nsec = ts[1].tv_nsec = (ms % 1000) * 1000000;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, 0), 0) << std::strerror(errno);
}

class DiskLogTest : public ::testing::Test {
 protected:
  LogOptions Options() const {
    LogOptions o;
    o.dir = dir_.path() + "/p0";
    o.segment_bytes = 1024;
    o.index_interval_bytes = 128;
    return o;
  }
  TempDir dir_;
};

TEST_F(DiskLogTest, EmptyLog) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->start_offset(), 0u);
  EXPECT_EQ(log->end_offset(), 0u);
  EXPECT_EQ(log->size_bytes(), 0u);
  EXPECT_EQ(log->segment_count(), 1u);
  ReadBatch batch;
  EXPECT_TRUE(log->Read(0, UINT64_MAX, 10, 1000, &batch).ok());
  EXPECT_TRUE(batch.records.empty());
  auto empty = log->Append({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, 0u);
  auto synced = log->Sync();
  ASSERT_TRUE(synced.ok());
  EXPECT_EQ(*synced, 0u);
}

TEST_F(DiskLogTest, AppendReadAcrossManySegmentsAndIndexEntries) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  constexpr uint64_t kN = 600;
  AppendMany(*log, kN);
  EXPECT_EQ(log->start_offset(), 0u);
  EXPECT_EQ(log->end_offset(), kN);
  EXPECT_GT(log->segment_count(), 20u);
  EXPECT_EQ(Files(Options().dir, ".log").size(), log->segment_count());
  uint64_t total = 0;
  for (uint64_t i = 0; i < kN; ++i) total += record::EncodedSize(EntryOf(Expected(i)));
  EXPECT_EQ(log->size_bytes(), total);
  ExpectEveryOffsetReads(*log);
  // Bounded ranges, including ones that start and end inside segments.
  for (uint64_t from : {0, 1, 37, 250, 599}) {
    for (uint64_t limit : {from, from + 1, from + 13, from + 200, kN + 50}) {
      ExpectReads(*log, from, limit);
    }
  }
}

TEST_F(DiskLogTest, EveryRecordIndexedAndOneSegmentForAll) {
  LogOptions o = Options();
  o.index_interval_bytes = 1;  // an index entry per record
  o.segment_bytes = 1ull << 30;
  auto log = MustOpen(o);
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 300);
  EXPECT_EQ(log->segment_count(), 1u);
  ExpectEveryOffsetReads(*log);
}

TEST_F(DiskLogTest, ReadLimitsAreRespected) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 200);
  for (uint64_t from : {0, 5, 100, 199}) {
    for (size_t max_records : {1, 2, 17}) {
      ReadBatch batch;
      ASSERT_TRUE(log->Read(from, UINT64_MAX, max_records, SIZE_MAX, &batch).ok());
      EXPECT_EQ(batch.records.size(), std::min<uint64_t>(max_records, 200 - from));
      for (size_t i = 0; i < batch.records.size(); ++i) {
        EXPECT_EQ(Own(batch.records[i]), Expected(from + i));
      }
    }
    for (size_t max_bytes : {0, 1, 100, 1000, 5000}) {
      ReadBatch batch;
      ASSERT_TRUE(log->Read(from, UINT64_MAX, SIZE_MAX, max_bytes, &batch).ok());
      ASSERT_GE(batch.records.size(), 1u) << "at least one record, whatever max_bytes";
      // About max_bytes: everything but the last record fits below the limit.
      size_t before_last = 0;
      for (size_t i = 0; i < batch.records.size(); ++i) {
        EXPECT_EQ(batch.records[i].offset, from + i);
        EXPECT_EQ(Own(batch.records[i]), Expected(from + i));
        const size_t sz = record::EncodedSize(EntryOf(Expected(from + i)));
        if (i + 1 < batch.records.size()) before_last += sz;
      }
      EXPECT_EQ(batch.bytes, before_last + record::EncodedSize(
                                               EntryOf(Expected(from + batch.records.size() - 1))));
      if (batch.records.size() > 1) {
        EXPECT_LT(before_last, max_bytes);
      }
      // It stopped because of the limit, not early.
      if (from + batch.records.size() < 200) {
        EXPECT_GE(batch.bytes, max_bytes);
      }
    }
  }
}

TEST_F(DiskLogTest, RecordLargerThanReadChunk) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  const std::string big(300 << 10, 'x');
  const std::string big2(100 << 10, 'y');
  std::vector<AppendEntry> entries = {
      {"a", "small", "", std::nullopt, 1}, {"b", big, "p", 1, 2}, {"c", big2, "p", 2, 3}};
  ASSERT_TRUE(log->Append(entries).ok());
  for (uint64_t from = 0; from < 3; ++from) {
    ReadBatch batch;
    ASSERT_TRUE(log->Read(from, UINT64_MAX, SIZE_MAX, 1, &batch).ok());
    ASSERT_EQ(batch.records.size(), 1u);
    EXPECT_EQ(batch.records[0].value, entries[from].value);
    ReadBatch all;
    ASSERT_TRUE(log->Read(from, UINT64_MAX, SIZE_MAX, SIZE_MAX, &all).ok());
    ASSERT_EQ(all.records.size(), 3 - from);
    for (size_t i = 0; i < all.records.size(); ++i) {
      EXPECT_EQ(all.records[i].key, entries[from + i].key);
      EXPECT_EQ(all.records[i].value, entries[from + i].value);
    }
  }
}

TEST_F(DiskLogTest, RecordTheFormatCannotHoldIsRefusedAndNothingWritten) {
  // key_len and producer_len are u16 and a payload is at most kMaxPayload: a record past those
  // would be written but never read back, and recovery would cut it and everything after it.
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 5);
  const uint64_t size = log->size_bytes();
  const std::string long_key(70000, 'k');
  const std::string long_producer(65536, 'p');
  // With its 1-byte key, one byte over kMaxPayload.
  const std::string huge_value(record::kMaxPayload - record::kFixedPayload, 'v');
  const std::vector<std::vector<AppendEntry>> bad = {
      {{long_key, "v", "", std::nullopt, 0}},
      {{"k", "v", long_producer, 1, 0}},
      {{"k", "v", "", std::nullopt, 0}, {"k", huge_value, "", std::nullopt, 0}},
  };
  for (const auto& entries : bad) {
    auto r = log->Append(entries);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kTooLarge) << r.status().ToString();
    EXPECT_EQ(log->end_offset(), 5u);
    EXPECT_EQ(log->size_bytes(), size);
  }
  // The largest record the format holds is fine.
  const std::string max_key(65535, 'k');
  const std::string max_value(record::kMaxPayload - record::kFixedPayload - max_key.size(), 'v');
  const AppendEntry biggest[] = {{max_key, max_value, "", std::nullopt, 0}};
  auto r = log->Append(biggest);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  AppendRange(*log, 6, 2);
  ReadBatch batch;
  ASSERT_TRUE(log->Read(5, UINT64_MAX, SIZE_MAX, 1, &batch).ok());
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].key.size(), max_key.size());
  EXPECT_EQ(batch.records[0].value.size(), max_value.size());
  log.reset();
  log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->end_offset(), 8u);
  ExpectReads(*log, 6, UINT64_MAX);
}

TEST_F(DiskLogTest, ReadBelowStartIsNotFound) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 300);
  RetentionPolicy policy;
  policy.max_bytes = 1;
  policy.floor_offset = 150;
  auto removed = log->ApplyRetention(policy, 0);
  ASSERT_TRUE(removed.ok());
  ASSERT_GT(*removed, 0u);
  const uint64_t start = log->start_offset();
  ASSERT_GT(start, 0u);
  for (uint64_t from : {uint64_t{0}, start - 1}) {
    ReadBatch batch;
    Status st = log->Read(from, UINT64_MAX, SIZE_MAX, SIZE_MAX, &batch);
    EXPECT_EQ(st.code(), Status::Code::kNotFound) << from;
    EXPECT_TRUE(batch.records.empty());
  }
  ExpectReads(*log, start, UINT64_MAX);
  // At or past the end: nothing, and no error.
  ReadBatch batch;
  EXPECT_TRUE(log->Read(300, UINT64_MAX, SIZE_MAX, SIZE_MAX, &batch).ok());
  EXPECT_TRUE(log->Read(1000, UINT64_MAX, SIZE_MAX, SIZE_MAX, &batch).ok());
  EXPECT_TRUE(batch.records.empty());
}

TEST_F(DiskLogTest, ReopenAfterCleanCloseKeepsEverything) {
  size_t segments = 0;
  uint64_t size = 0;
  {
    auto log = MustOpen(Options());
    ASSERT_NE(log, nullptr);
    AppendMany(*log, 400);
    ASSERT_TRUE(log->Close().ok());
    EXPECT_EQ(log->durable_offset(), 400u);
    segments = log->segment_count();
    size = log->size_bytes();
  }
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->start_offset(), 0u);
  EXPECT_EQ(log->end_offset(), 400u);
  EXPECT_EQ(log->durable_offset(), 400u);
  EXPECT_EQ(log->segment_count(), segments);
  EXPECT_EQ(log->size_bytes(), size);
  ExpectEveryOffsetReads(*log);
  AppendMany(*log, 450);
  EXPECT_EQ(log->end_offset(), 450u);
  ExpectEveryOffsetReads(*log);
}

TEST_F(DiskLogTest, ReopenWithoutCloseKeepsWrittenRecords) {
  {
    auto log = MustOpen(Options());
    ASSERT_NE(log, nullptr);
    AppendMany(*log, 123);
  }
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->end_offset(), 123u);
  ExpectEveryOffsetReads(*log);
}

// How the tail of the last segment is damaged before reopening.
enum class Tear { kPartialRecord, kGarbage, kZeros, kWrongOffsetRecord, kTruncateMidRecord };

class TornTailTest : public DiskLogTest, public ::testing::WithParamInterface<Tear> {};

TEST_P(TornTailTest, RecoveryEndsAtLastWholeRecord) {
  constexpr uint64_t kN = 250;
  std::string last_path;
  uint64_t whole_size = 0;  // size of the last segment's whole records we expect to keep
  uint64_t expect_end = kN;
  {
    auto log = MustOpen(Options());
    ASSERT_NE(log, nullptr);
    AppendMany(*log, kN);
    ASSERT_TRUE(log->Sync().ok());
  }
  const auto segs = Files(Options().dir, ".log");
  ASSERT_GT(segs.size(), 3u);
  last_path = segs.back();
  whole_size = FileSize(last_path);
  std::mt19937_64 rng(static_cast<uint64_t>(GetParam()) + 1);
  switch (GetParam()) {
    case Tear::kPartialRecord: {
      std::string rec;
      const Rec r = Expected(kN);
      record::Encode(EntryOf(r), kN, rec);
      AppendBytes(last_path, rec.substr(0, rec.size() / 2));
      break;
    }
    case Tear::kGarbage: {
      std::string junk(777, '\0');
      for (auto& c : junk) c = static_cast<char>(rng());
      AppendBytes(last_path, junk);
      break;
    }
    case Tear::kZeros:
      AppendBytes(last_path, std::string(4096, '\0'));
      break;
    case Tear::kWrongOffsetRecord: {
      // A whole, checksummed record whose offset does not follow: not part of this log.
      std::string rec;
      record::Encode(EntryOf(Expected(kN)), kN + 5, rec);
      AppendBytes(last_path, rec);
      break;
    }
    case Tear::kTruncateMidRecord: {
      const uint64_t last_size = record::EncodedSize(EntryOf(Expected(kN - 1)));
      ASSERT_GT(whole_size, last_size);
      Truncate(last_path, whole_size - last_size / 2);
      whole_size -= last_size;
      expect_end = kN - 1;
      break;
    }
  }
  {
    auto log = MustOpen(Options());
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(log->end_offset(), expect_end);
    EXPECT_EQ(log->durable_offset(), expect_end);
    EXPECT_EQ(FileSize(last_path), whole_size) << "the torn tail is cut off the file";
    ExpectEveryOffsetReads(*log);
    // New appends continue the dense offsets right after the last whole record.
    AppendMany(*log, expect_end + 40);
    EXPECT_EQ(log->end_offset(), expect_end + 40);
    ExpectEveryOffsetReads(*log);
  }
  // And that survives one more reopen.
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->end_offset(), expect_end + 40);
  ExpectEveryOffsetReads(*log);
}

INSTANTIATE_TEST_SUITE_P(Tears, TornTailTest,
                         ::testing::Values(Tear::kPartialRecord, Tear::kGarbage, Tear::kZeros,
                                           Tear::kWrongOffsetRecord, Tear::kTruncateMidRecord),
                         [](const ::testing::TestParamInfo<Tear>& info) {
                           switch (info.param) {
                             case Tear::kPartialRecord:
                               return std::string("PartialRecord");
                             case Tear::kGarbage:
                               return std::string("Garbage");
                             case Tear::kZeros:
                               return std::string("Zeros");
                             case Tear::kWrongOffsetRecord:
                               return std::string("WrongOffset");
                             case Tear::kTruncateMidRecord:
                               return std::string("TruncateMid");
                           }
                           return std::string("Unknown");
                         });

TEST_F(DiskLogTest, TornTailOfAFreshlyRolledSegment) {
  // The active segment holds nothing whole: recovery leaves it empty at its base.
  {
    auto log = MustOpen(Options());
    ASSERT_NE(log, nullptr);
    AppendMany(*log, 200);
  }
  const auto segs = Files(Options().dir, ".log");
  const std::string last = segs.back();
  const uint64_t base = BaseOf(last);
  Truncate(last, 0);
  AppendBytes(last, std::string("\x30\0\0\0garbage", 11));
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->end_offset(), base);
  EXPECT_EQ(FileSize(last), 0u);
  ExpectEveryOffsetReads(*log);
  AppendMany(*log, base + 10);
  ExpectEveryOffsetReads(*log);
}

enum class IndexDamage {
  kMissing,
  kEmpty,
  kOddSize,
  kGarbage,
  kNotMonotonic,
  kPointsMidRecord,
  kPointsPastEnd,
  kWrongRelOffsetUp,
  kWrongRelOffsetDown,
};

class IndexRebuildTest : public DiskLogTest, public ::testing::WithParamInterface<IndexDamage> {};

TEST_P(IndexRebuildTest, DamagedIndexOfClosedSegmentIsRebuilt) {
  {
    auto log = MustOpen(Options());
    ASSERT_NE(log, nullptr);
    AppendMany(*log, 300);
    ASSERT_TRUE(log->Close().ok());
  }
  const auto indexes = Files(Options().dir, ".index");
  ASSERT_GT(indexes.size(), 3u);
  // Damage the index of a middle segment and of the first one. Entries are (u32 relative offset,
  // u32 position) pairs from the file's start; entry 1 is the one damaged.
  std::map<std::string, std::string> originals;
  for (const std::string& path : {indexes[indexes.size() / 2], indexes.front()}) {
    std::string idx = ReadBytes(path);
    originals[path] = idx;
    ASSERT_GE(idx.size(), 24u) << "want at least three entries";
    uint32_t v = 0;
    switch (GetParam()) {
      case IndexDamage::kMissing:
        ASSERT_EQ(::unlink(path.c_str()), 0);
        continue;
      case IndexDamage::kEmpty:
        idx.clear();
        break;
      case IndexDamage::kOddSize:
        idx.resize(idx.size() - 3);
        break;
      case IndexDamage::kGarbage: {
        std::mt19937 rng(7);
        for (auto& c : idx) c = static_cast<char>(rng());
        break;
      }
      case IndexDamage::kNotMonotonic:
        std::swap_ranges(idx.begin(), idx.begin() + 8, idx.begin() + 8);
        break;
      case IndexDamage::kPointsMidRecord:  // entry 1's position moved by one byte
        std::memcpy(&v, idx.data() + 12, 4);
        ++v;
        std::memcpy(idx.data() + 12, &v, 4);
        break;
      case IndexDamage::kPointsPastEnd:
        v = 1u << 30;
        std::memcpy(idx.data() + 12, &v, 4);
        break;
      case IndexDamage::kWrongRelOffsetUp:  // entry 1 claims a later record than it points at
        std::memcpy(&v, idx.data() + 8, 4);
        ++v;
        std::memcpy(idx.data() + 8, &v, 4);
        break;
      case IndexDamage::kWrongRelOffsetDown:  // entry 1 claims an earlier record
        std::memcpy(&v, idx.data() + 8, 4);
        ASSERT_GT(v, 1u);
        --v;
        std::memcpy(idx.data() + 8, &v, 4);
        break;
    }
    WriteBytes(path, idx);
  }
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->end_offset(), 300u);
  ExpectEveryOffsetReads(*log);
  // The rebuilt index is written back, the same as the one the log wrote when it rolled.
  for (const auto& [path, bytes] : originals) EXPECT_EQ(ReadBytes(path), bytes) << path;
}

INSTANTIATE_TEST_SUITE_P(
    Damages, IndexRebuildTest,
    ::testing::Values(IndexDamage::kMissing, IndexDamage::kEmpty, IndexDamage::kOddSize,
                      IndexDamage::kGarbage, IndexDamage::kNotMonotonic,
                      IndexDamage::kPointsMidRecord, IndexDamage::kPointsPastEnd,
                      IndexDamage::kWrongRelOffsetUp, IndexDamage::kWrongRelOffsetDown),
    [](const ::testing::TestParamInfo<IndexDamage>& info) {
      switch (info.param) {
        case IndexDamage::kMissing:
          return std::string("Missing");
        case IndexDamage::kEmpty:
          return std::string("Empty");
        case IndexDamage::kOddSize:
          return std::string("OddSize");
        case IndexDamage::kGarbage:
          return std::string("Garbage");
        case IndexDamage::kNotMonotonic:
          return std::string("NotMonotonic");
        case IndexDamage::kPointsMidRecord:
          return std::string("MidRecord");
        case IndexDamage::kPointsPastEnd:
          return std::string("PastEnd");
        case IndexDamage::kWrongRelOffsetUp:
          return std::string("RelOffsetUp");
        case IndexDamage::kWrongRelOffsetDown:
          return std::string("RelOffsetDown");
      }
      return std::string("Unknown");
    });

// The bases of the log's segments, from the directory.
std::vector<uint64_t> Bases(const std::string& dir) {
  std::vector<uint64_t> out;
  for (const auto& f : Files(dir, ".log")) out.push_back(BaseOf(f));
  return out;
}

TEST_F(DiskLogTest, RetentionBySizeRemovesWholeClosedSegmentsOnly) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 500);
  const auto bases = Bases(Options().dir);
  const size_t before = log->segment_count();
  ASSERT_EQ(bases.size(), before);
  const uint64_t total = log->size_bytes();
  std::vector<uint64_t> sizes;
  for (const auto& f : Files(Options().dir, ".log")) sizes.push_back(FileSize(f));

  // No limits, or a floor at 0: nothing goes.
  RetentionPolicy none;
  none.floor_offset = 500;
  EXPECT_EQ(*log->ApplyRetention(none, 0), 0u);
  RetentionPolicy floor0;
  floor0.max_bytes = 1;
  EXPECT_EQ(*log->ApplyRetention(floor0, 0), 0u);
  EXPECT_EQ(log->segment_count(), before);

  RetentionPolicy half;
  half.max_bytes = total / 2;
  half.floor_offset = 500;
  auto removed = log->ApplyRetention(half, 0);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  ASSERT_GT(*removed, 0u);
  EXPECT_EQ(log->segment_count(), before - *removed);
  EXPECT_LE(log->size_bytes(), total / 2);
  EXPECT_EQ(log->start_offset(), bases[*removed]);
  EXPECT_EQ(Bases(Options().dir), std::vector<uint64_t>(bases.begin() + *removed, bases.end()));
  for (const auto& idx : Files(Options().dir, ".index")) {
    EXPECT_GE(BaseOf(idx), bases[*removed]) << "index of a removed segment left behind";
  }
  // The last removal was needed: without it the log was still over the limit.
  EXPECT_GT(log->size_bytes() + sizes[*removed - 1], total / 2);
  ReadBatch below;
  EXPECT_EQ(log->Read(bases[*removed - 1], UINT64_MAX, SIZE_MAX, SIZE_MAX, &below).code(),
            Status::Code::kNotFound);
  ExpectEveryOffsetReads(*log);
  EXPECT_EQ(log->end_offset(), 500u);
}

TEST_F(DiskLogTest, RetentionNeverPassesFloorNorActiveSegment) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 500);
  const auto bases = Bases(Options().dir);
  RetentionPolicy policy;
  policy.max_bytes = 1;  // everything is too much
  for (uint64_t floor : {uint64_t{1}, bases[1] - 1, bases[1], bases[1] + 1, uint64_t{333}}) {
    policy.floor_offset = floor;
    ASSERT_TRUE(log->ApplyRetention(policy, 0).ok());
    EXPECT_LE(log->start_offset(), floor) << "removed a record at or above the floor";
    // Every segment still there holds the floor or lies above it; the one before was below.
    auto it = std::upper_bound(bases.begin(), bases.end(), floor);
    EXPECT_EQ(log->start_offset(), *(it - 1)) << "floor " << floor;
    ExpectReads(*log, log->start_offset(), UINT64_MAX);
  }
  // Floor at the end: every closed segment goes, the active one stays with its records.
  policy.floor_offset = UINT64_MAX;
  ASSERT_TRUE(log->ApplyRetention(policy, 0).ok());
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_EQ(log->start_offset(), bases.back());
  EXPECT_EQ(log->end_offset(), 500u);
  ExpectEveryOffsetReads(*log);
  // Appending and reopening still work.
  AppendMany(*log, 520);
  ExpectEveryOffsetReads(*log);
  log.reset();
  log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->start_offset(), bases.back());
  EXPECT_EQ(log->end_offset(), 520u);
  ExpectEveryOffsetReads(*log);
}

TEST_F(DiskLogTest, RetentionByAge) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 400);
  const auto segs = Files(Options().dir, ".log");
  const auto bases = Bases(Options().dir);
  ASSERT_GT(segs.size(), 8u);
  const int64_t now = 1'800'000'000'000;
  constexpr int64_t kHour = 3600 * 1000;
  // Segments 0..3 are two hours old, the rest ten minutes.
  for (size_t i = 0; i < segs.size(); ++i) {
    SetMtimeMs(segs[i], i < 4 ? now - 2 * kHour : now - 10 * 60 * 1000);
  }
  RetentionPolicy policy;
  policy.max_age_ms = kHour;
  policy.floor_offset = UINT64_MAX;
  auto removed = log->ApplyRetention(policy, now);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 4u);
  EXPECT_EQ(log->start_offset(), bases[4]);
  ExpectEveryOffsetReads(*log);

  // An old segment behind a young one stays: only whole prefixes go.
  SetMtimeMs(segs[4], now - 10 * 60 * 1000);
  SetMtimeMs(segs[5], now - 2 * kHour);
  EXPECT_EQ(*log->ApplyRetention(policy, now), 0u);

  // The floor holds old segments back too.
  SetMtimeMs(segs[4], now - 2 * kHour);
  policy.floor_offset = bases[5] - 1;
  EXPECT_EQ(*log->ApplyRetention(policy, now), 0u);
  policy.floor_offset = bases[6];
  EXPECT_EQ(*log->ApplyRetention(policy, now), 2u);
  EXPECT_EQ(log->start_offset(), bases[6]);

  // Even when everything is old, the active segment stays.
  for (size_t i = 6; i < segs.size(); ++i) SetMtimeMs(segs[i], now - 2 * kHour);
  policy.floor_offset = UINT64_MAX;
  ASSERT_TRUE(log->ApplyRetention(policy, now).ok());
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_EQ(log->start_offset(), bases.back());
  EXPECT_EQ(log->end_offset(), 400u);
  ExpectEveryOffsetReads(*log);
}

TEST_F(DiskLogTest, SyncReturnsDurableOffset) {
  LogOptions o = Options();
  o.segment_bytes = 1ull << 30;
  int fsyncs = 0;
  o.fsync_observer = [&fsyncs](double seconds) {
    EXPECT_GE(seconds, 0.0);
    ++fsyncs;
  };
  auto log = MustOpen(o);
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 50);
  EXPECT_EQ(log->end_offset(), 50u);
  EXPECT_LT(log->durable_offset(), 50u);
  auto d = log->Sync();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, 50u);
  EXPECT_EQ(log->durable_offset(), 50u);
  EXPECT_EQ(fsyncs, 1);
  // Nothing new: no second fdatasync.
  EXPECT_EQ(*log->Sync(), 50u);
  EXPECT_EQ(fsyncs, 1);
  AppendRange(*log, 50, 3);
  EXPECT_EQ(log->durable_offset(), 50u);
  EXPECT_EQ(*log->Sync(), 53u);
  EXPECT_EQ(fsyncs, 2);
}

TEST_F(DiskLogTest, RollMakesClosedSegmentsDurable) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  AppendMany(*log, 200);
  const auto bases = Bases(Options().dir);
  EXPECT_EQ(log->durable_offset(), bases.back());
}

TEST_F(DiskLogTest, ConcurrentAppendSyncAndReadStayDense) {
  LogOptions o = Options();
  o.segment_bytes = 4096;
  auto log = MustOpen(o);
  ASSERT_NE(log, nullptr);
  constexpr int kThreads = 4;
  constexpr int kBatches = 150;
  std::atomic<int> writers_done{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint64_t seq = 0;
      for (int b = 0; b < kBatches; ++b) {
        const int n = 1 + (b + t) % 4;
        std::vector<std::string> keys, values;
        for (int i = 0; i < n; ++i) {
          keys.push_back("t" + std::to_string(t));
          values.push_back(std::to_string(seq++));
        }
        std::vector<AppendEntry> entries;
        for (int i = 0; i < n; ++i) entries.push_back({keys[i], values[i], "", std::nullopt, 0});
        auto first = log->Append(entries);
        if (!first.ok()) {
          failed = true;
          return;
        }
        if (b % 5 == 4) {
          auto d = log->Sync();
          // Sync covers every record this thread appended before calling it.
          if (!d.ok() || *d < *first + static_cast<uint64_t>(n) ||
              log->durable_offset() < *first + static_cast<uint64_t>(n)) {
            failed = true;
            return;
          }
        }
      }
      writers_done.fetch_add(1);
    });
  }
  // A reader beside the writers: whatever it sees below end_offset is dense and readable.
  std::thread reader([&] {
    uint64_t from = 0;
    while (writers_done.load() < kThreads && !failed.load()) {
      ReadBatch batch;
      Status st = log->Read(from, UINT64_MAX, 64, 1 << 20, &batch);
      if (!st.ok()) {
        ADD_FAILURE() << st.ToString();
        failed = true;
        return;
      }
      for (const auto& r : batch.records) {
        if (r.offset != from) {
          ADD_FAILURE() << "gap at " << from;
          failed = true;
          return;
        }
        ++from;
      }
      if (batch.records.empty()) std::this_thread::yield();
    }
  });
  for (auto& th : threads) th.join();
  reader.join();
  ASSERT_FALSE(failed.load());
  ASSERT_TRUE(log->Sync().ok());

  ReadBatch all;
  ASSERT_TRUE(log->Read(0, UINT64_MAX, SIZE_MAX, SIZE_MAX, &all).ok());
  uint64_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int b = 0; b < kBatches; ++b) total += 1 + (b + t) % 4;
  }
  ASSERT_EQ(log->end_offset(), total);
  ASSERT_EQ(log->durable_offset(), total);
  ASSERT_EQ(all.records.size(), total);
  std::map<std::string, uint64_t> next_seq;
  for (uint64_t i = 0; i < total; ++i) {
    const auto& r = all.records[i];
    ASSERT_EQ(r.offset, i);
    // Each thread's records appear once each, in its order.
    EXPECT_EQ(std::to_string(next_seq[std::string(r.key)]++), r.value) << "offset " << i;
  }
  EXPECT_EQ(next_seq.size(), static_cast<size_t>(kThreads));

  // And all of it after a reopen.
  log.reset();
  log = MustOpen(o);
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->end_offset(), total);
}

}  // namespace
}  // namespace shoal::storage

namespace shoal::storage {
namespace {

// The encoded bytes of Expected(first..first+n), as a leader's log stores them.
std::string EncodedRange(uint64_t first, uint64_t n) {
  std::string out;
  for (uint64_t i = first; i < first + n; ++i) record::Encode(EntryOf(Expected(i)), i, out);
  return out;
}

TEST_F(DiskLogTest, CopiedRecordsAreCheckedAndWrittenAsTheyCame) {
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  for (uint64_t first = 0; first < 300; first += 25) {
    auto r = log->AppendCopied(first, EncodedRange(first, 25));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(log->end_offset(), 300u);
  ExpectEveryOffsetReads(*log);
  // Not at the end, a gap in offsets, a flipped bit: refused, nothing written.
  EXPECT_EQ(log->AppendCopied(299, EncodedRange(299, 2)).status().code(),
            Status::Code::kFailedPrecondition);
  std::string gap = EncodedRange(300, 1) + EncodedRange(302, 1);
  EXPECT_EQ(log->AppendCopied(300, gap).status().code(), Status::Code::kInvalidArgument);
  std::string bad = EncodedRange(300, 3);
  bad[bad.size() - 1] ^= 1;
  EXPECT_EQ(log->AppendCopied(300, bad).status().code(), Status::Code::kCorruption);
  EXPECT_EQ(log->AppendCopied(300, bad.substr(0, bad.size() - 5)).status().code(),
            Status::Code::kCorruption);
  EXPECT_EQ(log->end_offset(), 300u);
  // The same files as Append writes for the same batches.
  auto other = MustOpen([&] {
    LogOptions o = Options();
    o.dir = dir_.path() + "/p1";
    return o;
  }());
  for (uint64_t first = 0; first < 300; first += 25) AppendRange(*other, first, 25);
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const auto mine = Files(Options().dir, ".log");
  const auto theirs = Files(dir_.path() + "/p1", ".log");
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(slurp(mine[i]), slurp(theirs[i])) << mine[i];
}

TEST_F(DiskLogTest, ALogCutBackKeepsWhatCameBeforeAndTakesNewRecordsAfter) {
  {
    auto log = MustOpen(Options());
    ASSERT_NE(log, nullptr);
    AppendMany(*log, 600);
    const size_t segments = log->segment_count();
    // Inside a segment, at a segment's base, then nothing to cut.
    ASSERT_TRUE(log->TruncateTo(537).ok());
    EXPECT_EQ(log->end_offset(), 537u);
    EXPECT_LE(log->durable_offset(), 537u);
    EXPECT_LT(log->segment_count(), segments);
    ExpectReads(*log, 0, 537);
    ASSERT_TRUE(log->TruncateTo(600).ok());
    EXPECT_EQ(log->end_offset(), 537u);
    uint64_t total = 0;
    for (uint64_t i = 0; i < 537; ++i) total += record::EncodedSize(EntryOf(Expected(i)));
    EXPECT_EQ(log->size_bytes(), total);
    // Records after the cut take its offsets again.
    AppendRange(*log, 537, 13);
    ExpectReads(*log, 0, 550);
    ASSERT_TRUE(log->Sync().ok());
  }
  auto log = MustOpen(Options());  // and a restart reads the same
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->end_offset(), 550u);
  ExpectEveryOffsetReads(*log);
  ASSERT_TRUE(log->TruncateTo(0).ok());
  EXPECT_EQ(log->end_offset(), 0u);
  EXPECT_EQ(log->segment_count(), 1u);
  AppendRange(*log, 0, 5);
  ExpectReads(*log, 0, 5);
}

// A follower whose end fell below its leader's oldest record starts its log again, empty, at the
// leader's start, and copies on from there; a restart reads the same. Never below its end.
TEST_F(DiskLogTest, ALogStartedAfreshIsEmptyAtItsNewStartAndTakesCopiesFromThere) {
  {
    auto log = MustOpen(Options());
    ASSERT_NE(log, nullptr);
    AppendMany(*log, 120);
    EXPECT_EQ(log->StartAfresh(100).code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(log->end_offset(), 120u);
    ASSERT_TRUE(log->StartAfresh(4000).ok());
    EXPECT_EQ(log->start_offset(), 4000u);
    EXPECT_EQ(log->end_offset(), 4000u);
    EXPECT_EQ(log->durable_offset(), 4000u);
    EXPECT_EQ(log->size_bytes(), 0u);
    EXPECT_EQ(log->segment_count(), 1u);
    ReadBatch below;
    EXPECT_EQ(log->Read(0, 4000, 10, 1 << 20, &below).code(), Status::Code::kNotFound);
    ASSERT_TRUE(log->AppendCopied(4000, EncodedRange(4000, 7)).ok());
    ExpectReads(*log, 4000, 4007);
    ASSERT_TRUE(log->Sync().ok());
  }
  auto log = MustOpen(Options());
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->start_offset(), 4000u);
  EXPECT_EQ(log->end_offset(), 4007u);
  ExpectReads(*log, 4000, 4007);
  EXPECT_EQ(Files(Options().dir, ".log").size(), 1u);
}

}  // namespace
}  // namespace shoal::storage
