#include "broker/partition.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_set>

#include "shoal/common/hash.h"
#include "shoal/common/json.h"
#include "shoal/common/logging.h"
#include "storage/file_util.h"
#include "storage/record.h"

namespace shoal::broker {

namespace {
constexpr int64_t kRetentionEveryMs = 5000;
constexpr int64_t kSnapshotEveryMs = 10000;

struct SeqKey {
  std::string_view producer;
  uint64_t seq;
  bool operator==(const SeqKey&) const = default;
};
struct SeqKeyHash {
  size_t operator()(const SeqKey& k) const {
    return std::hash<std::string_view>{}(k.producer) ^ (k.seq * 0x9E3779B97F4A7C15ull);
  }
};

std::string SnapshotPath(const std::string& dir) { return dir + "/producers.snapshot"; }

// The producer snapshot: "SPS2", u64 covered end offset (the log below it is in the table), u8
// seeded (the table holds the state inherited from the partition's parents), then the table's
// own serialized bytes. A snapshot from before the flag (u64 covered, table) was only ever
// written by a seeded partition.
constexpr std::string_view kSnapshotMagic = "SPS2";
struct ProducerSnapshot {
  uint64_t covered = 0;
  bool seeded = false;
  std::string_view table;
};
std::string EncodeProducerSnapshot(uint64_t covered, bool seeded, const std::string& table) {
  std::string out(kSnapshotMagic);
  out.append(reinterpret_cast<const char*>(&covered), 8);
  out += seeded ? '\1' : '\0';
  out += table;
  return out;
}
std::optional<ProducerSnapshot> DecodeProducerSnapshot(std::string_view bytes) {
  ProducerSnapshot s;
  if (bytes.size() >= 13 && bytes.substr(0, 4) == kSnapshotMagic) {
    std::memcpy(&s.covered, bytes.data() + 4, 8);
    s.seeded = bytes[12] != '\0';
    s.table = bytes.substr(13);
    return s;
  }
  if (bytes.size() < 8) return std::nullopt;
  std::memcpy(&s.covered, bytes.data(), 8);
  s.seeded = true;
  s.table = bytes.substr(8);
  return s;
}
std::string SealPath(const std::string& dir) { return dir + "/sealed"; }
std::string EpochsPath(const std::string& dir) { return dir + "/epochs"; }
std::string FencePath(const std::string& dir) { return dir + "/fence"; }
std::string RefetchingPath(const std::string& dir) { return dir + "/refetching"; }
std::string JoiningPath(const std::string& dir) { return dir + "/joining"; }

void AppendSuccessors(std::string& out, const std::vector<SuccessorRef>& successors) {
  out += '[';
  for (size_t i = 0; i < successors.size(); ++i) {
    if (i) out += ',';
    out += "{\"id\":";
    json::AppendUint(out, successors[i].id.value());
    out += ",\"owner\":";
    json::AppendString(out, successors[i].owner.value());
    out += ",\"lo\":";
    json::AppendUint(out, successors[i].range.lo);
    out += ",\"hi\":";
    json::AppendUint(out, successors[i].range.hi);
    out += '}';
  }
  out += ']';
}

// {"end":N,"epoch":E,"digest":"...","successors":[...],"confirmed":[ids]}; a seal written by an
// earlier sidecar is the end offset alone, as decimal text.
std::string EncodeSealRecord(const SealRecord& r) {
  std::string out = "{\"end\":";
  json::AppendUint(out, r.end);
  if (r.intent) {
    out += ",\"epoch\":";
    json::AppendUint(out, r.intent->epoch.value());
    out += ",\"digest\":";
    json::AppendString(out, r.intent->digest);
    out += ",\"successors\":";
    AppendSuccessors(out, r.intent->successors);
  }
  out += ",\"confirmed\":[";
  for (size_t i = 0; i < r.confirmed.size(); ++i) {
    if (i) out += ',';
    json::AppendUint(out, r.confirmed[i]);
  }
  out += "]}";
  return out;
}

Result<SealRecord> DecodeSealRecord(const std::string& text) {
  SealRecord r;
  if (!text.empty() && text[0] != '{') {
    char* end = nullptr;
    r.end = std::strtoull(text.c_str(), &end, 10);
    if (end == text.c_str()) return Status::Corruption("the seal record is not a number");
    return r;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array confirmed;
  if (parser.parse(text).get(doc) || doc["end"].get(r.end) || doc["confirmed"].get(confirmed)) {
    return Status::Corruption("the seal record is not {\"end\",...,\"confirmed\"}");
  }
  for (auto c : confirmed) {
    uint64_t id = 0;
    if (c.get(id) || id > kMaxPartitionId) return Status::Corruption("bad confirmed successor");
    r.confirmed.push_back(static_cast<uint32_t>(id));
  }
  uint64_t epoch = 0;
  if (doc["epoch"].get(epoch) == simdjson::SUCCESS) {
    SealIntent in;
    in.epoch = Epoch(epoch);
    std::string_view digest;
    simdjson::dom::array succ;
    if (doc["digest"].get(digest) || doc["successors"].get(succ)) {
      return Status::Corruption("the seal record's intent needs digest and successors");
    }
    in.digest = std::string(digest);
    for (auto e : succ) {
      uint64_t id = 0;
      std::string_view owner;
      SuccessorRef ref;
      if (e["id"].get(id) || e["owner"].get(owner) || e["lo"].get(ref.range.lo) ||
          e["hi"].get(ref.range.hi) || id > kMaxPartitionId) {
        return Status::Corruption("bad successor in the seal record");
      }
      ref.id = PartitionId(static_cast<uint32_t>(id));
      ref.owner = PodName(std::string(owner));
      in.successors.push_back(std::move(ref));
    }
    r.intent = std::move(in);
  }
  return r;
}

std::string Describe(const SuccessorRef& s) {
  return "successor " + std::to_string(s.id.value()) + " on " + s.owner.value() + " [" +
         std::to_string(s.range.lo) + ", " + std::to_string(s.range.hi) + ")";
}
}  // namespace

Result<FsyncPolicy> ParseFsyncPolicy(std::string_view s) {
  if (s == "always") return FsyncPolicy::kAlways;
  if (s == "interval") return FsyncPolicy::kInterval;
  if (s == "never") return FsyncPolicy::kNever;
  return Status::InvalidArgument("fsync must be always, interval or never, not \"" +
                                 std::string(s) + "\"");
}

Partition::Partition(PartitionId id, PartitionOptions options, Clock& clock, PartitionProbe probe)
    : id_(id),
      opts_(std::move(options)),
      fs_(opts_.fs ? *opts_.fs : storage::PosixFileSystem()),
      clock_(clock),
      probe_(probe),
      producers_(id.value(), opts_.range) {}

Partition::~Partition() = default;

void Partition::RestoreLeaseTimes() {
  MutexLock lock(cursor_mu_);
  const int64_t now = clock_.NowMs();
  for (const auto& [group, by_reader] : commits_->AllLeases()) {
    for (const auto& [reader, lease] : by_reader) {
      // Over what this pod knew of them when it led before: the leases are the leader's now.
      if (!lease.complete) lease_times_.insert_or_assign({group, reader}, LeaseTime{now, true, false});
    }
  }
}

void Partition::SetFollower(bool follower) {
  if (!follower_.exchange(follower) || follower) return;
  RestoreLeaseTimes();
}

Result<std::unique_ptr<Partition>> Partition::Open(PartitionId id, const PartitionOptions& options,
                                                   Clock& clock, SidecarProbe& probe) {
  std::unique_ptr<Partition> p(new Partition(id, options, clock, probe.ForPartition(id.value())));
  p->sidecar_probe_ = &probe;
  storage::LogOptions lo;
  lo.dir = options.dir;
  lo.fs = &p->fs_;
  lo.segment_bytes = options.segment_bytes;
  lo.fsync_observer = [&probe](double s) { probe.ObserveFsync(s); };
  auto log = storage::OpenDiskLog(lo);
  if (!log.ok()) return log.status();
  p->log_ = std::move(log).value();
  auto commits = storage::CommitStore::Open(options.dir, &p->fs_, options.range);
  if (!commits.ok()) return commits.status();
  p->commits_ = std::move(commits).value();
  p->RestoreLeaseTimes();
  SHOAL_RETURN_IF_ERROR(p->RecoverProducers());
  SHOAL_RETURN_IF_ERROR(p->ClampCommits());
  if (std::string text; p->fs_.ReadWholeFile(EpochsPath(options.dir), &text).ok()) {
    MutexLock lock(p->append_mu_);  // not shared yet; the lock is what the analysis checks
    std::istringstream in(text);
    uint64_t epoch = 0, start = 0;
    while (in >> epoch >> start) {
      if (!p->epochs_.empty() && (epoch <= p->epochs_.back().epoch ||
                                  start < p->epochs_.back().start)) {
        return Status::Corruption(EpochsPath(options.dir) + ": epochs out of order");
      }
      p->epochs_.push_back({epoch, start});
    }
  }
  if (std::string text; p->fs_.ReadWholeFile(RefetchingPath(options.dir), &text).ok()) {
    p->refetching_.store(true);
  }
  if (std::string text; p->fs_.ReadWholeFile(JoiningPath(options.dir), &text).ok()) {
    p->joining_.store(true);
  }
  if (std::string text; p->fs_.ReadWholeFile(FencePath(options.dir), &text).ok()) {
    uint64_t fence = 0;
    std::istringstream in(text);
    if (!(in >> fence)) return Status::Corruption(FencePath(options.dir) + ": not an epoch");
    p->fenced_.store(fence);
  }
  std::string marker;
  if (p->fs_.ReadWholeFile(SealPath(options.dir), &marker).ok()) {
    auto record = DecodeSealRecord(marker);
    if (!record.ok()) return record.status().Annotate(SealPath(options.dir));
    MutexLock lock(p->append_mu_);  // not shared yet; the lock is what the analysis checks
    p->seal_ = std::move(record).value();
    p->seal_end_ = p->seal_.end;
    p->sealed_.store(true);
  }
  // Seeded means a producer snapshot loaded: inherited parent state lives only there, so a
  // missing or damaged one makes the successor inherit again before it takes appends.
  return p;
}

void Partition::NoteForgotten(uint64_t before) {
  const uint64_t n = producers_.evicted_producers() - before;
  if (n == 0) return;
  probe_.producers_forgotten->Increment(static_cast<double>(n));
  Logger("broker")->warn(
      "msg=\"producer table full: forgot the idlest producers; a retry of their old events "
      "would be appended again\" partition={} forgotten={} cap={}",
      id_.value(), n, storage::ProducerTable::kMaxProducers);
}

Status Partition::ClampCommits() {
  const uint64_t end = log_->end_offset();
  for (const auto& [group, commit] : commits_->All()) {
    const uint64_t offset = commit.value();
    if (offset <= end) continue;
    Logger("broker")->warn(
        "msg=\"a commit is past the log's end after a crash; the group resumes at the end\" "
        "partition={} group={} commit={} end={}",
        id_.value(), group, offset, end);
  }
  return commits_->ClampTo(Offset(end));
}

Status Partition::RecoverProducers() {
  std::string bytes;
  uint64_t from = log_->start_offset();
  MutexLock lock(append_mu_);  // at open, not shared yet; the lock is what the analysis checks
  Status st = fs_.ReadWholeFile(SnapshotPath(opts_.dir), &bytes);
  auto snapshot = st.ok() ? DecodeProducerSnapshot(bytes) : std::nullopt;
  if (snapshot) {
    const uint64_t covered = snapshot->covered;
    auto table = storage::ProducerTable::Deserialize(snapshot->table);
    if (table.ok()) {
      producers_ = std::move(table).value();
      seeded_.store(snapshot->seeded);
      producers_durable_.store(snapshot->seeded);
      // A snapshot may cover records a crash took back from the log; forget those.
      producers_.TruncateFrom(id_.value(), log_->end_offset());
      from = std::max(from, std::min(covered, log_->end_offset()));
    } else {
      Logger("broker")->warn("msg=\"ignoring producer snapshot\" partition={} reason=\"{}\"",
                             id_.value(), table.status().message());
    }
  }
  // Replay the log past the snapshot.
  const uint64_t end = log_->end_offset();
  while (from < end) {
    storage::ReadBatch batch;
    SHOAL_RETURN_IF_ERROR(log_->Read(from, end, 65536, 16 << 20, &batch));
    if (batch.records.empty()) break;
    for (const auto& r : batch.records) {
      if (r.seq) producers_.Record(r.producer, *r.seq, {id_.value(), r.offset}, r.timestamp_ms);
    }
    from = batch.records.back().offset + 1;
  }
  producers_snapshot_end_ = end;
  return Status::Ok();
}

std::string Partition::ProducerSnapshotLocked() {
  const uint64_t end = log_->end_offset();
  producers_snapshot_end_ = end;
  // MarkSeeded and InheritFromLeader set seeded_ under this lock after the inherited state is in
  // producers_, so a table serialized after it holds that state.
  return EncodeProducerSnapshot(end, seeded_.load(), producers_.Serialize());
}

Status Partition::WriteProducerSnapshot() {
  std::string bytes;
  bool covers_seeding = false;
  {
    MutexLock lock(append_mu_);
    if (log_->end_offset() == producers_snapshot_end_) return Status::Ok();  // nothing new
    covers_seeding = seeded_.load();
    bytes = ProducerSnapshotLocked();
  }
  return StoreProducerSnapshot(bytes, covers_seeding);
}

Status Partition::StoreProducerSnapshot(const std::string& bytes, bool covers_seeding) {
  Status st = fs_.WriteFileAtomic(SnapshotPath(opts_.dir), bytes);
  if (!st.ok()) {
    // Not on disk: write it again at the next snapshot time even if nothing is appended.
    MutexLock lock(append_mu_);
    producers_snapshot_end_ = UINT64_MAX;
    return st;
  }
  if (covers_seeding) producers_durable_.store(true);
  return st;
}

Status Partition::Append(std::span<const wire::ProduceEvent* const> events,
                         std::span<wire::ProduceResult* const> results) {
  std::vector<uint32_t> hashes(events.size());
  for (size_t i = 0; i < events.size(); ++i) hashes[i] = KeyHash(events[i]->key);
  return Append(events, hashes, results);
}

// The load sketch, per appended event under append_mu_: one bucket increment and a scan of four
// counters (space-saving: a hash point not counted yet takes over the smallest counter and adds
// one to it, so every count is an upper bound and a point with more than 1/4 of the appends is
// always among them).
void Partition::CountLoad(uint32_t hash) {
  const uint64_t lo = opts_.range.lo, width = opts_.range.Width();
  const uint64_t rel = hash >= lo ? hash - lo : 0;
  const uint64_t b = rel * LoadSketch::kBuckets / (width ? width : 1);
  ++load_buckets_[b < LoadSketch::kBuckets ? b : LoadSketch::kBuckets - 1];
  for (size_t k = 0; k < load_top_size_; ++k) {
    if (load_top_[k].hash == hash) {
      ++load_top_[k].count;
      return;
    }
  }
  if (load_top_size_ < LoadSketch::kTopHashes) {
    load_top_[load_top_size_++] = {hash, 1};
    return;
  }
  size_t min = 0;
  for (size_t k = 1; k < LoadSketch::kTopHashes; ++k) {
    if (load_top_[k].count < load_top_[min].count) min = k;
  }
  load_top_[min] = {hash, load_top_[min].count + 1};
}

LoadSketch Partition::Load() const {
  LoadSketch out;
  {
    MutexLock lock(append_mu_);
    out.buckets = load_buckets_;
    out.top.assign(load_top_.begin(), load_top_.begin() + load_top_size_);
  }
  std::sort(out.top.begin(), out.top.end(), [](const auto& a, const auto& b) {
    return a.count != b.count ? a.count > b.count : a.hash < b.hash;
  });
  return out;
}

uint64_t Partition::appended() const {
  return static_cast<uint64_t>(probe_.events_appended->Value());
}

Status Partition::Append(std::span<const wire::ProduceEvent* const> events,
                         std::span<const uint32_t> hashes,
                         std::span<wire::ProduceResult* const> results,
                         std::vector<size_t>* unknown) {
  MutexLock lock(append_mu_);
  // Fencing (invariant 5): a sealed partition's end is final; nothing is appended after it.
  if (sealed_.load()) {
    return Status::Unavailable("partition " + std::to_string(id_.value()) +
                               " is sealed by a change in progress; retry");
  }
  // Fenced for a failover (invariant 10): a leader whose copies the coordinator fences, itself
  // included when it answers, takes nothing more until a map names it the leader at or above
  // the fence (StartLeading).
  if (const uint64_t fence = fenced_.load();
      fence > 0 && (epochs_.empty() || epochs_.back().epoch < fence)) {
    return Status::Unavailable("partition " + std::to_string(id_.value()) +
                               " is fenced for a failover at leader epoch " +
                               std::to_string(fence) + "; retry");
  }
  // Idempotence (invariant 6): a (producer, seq) the state cannot decide is neither appended nor
  // called a duplicate; the whole call is refused before anything is appended.
  std::vector<size_t> undecided = UndecidableLocked(events, hashes);
  if (!undecided.empty()) {
    const auto& first = *events[undecided.front()];
    std::string msg = std::to_string(undecided.size()) + " event(s) carry a (producer, seq) older " +
                      "than what partition " + std::to_string(id_.value()) +
                      " remembers of that producer, e.g. (" + std::string(first.producer) + ", " +
                      std::to_string(*first.seq) +
                      "): whether they were stored cannot be told, so none was appended; send them "
                      "again under a new producer id or seq (docs/producer-state.md)";
    if (unknown) *unknown = std::move(undecided);
    probe_.sequence_unknown->Increment();
    return Status::SequenceUnknown(std::move(msg));
  }
  pending_.clear();
  const uint64_t base = log_->end_offset();
  const int64_t now = clock_.NowMs();
  std::unordered_set<SeqKey, SeqKeyHash> in_batch;  // (producer, seq) first seen in this call
  std::vector<uint64_t> in_batch_offset;
  uint64_t bytes = 0, dups = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& ev = *events[i];
    if (ev.seq) {
      const auto found = producers_.Find(ev.producer, *ev.seq, hashes[i]);
      if (found.verdict == storage::ProducerTable::Verdict::kDuplicate) {
        *results[i] = {found.at.partition, found.at.offset, true};
        ++dups;
        continue;
      }
      auto [it, fresh] = in_batch.insert({ev.producer, *ev.seq});
      if (!fresh) {
        // Same (producer, seq) twice in one request: the second is the duplicate of the first.
        for (size_t j = 0; j < pending_.size(); ++j) {
          if (pending_[j].seq == ev.seq && pending_[j].producer == ev.producer) {
            *results[i] = {id_.value(), base + j, true};
          }
        }
        ++dups;
        continue;
      }
    }
    pending_.push_back({ev.key, ev.value, ev.producer, ev.seq, now, ev.raw});
    bytes += storage::record::EncodedSize(pending_.back());
    *results[i] = {id_.value(), base + pending_.size() - 1, false};
  }
  if (!pending_.empty()) {
    auto first = log_->Append(pending_);
    if (!first.ok()) return first.status();
    const uint64_t forgotten = producers_.evicted_producers();
    for (size_t j = 0; j < pending_.size(); ++j) {
      if (pending_[j].seq) {
        producers_.Record(pending_[j].producer, *pending_[j].seq, {id_.value(), base + j}, now);
      }
    }
    NoteForgotten(forgotten);
    // Every result that is not a duplicate got one of the new offsets just appended.
    for (size_t i = 0; i < events.size(); ++i) {
      if (!results[i]->duplicate) CountLoad(hashes[i]);
    }
    probe_.events_appended->Increment(static_cast<double>(pending_.size()));
    probe_.bytes_appended->Increment(static_cast<double>(bytes));
  }
  if (dups) probe_.duplicates->Increment(static_cast<double>(dups));
  return Status::Ok();
}

Status Partition::WriteSealRecord(const SealRecord& record) {
  return fs_.WriteFileAtomic(SealPath(opts_.dir), EncodeSealRecord(record));
}

std::vector<size_t> Partition::UndecidableLocked(std::span<const wire::ProduceEvent* const> events,
                                                 std::span<const uint32_t> hashes) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& ev = *events[i];
    if (ev.seq && producers_.Find(ev.producer, *ev.seq, hashes[i]).verdict ==
                      storage::ProducerTable::Verdict::kUnknown) {
      out.push_back(i);
    }
  }
  return out;
}

