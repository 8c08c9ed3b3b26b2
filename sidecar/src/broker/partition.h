// Partition: one partition replica on this sidecar: its log, its idempotent-producer table, its
// consumer groups' commits and delivery cursors, and its metrics.
//
// Thread-safety: Append is serialized by append_mu_ (dedup check and append are one step, and the
// load sketch is counted under the same lock, so it costs no lock of its own); reads for a group
// are serialized per partition by cursor_mu_ so two requests of one group never get the same
// events; Commit goes through the CommitStore's own lock. Owned by Topic; destroyed only after the
// HTTP frontends stopped.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "broker/quorum_tracker.h"
#include "broker/sidecar_probe.h"
#include "shoal/common/clock.h"
#include "shoal/common/ids.h"
#include "shoal/common/map_transition.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/range_standing.h"
#include "shoal/common/wire.h"
#include "shoal/common/thread_annotations.h"
#include "storage/log.h"
#include "storage/commit_store.h"
#include "storage/file_system.h"
#include "storage/producer_table.h"

namespace shoal::broker {

enum class FsyncPolicy { kAlways, kInterval, kNever };
Result<FsyncPolicy> ParseFsyncPolicy(std::string_view s);

struct PartitionOptions {
  std::string dir;
  storage::FileSystem* fs = nullptr;  // where the files live; null: the real file system
  HashRange range;  // the partition's hash range, for its load sketch (fixed for an id)
  FsyncPolicy fsync = FsyncPolicy::kInterval;
  uint64_t segment_bytes = 64ull << 20;
  uint64_t retention_bytes = 0;  // 0: unlimited
  int64_t retention_ms = 0;      // 0: unlimited
  int64_t redelivery_ms = 30000;
  int64_t producer_idle_ms = 24 * 3600 * 1000;
  // The pod this sidecar runs as: the reader of what its own consumers take through ranges.
  std::string pod;
};

// What a read through hash ranges handed out (Partition::ReadRanges).
struct RangeBatch {
  size_t count = 0;
  // The ranges read: those asked for, less what a batch out to another reader holds.
  std::vector<HashRange> ranges;
  uint64_t last = 0;        // one past the last event handed out (0: none)
  uint64_t scanned_to = 0;  // no event of `ranges` below it is left unread or unconsumed
  bool consumed = false;    // every range asked for is consumed to the partition's sealed end
};

// The seal's value types (SuccessorRef, SealIntent, SealRecord) belong to the map transition
// rule, which reads them: common/map_transition.h.
using ::shoal::SealIntent;
using ::shoal::SealRecord;
using ::shoal::SuccessorRef;
using ::shoal::SuccessorRefs;

// Read leases of a partition's commit store: per group, per reader (storage::ReadLease).
using LeasesByGroup = std::map<std::string, std::map<std::string, storage::ReadLease>>;

// Where a partition's appends fell in its hash range [lo, hi), counted since the sidecar started
// (in memory only), for the operator's split decisions. A value.
struct LoadSketch {
  static constexpr size_t kBuckets = 16;
  static constexpr size_t kTopHashes = 4;
  struct HashCount {
    uint32_t hash = 0;
    uint64_t count = 0;  // an upper bound of the hash point's appends (space-saving)
    bool operator==(const HashCount&) const = default;
  };
  // Appends per sixteenth of the range: bucket b counts hash points h with
  // (h - lo) * 16 / (hi - lo) == b.
  std::array<uint64_t, kBuckets> buckets{};
  // The heaviest hash points (space-saving over kTopHashes counters), by count, heaviest first.
  std::vector<HashCount> top;
};

class Partition {
 public:
  static Result<std::unique_ptr<Partition>> Open(PartitionId id, const PartitionOptions& options,
                                                 Clock& clock, SidecarProbe& probe);
  Partition(const Partition&) = delete;
  Partition& operator=(const Partition&) = delete;
  ~Partition();

