// DiskLog: the Log implementation over segment files.
//
// Layout of a partition directory: one `<base offset, 20 digits>.log` file per segment, holding
// records (see record.h) with consecutive offsets starting at the base, and for each closed
// segment a `.index` file of (u32 relative offset, u32 file position) pairs, one every
// index_interval_bytes, then a u32 crc32 of the pairs (an entry damaged into a plausible but
// wrong position passes every structural check and would make reads fail; a bad checksum means
// "rebuild from the segment"). The active (last) segment's index lives in memory and is rebuilt
// by the recovery scan, which is also what finds and truncates a torn tail after a crash.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "shoal/common/hash.h"
#include "shoal/common/logging.h"
#include "shoal/common/thread_annotations.h"
#include "storage/log.h"
#include "storage/file_system.h"
#include "storage/record.h"

namespace shoal::storage {

namespace {

struct IndexEntry {
  uint32_t rel_offset;
  uint32_t position;
};

// One segment file. Fields other than file and base are guarded by DiskLog::mu_.
struct Segment {
  std::unique_ptr<File> file;
  uint64_t base = 0;
  uint64_t size = 0;          // bytes of whole records in the file
  uint64_t records = 0;       // records in this segment
  uint64_t last_indexed = 0;  // file position of the last index entry
  std::vector<IndexEntry> index;
  std::string path;
};

// The bytes of a closed segment's `.index` file: the entries, then their crc32.
std::string EncodeIndex(const std::vector<IndexEntry>& index) {
  std::string out(reinterpret_cast<const char*>(index.data()), index.size() * sizeof(IndexEntry));
  const uint32_t crc = Crc32(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  return out;
}

std::string SegmentPath(const std::string& dir, uint64_t base, const char* ext) {
  char name[40];
  std::snprintf(name, sizeof name, "%020" PRIu64 "%s", base, ext);
  return dir + "/" + name;
}

class DiskLog final : public Log {
 public:
  explicit DiskLog(LogOptions options)
      : opts_(std::move(options)),
        fs_(opts_.fs ? *opts_.fs : PosixFileSystem()),
        log_(Logger("storage")) {}

  Status Open();

  Result<uint64_t> Append(std::span<const AppendEntry> entries) override;
  Result<uint64_t> AppendCopied(uint64_t first, std::string_view bytes,
                                std::vector<RecordView>* records) override;
  Result<uint64_t> Sync() override;
  Status TruncateTo(uint64_t offset) override;
  Status StartAfresh(uint64_t offset) override;
  Status Read(uint64_t from, uint64_t limit, size_t max_records, size_t max_bytes,
              ReadBatch* out) const override;
  uint64_t start_offset() const override { return start_.load(std::memory_order_acquire); }
  uint64_t end_offset() const override { return end_.load(std::memory_order_acquire); }
  uint64_t durable_offset() const override { return durable_.load(std::memory_order_acquire); }
  uint64_t size_bytes() const override { return size_.load(std::memory_order_relaxed); }
  size_t segment_count() const override {
    MutexLock lock(mu_);
    return segments_.size();
  }
  Result<size_t> ApplyRetention(const RetentionPolicy& policy, int64_t now_ms) override;
  Status Close() override;

 private:
  Status OpenSegment(uint64_t base, bool is_last, std::shared_ptr<Segment>* out);
  Status ScanSegment(Segment* seg, bool truncate_tail);
  Status Roll() REQUIRES(mu_);
  // Writes encoded records (the first at `first`, each starting at starts[i] in `encoded`) at
  // the end of the active segment, rolling first when it is full; on error nothing is visible.
  Result<uint64_t> WriteLocked(std::string_view encoded, uint64_t first,
                               std::span<const size_t> starts) REQUIRES(mu_);
  void MaybeIndex(Segment* seg, uint64_t offset, uint64_t position);
  // A failed fdatasync is final for this log (PostgreSQL's lesson: after an EIO the kernel may
  // have dropped the dirty pages, and a later fdatasync that succeeds says nothing about them).
  // Every append and sync from then on fails with it; reopening the log (a restart) reads back
  // what is really on disk.
  Status Fail(const Status& st);
  Status failure() const;

  const LogOptions opts_;
  FileSystem& fs_;
  std::shared_ptr<spdlog::logger> log_;

  // Guards segments_ and every Segment's mutable fields, serializes appends.
  mutable Mutex mu_ ACQUIRED_AFTER(sync_mu_);
  std::vector<std::shared_ptr<Segment>> segments_ GUARDED_BY(mu_);
  std::string scratch_ GUARDED_BY(mu_);
  std::vector<size_t> starts_ GUARDED_BY(mu_);
  Mutex sync_mu_;  // one fdatasync at a time; later callers find their records already synced

  std::atomic<uint64_t> start_{0};
  std::atomic<uint64_t> end_{0};
  std::atomic<uint64_t> durable_{0};
  std::atomic<uint64_t> size_{0};
  std::atomic<bool> failed_{false};
  mutable Mutex failure_mu_;
  Status failure_ GUARDED_BY(failure_mu_);
};

Status DiskLog::Fail(const Status& st) {
  MutexLock lock(failure_mu_);
  if (!failed_.exchange(true)) {
    failure_ = st.Annotate("the log failed and takes no more writes until it is reopened");
    log_->error("msg=\"fdatasync failed; the partition's log takes no more writes\" dir={} "
                "reason=\"{}\"",
                opts_.dir, st.message());
  }
  return failure_;
}

Status DiskLog::failure() const {
  MutexLock lock(failure_mu_);
  return failure_;
}

void DiskLog::MaybeIndex(Segment* seg, uint64_t offset, uint64_t position) {
  if (seg->index.empty() || position - seg->last_indexed >= opts_.index_interval_bytes) {
    seg->index.push_back(
        {static_cast<uint32_t>(offset - seg->base), static_cast<uint32_t>(position)});
    seg->last_indexed = position;
  }
}

Status DiskLog::Open() {
  SHOAL_RETURN_IF_ERROR(fs_.CreateDirs(opts_.dir));
  std::vector<uint64_t> bases;
  auto names = fs_.List(opts_.dir);
  if (!names.ok()) return names.status();
  for (const auto& name : *names) {
    if (name.size() == 24 && name.ends_with(".log")) {
      bases.push_back(std::strtoull(name.c_str(), nullptr, 10));
    }
  }
  std::sort(bases.begin(), bases.end());
  if (bases.empty()) bases.push_back(0);
  MutexLock lock(mu_);  // not shared yet; the lock is what the analysis checks
  for (size_t i = 0; i < bases.size(); ++i) {
    std::shared_ptr<Segment> seg;
    SHOAL_RETURN_IF_ERROR(OpenSegment(bases[i], i + 1 == bases.size(), &seg));
    segments_.push_back(std::move(seg));
  }
  // A closed segment's record count follows from the next segment's base.
  uint64_t total = 0;
  for (size_t i = 0; i + 1 < segments_.size(); ++i) {
    segments_[i]->records = segments_[i + 1]->base - segments_[i]->base;
    total += segments_[i]->size;
  }
  const auto& last = segments_.back();
  total += last->size;
  start_ = segments_.front()->base;
  end_ = last->base + last->records;
  durable_ = end_.load();
  size_ = total;
  return fs_.SyncDir(opts_.dir);
}

Status DiskLog::OpenSegment(uint64_t base, bool is_last, std::shared_ptr<Segment>* out) {
  auto seg = std::make_shared<Segment>();
  seg->base = base;
  seg->path = SegmentPath(opts_.dir, base, ".log");
  auto file = fs_.Open(seg->path, /*truncate=*/false);
  if (!file.ok()) return file.status();
  seg->file = std::move(file).value();
  auto size = seg->file->Size();
  if (!size.ok()) return size.status();
  seg->size = *size;
  if (is_last) {
    // The active segment may end in a torn record: scan it whole, truncate after the last good one.
    SHOAL_RETURN_IF_ERROR(ScanSegment(seg.get(), true));
    SHOAL_RETURN_IF_ERROR(fs_.Remove(SegmentPath(opts_.dir, base, ".index")));
  } else {
    std::string idx;
    const std::string idx_path = SegmentPath(opts_.dir, base, ".index");
    auto st_idx = fs_.ReadWholeFile(idx_path, &idx);
    uint32_t crc = 0;
    bool ok = st_idx.ok() && idx.size() > sizeof crc &&
              (idx.size() - sizeof crc) % sizeof(IndexEntry) == 0;
    if (ok) {
      std::memcpy(&crc, idx.data() + idx.size() - sizeof crc, sizeof crc);
      idx.resize(idx.size() - sizeof crc);
      ok = crc == Crc32(idx.data(), idx.size());
    }
    if (ok) {
      seg->index.resize(idx.size() / sizeof(IndexEntry));
      std::memcpy(seg->index.data(), idx.data(), idx.size());
      for (size_t i = 0; i < seg->index.size() && ok; ++i) {
        ok = seg->index[i].position < seg->size &&
             (i == 0 || (seg->index[i].position > seg->index[i - 1].position &&
                         seg->index[i].rel_offset > seg->index[i - 1].rel_offset));
      }
    }
    if (!ok) {
      log_->warn("msg=\"rebuilding missing or bad index\" segment={}", seg->path);
      seg->index.clear();
      SHOAL_RETURN_IF_ERROR(ScanSegment(seg.get(), false));
      // Keep the repair, so the next open does not scan again; the in-memory index serves now.
      if (auto st = fs_.WriteFileAtomic(idx_path, EncodeIndex(seg->index)); !st.ok()) {
        log_->warn("msg=\"cannot rewrite index\" segment={} reason=\"{}\"", seg->path,
                   st.message());
      }
    }
  }
  *out = std::move(seg);
  return Status::Ok();
}

Status DiskLog::ScanSegment(Segment* seg, bool truncate_tail) {
  // Segments are bounded by segment_bytes (plus one batch), so recovery reads one whole.
  std::string buf;
  buf.resize(seg->size);
  if (!buf.empty()) SHOAL_RETURN_IF_ERROR(seg->file->ReadAt(0, buf.data(), buf.size()));
  uint64_t pos = 0;
  uint64_t expect = seg->base;
  while (pos < buf.size()) {
    RecordView rec;
    size_t size = 0;
    auto r = record::Decode(buf.data() + pos, buf.size() - pos, &rec, &size);
    if (r != record::DecodeResult::kOk || rec.offset != expect) break;
    MaybeIndex(seg, expect, pos);
    ++expect;
    pos += size;
  }
  if (pos < buf.size()) {
    if (!truncate_tail) {
      return Status::Corruption("closed segment " + seg->path + " has a bad record at position " +
                                std::to_string(pos));
    }
    log_->warn("msg=\"truncating torn tail\" segment={} position={} dropped_bytes={}", seg->path,
               pos, buf.size() - pos);
    SHOAL_RETURN_IF_ERROR(seg->file->Truncate(pos));
    SHOAL_RETURN_IF_ERROR(seg->file->Sync());
  }
  seg->size = pos;
  seg->records = expect - seg->base;
  return Status::Ok();
}

Status DiskLog::Roll() {
  auto& cur = segments_.back();
  if (Status st = cur->file->Sync(); !st.ok()) return Fail(st);
  SHOAL_RETURN_IF_ERROR(
      fs_.WriteFileAtomic(SegmentPath(opts_.dir, cur->base, ".index"), EncodeIndex(cur->index)));
  const uint64_t base = cur->base + cur->records;
  auto seg = std::make_shared<Segment>();
  seg->base = base;
  seg->path = SegmentPath(opts_.dir, base, ".log");
  auto file = fs_.Open(seg->path, /*truncate=*/true);
  if (!file.ok()) return file.status();
  seg->file = std::move(file).value();
  SHOAL_RETURN_IF_ERROR(fs_.SyncDir(opts_.dir));
  segments_.push_back(std::move(seg));
  // Everything in closed segments is durable now; the new segment is empty.
  uint64_t d = durable_.load();
  while (d < base && !durable_.compare_exchange_weak(d, base)) {
  }
  return Status::Ok();
}

Result<uint64_t> DiskLog::Append(std::span<const AppendEntry> entries) {
  // A record the format cannot describe (u16 key and producer lengths, payload up to kMaxPayload)
  // would be written but never read back, and recovery would cut it and everything after it.
  for (const auto& e : entries) {
    if (e.key.size() > UINT16_MAX || e.producer.size() > UINT16_MAX ||
        record::EncodedSize(e) - record::kFrameHeader > record::kMaxPayload) {
      return Status::TooLarge("record of " + std::to_string(record::EncodedSize(e)) +
                              " bytes (key " + std::to_string(e.key.size()) + ", producer " +
                              std::to_string(e.producer.size()) +
                              ") does not fit the log's record format");
    }
  }
  MutexLock lock(mu_);
  if (failed_.load()) return failure();
  if (entries.empty()) return end_.load();
  const uint64_t first = end_.load();
  scratch_.clear();
  starts_.clear();
  uint64_t offset = first;
  for (const auto& e : entries) {
    starts_.push_back(scratch_.size());
    record::Encode(e, offset, scratch_);
    ++offset;
  }
  return WriteLocked(scratch_, first, starts_);
}

Result<uint64_t> DiskLog::AppendCopied(uint64_t first, std::string_view bytes,
                                       std::vector<RecordView>* records) {
  std::vector<size_t> starts;
  std::vector<RecordView> checked;
  for (size_t pos = 0; pos < bytes.size();) {
    RecordView rec;
    size_t size = 0;
    if (record::Decode(bytes.data() + pos, bytes.size() - pos, &rec, &size) !=
        record::DecodeResult::kOk) {
      return Status::Corruption("copied records: a bad or cut record at byte " +
                                std::to_string(pos));
    }
    if (rec.offset != first + starts.size()) {
      return Status::InvalidArgument("copied records: offset " + std::to_string(rec.offset) +
                                     " where " + std::to_string(first + starts.size()) +
                                     " was due");
    }
    starts.push_back(pos);
    if (records) checked.push_back(rec);
    pos += size;
  }
  MutexLock lock(mu_);
  if (failed_.load()) return failure();
  if (first != end_.load()) {
    return Status::FailedPrecondition("copied records start at " + std::to_string(first) +
                                      "; this log ends at " + std::to_string(end_.load()));
  }
  if (starts.empty()) return first;
  auto written = WriteLocked(bytes, first, starts);
  if (written.ok() && records) *records = std::move(checked);
  return written;
}

Result<uint64_t> DiskLog::WriteLocked(std::string_view encoded, uint64_t first,
                                      std::span<const size_t> starts) {
  Segment* seg = segments_.back().get();
  if (seg->size >= opts_.segment_bytes && seg->records > 0) {
    SHOAL_RETURN_IF_ERROR(Roll());
    seg = segments_.back().get();
  }
  const uint64_t start_pos = seg->size;
  const size_t index_before = seg->index.size();
  const uint64_t last_indexed_before = seg->last_indexed;
  for (size_t i = 0; i < starts.size(); ++i) MaybeIndex(seg, first + i, start_pos + starts[i]);
  Status st = seg->file->WriteAt(start_pos, encoded.data(), encoded.size());
  if (!st.ok()) {
    // Nothing of this call may become visible: cut the file back and forget its index entries.
    if (!seg->file->Truncate(start_pos).ok()) {
      log_->error("msg=\"cannot truncate after failed write\" segment={}", seg->path);
    }
    seg->index.resize(index_before);
    seg->last_indexed = last_indexed_before;
    return st.Annotate("appending to " + seg->path);
  }
  seg->size += encoded.size();
  seg->records += starts.size();
  size_.fetch_add(encoded.size(), std::memory_order_relaxed);
  end_.store(first + starts.size(), std::memory_order_release);
  return first;
}

Status DiskLog::TruncateTo(uint64_t offset) {
  MutexLock sync_lock(sync_mu_);
  MutexLock lock(mu_);
  if (failed_.load()) return failure();
  if (offset >= end_.load()) return Status::Ok();
  if (offset < start_.load()) {
    return Status::InvalidArgument("cannot cut the log at " + std::to_string(offset) +
                                   ", below its start " + std::to_string(start_.load()));
  }
  // Whole segments from the offset on go; the one holding it becomes the active segment.
  while (segments_.size() > 1 && segments_.back()->base >= offset) {
    const auto& seg = segments_.back();
    SHOAL_RETURN_IF_ERROR(fs_.Remove(seg->path));
    (void)fs_.Remove(SegmentPath(opts_.dir, seg->base, ".index"));
    size_.fetch_sub(seg->size);
    segments_.pop_back();
  }
  Segment* seg = segments_.back().get();
  (void)fs_.Remove(SegmentPath(opts_.dir, seg->base, ".index"));  // active again: no index file
  // The position of record `offset`: from the index entry before it, record by record.
  uint64_t pos = 0, at = seg->base;
  for (const auto& e : seg->index) {
    if (seg->base + e.rel_offset > offset) break;
    pos = e.position;
    at = seg->base + e.rel_offset;
  }
  std::string buf(static_cast<size_t>(seg->size - pos), '\0');
  if (!buf.empty()) SHOAL_RETURN_IF_ERROR(seg->file->ReadAt(pos, buf.data(), buf.size()));
  size_t used = 0;
  while (at < offset) {
    RecordView rec;
    size_t size = 0;
    if (record::Decode(buf.data() + used, buf.size() - used, &rec, &size) !=
            record::DecodeResult::kOk ||
        rec.offset != at) {
      return Status::Corruption("cannot find offset " + std::to_string(offset) + " in " +
                                seg->path);
    }
    used += size;
    ++at;
  }
  const uint64_t cut = pos + used;
  SHOAL_RETURN_IF_ERROR(seg->file->Truncate(cut));
  if (Status st = seg->file->Sync(); !st.ok()) return Fail(st);
  size_.fetch_sub(seg->size - cut);
  seg->size = cut;
  seg->records = offset - seg->base;
  std::erase_if(seg->index, [&](const IndexEntry& e) { return seg->base + e.rel_offset >= offset; });
  seg->last_indexed = seg->index.empty() ? 0 : seg->index.back().position;
  end_.store(offset, std::memory_order_release);
  uint64_t d = durable_.load();
  while (d > offset && !durable_.compare_exchange_weak(d, offset)) {
  }
  log_->warn("msg=\"log cut back\" dir={} to={}", opts_.dir, offset);
  return fs_.SyncDir(opts_.dir);
}

Status DiskLog::StartAfresh(uint64_t offset) {
  MutexLock sync_lock(sync_mu_);
  MutexLock lock(mu_);
  if (failed_.load()) return failure();
  if (offset < end_.load()) {
    return Status::InvalidArgument("cannot start the log afresh at " + std::to_string(offset) +
                                   ": it holds records up to " + std::to_string(end_.load()));
  }
  // Oldest first, as retention removes them: what a crash leaves is a suffix of the log. The
  // segments stay listed (readers hold their open files) until the new one replaces them; a
  // failure part way is final for this log, as a failed sync is.
  for (const auto& old : segments_) {
    if (Status st = fs_.Remove(old->path); !st.ok()) return Fail(st);
    (void)fs_.Remove(SegmentPath(opts_.dir, old->base, ".index"));
  }
  auto seg = std::make_shared<Segment>();
  seg->base = offset;
  seg->path = SegmentPath(opts_.dir, offset, ".log");
  auto file = fs_.Open(seg->path, /*truncate=*/true);
  if (!file.ok()) return Fail(file.status());
  seg->file = std::move(file).value();
  segments_.clear();
  segments_.push_back(std::move(seg));
  start_.store(offset, std::memory_order_release);
  end_.store(offset, std::memory_order_release);
  durable_.store(offset);
  size_.store(0);
  log_->warn("msg=\"log started afresh\" dir={} at={}", opts_.dir, offset);
  if (Status st = fs_.SyncDir(opts_.dir); !st.ok()) return Fail(st);
  return Status::Ok();
}

Result<uint64_t> DiskLog::Sync() {
  MutexLock sync_lock(sync_mu_);
  if (failed_.load()) return failure();
  std::shared_ptr<Segment> seg;
  uint64_t target;
  {
    MutexLock lock(mu_);
    target = end_.load();
    seg = segments_.back();
  }
  if (durable_.load() >= target) return durable_.load();
  // Records below target are in `seg` or in closed segments, which Roll synced already.
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = seg->file->Sync(); !st.ok()) return Fail(st);
  if (opts_.fsync_observer) {
    opts_.fsync_observer(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  uint64_t d = durable_.load();
  while (d < target && !durable_.compare_exchange_weak(d, target)) {
  }
  return durable_.load();
}

Status DiskLog::Read(uint64_t from, uint64_t limit, size_t max_records, size_t max_bytes,
                     ReadBatch* out) const {
  if (from < start_offset()) {
    return Status::NotFound("offset " + std::to_string(from) + " is below the log start " +
                            std::to_string(start_offset()));
  }
  // end_ is published after the segment's size, so every record below `limit` is readable.
  limit = std::min(limit, end_offset());
  size_t got = 0;
  auto want_more = [&] {
    return from < limit && got < max_records && (got == 0 || out->bytes < max_bytes);
  };
  while (want_more()) {
    // Find the segment holding `from` and the indexed position at or before it.
    std::shared_ptr<Segment> seg;
    uint64_t pos = 0, seg_size = 0;
    {
      MutexLock lock(mu_);
      auto it = std::upper_bound(
          segments_.begin(), segments_.end(), from,
          [](uint64_t v, const std::shared_ptr<Segment>& s) { return v < s->base; });
      if (it == segments_.begin()) return Status::NotFound("offset below the first segment");
      seg = *(it - 1);
      seg_size = seg->size;
      const uint32_t rel = static_cast<uint32_t>(from - seg->base);
      auto ix = std::upper_bound(seg->index.begin(), seg->index.end(), rel,
                                 [](uint32_t v, const IndexEntry& e) { return v < e.rel_offset; });
      if (ix != seg->index.begin()) pos = (ix - 1)->position;
    }
    const uint64_t from_before = from;
    // Chunks start small and double: a consumer's read usually wants a few hundred records, and
    // a first chunk of max_bytes would read megabytes to use kilobytes of them (once per
    // partition of every consume request).
    uint64_t chunk = 64 << 10;
    while (pos < seg_size && want_more()) {
      size_t len = static_cast<size_t>(std::min<uint64_t>(
          {chunk, std::max<uint64_t>(64 << 10, max_bytes - std::min(max_bytes, out->bytes) + 4096),
           seg_size - pos}));
      chunk = std::min<uint64_t>(chunk * 2, uint64_t{1} << 30);
      // Not value-initialised: the pread below fills it (clearing it cost as much as the read).
      auto buf = std::make_unique_for_overwrite<char[]>(len);
      SHOAL_RETURN_IF_ERROR(seg->file->ReadAt(pos, buf.get(), len));
      size_t used = 0;
      bool kept = false;
      // The records kept from this chunk are one run of it, appended to `stored` at once.
      size_t run_start = 0, run_end = 0;
      while (want_more()) {
        RecordView rec;
        size_t size = 0;
        auto r = record::Decode(buf.get() + used, len - used, &rec, &size,
                                /*check_crc=*/out->stored == nullptr);
        if (r == record::DecodeResult::kIncomplete && used == 0) {
          // One record larger than the chunk: read exactly that record.
          uint32_t payload = 0;
          if (len >= 4) std::memcpy(&payload, buf.get(), 4);
          const uint64_t need = record::kFrameHeader + uint64_t{payload};
          if (len < 4 || pos + need > seg_size) {
            return Status::Corruption("record past the end of " + seg->path);
          }
          len = static_cast<size_t>(need);
          buf = std::make_unique_for_overwrite<char[]>(len);
          SHOAL_RETURN_IF_ERROR(seg->file->ReadAt(pos, buf.get(), len));
          continue;
        }
        if (r == record::DecodeResult::kIncomplete) break;  // continue with a fresh chunk
        if (r == record::DecodeResult::kCorrupt) {
          return Status::Corruption("bad record in " + seg->path + " at position " +
                                    std::to_string(pos + used));
        }
        used += size;
        if (rec.offset < from) continue;  // between the index entry and the wanted offset
        if (rec.offset != from) {
          return Status::Corruption("offset gap in " + seg->path + ": wanted " +
                                    std::to_string(from) + ", found " + std::to_string(rec.offset));
        }
        out->records.push_back(rec);
        out->bytes += size;
        if (!kept) run_start = used - size;
        run_end = used;
        kept = true;
        ++got;
        ++from;
      }
      if (kept && out->stored) out->stored->append(buf.get() + run_start, run_end - run_start);
      if (kept) out->buffers.push_back(std::move(buf));
      pos += used;
    }
    if (from == from_before) {
      return Status::Corruption("offset " + std::to_string(from) + " not found in " + seg->path);
    }
  }
  return Status::Ok();
}

Result<size_t> DiskLog::ApplyRetention(const RetentionPolicy& policy, int64_t now_ms) {
  if (policy.max_bytes == 0 && policy.max_age_ms == 0) return size_t{0};
  MutexLock lock(mu_);
  size_t removed = 0;
  while (segments_.size() > 1) {
    const auto& seg = segments_.front();
    const uint64_t seg_end = segments_[1]->base;
    if (seg_end > policy.floor_offset) break;  // some group still needs records in it
    bool too_big = policy.max_bytes && size_.load() > policy.max_bytes;
    bool too_old = false;
    if (policy.max_age_ms) {
      if (auto mtime_ms = seg->file->ModifiedMs(); mtime_ms.ok()) {
        too_old = *mtime_ms < now_ms - policy.max_age_ms;
      }
    }
    if (!too_big && !too_old) break;
    SHOAL_RETURN_IF_ERROR(fs_.Remove(seg->path));
    SHOAL_RETURN_IF_ERROR(fs_.Remove(SegmentPath(opts_.dir, seg->base, ".index")));
    size_.fetch_sub(seg->size);
    log_->info("msg=\"retention removed segment\" segment={} reason={}", seg->path,
               too_big ? "size" : "age");
    segments_.erase(segments_.begin());
    start_.store(segments_.front()->base, std::memory_order_release);
    ++removed;
  }
  if (removed) SHOAL_RETURN_IF_ERROR(fs_.SyncDir(opts_.dir));
  return removed;
}

Status DiskLog::Close() {
  auto r = Sync();
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace

Result<std::unique_ptr<Log>> OpenDiskLog(const LogOptions& options) {
  auto log = std::make_unique<DiskLog>(options);
  SHOAL_RETURN_IF_ERROR(log->Open().Annotate("opening log " + options.dir));
  return std::unique_ptr<Log>(std::move(log));
}

}  // namespace shoal::storage