std::vector<size_t> Partition::Undecidable(std::span<const wire::ProduceEvent* const> events,
                                           std::span<const uint32_t> hashes) const {
  MutexLock lock(append_mu_);
  return UndecidableLocked(events, hashes);
}

Result<uint64_t> Partition::Seal() {
  MutexLock lock(append_mu_);
  if (sealed_.load()) return seal_end_;
  return SealLocked();
}

Result<uint64_t> Partition::SealLocked() {
  SHOAL_RETURN_IF_ERROR(SyncLog());
  SealRecord record;
  record.end = log_->end_offset();
  SHOAL_RETURN_IF_ERROR(WriteSealRecord(record));
  seal_ = record;
  seal_end_ = record.end;
  sealed_.store(true);
  return record.end;
}

Result<uint64_t> Partition::SealAt(uint64_t end, bool cut_past) {
  std::optional<std::string> snapshot;  // of the producer state, after a cut
  Result<uint64_t> sealed = [&]() -> Result<uint64_t> {
    MutexLock lock(append_mu_);
    const std::string me = "partition " + std::to_string(id_.value());
    if (sealed_.load()) {
      if (seal_end_ == end) return seal_end_;
      return Status::Conflict(me + " is sealed here at " + std::to_string(seal_end_) + ", not " +
                              std::to_string(end));
    }
    const uint64_t held = log_->end_offset();
    if (held < end || (held > end && !cut_past)) {
      return Status::Conflict(me + " ends at " + std::to_string(held) +
                              " here, not at the sealed end " + std::to_string(end) +
                              " the map records");
    }
    SHOAL_RETURN_IF_ERROR(CutPastLocked(end, &snapshot));
    return SealLocked();
  }();
  if (sealed.ok() && snapshot) {
    SHOAL_RETURN_IF_ERROR(StoreProducerSnapshot(*snapshot, seeded_.load()));
  }
  return sealed;
}