  PartitionId id() const { return id_; }
  // The hash range this partition was opened with (fixed for its id).
  const HashRange& range() const { return opts_.range; }

  // Appends the events (all routed to this partition, in request order). For each event, writes
  // its result: a new offset, or the original offset of an already-appended (producer, seq).
  // `hashes[i]` is KeyHash(events[i]->key), as the router computed it; every appended event (not
  // a duplicate) is counted in the load sketch at its hash point. Durability is the caller's next
  // step (SyncForAck). When the producer state cannot decide some (producer, seq) (see
  // ProducerTable), nothing is appended: SequenceUnknown, with their positions in `events` put
  // in `unknown` (when given).
  Status Append(std::span<const wire::ProduceEvent* const> events, std::span<const uint32_t> hashes,
                std::span<wire::ProduceResult* const> results,
                std::vector<size_t>* unknown = nullptr);
  // The positions in `events` of those whose (producer, seq) the producer state cannot decide
  // (Append would refuse the call for them); lets a caller refuse a request that spans several
  // partitions before it appends to any.
  std::vector<size_t> Undecidable(std::span<const wire::ProduceEvent* const> events,
                                  std::span<const uint32_t> hashes) const;
  // As above, hashing the keys here (for callers that did not route).
  Status Append(std::span<const wire::ProduceEvent* const> events,
                std::span<wire::ProduceResult* const> results);
  // The load sketch of the appends since the sidecar started (empty for a partition that took
  // none, e.g. a sealed one).
  LoadSketch Load() const;
  // Events appended since the sidecar started (shoal_events_appended_total of this partition).
  uint64_t appended() const;
  // Seals the partition for the change `intent` names: no append after this returns, the end
  // offset is final and durable, and the seal and its intent survive a restart. The fencing rule
  // of seals (invariant 5): a partition is sealed for one change. Asked again for the same change
  // (epoch and digest) it answers its end again; for another change of the same epoch it is
  // Conflict; for an older epoch StaleEpoch. For a newer epoch it is Conflict too, unless the
  // change it was sealed for was abandoned: no successor confirmed it (ConfirmSuccessor) and the
  // sidecar never held a map of that epoch (`held` is the epoch of the map it holds); then the
  // seal is made over for the newer change, with the same end (nothing was appended since).
  // With `at` (a change whose seal of this partition was answered elsewhere, at that end, before
  // a failover made this copy the leader): sealed at exactly `at`, the tail past it cut;
  // Unavailable when this copy holds less, Conflict when it is sealed already at another end.
  Result<uint64_t> Seal(const SealIntent& intent, Epoch held,
                        std::optional<uint64_t> at = std::nullopt);
  // A seal that names no change (tests, and the behaviour of earlier sidecars); idempotent.
  Result<uint64_t> Seal();
  // A seal that names no change, at `end` exactly: Conflict when the log ends elsewhere (an
  // append came in), unless it ends past it and `cut_past` (the tail is cut), and when it is
  // sealed already at another end.
  Result<uint64_t> SealAt(uint64_t end, bool cut_past = false);
  std::optional<uint64_t> sealed_end() const;
  std::optional<SealRecord> seal_record() const;
  // A successor's owner takes over from this sealed partition (its producer state) only if the
  // seal was made for the change that created the successor: `s` must be one of the successors
  // the seal names. Recorded durably before it returns, so that the seal can no longer be made
  // over for another change. Unavailable while not sealed; Conflict when sealed for a change
  // without `s`. A seal that names no change accepts any successor.
  Status ConfirmSuccessor(const SuccessorRef& s);
  // Whether the seal is void for `map` (see Unseal): sealed for a change that no successor
  // confirmed, while `map`, of that change's epoch or a newer one, has the partition active.
  bool SealVoidFor(const PartitionInfo& info, Epoch map_epoch) const;
  // Undoes a seal that lost its race: a map of its change's epoch or a newer one has the
  // partition active, so that change can never be installed, and no successor of it took over
  // (none confirmed), so nothing but this partition ever took writes for its range. The
  // partition takes appends again, after its end offset. Durable before it returns.
  // FailedPrecondition when the seal was confirmed or names no change.
  Status Unseal();