namespace {
// The same successor partitions (ids and ranges), whatever their leaders.
bool SameSuccessorPartitions(const std::vector<SuccessorRef>& a,
                             const std::vector<SuccessorRef>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.id == y.id && x.range == y.range;
  });
}
}  // namespace

// Fencing of seals (invariant 5): one partition is sealed for one change. Two coordinators that
// both believe they mint epoch e build two different maps; whichever seal arrives first names
// the change, and the other is refused, so at most one of the two changes can ever make a
// successor of this partition take writes (a successor needs ConfirmSuccessor, below).
Result<uint64_t> Partition::Seal(const SealIntent& intent, Epoch held, std::optional<uint64_t> at) {
  std::optional<std::string> snapshot;  // of the producer state, after a cut
  Result<uint64_t> sealed = [&] {
    MutexLock lock(append_mu_);
    return SealForLocked(intent, held, at, &snapshot);
  }();
  if (sealed.ok() && snapshot) {
    SHOAL_RETURN_IF_ERROR(StoreProducerSnapshot(*snapshot, seeded_.load()));
  }
  return sealed;
}

Result<uint64_t> Partition::SealForLocked(const SealIntent& intent, Epoch held,
                                          std::optional<uint64_t> at,
                                          std::optional<std::string>* snapshot) {
  const std::string me = "partition " + std::to_string(id_.value());
  if (intent.range && *intent.range != opts_.range) {
    return Status::Conflict(me + " has the range [" + std::to_string(opts_.range.lo) + ", " +
                            std::to_string(opts_.range.hi) + ") here, not [" +
                            std::to_string(intent.range->lo) + ", " +
                            std::to_string(intent.range->hi) + ") as the change's map has it");
  }
  if (sealed_.load()) {
    if (at && *at != seal_end_) {
      return Status::FailedPrecondition(me + " is sealed here at " + std::to_string(seal_end_) +
                                        ", not at " + std::to_string(*at) +
                                        ", the end the change's seal was answered with");
    }
    if (!seal_.intent) return seal_end_;  // sealed before seals named their change
    const SealIntent& was = *seal_.intent;
    if (was.epoch == intent.epoch && was.digest == intent.digest) return seal_end_;
    const std::string sealed_for = me + " is sealed for the change of epoch " +
                                   std::to_string(was.epoch.value()) + " (map " + was.digest +
                                   ")";
    if (intent.epoch < was.epoch) {
      return Status::StaleEpoch(sealed_for + "; this seal is for epoch " +
                                std::to_string(intent.epoch.value()));
    }
    if (intent.epoch > was.epoch && SameSuccessorPartitions(intent.successors, was.successors)) {
      // The same change carried on at a later epoch (a coordinator that declared a pod's
      // partitions lost, or failed a leader over, on top of a change in progress): the
      // successors, the only writers this seal lets in, are the same partitions (a failover
      // may have given one a new leader from its copies).
      SealRecord record = seal_;
      record.intent = intent;
      SHOAL_RETURN_IF_ERROR(WriteSealRecord(record));
      seal_ = std::move(record);
      return seal_end_;
    }
    if (intent.epoch == was.epoch || !seal_.confirmed.empty() || held >= was.epoch) {
      return Status::Conflict(sealed_for + ", not for map " + intent.digest + " of epoch " +
                              std::to_string(intent.epoch.value()) +
                              (seal_.confirmed.empty() ? "" : "; a successor took over from it"));
    }
    // The earlier change was abandoned before any successor took over: seal for this one.
    SealRecord record = seal_;
    record.intent = intent;
    SHOAL_RETURN_IF_ERROR(WriteSealRecord(record));
    seal_ = std::move(record);
    return seal_end_;
  }
  if (intent.epoch <= held) {
    return Status::StaleEpoch("stale epoch " + std::to_string(intent.epoch.value()) +
                              ": this sidecar holds epoch " + std::to_string(held.value()));
  }
  if (at) {
    // Sealed before, elsewhere, at `at` (a failover carried in the change made this copy the
    // leader after the first seal was answered): its successors may have taken writes from
    // there, so it is sealed there too. What it holds past it was never acknowledged (the first
    // seal took everything its leader had, and it was answered once a quorum held it).
    const uint64_t end = log_->end_offset();
    if (end < *at) {
      return Status::Unavailable(me + " holds " + std::to_string(end) +
                                 " events here, less than the end " + std::to_string(*at) +
                                 " it was sealed at for this change: it cannot be sealed here");
    }
    SHOAL_RETURN_IF_ERROR(CutPastLocked(*at, snapshot));
  }
  // The seal is durable before it is acknowledged: a restarted sidecar must never append to a
  // partition whose successor may already accept writes (invariant 2).
  SHOAL_RETURN_IF_ERROR(SyncLog());
  SealRecord record;
  record.end = log_->end_offset();
  record.intent = intent;
  SHOAL_RETURN_IF_ERROR(WriteSealRecord(record));
  seal_ = std::move(record);
  seal_end_ = seal_.end;
  sealed_.store(true);
  return seal_end_;
}