  // Handoff of the idempotent-producer state along the lineage (invariant 6).
  std::string ExportProducers();
  Status InheritProducers(const std::string& serialized);
  // A successor is seeded once it inherited its parents' producer state; only then does it take
  // appends. The mark is durable so a restart does not seed twice.
  bool seeded() const;
  // What a follower of a successor cannot copy from the log: the producer state its leader
  // inherited (the table without this partition's own entries), sent once to each follower.
  std::string ExportInheritedProducers();
  // As a follower: takes that state from the leader and writes it in a producer snapshot
  // before it returns, so a copy made the leader answers retries of events stored in the
  // parents as duplicates even once the parents are retired (invariant 6 across a failover).
  // Seeded and producers_durable() from then on.
  Status InheritFromLeader(std::string_view serialized);
  // As the leader: whether `follower` said in its last fetch that it holds that state durably,
  // and whether every one of `followers` did (the parents stay until they do).
  void NoteFollowerSeeded(const std::string& follower, bool seeded);
  bool FollowersSeeded(const std::vector<PodName>& followers) const;
  Status MarkSeeded();
  // Whether the producer state inherited at seeding is on disk, in a producer snapshot written
  // after the seeding (or loaded at open): from then on the partition no longer needs its
  // parents' state, so they may be retired. False until the ticker wrote that snapshot.
  bool producers_durable() const { return producers_durable_.load(); }

  // Under fsync=always: makes everything appended so far durable before the caller acks.
  Status SyncForAck();

  // The end of what consumers may see: what this replica holds under its fsync policy
  // (held_end), and when the map names followers, only below the high watermark as well: an
  // event is never handed out before it could be acknowledged (invariant 9).
  uint64_t visible_end() const;
  // What this replica holds under its fsync policy: the durable end under fsync=always, else the
  // written end.
  uint64_t held_end() const;

  // Replication (common/replication.h). As the leader: what its followers hold, and the high
  // watermark, the lesser of what it holds and what enough followers hold to make a quorum.
  const std::shared_ptr<QuorumTracker>& quorum() const { return quorum_; }
  // The groups' commits replicate with the log: a follower's fetch says which state of this
  // store it mirrors (incarnation and version, storage::CommitStore::State) and the leader sends
  // the whole state when it changed. As the leader, commit_quorum() counts the versions each
  // follower mirrors, as quorum() counts their ends: a commit under acks quorum is answered
  // once a quorum holds it (invariant 4 across a failover).
  const std::shared_ptr<QuorumTracker>& commit_quorum() const { return commit_quorum_; }
  storage::CommitStore::State CommitsSnapshot() const { return commits_->Snapshot(); }
  uint64_t commits_incarnation() const { return commits_->incarnation(); }
  uint64_t commits_version() const { return commits_->version(); }
  // As a follower: takes the leader's commit store state, named by the leader's (incarnation,
  // version), which mirrored() then answers.
  Status MirrorCommits(uint64_t incarnation, uint64_t version, std::string_view records);
  std::pair<uint64_t, uint64_t> mirrored() const {
    MutexLock lock(mirror_mu_);
    return mirrored_;
  }
  // Failover (docs/replication.md, step 4): a commit is answered once a quorum of the copies
  // holds it, which need not include the copy made the leader, so under acks quorum that copy
  // gathers its groups' commits from its followers' copies before it hands out an event of the
  // partition or sends its commits to a follower (which would mirror them over its own).
  // Gathering ends once enough of `followers` whose copies mirror a leader's store merged theirs
  // that with this copy they are a quorum of the copies (it meets every quorum that held a
  // commit), or every one of them answered. Nothing to gather without followers.
  void StartGathering(const std::vector<PodName>& followers);
  // Whether this copy's commit store is a leader's (mirrored since it opened, or holding commits
  // from before a restart), not the empty one of a wiped volume that fetched nothing since.
  bool MirrorsALeader() const { return mirrored().first != 0 || !commits_->All().empty(); }
  bool gathering() const { return gathering_.load(std::memory_order_acquire); }
  // The followers still to ask.
  std::vector<PodName> StillToGather() const;
  // Merges the standings of `pod`'s copy (per group, pieces over the range, as
  // RangeStanding::Pieces gives them; each only raises, and never past this log's end), and
  // the read leases it holds (per group and reader) that this copy lacks or holds an older one
  // of: a batch read through ranges goes out only once a quorum holds its lease (ReadRanges'
  // caller waits for it), so its reader still commits it here. `mirror`: the copy mirrors a
  // leader's store (a wiped one does not count towards `need`). Returns whether gathering is
  // over.
  Result<bool> MergeCommitsOf(const PodName& pod,
                              const std::map<std::string, std::vector<RangeOffset>>& pieces,
                              const LeasesByGroup& leases, bool mirror);
  // The read leases of the commit store (per group, per reader).
  LeasesByGroup Leases() const { return commits_->AllLeases(); }
  // The groups the commit store names (with a position or a lease).
  std::set<std::string> CommitGroups() const;
  uint64_t high_watermark() const { return std::min(held_end(), quorum_->followers_mark()); }
  // The records [from, ...) as they are stored, about max_bytes of them (at least one if any),
  // appended to `out`; returns how many. For a follower's fetch.
  Result<size_t> ReadCopy(uint64_t from, size_t max_bytes, std::string* out) const;
  // As a follower: a copy of a partition another pod leads. It takes records only as copied from
  // the leader's log (AppendCopied), writes a producer snapshot only when it inherits its
  // leader's lineage state or cuts its log (a copy that becomes the leader rebuilds the rest of
  // its producer state from the log it holds, which records every (producer, seq)), and removes
  // old segments only below the leader's oldest record.
  // A copy made the leader takes the read leases its leader's commit store held (mirrored with
  // it) as a restart takes its own: a batch read through ranges before the failover is still
  // committed by its reader, or handed to it again.
  void SetFollower(bool follower);
  // A copy on a volume that was emptied, refetching what it held: it may have acknowledged
  // events it no longer holds, so its fence answer says so and a failover neither counts it
  // towards the quorum of answers nor makes it the leader (replication::ChooseLeader) until it
  // caught up with its leader (CaughtUpTo). Durable across restarts (a marker in its directory).
  Status MarkRefetching();
  // The mark goes once this copy holds `leader_end`, where its leader's log ended when it
  // answered, and the leader's commit store is mirrored. Not the leader's high watermark: that
  // falls while this copy refetches (it counts what the copy holds now), below events that
  // were acknowledged when the copy still held them.
  Status CaughtUpTo(uint64_t leader_end);
  bool refetching() const { return refetching_.load(); }
  // A copy a map added to a partition made before it (replication::JoiningCopies): marked in
  // its directory `dir` before that map is installed (durably, where Open reads it), it does not
  // count for a failover until it caught up with its leader (CaughtUpTo clears it too).
  static Status MarkJoining(storage::FileSystem& fs, const std::string& dir);
  // The same for this copy, open already (a pod that missed the maps that placed it off the
  // partition and added it again holds its old copy): it joins from now on.
  Status MarkJoining();
  bool joining() const { return joining_.load(); }
  // Whether this copy, while it led the partition, handed `group` a whole-partition batch that
  // is not committed yet and reaches at least to `offset` (its consumers commit it to this pod
  // after a failover).
  bool HandedWholeBatch(const std::string& group, Offset offset) const EXCLUDES(cursor_mu_);
  bool follower() const { return follower_.load(); }
  // Appends records copied from the leader of leader epoch `leader_epoch`, whose log starts at
  // `leader_start`; syncs them under fsync=always; records their (producer, seq) in the producer
  // state, so that a copy made the leader answers retries as its leader did. Returns held_end().
  // FailedPrecondition when the copy is fenced above `leader_epoch` (Fence).
  Result<uint64_t> AppendCopied(uint64_t first, std::string_view records, uint64_t leader_start,
                                uint64_t leader_epoch);
  // As a follower: takes no more records from any leader of a leader epoch below `leader_epoch`
  // (the coordinator's fence at failover, invariant 10), durably. Returns what the copy holds
  // then: every end it reported to the old leader before is at most this end.
  Result<replication::ReplicaState> Fence(uint64_t leader_epoch);
  // The leader epoch this copy is fenced at (0: never fenced).
  uint64_t fenced() const { return fenced_.load(); }
  // A fence for a partition not held here (no copy yet, never in a map this pod installed):
  // written in its directory `dir`, durably, where Open reads it, so that a copy made later
  // takes nothing from a leader of a leader epoch below it. Never lowers a fence.
  static Status FenceAbsent(storage::FileSystem& fs, const std::string& dir, uint64_t leader_epoch);
  // The fence written in `dir` (0: none).
  static uint64_t FenceIn(storage::FileSystem& fs, const std::string& dir);