Status Partition::ConfirmSuccessor(const SuccessorRef& s) {
  MutexLock lock(append_mu_);
  const std::string me = "partition " + std::to_string(id_.value());
  if (!sealed_.load()) {
    return Status::Unavailable(me + " is not sealed yet; " + Describe(s) + " waits for its seal");
  }
  if (!seal_.intent) return Status::Ok();
  const auto& listed = seal_.intent->successors;
  if (std::find(listed.begin(), listed.end(), s) == listed.end()) {
    return Status::Conflict(me + " is sealed for the change of epoch " +
                            std::to_string(seal_.intent->epoch.value()) + " (map " +
                            seal_.intent->digest + "), which does not create " + Describe(s));
  }
  if (std::binary_search(seal_.confirmed.begin(), seal_.confirmed.end(), s.id.value())) {
    return Status::Ok();
  }
  SealRecord record = seal_;
  record.confirmed.insert(
      std::lower_bound(record.confirmed.begin(), record.confirmed.end(), s.id.value()),
      s.id.value());
  SHOAL_RETURN_IF_ERROR(WriteSealRecord(record));
  seal_ = std::move(record);
  return Status::Ok();
}

bool Partition::SealVoidFor(const PartitionInfo& info, Epoch map_epoch) const {
  MutexLock lock(append_mu_);
  return sealed_.load() && SealVoid(seal_, info, map_epoch);
}

Status Partition::Unseal() {
  MutexLock lock(append_mu_);
  if (!sealed_.load()) return Status::Ok();
  if (!seal_.intent || !seal_.confirmed.empty()) {
    return Status::FailedPrecondition("partition " + std::to_string(id_.value()) +
                                      " cannot be unsealed: a successor took over from it");
  }
  SHOAL_RETURN_IF_ERROR(fs_.Remove(SealPath(opts_.dir)));
  SHOAL_RETURN_IF_ERROR(fs_.SyncDir(opts_.dir));
  Logger("broker")->warn(
      "msg=\"seal undone: the change it was made for lost to another map of its epoch\" "
      "partition={} end={} epoch={} map={}",
      id_.value(), seal_.end, seal_.intent->epoch.value(), seal_.intent->digest);
  seal_ = SealRecord{};
  sealed_.store(false);
  return Status::Ok();
}

std::optional<uint64_t> Partition::sealed_end() const {
  if (!sealed_.load()) return std::nullopt;
  return seal_end_;
}

std::optional<SealRecord> Partition::seal_record() const {
  MutexLock lock(append_mu_);
  if (!sealed_.load()) return std::nullopt;
  return seal_;
}

std::string Partition::ExportProducers() {
  MutexLock lock(append_mu_);
  return producers_.Serialize();
}

Status Partition::InheritProducers(const std::string& serialized) {
  auto table = storage::ProducerTable::Deserialize(serialized);
  if (!table.ok()) return table.status();
  MutexLock lock(append_mu_);
  const uint64_t forgotten = producers_.evicted_producers();
  producers_.Inherit(*table);
  NoteForgotten(forgotten);
  return Status::Ok();
}

bool Partition::seeded() const { return seeded_.load(); }

std::string Partition::ExportInheritedProducers() {
  MutexLock lock(append_mu_);
  // What this partition's own log records, a follower takes from the records it copies; the
  // rest (entries and marks of the lineage) it cannot find anywhere but here.
  storage::ProducerTable inherited = producers_;
  inherited.TruncateFrom(id_.value(), 0);
  return inherited.Serialize();
}

Status Partition::InheritFromLeader(std::string_view serialized) {
  auto table = storage::ProducerTable::Deserialize(serialized);
  if (!table.ok()) return table.status();
  std::string bytes;
  {
    MutexLock lock(append_mu_);
    const uint64_t forgotten = producers_.evicted_producers();
    producers_.Inherit(*table);
    NoteForgotten(forgotten);
    seeded_.store(true);
    bytes = ProducerSnapshotLocked();
  }
  // Durable before the follower says it holds the state: the leader's parents may be retired
  // once every copy does (producers_durable in the admin plane's view).
  return StoreProducerSnapshot(bytes, /*covers_seeding=*/true);
}

void Partition::NoteFollowerSeeded(const std::string& follower, bool seeded) {
  MutexLock lock(mirror_mu_);
  if (seeded) {
    followers_seeded_.insert(follower);
  } else {
    followers_seeded_.erase(follower);
  }
}

bool Partition::FollowersSeeded(const std::vector<PodName>& followers) const {
  MutexLock lock(mirror_mu_);
  for (const auto& f : followers) {
    if (!followers_seeded_.contains(f.value())) return false;
  }
  return true;
}

Status Partition::MarkSeeded() {
  // Not synced here, to keep the write pause short: the ticker writes the next producer snapshot
  // (with the inherited state) within kSnapshotEveryMs. A crash before that leaves no snapshot,
  // so the restarted partition is not seeded and inherits again from its sealed parents, which
  // stay until retired; retiring a parent must wait for its successors' snapshots, which
  // producers_durable() reports.
  MutexLock lock(append_mu_);
  producers_snapshot_end_ = UINT64_MAX;  // differs from any end: the next snapshot is written
  snapshot_due_.store(true);             // at the next tick
  seeded_.store(true);
  return Status::Ok();
}

Status Partition::SyncForAck() {
  if (opts_.fsync != FsyncPolicy::kAlways) return Status::Ok();
  return SyncLog();
}

Status Partition::SyncLog() {
  auto r = log_->Sync();
  return r.ok() ? Status::Ok() : r.status();
}

uint64_t Partition::held_end() const {
  return opts_.fsync == FsyncPolicy::kAlways ? log_->durable_offset() : log_->end_offset();
}

uint64_t Partition::visible_end() const {
  const uint64_t held = held_end();
  return quorum_->replicated() ? std::min(held, quorum_->followers_mark()) : held;
}

Result<Partition::Browsed> Partition::Browse(uint64_t from, size_t max,
                                             const std::optional<std::string>& key,
                                             std::string* out) const {
  Browsed b;
  b.from = std::max(from, log_->start_offset());
  b.next = b.from;
  const uint64_t end = visible_end();
  size_t scanned = 0;
  size_t scanned_bytes = 0;  // read from the log, matching or not
  size_t bytes = 0;          // answered
  constexpr size_t kMaxBytes = 1 << 20;
  while (b.next < end && b.count < max && scanned < kBrowseScanRecords &&
         scanned_bytes < kBrowseScanBytes && bytes < kMaxBytes) {
    storage::ReadBatch batch;
    const size_t want = key ? std::min<size_t>(4096, kBrowseScanRecords - scanned) : max - b.count;
    SHOAL_RETURN_IF_ERROR(log_->Read(b.next, end, want, kMaxBytes - bytes, &batch));
    if (batch.records.empty()) break;
    scanned_bytes += batch.bytes;
    for (const auto& r : batch.records) {
      b.next = r.offset + 1;
      ++scanned;
      if (key && r.key != *key) continue;
      if (b.count > 0) out->push_back(',');
      const size_t before = out->size();
      wire::AppendConsumedEvent(*out, r.key, r.value, r.raw, id_.value(), r.offset, r.producer,
                                r.seq, r.timestamp_ms);
      bytes += out->size() - before;
      if (++b.count == max || bytes >= kMaxBytes) break;
    }
  }
  return b;
}