  // The leader epochs of this copy's log (Kafka's leader-epoch checkpoint): each entry is an
  // epoch and the offset of its first record, in order; durable in the partition's directory.
  std::vector<replication::EpochStart> epochs() const;
  // The leader epoch of the last record held (0: none, or a log from before epochs were kept).
  uint64_t last_epoch() const;
  // This copy leads the partition from leader epoch `e`: records appended from its end on belong
  // to `e` (nothing changes when its last entry is `e` already). Durable before it returns.
  Status StartLeading(Epoch e);
  // As a follower: takes the leader's epochs for the records this copy holds.
  Status TakeLeaderEpochs(const std::vector<replication::EpochStart>& leader);
  // As a follower: cuts the log back to `offset` (its tail left the leader's log; invariant 11),
  // with the producer state and epochs that came with it.
  Status CutTo(uint64_t offset);
  // As a follower whose end fell below its leader's oldest record (`leader_start`; the leader's
  // retention removed what it would copy next, or the copy is new and empty): starts its log
  // again, empty, there, with no epochs, and copies on from it. What it held was below the
  // leader's start, so removable by retention anyway. It takes the leader's epochs below that
  // start (`leader_epochs`), so that its next fetch tells the leader where it is in the
  // leader's log (its last epoch is the one of the record before it). The producer state of
  // the records below
  // is kept (a snapshot covers it), not sent: a retry of one of them after this copy leads is
  // answered duplicate only if this copy held it. Unless it holds nothing yet, a copy that
  // counted for acknowledgements is behind its leader's start only if it lagged so far that
  // it was not one of the quorum for anything there.
  Status StartAt(uint64_t leader_start, const std::vector<replication::EpochStart>& leader_epochs);
  uint64_t start_offset() const { return log_->start_offset(); }
  uint64_t end_offset() const { return log_->end_offset(); }
  uint64_t size_bytes() const { return log_->size_bytes(); }
  size_t segment_count() const { return log_->segment_count(); }