Result<size_t> Partition::ReadCopy(uint64_t from, size_t max_bytes, std::string* out) const {
  storage::ReadBatch batch;
  batch.stored = out;  // the bytes as stored, not encoded again
  SHOAL_RETURN_IF_ERROR(log_->Read(from, log_->end_offset(), SIZE_MAX, max_bytes, &batch));
  return batch.records.size();
}

Result<uint64_t> Partition::AppendCopied(uint64_t first, std::string_view records,
                                         uint64_t leader_start, uint64_t leader_epoch) {
  if (fenced_.load() > leader_epoch) {
    return Status::FailedPrecondition("copy fenced at leader epoch " +
                                      std::to_string(fenced_.load()));
  }
  leader_start_.store(leader_start);
  if (!records.empty()) {
    MutexLock lock(append_mu_);
    // Checked again under the lock Fence takes: nothing from an older leader lands after it.
    if (fenced_.load() > leader_epoch) {
      return Status::FailedPrecondition("copy fenced at leader epoch " +
                                        std::to_string(fenced_.load()));
    }
    std::vector<storage::RecordView> copied;  // as the log checked them
    auto r = log_->AppendCopied(first, records, &copied);
    if (!r.ok()) return r.status();
    for (const auto& rec : copied) {
      if (rec.seq) {
        producers_.Record(rec.producer, *rec.seq, {id_.value(), rec.offset}, rec.timestamp_ms);
      }
    }
  }
  if (!records.empty() && opts_.fsync == FsyncPolicy::kAlways) SHOAL_RETURN_IF_ERROR(SyncLog());
  return held_end();
}

std::vector<replication::EpochStart> Partition::epochs() const {
  MutexLock lock(append_mu_);
  return epochs_;
}

uint64_t Partition::last_epoch() const {
  MutexLock lock(append_mu_);
  const uint64_t end = log_->end_offset();
  for (auto it = epochs_.rbegin(); it != epochs_.rend(); ++it) {
    if (it->start < end) return it->epoch;
  }
  return 0;
}

Status Partition::WriteEpochs() {
  std::string text;
  for (const auto& e : epochs_) text += std::to_string(e.epoch) + " " + std::to_string(e.start) + "\n";
  return fs_.WriteFileAtomic(EpochsPath(opts_.dir), text);
}

Result<replication::ReplicaState> Partition::Fence(uint64_t leader_epoch) {
  MutexLock lock(append_mu_);
  if (leader_epoch > fenced_.load()) {
    SHOAL_RETURN_IF_ERROR(fs_.WriteFileAtomic(FencePath(opts_.dir), std::to_string(leader_epoch)));
    fenced_.store(leader_epoch);
  }
  replication::ReplicaState s;
  s.end = log_->end_offset();
  s.refetching = refetching_.load();
  s.joining = joining_.load();
  for (auto it = epochs_.rbegin(); it != epochs_.rend(); ++it) {
    if (it->start < s.end) {
      s.last_epoch = Epoch(it->epoch);
      break;
    }
  }
  return s;
}

Status Partition::MarkRefetching() {
  SHOAL_RETURN_IF_ERROR(fs_.WriteFileAtomic(RefetchingPath(opts_.dir), "refetching\n"));
  refetching_.store(true);
  return Status::Ok();
}

Status Partition::CaughtUpTo(uint64_t leader_end) {
  if ((!refetching_.load() && !joining_.load()) || held_end() < leader_end ||
      mirrored().first == 0) {
    return Status::Ok();
  }
  if (refetching_.load()) {
    SHOAL_RETURN_IF_ERROR(fs_.Remove(RefetchingPath(opts_.dir)));
    refetching_.store(false);
  }
  if (joining_.load()) {
    SHOAL_RETURN_IF_ERROR(fs_.Remove(JoiningPath(opts_.dir)));
    joining_.store(false);
  }
  return Status::Ok();
}

Status Partition::MarkJoining(storage::FileSystem& fs, const std::string& dir) {
  SHOAL_RETURN_IF_ERROR(fs.CreateDirs(dir));
  return fs.WriteFileAtomic(JoiningPath(dir), "joining\n");
}

Status Partition::MarkJoining() {
  SHOAL_RETURN_IF_ERROR(fs_.WriteFileAtomic(JoiningPath(opts_.dir), "joining\n"));
  joining_.store(true);
  return Status::Ok();
}

Status Partition::FenceAbsent(storage::FileSystem& fs, const std::string& dir,
                              uint64_t leader_epoch) {
  if (FenceIn(fs, dir) >= leader_epoch) return Status::Ok();
  SHOAL_RETURN_IF_ERROR(fs.CreateDirs(dir));
  return fs.WriteFileAtomic(FencePath(dir), std::to_string(leader_epoch));
}

uint64_t Partition::FenceIn(storage::FileSystem& fs, const std::string& dir) {
  std::string text;
  if (!fs.ReadWholeFile(FencePath(dir), &text).ok()) return 0;
  uint64_t fence = 0;
  std::istringstream in(text);
  return (in >> fence) ? fence : 0;
}

Status Partition::StartLeading(Epoch e) {
  MutexLock lock(append_mu_);
  if (!epochs_.empty() && epochs_.back().epoch >= e.value()) return Status::Ok();
  const uint64_t end = log_->end_offset();
  // An epoch that appended nothing is overtaken by this one.
  while (!epochs_.empty() && epochs_.back().start >= end) epochs_.pop_back();
  epochs_.push_back({e.value(), epochs_.empty() ? log_->start_offset() : end});
  return WriteEpochs();
}

Status Partition::TakeLeaderEpochs(const std::vector<replication::EpochStart>& leader) {
  MutexLock lock(append_mu_);
  const uint64_t end = log_->end_offset();
  std::vector<replication::EpochStart> next;
  for (const auto& e : leader) {
    if (e.start < end) next.push_back(e);
  }
  if (next == epochs_) return Status::Ok();
  epochs_ = std::move(next);
  return WriteEpochs();
}

Status Partition::CutTo(uint64_t offset) {
  std::string snapshot;
  {
    MutexLock lock(append_mu_);
    auto cut = CutLocked(offset);
    if (!cut.ok()) return cut.status();
    snapshot = std::move(cut).value();
  }
  return StoreProducerSnapshot(snapshot, seeded_.load());
}

Status Partition::StartAt(uint64_t leader_start,
                          const std::vector<replication::EpochStart>& leader_epochs) {
  std::string snapshot;
  {
    MutexLock lock(append_mu_);
    if (log_->end_offset() >= leader_start) return Status::Ok();  // nothing to skip
    // As a cut does: no snapshot may claim records the log no longer has.
    producers_durable_.store(false);
    if (Status rm = fs_.Remove(SnapshotPath(opts_.dir));
        !rm.ok() && rm.code() != Status::Code::kNotFound) {
      return rm;
    }
    SHOAL_RETURN_IF_ERROR(log_->StartAfresh(leader_start));
    epochs_.clear();
    for (const auto& e : leader_epochs) {
      if (e.start < leader_start) epochs_.push_back(e);
    }
    SHOAL_RETURN_IF_ERROR(WriteEpochs());
    snapshot = ProducerSnapshotLocked();
  }
  return StoreProducerSnapshot(snapshot, seeded_.load());
}

Status Partition::CutPastLocked(uint64_t end, std::optional<std::string>* snapshot) {
  if (log_->end_offset() <= end) return Status::Ok();
  auto cut = CutLocked(end);
  if (!cut.ok()) return cut.status();
  *snapshot = std::move(cut).value();
  return Status::Ok();
}

Result<std::string> Partition::CutLocked(uint64_t offset) {
  // No snapshot covers the records about to be cut, even if the one below is not written: a
  // restart then replays the whole log (and a follower takes its leader's inherited state
  // again). Not durable until that one is on disk.
  producers_durable_.store(false);
  if (Status rm = fs_.Remove(SnapshotPath(opts_.dir));
      !rm.ok() && rm.code() != Status::Code::kNotFound) {
    return rm;
  }
  SHOAL_RETURN_IF_ERROR(log_->TruncateTo(offset));
  producers_.TruncateFrom(id_.value(), offset);
  while (!epochs_.empty() && epochs_.back().start >= offset) epochs_.pop_back();
  SHOAL_RETURN_IF_ERROR(WriteEpochs());
  // A snapshot on disk may cover the records cut: once other records take their offsets, a
  // restart would keep the cut ones' (producer, seq) and skip replaying the new ones.
  return ProducerSnapshotLocked();
}

uint64_t Partition::Standing(std::optional<Offset> committed) const {
  // Retention removes only what every group with a commit has committed, but a commit can still
  // lie below the oldest event (a group's first commit after retention passed it, a low commit):
  // nothing below it can be handed out any more, so the group stands there.
  return std::max(committed.value_or(Offset(0)).value(), log_->start_offset());
}

bool Partition::HasDataFor(const std::string& group) const {
  const uint64_t end = visible_end();
  MutexLock lock(cursor_mu_);
  const uint64_t stands = Standing(commits_->Get(group));
  auto it = cursors_.find(group);
  if (it != cursors_.end() && it->second.next > stands) return false;  // a batch is out
  if (!HeldByOthers(group, "", clock_.NowMs()).empty()) return false;  // a range batch is out
  return stands < end;
}

bool Partition::LeaseHolds(const std::string& group, const storage::ReadLease& lease,
                           int64_t now) const {
  if (lease.complete) return false;
  auto t = lease_times_.find({group, lease.reader});
  if (t == lease_times_.end()) return false;
  return !t->second.expired && now - t->second.handed_ms < opts_.redelivery_ms;
}

bool Partition::WholeBatchOut(const std::string& group, uint64_t low) const {
  auto it = cursors_.find(group);
  return it != cursors_.end() && it->second.next > low;
}

bool Partition::HandedWholeBatch(const std::string& group, Offset offset) const {
  MutexLock lock(cursor_mu_);
  auto it = cursors_.find(group);
  return WholeBatchOut(group, Standing(commits_->Get(group))) && it != cursors_.end() &&
         offset.value() <= it->second.next;
}

std::vector<HashRange> Partition::HeldByOthers(const std::string& group,
                                               const std::string& reader, int64_t now) const {
  std::vector<HashRange> held;
  if (!commits_->HasLeases(group)) return held;
  for (const auto& [other, lease] : commits_->LeasesOf(group)) {
    if (other == reader || !LeaseHolds(group, lease, now)) continue;
    held.insert(held.end(), lease.ranges.begin(), lease.ranges.end());
  }
  return NormalizeRanges(std::move(held));
}

Status Partition::RecordWholeBatches() {
  if (opts_.pod.empty()) return Status::Ok();
  MutexLock lock(cursor_mu_);
  for (const auto& [group, c] : cursors_) {
    if (!WholeBatchOut(group, Standing(commits_->Get(group)))) continue;
    storage::ReadLease lease{opts_.pod, {opts_.range}, c.next, c.next, false};
    SHOAL_RETURN_IF_ERROR(commits_->PutLease(group, lease, opts_.fsync == FsyncPolicy::kAlways));
    lease_times_[{group, opts_.pod}] = {c.progress_ms, false, false};
  }
  return Status::Ok();
}

uint64_t Partition::StandingOver(const std::string& group, const HashRange& range) const {
  auto st = commits_->Standing(group);
  const uint64_t at = st ? st->MinOver(range) : 0;
  return std::max(at, log_->start_offset());
}

uint64_t Partition::LagOf(const std::string& group) const {
  const uint64_t end = end_offset();
  auto st = commits_->Standing(group);
  const uint64_t start = log_->start_offset();
  if (!st) return end > start ? end - start : 0;
  RangeStanding floor = *st;
  floor.RaiseAll(start);  // nothing below the oldest retained event is left to consume
  return static_cast<uint64_t>(floor.LagEstimate(end) + 0.5);
}

Result<RangeBatch> Partition::ReadRanges(const std::string& group, const std::string& reader,
                                         const std::vector<HashRange>& asked, size_t max,
                                         size_t max_bytes, bool comma_first, std::string* out,
                                         wire::Format format) {
  // Bounds the work of one call over ranges that hold little of the partition: the scan stops
  // after this many records, and the next call goes on from there (its ranges committed to
  // where it stopped when it found nothing).
  constexpr size_t kScanRecords = 1 << 16;
  RangeBatch b;
  if (gathering()) return b;  // its groups' commits first (StartGathering)
  std::vector<HashRange> mine;
  for (const auto& r : asked) mine.push_back(Intersect(r, opts_.range));
  mine = NormalizeRanges(std::move(mine));
  const auto end_of = [&] {
    const auto sealed = sealed_end();
    return sealed ? std::min(*sealed, visible_end()) : visible_end();
  };
  MutexLock lock(cursor_mu_);
  const int64_t now = clock_.NowMs();
  auto standing = commits_->Standing(group).value_or(RangeStanding(opts_.range, 0));
  standing.RaiseAll(log_->start_offset());  // retention passed what is below it
  const uint64_t end = end_of();
  auto consumed = [&] {
    if (!sealed_end()) return false;
    for (const auto& r : mine) {
      if (standing.MinOver(r) < end) return false;
    }
    return true;
  };
  // One batch out per group and reader (see ReadForGroup for why).
  if (auto own = commits_->Lease(group, reader); own && LeaseHolds(group, *own, now)) {
    auto t = lease_times_.find({group, reader});
    if (t == lease_times_.end() || !t->second.restored) {
      b.consumed = consumed();
      return b;
    }
    // Restored by a restart: the reader's consumers ask again, so they lost it; hand it again.
  }
  if (WholeBatchOut(group, standing.Low())) {
    auto it = cursors_.find(group);
    if (now - it->second.progress_ms <= opts_.redelivery_ms) {
      b.consumed = consumed();
      return b;
    }
  }
  b.ranges = SubtractRanges(mine, HeldByOthers(group, reader, now));
  if (b.ranges.empty() || max == 0) {
    b.consumed = consumed();
    return b;
  }
  uint64_t from = UINT64_MAX;
  for (const auto& r : b.ranges) from = std::min(from, standing.MinOver(r));
  uint64_t pos = from;
  size_t scanned = 0, bytes = 0;
  bool comma = comma_first;
  bool full = false;
  while (pos < end && !full && scanned < kScanRecords) {
    storage::ReadBatch batch;
    SHOAL_RETURN_IF_ERROR(log_->Read(pos, end, 1024, 1 << 20, &batch));
    if (batch.records.empty()) break;
    for (const auto& r : batch.records) {
      ++scanned;
      pos = r.offset + 1;
      const uint32_t h = KeyHash(r.key);
      auto in = std::upper_bound(b.ranges.begin(), b.ranges.end(), uint64_t{h},
                                 [](uint64_t x, const HashRange& e) { return x < e.lo; });
      if (in == b.ranges.begin() || !(--in)->Contains(h)) continue;
      if (r.offset < standing.At(h)) continue;  // consumed already at this hash point
      wire::AppendAnswerEvent(format, *out, comma, r.key, r.value, r.raw, id_.value(), r.offset,
                              r.producer, r.seq, r.timestamp_ms);
      comma = true;
      ++b.count;
      b.last = r.offset + 1;
      bytes += storage::record::EncodedSize(
          {r.key, r.value, r.producer, r.seq, r.timestamp_ms});
      if (b.count >= max || bytes >= max_bytes) {
        full = true;
        break;
      }
    }
  }
  b.scanned_to = std::max(pos, from);
  if (b.count == 0) {
    // Nothing of these ranges in [from, scanned_to): consumed there, at every hash point.
    if (b.scanned_to > from) {
      auto moved = commits_->CommitRanges(group, b.ranges, Offset(b.scanned_to),
                                          opts_.fsync == FsyncPolicy::kAlways);
      if (!moved.ok()) return moved.status();
      for (const auto& r : b.ranges) standing.Raise(r, b.scanned_to);
    }
    b.consumed = consumed();
    return b;
  }
  // Recorded before it goes out: the reader's commit must find its ranges after any restart.
  storage::ReadLease lease{reader, b.ranges, b.last, b.scanned_to, false};
  SHOAL_RETURN_IF_ERROR(commits_->PutLease(group, lease, opts_.fsync == FsyncPolicy::kAlways));
  lease_times_[{group, reader}] = {now, false, false};
  probe_.events_consumed->Increment(static_cast<double>(b.count));
  probe_.bytes_consumed->Increment(static_cast<double>(bytes));
  return b;
}