  // Appends up to `max` events for `group` from its cursor, as JSON objects separated by commas
  // (a comma first when `out` already holds events), and advances the cursor past them. Nothing
  // while a batch handed to the group is not committed yet: one batch out per group.
  Result<size_t> ReadForGroup(const std::string& group, size_t max, size_t max_bytes,
                              bool comma_first, std::string* out,
                              wire::Format format = wire::Format::kJson);
  // What a person browses (the console's event browser, docs/admin-api.md): the events from
  // `from` (raised to the oldest retained) below the visible end, as a consume answer lists
  // them, comma-separated, at most `max` of them and about 1 MiB; with `key`, only that key's,
  // scanning at most kBrowseScanRecords and about kBrowseScanBytes. No group's cursor, commit or
  // lease is touched.
  struct Browsed {
    size_t count = 0;
    uint64_t from = 0;  // where the scan started
    uint64_t next = 0;  // where a next call goes on (the end once everything was scanned)
  };
  static constexpr size_t kBrowseScanRecords = 50000;
  static constexpr size_t kBrowseScanBytes = 16 << 20;
  Result<Browsed> Browse(uint64_t from, size_t max, const std::optional<std::string>& key,
                         std::string* out) const;
  // Whether `group` has anything to read here now (for long-poll wakeups).
  bool HasDataFor(const std::string& group) const;

  // Reads through hash ranges (invariant 3 per hash point): up to `max` events of `group` whose
  // hash lies in `ranges`, each from where the group stands at its hash point, in offset order,
  // for the consumers of pod `reader` (a successor's owner reading its range of this ancestor).
  // One batch out per group and reader: while the reader's last batch is neither committed nor
  // past `redelivery_ms`, nothing. Ranges that another reader's batch (or a whole-partition
  // batch) holds are left out, so no event is out to two readers at once. The batch is recorded
  // as the reader's lease (durably under fsync=always) before it is handed out, so that the
  // reader's commit names its ranges whatever restarts in between. A scan that finds nothing up
  // to where it stopped commits the ranges to there: there was nothing in them to consume.
  Result<RangeBatch> ReadRanges(const std::string& group, const std::string& reader,
                                const std::vector<HashRange>& ranges, size_t max, size_t max_bytes,
                                bool comma_first, std::string* out,
                                wire::Format format = wire::Format::kJson);
  // Whether ReadRanges could hand `reader` something now (for long-poll wakeups; may say yes for
  // ranges that turn out to hold nothing, which that read then commits).
  bool HasDataInRanges(const std::string& group, const std::string& reader,
                       const std::vector<HashRange>& ranges) const;
  // A commit of `group`'s consumers at pod `reader`: "processed everything below `offset` that
  // was handed to us". Through the reader's lease when its consumers read by ranges (the lease's
  // ranges are raised: to the lease's scan end once `offset` covers the whole batch); otherwise,
  // or while a whole-partition batch is out, the whole partition (Commit). Above the end is
  // InvalidArgument. With `require_lease` (a reader on another pod), never the whole partition:
  // NotFound when the reader has no batch here.
  Status CommitBy(const std::string& group, const std::string& reader, Offset offset,
                  bool require_lease = false);
  // Records every whole-partition batch out (a cursor past its group's standing) as a lease of
  // this pod over the whole range, as whole reads of a sealed partition are: once sealed, the
  // partition is read through ranges by its successors' pods, and a commit of such a batch
  // that arrives after a restart must still mean that batch.
  Status RecordWholeBatches();
  // The lowest standing of `group` over `range` (as StandingOf, per hash point).
  uint64_t StandingOver(const std::string& group, const HashRange& range) const;
  // Each group's standing per hash point.
  std::map<std::string, RangeStanding> Standings() const { return commits_->AllStandings(); }
  // The events of this partition `group` has not consumed, estimated per range (exact when the
  // group consumed it as a whole).
  uint64_t LagOf(const std::string& group) const;

  // Records that `group` processed everything below `offset`. Above the end is InvalidArgument.
  Status Commit(const std::string& group, Offset offset);
  std::map<std::string, Offset> Commits() const { return commits_->All(); }
  std::optional<Offset> Committed(const std::string& group) const { return commits_->Get(group); }
  // Where `group` stands: its commit, or the oldest retained event when that is later (also for
  // a group without a commit here).
  uint64_t StandingOf(const std::string& group) const { return Standing(commits_->Get(group)); }
  // FailedPrecondition when `group` looks alive here: a batch handed out and not committed, or
  // a read or commit within redelivery_ms.
  Status CheckGroupIdle(const std::string& group) const;
  // Forgets `group` here: its commit (durably, whatever the fsync policy) and its cursor.
  // Returns whether it had either.
  Result<bool> DeleteGroup(const std::string& group);

  // Periodic work from Topic's ticker: interval fsync, retention, producer snapshots, cursor
  // rewinds for groups that stopped committing. Returns whether a group may have something new
  // to read: the visible end moved or a batch came back for redelivery.
  bool Tick(bool sync_due);
  // Syncs and writes the producer snapshot; used at shutdown.
  Status Close();

 private:
  Partition(PartitionId id, PartitionOptions options, Clock& clock, PartitionProbe probe);
  Status RecoverProducers();
  // Writes the seal record atomically (fsync'd).
  Status WriteSealRecord(const SealRecord& record) REQUIRES(append_mu_);
  // Seals at the log's end, with no change named.
  Result<uint64_t> SealLocked() REQUIRES(append_mu_);
  // Seal(intent, held, at) under the lock; a cut's producer snapshot goes to `snapshot`, to be
  // stored once the lock is released.
  Result<uint64_t> SealForLocked(const SealIntent& intent, Epoch held, std::optional<uint64_t> at,
                                 std::optional<std::string>* snapshot) REQUIRES(append_mu_);
  // CutTo under the lock: returns the producer snapshot to store once it is released.
  Result<std::string> CutLocked(uint64_t offset) REQUIRES(append_mu_);
  // CutLocked(end) when the log runs past `end` (its snapshot to `snapshot`); else nothing.
  Status CutPastLocked(uint64_t end, std::optional<std::string>* snapshot) REQUIRES(append_mu_);
  // Commits ahead of the log's end (a crash under fsync interval|never took back the tail they
  // covered) are brought back to it, so the group reads the events appended there next.
  Status ClampCommits();
  Status WriteProducerSnapshot();
  void CountLoad(uint32_t hash) REQUIRES(append_mu_);
  std::vector<size_t> UndecidableLocked(std::span<const wire::ProduceEvent* const> events,
                                        std::span<const uint32_t> hashes) const
      REQUIRES(append_mu_);
  // Counts and logs producers the table forgot since it had forgotten `before`.
  void NoteForgotten(uint64_t before) REQUIRES(append_mu_);
  Status SyncLog();

  // Where a group stands: its commit, or the oldest retained event when that is later (also
  // for a group without commits).
  uint64_t Standing(std::optional<Offset> committed) const;

  struct Cursor {
    uint64_t next = 0;
    int64_t progress_ms = 0;  // last time the group's commit caught up or moved
    int64_t active_ms = 0;    // last read or commit of the group here
  };
  // When a range lease (storage::ReadLease) went out, in memory. A lease found on disk at open
  // is `restored`: its reader may take it again at once (its consumers asked a restarted
  // sidecar), other readers wait out redelivery_ms as for a lease handed out then.
  struct LeaseTime {
    int64_t handed_ms = 0;
    bool restored = false;
    bool expired = false;  // redelivery_ms passed without the commit; the reader may read again
  };
  // lease_times_ for the commit store's leases that are not complete, as restored ones.
  void RestoreLeaseTimes() EXCLUDES(cursor_mu_);
  // Whether a lease still holds its ranges for its reader (not complete, not expired).
  bool LeaseHolds(const std::string& group, const storage::ReadLease& lease, int64_t now) const
      REQUIRES(cursor_mu_);
  // Whether a whole-partition batch of `group` is out (its cursor is past its standing).
  bool WholeBatchOut(const std::string& group, uint64_t low) const REQUIRES(cursor_mu_);
  // The ranges of `group` that batches of readers other than `reader` hold now.
  std::vector<HashRange> HeldByOthers(const std::string& group, const std::string& reader,
                                      int64_t now) const REQUIRES(cursor_mu_);