bool Partition::HasDataInRanges(const std::string& group, const std::string& reader,
                                const std::vector<HashRange>& asked) const {
  std::vector<HashRange> mine;
  for (const auto& r : asked) mine.push_back(Intersect(r, opts_.range));
  mine = NormalizeRanges(std::move(mine));
  const uint64_t end = visible_end();
  MutexLock lock(cursor_mu_);
  const int64_t now = clock_.NowMs();
  if (auto own = commits_->Lease(group, reader); own && LeaseHolds(group, *own, now)) return false;
  const auto open = SubtractRanges(mine, HeldByOthers(group, reader, now));
  for (const auto& r : open) {
    if (StandingOver(group, r) < end) return true;
  }
  return false;
}

Status Partition::CommitBy(const std::string& group, const std::string& reader, Offset offset,
                           bool require_lease) {
  std::optional<storage::ReadLease> lease;
  {
    MutexLock lock(cursor_mu_);
    lease = commits_->Lease(group, reader);
    if (lease && lease->complete && !require_lease &&
        WholeBatchOut(group, Standing(commits_->Get(group)))) {
      lease.reset();  // an older batch read through ranges; a whole-partition batch is out now
    }
  }
  if (!lease && require_lease) {
    return Status::NotFound("group " + group + " has no batch of partition " +
                            std::to_string(id_.value()) + " read through pod " + reader +
                            "; only what a pod's consumers read through ranges is committed for "
                            "them");
  }
  if (!lease) return Commit(group, offset);
  if (offset.value() > end_offset()) {
    return Status::InvalidArgument("offset " + std::to_string(offset.value()) +
                                   " is past the end " + std::to_string(end_offset()) +
                                   " of partition " + std::to_string(id_.value()));
  }
  const bool sync = opts_.fsync == FsyncPolicy::kAlways;
  // The whole batch processed: its ranges are consumed through the scan's end (nothing of them
  // lies between its last event and there). Part of it: through `offset`.
  const bool whole = offset.value() >= lease->last;
  const uint64_t to = whole ? std::max(lease->scanned_to, lease->last) : offset.value();
  auto moved = commits_->CommitRanges(group, lease->ranges, Offset(to), false);
  if (!moved.ok()) return moved.status();
  if (whole && !lease->complete) {
    storage::ReadLease done = *lease;
    done.complete = true;
    SHOAL_RETURN_IF_ERROR(commits_->PutLease(group, done, false));
  }
  if (sync) SHOAL_RETURN_IF_ERROR(commits_->Sync());
  MutexLock lock(cursor_mu_);
  auto [it, fresh] = cursors_.try_emplace(group);
  if (fresh) it->second.next = Standing(commits_->Get(group));
  it->second.active_ms = clock_.NowMs();
  if (*moved) it->second.progress_ms = clock_.NowMs();
  if (whole) lease_times_.erase({group, reader});
  return Status::Ok();
}

Result<size_t> Partition::ReadForGroup(const std::string& group, size_t max, size_t max_bytes,
                                       bool comma_first, std::string* out, wire::Format format) {
  if (gathering()) return size_t{0};  // its groups' commits first (StartGathering)
  MutexLock lock(cursor_mu_);
  auto [it, fresh] = cursors_.try_emplace(group);
  Cursor& c = it->second;
  // A group with no commits starts at the oldest retained event.
  const uint64_t stands = Standing(commits_->Get(group));
  if (fresh) {
    c.next = stands;
    c.progress_ms = clock_.NowMs();
  }
  c.active_ms = clock_.NowMs();
  // Retention may have passed the cursor, and a commit may be ahead of it (Commit stores the
  // commit before it moves the cursor): never hand out what the group committed.
  c.next = std::max(c.next, stands);
  // One batch out per group at a time: what was handed out must be committed (or come back by
  // redelivery, see Tick) before anything after it goes out. Commits are cumulative ("processed
  // everything below"), so a later batch's commit would otherwise also commit a batch handed to
  // a consumer that died without committing it (a restarted consumer would skip it: lost for
  // the group, invariant 4), and a redelivered batch would arrive after later events of its keys
  // (invariant 7). As in Kafka, one consumer of a group reads a partition at a time; concurrent
  // requests of the group are served from other partitions.
  if (c.next > stands) return size_t{0};
  // Nor while a batch read through ranges is out (the partition became an ancestor in some
  // pod's map before in this one's): its events are not to go out twice.
  if (!HeldByOthers(group, "", clock_.NowMs()).empty()) return size_t{0};
  const uint64_t end = visible_end();
  if (c.next >= end || max == 0) return size_t{0};
  storage::ReadBatch batch;
  SHOAL_RETURN_IF_ERROR(log_->Read(c.next, end, max, max_bytes, &batch));
  c.progress_ms = clock_.NowMs();  // the redelivery timer runs from the hand-out
  // Parts of the range consumed further (read through ranges before) skip what they consumed.
  std::optional<RangeStanding> per_point;
  if (commits_->HasRaised(group)) per_point = commits_->Standing(group);
  bool comma = comma_first;
  size_t n = 0;
  for (const auto& r : batch.records) {
    if (per_point && r.offset < per_point->At(KeyHash(r.key))) continue;
    wire::AppendAnswerEvent(format, *out, comma, r.key, r.value, r.raw, id_.value(), r.offset,
                            r.producer, r.seq, r.timestamp_ms);
    comma = true;
    ++n;
  }
  if (!batch.records.empty()) c.next = batch.records.back().offset + 1;
  if (n > 0 && !opts_.pod.empty() && (sealed_.load() || commit_quorum_->replicated())) {
    // The batch is recorded in the commit store, so that the late commit of it still means this
    // batch: a sealed partition's successors may read it through ranges after a restart of this
    // sidecar, and a replicated one's copies mirror the lease, so that a copy made the leader by
    // a failover does not hand the batch to another consumer of the group while the one that
    // holds it is about to commit it (Topic::Consume answers once a quorum holds the lease).
    storage::ReadLease lease{opts_.pod, {opts_.range}, c.next, c.next, false};
    SHOAL_RETURN_IF_ERROR(commits_->PutLease(group, lease, opts_.fsync == FsyncPolicy::kAlways));
    lease_times_[{group, opts_.pod}] = {clock_.NowMs(), false, false};
  }
  probe_.events_consumed->Increment(static_cast<double>(n));
  probe_.bytes_consumed->Increment(static_cast<double>(batch.bytes));
  return n;
}

Status Partition::Commit(const std::string& group, Offset commit) {
  const uint64_t offset = commit.value();
  const uint64_t end = log_->end_offset();
  if (offset > end) {
    return Status::InvalidArgument("offset " + std::to_string(offset) + " is past the end " +
                                   std::to_string(end) + " of partition " +
                                   std::to_string(id_.value()));
  }
  const bool sync = opts_.fsync == FsyncPolicy::kAlways;
  auto moved = commits_->Commit(group, commit, sync);
  if (!moved.ok()) return moved.status();
  MutexLock lock(cursor_mu_);
  if (commits_->HasLeases(group)) {
    // Every batch out that ends at or below the commit is committed now, at every hash point:
    // complete (a failover's new leader takes the commit of a batch its old leader handed out,
    // passed on by the reader's pod, as a whole-partition one).
    for (auto [reader, lease] : commits_->LeasesOf(group)) {
      if (lease.complete || lease.last > offset) continue;
      lease.complete = true;
      SHOAL_RETURN_IF_ERROR(commits_->PutLease(group, lease, sync));
      lease_times_.erase({group, lease.reader});
    }
  }
  // A group that only commits (its reads go elsewhere, or not yet) gets a cursor too: at its
  // commit, which is where a first read would put it; its time says the group is alive.
  auto [it, fresh] = cursors_.try_emplace(group);
  Cursor& c = it->second;
  c.next = std::max(c.next, offset);
  if (fresh || *moved) c.progress_ms = clock_.NowMs();
  c.active_ms = clock_.NowMs();
  return Status::Ok();
}

Status Partition::CheckGroupIdle(const std::string& group) const {
  MutexLock lock(cursor_mu_);
  const std::string where = "group " + group + " on partition " + std::to_string(id_.value());
  if (!HeldByOthers(group, "", clock_.NowMs()).empty()) {
    return Status::FailedPrecondition(where + " has a batch out, read through hash ranges, that "
                                      "it has not committed");
  }
  auto it = cursors_.find(group);
  if (it == cursors_.end()) return Status::Ok();
  const Cursor& c = it->second;
  if (c.next > Standing(commits_->Get(group))) {
    return Status::FailedPrecondition(where + " has a batch out that it has not committed");
  }
  const int64_t idle = clock_.NowMs() - c.active_ms;
  if (idle < opts_.redelivery_ms) {
    return Status::FailedPrecondition(where + " read or committed " + std::to_string(idle) +
                                      " ms ago");
  }
  return Status::Ok();
}