  const PartitionId id_;
  const PartitionOptions opts_;
  storage::FileSystem& fs_;
  Clock& clock_;
  PartitionProbe probe_;
  SidecarProbe* sidecar_probe_ = nullptr;
  std::unique_ptr<storage::Log> log_;
  std::unique_ptr<storage::CommitStore> commits_;

  const std::shared_ptr<QuorumTracker> quorum_ = std::make_shared<QuorumTracker>();
  const std::shared_ptr<QuorumTracker> commit_quorum_ =
      std::make_shared<QuorumTracker>(QuorumTracker::Counts::kCommits);
  mutable Mutex mirror_mu_;
  std::pair<uint64_t, uint64_t> mirrored_ GUARDED_BY(mirror_mu_);  // (incarnation, version)
  std::set<std::string> followers_seeded_ GUARDED_BY(mirror_mu_);
  std::atomic<bool> gathering_{false};
  std::set<std::string> gather_from_ GUARDED_BY(mirror_mu_);  // followers still to ask
  size_t gather_need_ GUARDED_BY(mirror_mu_) = 0;
  std::atomic<bool> follower_{false};
  std::atomic<bool> refetching_{false};
  std::atomic<bool> joining_{false};
  std::atomic<uint64_t> leader_start_{0};  // as a follower: the leader's oldest record
  std::vector<replication::EpochStart> epochs_ GUARDED_BY(append_mu_);
  std::atomic<uint64_t> fenced_{0};  // written under append_mu_, durable in `fence`
  // Writes epochs_ (atomically replaced, fsync'd).
  Status WriteEpochs() REQUIRES(append_mu_);
  std::atomic<bool> sealed_{false};
  uint64_t seal_end_ = 0;  // written under append_mu_ before sealed_ is set
  SealRecord seal_ GUARDED_BY(append_mu_);  // valid once sealed_
  std::atomic<bool> seeded_{false};
  std::atomic<bool> snapshot_due_{false};  // a seeding asks the ticker for a snapshot now
  std::atomic<bool> producers_durable_{false};

  mutable Mutex append_mu_;
  storage::ProducerTable producers_ GUARDED_BY(append_mu_);
  uint64_t producers_snapshot_end_ GUARDED_BY(append_mu_) = 0;
  // The snapshot's bytes of the table as it is now (and the end it covers noted as written).
  std::string ProducerSnapshotLocked() REQUIRES(append_mu_);
  // Writes those bytes (atomically replaced, fsync'd); producers_durable() once it is on disk if
  // it `covers_seeding`; else the next tick writes one again.
  Status StoreProducerSnapshot(const std::string& bytes, bool covers_seeding)
      EXCLUDES(append_mu_);
  std::vector<storage::AppendEntry> pending_ GUARDED_BY(append_mu_);
  // The load sketch: bucket counters and space-saving counters of the heaviest hash points
  // (top_size_ of them in use).
  std::array<uint64_t, LoadSketch::kBuckets> load_buckets_ GUARDED_BY(append_mu_){};
  std::array<LoadSketch::HashCount, LoadSketch::kTopHashes> load_top_ GUARDED_BY(append_mu_){};
  size_t load_top_size_ GUARDED_BY(append_mu_) = 0;

  int64_t last_retention_ms_ = 0;  // touched by the ticker thread only
  int64_t last_snapshot_ms_ = 0;   // touched by the ticker thread only

  mutable Mutex cursor_mu_;
  std::map<std::string, Cursor> cursors_ GUARDED_BY(cursor_mu_);
  std::map<std::pair<std::string, std::string>, LeaseTime> lease_times_ GUARDED_BY(cursor_mu_);
};

}  // namespace shoal::broker