Result<bool> Partition::DeleteGroup(const std::string& group) {
  // The store first (it may fsync or compact), then the cursor: reads of other groups do not
  // wait for the disk.
  auto had = commits_->Delete(group, /*sync=*/true);
  if (!had.ok()) return had.status();
  MutexLock lock(cursor_mu_);
  std::erase_if(lease_times_, [&](const auto& e) { return e.first.first == group; });
  return cursors_.erase(group) > 0 || *had;
}

bool Partition::Tick(bool sync_due) {
  const uint64_t visible_before = visible_end();
  const int64_t now = clock_.NowMs();
  if (sync_due && opts_.fsync == FsyncPolicy::kInterval) {
    if (auto st = SyncLog(); !st.ok()) {
      Logger("broker")->error("msg=\"interval fsync failed\" partition={} reason=\"{}\"",
                              id_.value(), st.message());
    }
    (void)commits_->Sync();
  }
  const auto commits = commits_->All();
  bool redelivered = false;  // a batch came back: a parked request of its group may take it
  {
    // A group that took events and stopped committing for redelivery_ms gets them again
    // (at-least-once); cursors of groups that caught up only record the time.
    MutexLock lock(cursor_mu_);
    for (auto& [group, c] : cursors_) {
      auto it = commits.find(group);
      const uint64_t committed =
          Standing(it == commits.end() ? std::nullopt : std::optional<Offset>(it->second));
      if (committed >= c.next) {
        c.progress_ms = now;
      } else if (now - c.progress_ms > opts_.redelivery_ms) {
        Logger("broker")->info(
            "msg=\"redelivering uncommitted events\" partition={} group={} from={} to={}",
            id_.value(), group, committed, c.next);
        c.next = committed;
        c.progress_ms = now;
        redelivered = true;
      }
    }
    // A batch read through ranges and not committed within redelivery_ms: its ranges are free
    // again, for its reader (redelivery) and for whoever reads them now.
    for (auto& [key, t] : lease_times_) {
      if (!t.expired && now - t.handed_ms > opts_.redelivery_ms) {
        Logger("broker")->info(
            "msg=\"redelivering uncommitted events read through ranges\" partition={} group={} "
            "reader={}",
            id_.value(), key.first, key.second);
        t.expired = true;
        redelivered = true;
      }
    }
  }
  if (follower_.load()) {
    // A copy keeps what its leader keeps: whole segments below the leader's oldest record go.
    if (now - last_retention_ms_ >= kRetentionEveryMs) {
      last_retention_ms_ = now;
      storage::RetentionPolicy policy;
      policy.max_bytes = 1;  // every segment is "too big"; the floor decides
      policy.floor_offset = std::min(leader_start_.load(), log_->end_offset());
      if (policy.floor_offset > log_->start_offset()) (void)log_->ApplyRetention(policy, now);
    }
    return visible_end() != visible_before || redelivered;
  }
  if (now - last_retention_ms_ >= kRetentionEveryMs) {
    last_retention_ms_ = now;
    // Retention holds whatever groups have committed, as Kafka's does: a group that fell behind
    // it goes on from the oldest event kept (Standing), counted and logged here, so that no
    // group, a stranger's included, can pin a partition's disk. It never removes what is not
    // visible yet (not synced, or not on a quorum of the copies).
    storage::RetentionPolicy policy;
    policy.max_bytes = opts_.retention_bytes;
    policy.max_age_ms = opts_.retention_ms;
    policy.floor_offset = visible_end();
    const uint64_t start_before = log_->start_offset();
    auto removed = log_->ApplyRetention(policy, now);
    if (!removed.ok()) {
      Logger("broker")->error("msg=\"retention failed\" partition={} reason=\"{}\"", id_.value(),
                              removed.status().message());
    }
    const uint64_t start = log_->start_offset();
    for (const auto& [group, committed] : commits) {
      if (start <= start_before || committed.value() >= start) continue;
      const uint64_t skipped = start - std::max(committed.value(), start_before);
      Logger("broker")->warn(
          "msg=\"retention removed events a group had not committed\" partition={} group={} "
          "committed={} oldest_kept={} skipped={}",
          id_.value(), group, committed.value(), start, skipped);
      if (sidecar_probe_) sidecar_probe_->RetentionSkipped(group, skipped);
    }
  }
  if (now - last_snapshot_ms_ >= kSnapshotEveryMs || snapshot_due_.exchange(false)) {
    last_snapshot_ms_ = now;
    {
      MutexLock lock(append_mu_);
      producers_.Expire(now, opts_.producer_idle_ms);
    }
    if (auto st = WriteProducerSnapshot(); !st.ok()) {
      Logger("broker")->error("msg=\"producer snapshot failed\" partition={} reason=\"{}\"",
                              id_.value(), st.message());
    }
  }
  return visible_end() != visible_before || redelivered;
}

Status Partition::MirrorCommits(uint64_t incarnation, uint64_t version,
                                std::string_view records) {
  MutexLock lock(mirror_mu_);
  SHOAL_RETURN_IF_ERROR(commits_->Mirror(records));
  mirrored_ = {incarnation, version};
  return Status::Ok();
}

std::set<std::string> Partition::CommitGroups() const {
  std::set<std::string> out;
  for (const auto& [group, offset] : commits_->All()) out.insert(group);
  for (const auto& [group, leases] : commits_->AllLeases()) out.insert(group);
  return out;
}

void Partition::StartGathering(const std::vector<PodName>& followers) {
  const size_t need = replication::QuorumOf(1 + followers.size()) - 1;
  MutexLock lock(mirror_mu_);
  gather_from_.clear();
  for (const auto& pod : followers) gather_from_.insert(pod.value());
  gather_need_ = need;
  gathering_.store(need > 0 && !gather_from_.empty(), std::memory_order_release);
}

std::vector<PodName> Partition::StillToGather() const {
  MutexLock lock(mirror_mu_);
  std::vector<PodName> out;
  for (const auto& pod : gather_from_) out.emplace_back(pod);
  return out;
}

Result<bool> Partition::MergeCommitsOf(
    const PodName& pod, const std::map<std::string, std::vector<RangeOffset>>& pieces,
    const LeasesByGroup& leases, bool mirror) {
  {
    MutexLock lock(mirror_mu_);
    if (!gathering_.load(std::memory_order_acquire)) return true;
    if (!gather_from_.count(pod.value())) return false;
  }
  const bool sync = opts_.fsync == FsyncPolicy::kAlways;
  // Every copy's log holds what its groups committed below (a commit covers events a quorum
  // held); a copy cut back since (fsync interval) may hold less: never past this log's end.
  const uint64_t end = log_->end_offset();
  {
    // The leases of batches still out: their readers commit them here (CommitBy), or they are
    // handed to them again, as after a restart (restored).
    MutexLock lock(cursor_mu_);
    const int64_t now = clock_.NowMs();
    for (const auto& [group, by_reader] : leases) {
      for (const auto& [reader, lease] : by_reader) {
        if (lease.complete || lease.last > end || lease.reader != reader) continue;
        if (auto mine = commits_->Lease(group, reader); mine && mine->last >= lease.last) continue;
        SHOAL_RETURN_IF_ERROR(commits_->PutLease(group, lease, sync));
        lease_times_.insert_or_assign({group, reader}, LeaseTime{now, true, false});
      }
    }
  }
  MutexLock lock(mirror_mu_);
  if (!gathering_.load(std::memory_order_acquire)) return true;
  if (!gather_from_.count(pod.value())) return false;
  for (const auto& [group, list] : pieces) {
    for (const auto& piece : list) {
      const uint64_t offset = std::min(piece.offset, end);
      if (offset == 0) continue;
      if (piece.lo <= opts_.range.lo && piece.hi >= opts_.range.hi) {
        SHOAL_RETURN_IF_ERROR(commits_->Commit(group, Offset(offset), sync).status());
      } else {
        SHOAL_RETURN_IF_ERROR(
            commits_->CommitRanges(group, {HashRange{piece.lo, piece.hi}}, Offset(offset), sync)
                .status());
      }
    }
  }
  gather_from_.erase(pod.value());
  if (mirror && gather_need_ > 0) --gather_need_;
  if (gather_need_ == 0 || gather_from_.empty()) {
    gathering_.store(false, std::memory_order_release);
    return true;
  }
  return false;
}

Status Partition::Close() {
  quorum_->Close();
  commit_quorum_->Close();
  SHOAL_RETURN_IF_ERROR(SyncLog());
  SHOAL_RETURN_IF_ERROR(commits_->Sync());
  if (follower_.load()) return Status::Ok();
  return WriteProducerSnapshot();
}

}  // namespace shoal::broker
