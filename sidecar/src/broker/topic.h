// Topic: the partitions of one topic that this sidecar holds, with the partition map that says
// which hash ranges they own. The data frontend calls Produce, Consume and Commit; the admin
// frontend reads and installs maps.
//
// Lifecycle: Open (creating or recovering the map and every partition from the data directory),
// Start (the ticker thread), then any number of concurrent calls, then Close. Thread-safe: the map
// is read under a shared lock and replaced under an exclusive one; partitions synchronize
// themselves. A Partition* taken from partitions_ is valid only while map_mu_ is held (shared is
// enough) or while install_mu_ is held: InstallMap retires partitions by taking them out under
// both, and destroys them only after releasing map_mu_. Owned by main.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "broker/group_registry.h"
#include "broker/partition.h"
#include "broker/replica_fetch.h"
#include "broker/sidecar_probe.h"
#include "broker/successor_gate.h"
#include "shoal/common/retirement_rule.h"
#include "storage/disk_reserve.h"
#include "shoal/common/clock.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/wire.h"
#include "shoal/common/thread_annotations.h"

namespace prometheus {
class Collectable;
}

namespace shoal::broker {

// What a partition's owner says of its groups' commits (GET .../partitions/{id}/commits).
struct RemoteCommits {
  uint64_t start_offset = 0;                // the oldest retained event
  uint64_t end_offset = 0;                  // the next offset (final once sealed)
  bool sealed = false;
  HashRange range;                          // the partition's range at its owner
  std::map<std::string, Offset> commits;    // per group: its lowest standing over the range
  // Per group that consumed some part of the range further than the rest: its standing as
  // pieces that cover the range (RangeStanding::Pieces).
  std::map<std::string, std::vector<RangeOffset>> ranges;
  // Answered for a copy (PeerClient::FetchCopyCommits): whether it mirrors a leader's store (a
  // copy on a wiped volume that fetched nothing since does not), and the read leases it holds.
  bool mirror = false;
  LeasesByGroup leases;
  // Where `group` stands over `r` (the oldest retained event for a group without a commit).
  uint64_t MinOver(const std::string& group, const HashRange& r) const;
  bool operator==(const RemoteCommits&) const = default;
};

// A batch read through hash ranges from a partition a peer holds (PeerClient::ReadRange): the
// events as a consume answer lists them, comma-separated, without the brackets.
struct RemoteBatch {
  std::string events;
  RangeBatch batch;
};

// What a fenced copy holds (Topic::FenceCopies).
struct FencedCopy {
  PartitionId id;
  Epoch last_epoch{0};
  uint64_t end = 0;
  bool refetching = false;  // Partition::refetching
  bool joining = false;     // Partition::joining
  bool absent = false;      // no copy: a partition of a map this pod never installed
};

// The identity of the volume a sidecar keeps its topic on (Topic::volume).
using VolumeId = uint64_t;

// The leader a change's map gives a partition, as a seal request names it (Topic::Seal).
struct MapLeader {
  PodName pod;
  Epoch leader_epoch{0};
};

// How a sidecar talks to its peers: forwarding produce requests to a key's owner and, during a
// change, fetching a sealed parent's producer state and its groups' commits. Implemented over HTTP
// in http/peer_client.h; tests may hand in their own. Thread-safe; owned by main.
class PeerClient {
 public:
  virtual ~PeerClient() = default;
  // The serialized ProducerTable of sealed `partition` from its owner's admin plane, for
  // `successor`, which the owner first confirms as a successor of the change the partition was
  // sealed for (Partition::ConfirmSuccessor), sealed at `end` as the successor's map records:
  // Conflict when it is not, Unavailable while the partition is not sealed yet. Without a
  // successor (nullptr), nothing is confirmed: for a successor of a lost partition taking over
  // from the lost one's parents.
  virtual Result<std::string> FetchProducers(const PeerAddress& peer, PartitionId partition,
                                             const SuccessorRef* successor, uint64_t end) = 0;
  // The commits of `partition` from its owner's admin plane.
  virtual Result<RemoteCommits> FetchCommits(const PeerAddress& peer, PartitionId partition) = 0;
  // The commits of the copy of `partition` the peer follows (GET .../commits?copy=true), for
  // a copy made the leader that gathers them (Topic::GatherCommits). With `leader_epoch` (the
  // asker's, as leader; 0: none), a copy that knows of a newer leader refuses (FailedPrecondition):
  // a leader replaced by a failover, restarted on its old map, must not gather and hand out.
  virtual Result<RemoteCommits> FetchCopyCommits(const PeerAddress& peer, PartitionId partition,
                                                 Epoch leader_epoch = Epoch(0)) {
    (void)peer;
    (void)partition;
    (void)leader_epoch;
    return Status::Unavailable("this peer client does not replicate");
  }
  // The groups the peer's registry holds (GET /v1/admin/groups).
  virtual Result<std::map<std::string, GroupRegistry::Group>> FetchGroups(
      const PeerAddress& peer) = 0;
  // Reads `ranges` of `partition` for `group` from its owner, for the consumers of pod `reader`
  // (Topic::ReadFor on the owner; POST /v1/admin/partitions/{id}/read).
  virtual Result<RemoteBatch> ReadRange(const PeerAddress& peer, PartitionId partition,
                                        const std::string& group, const PodName& reader,
                                        const std::vector<HashRange>& ranges, size_t max,
                                        size_t max_bytes) = 0;
  // Commits what the consumers of pod `reader` took of `partition` (Topic::CommitFor on the
  // owner; POST /v1/admin/partitions/{id}/commit). Returns the partition's commits after it.
  virtual Result<RemoteCommits> CommitFor(const PeerAddress& peer, PartitionId partition,
                                          const std::string& group, const PodName& reader,
                                          Offset offset) = 0;
  // A follower's fetch from the partitions' leader (POST /v1/admin/replica/fetch; the body is
  // EncodeFetchRequest's): the leader's answer, to be read with ParseFetchAnswer.
  virtual Result<std::string> FetchReplica(const PeerAddress& leader, const std::string& body) {
    (void)leader;
    (void)body;
    return Status::Unavailable("this peer client does not replicate");
  }
  // A consumer's commit of partitions `leader` leads, made to this pod (which followed them
  // when its consumer read them, and led them before a failover), sent on to the leader's data
  // plane marked as forwarded (POST /v1/topics/{topic}/commits). Answered as the leader answers.
  virtual Status ForwardCommit(const PeerAddress& leader, const std::string& topic,
                               const wire::CommitRequest& request) {
    (void)leader;
    (void)topic;
    (void)request;
    return Status::Unavailable("this peer client does not forward commits");
  }
};

// Events of one produce request that another sidecar owns: the frontend sends `body` to `peer`
// (asynchronously, so no server thread waits on the network) and puts the answer's results at
// `indices` of the request's results.
struct ForwardPlan {
  PeerAddress peer;
  std::string body;
  std::vector<size_t> indices;
  // JSON unless an event's value is raw bytes, which only a binary batch carries (a JSON body
  // keeps a sidecar of the previous version, during a rolling upgrade, able to take it).
  wire::Format format = wire::Format::kJson;
};

struct TopicOptions {
  std::string topic;
  uint32_t partitions = 4;  // for a new topic; an existing map on disk wins
  std::string data_dir;
  // Where every file of the topic lives; null: the real file system (tests hand in their own).
  storage::FileSystem* fs = nullptr;
  PodName pod{"local"};
  PartitionOptions partition;  // dir is filled per partition
  int64_t fsync_interval_ms = 100;
  int64_t tick_ms = 50;
  // Start without a map of our own when none is on disk, and wait for one to be installed
  // through the admin plane (a sidecar that joins a multi-sidecar topic).
  bool wait_for_map = false;
  // Consumer groups the topic may have (GroupRegistry).
  size_t max_groups = 10000;
  // A group idle on every sidecar of the map for this long is deleted (0: never), like Kafka's
  // offsets retention: a group that is gone for good stops holding back retention and retirement.
  int64_t group_expiry_ms = 0;
  // Successors' consumers read their ranges of unconsumed ancestors, wherever those are held
  // (invariant 3 per hash point). Off: a successor waits until its whole lineage is consumed,
  // and a sealed partition is read only by the consumers of the pod that holds it (the rule of
  // Kinesis and Pravega; kept for comparison: shoal bench drain).
  bool range_reads = true;
  // Replication (when the map names followers): with acks_quorum, a produce is acknowledged only
  // once a quorum of each partition's copies holds its events, waiting at most
  // replication_timeout_ms (then Unavailable: retry); otherwise once the leader holds them.
  // Consumers read below the high watermark either way. A follower's fetch waits up to
  // fetch_wait_ms at its leader for something new, and asks for about fetch_max_bytes of
  // records (at least one; Kafka's replica.fetch.max.bytes).
  bool acks_quorum = true;
  int64_t replication_timeout_ms = 5000;
  int64_t fetch_wait_ms = 500;
  size_t fetch_max_bytes = 1 << 20;
  // Space kept on the data volume for what lets a full disk recover (storage/disk_reserve.h):
  // produce is refused first, with NoSpace, and the ticker takes the reserve back. Null: none.
  storage::DiskReserve* disk_reserve = nullptr;
  // Names a volume the first time the topic is opened on it (Topic::volume); null: a random
  // number. The simulation hands in its own, deterministic.
  std::function<VolumeId()> new_volume_id;
};

// Events of one produce request that a quorum of their partition's copies must hold before the
// request is acknowledged (acks quorum): the caller waits with tracker->OnReached(end, ...).
struct QuorumWait {
  std::shared_ptr<QuorumTracker> tracker;
  uint64_t end = 0;
  // Of a produce: the partition whose copies are waited for (a parent, for duplicates answered
  // from its producer state, after every partition's own wait).
  PartitionId partition{0};
};

// What InstallMap did with a map that it did not refuse.
enum class InstallOutcome { kInstalled, kAlreadyHeld };

class Topic {
 public:
  static Result<std::unique_ptr<Topic>> Open(const TopicOptions& options, Clock& clock,
                                             SidecarProbe& probe, PeerClient* peers = nullptr);
  Topic(const Topic&) = delete;
  Topic& operator=(const Topic&) = delete;
  ~Topic();

  const std::string& name() const { return opts_.topic; }
  const TopicOptions& options() const { return opts_; }

  // Routes each event by KeyHash to its active partition and appends it; results come back in
  // request order. Events of one request for the same key keep their order (same partition,
  // appended in request order). Acknowledged only after the fsync policy is met.
  // Events whose partition another sidecar owns are returned in `forwards` for the caller to send
  // on, unless this request was itself forwarded or `forwards` is null (then they are refused
  // as Unavailable naming the owner: the sender's map is behind, a change is in flight). When
  // the producer state cannot decide some (producer, seq), SequenceUnknown, with their indices
  // in `unknown` (when given). On replicated partitions with acks quorum, the events must be
  // held by a quorum of copies before the ack: with `quorum` given, what to wait for is put
  // there and the caller waits (without holding a thread: QuorumTracker::OnReached); without
  // it, Produce waits, up to replication_timeout_ms (then Unavailable).
  Status Produce(const std::vector<wire::ProduceEvent>& events,
                 std::vector<wire::ProduceResult>* results, bool forwarded = false,
                 std::vector<ForwardPlan>* forwards = nullptr,
                 std::vector<size_t>* unknown = nullptr,
                 std::vector<QuorumWait>* quorum = nullptr);

  // Writes up to `max` events for `group` into `out` as a consume answer in `format`
  // ({"events":[...]} or a binary batch); returns how many.
  // Whole-partition batches of replicated partitions are recorded as leases in their commit
  // stores (Partition::ReadForGroup); under acks quorum the answer waits until a quorum of the
  // copies holds them, at most replication_timeout_ms (DataFrontend::Hand): with `quorum`, what
  // to wait for is appended there for the caller (as Produce's); without, waited for here.
  Result<size_t> Consume(const std::string& group, size_t max, std::string* out,
                         std::vector<QuorumWait>* quorum = nullptr,
                         wire::Format format = wire::Format::kJson);
  bool HasDataFor(const std::string& group);
  // Records a group's commit. Of a replicated partition under acks quorum, the commit counts
  // once a quorum of its copies holds it (Partition::commit_quorum): with `quorum`, what to wait
  // for is appended there for the caller (as Produce's); without, waited for here, up to
  // replication_timeout_ms (then Unavailable: retry; a commit only raises). A partition that
  // another pod leads now (a failover moved it while this pod's consumers held a batch of it)
  // is committed at its leader, unless the request was `forwarded` to this pod already.
  Status Commit(const wire::CommitRequest& request, std::vector<QuorumWait>* quorum = nullptr,
                bool forwarded = false);
  // Forgets consumer group `group` on every partition held here (commits, cursors, parents-first
  // releases): a group that is gone for good no longer holds back retention or the retirement
  // of sealed partitions. Unless `force`, refused (FailedPrecondition, nothing changed) while
  // the group looks alive on some partition (Partition::CheckGroupIdle). Returns the partitions
  // where it had a commit or a cursor. A group that comes back later is a new group: it starts
  // at the oldest retained events, parents first.
  Result<std::vector<PartitionId>> DeleteGroup(const std::string& group, bool force);

  // The topic view of GET /v1/topics/{topic}: the map plus per-partition counters.
  std::string ViewJson() const;
  // GET /v1/admin/partitions: every partition held here with its offsets, appends since start,
  // load sketch, groups' commits and whether its inherited producer state is durable.
  std::string PartitionsJson() const;
  PartitionMap map() const;

  // The admin plane's changes. InstallMap applies a map of a newer epoch (fencing, invariant 5:
  // an older epoch is StaleEpoch naming the held one; the same epoch is kAlreadyHeld when the
  // map is the one held and Conflict when it is another). Before anything changes it checks the
  // map against what is held here (see CheckAgainstHeld: seals, successors, retirement); then it
  // opens the partitions this pod now owns, seeds successors with their parents' producer state
  // once the parents' owners confirm the seals were made for this change, and persists the map
  // before it takes effect. Then it retires what the map no longer lists: each such partition
  // held here (or prepared) is closed and its directory removed.
  Result<InstallOutcome> InstallMap(const PartitionMap& map);
  // Opens, ahead of a change, the partitions a coming map gives this pod, so that creating their
  // files is not part of the change's write pause. They take effect with InstallMap.
  Status Prepare(const PartitionMap& map);
  // Seals a partition this sidecar holds for the change `intent` names, ahead of the map that
  // makes its successors (Partition::Seal has the fencing rule). A replicated partition's seal
  // is answered only once a quorum of its copies holds the sealed end, waited for up to
  // `quorum_wait` (then Unavailable; the seal stands and a retry answers the same end): the end
  // the map records for a sealed partition is always held by a quorum (invariant 9), so any copy
  // made its leader later holds it, and a restarted leader serves it whole (its followers, which
  // hold it, no longer fetch).
  // `leader`: the pod the change's map makes the partition's leader and at which leader epoch.
  // When that is this pod, at a leader epoch at or above the fence of a copy it follows (a
  // failover carried in the change chose the copy to lead a parent whose leader went down), the
  // copy is sealed at its end before the map that makes it the leader arrives.
  // `at`: the end the change's seal of the partition was answered with before (at a leader a
  // failover has replaced since): the copy is sealed at exactly that end (Partition::Seal).
  Result<uint64_t> Seal(PartitionId partition, const SealIntent& intent,
                        std::chrono::milliseconds quorum_wait = std::chrono::milliseconds(0),
                        const std::optional<MapLeader>& leader = std::nullopt,
                        std::optional<uint64_t> at = std::nullopt);
  // The same for the change that makes `target`: its epoch, digest and the successors it gives
  // the partition, and the end its seal was answered with when the target records it
  // (PartitionInfo::end_known).
  Result<uint64_t> Seal(const PartitionMap& target, PartitionId partition,
                        std::chrono::milliseconds quorum_wait = std::chrono::milliseconds(0));
  // The producer state of a partition held here; for `successor` (when given) only once the
  // partition's seal confirms it (Partition::ConfirmSuccessor) and, with `end`, only if the seal's
  // end offset is that (the successor's map records it; another is Conflict). A partition with
  // parents that does not hold their producer state yet is FailedPrecondition, after the
  // confirmation: only a whole state is handed on.
  Result<std::string> ExportProducers(PartitionId partition,
                                      const SuccessorRef* successor = nullptr,
                                      std::optional<uint64_t> end = std::nullopt);
  // GET /v1/admin/groups: this sidecar's GroupRegistry.
  std::string GroupsJson() const;
  std::map<std::string, GroupRegistry::Group> Groups() const { return registry_->All(); }
  // The commits of a partition held here (what GET .../commits answers).
  // With `copy` and `leader_epoch` > 0 (the asking leader's): FailedPrecondition when this
  // copy is fenced at a newer leader epoch, or its map has the partition at one.
  Result<RemoteCommits> CommitsOf(PartitionId partition, bool copy = false,
                                  Epoch leader_epoch = Epoch(0));
  // A peer's consumers read `ranges` of partition `id`, held here, through a successor their pod
  // owns (the owner's side of PeerClient::ReadRange; Partition::ReadRanges has the rules).
  // NotFound when the partition is not held here.
  // Of a replicated partition under acks quorum, a batch goes out once a quorum of the copies
  // holds its lease (a failover's new leader gathers it, Partition::MergeCommitsOf): what to
  // wait for is handed to `quorum`, as for CommitFor.
  Result<RemoteBatch> ReadFor(PartitionId id, const std::string& group, const PodName& reader,
                              const std::vector<HashRange>& ranges, size_t max, size_t max_bytes,
                              std::optional<QuorumWait>* quorum = nullptr);
  // A peer's consumers commit what they took of partition `id` through ranges (the owner's side
  // of PeerClient::CommitFor): only through the lease of that reader's last batch, never as a
  // whole-partition commit (NotFound when the reader has no batch here).
  // Of a replicated partition under acks quorum, the commit counts once a quorum of its copies
  // holds it: what to wait for is handed to `quorum` (the caller waits without a thread), or
  // without it the answer is Unavailable (the commit stands; a retry answers once it is held).
  Result<RemoteCommits> CommitFor(PartitionId id, const std::string& group, const PodName& reader,
                                  Offset offset, std::optional<QuorumWait>* quorum = nullptr);
  // The partitions that take appends here now, with their ranges (for invariant checks).
  std::vector<std::pair<PartitionId, HashRange>> AcceptingPartitions() const;
  // {"commits":{group:offset},"sealed":bool,"end_offset":N} of one partition held here.
  // `copy`: of the copy this pod follows (or leads) with "mirror" (whether it mirrors a
  // leader's store), for a copy made the leader that gathers its groups' commits.
  Result<std::string> CommitsJson(PartitionId partition, bool copy = false,
                                  Epoch leader_epoch = Epoch(0));

  // The events of a partition held here from an offset, or one key's, for a person to browse
  // (Partition::Browse): {"partition","start_offset","end_offset","from","next","events":[...]}.
  Result<std::string> BrowseJson(PartitionId partition, uint64_t from, size_t max,
                                 const std::optional<std::string>& key) const;

  // Called (from producing threads or the ticker) whenever events became visible to consumers.
  void SetDataListener(std::function<void()> fn) { on_data_ = std::move(fn); }
  // Called after events were appended to a partition this pod leads (a follower's fetch parked
  // at the admin plane may now have something to copy).
  void SetAppendListener(std::function<void()> fn) { on_append_ = std::move(fn); }

  // Replication, the leader's side of a follower's fetch (POST /v1/admin/replica/fetch): appends
  // the answer to `body` (StartFetchAnswer's header first) and records what the follower says
  // it holds, which may move the high watermark. Returns whether the answer should go now: it
  // holds records or a refusal; otherwise the caller may hold the request up to its wait_ms and
  // ask again.
  bool ServeFetch(const FetchRequest& request, std::string* body);
  // The partitions this pod follows, with what each holds (for the admin plane and tests):
  // {"followed":[{"id":N,"leader":"pod","start":N,"end":N,"last_epoch":N,"fenced":N}, ...]}.
  std::string FollowedJson() const;
  // The coordinator's fence at a failover (POST /v1/admin/replica/fence; invariant 10): the
  // copies of `ids` followed here take nothing more from a leader of a leader epoch below
  // `leader_epoch` (durably, until a map names a leader at or above it), and answer what they
  // hold. Partitions not followed here are left out.
  // A partition not held here that the map does not know yet (at or past its NextId, by fewer
  // than kMaxAbsentFences) is answered as held empty, at leader epoch 0, and fenced in its
  // directory (Partition::FenceAbsent).
  std::vector<FencedCopy> FenceCopies(const std::vector<PartitionId>& ids, Epoch leader_epoch);
  // The volume this sidecar keeps the topic on, named the first time the topic was opened on it
  // (a file beside the map): an emptied or replaced volume has a new one. A copy's `refetching`
  // mark is this sidecar's own guess, made alike on a first start and after a wipe; the
  // coordinator, which remembers the volume it first saw each pod hold a map on, tells the two
  // apart (replication::CountRefetching).
  VolumeId volume() const { return volume_; }
  static constexpr uint32_t kMaxAbsentFences = 65536;
  // One follower's fetch round from `leader`, without waiting between rounds (FetchLoop paces
  // them; the protocol simulation calls it as a step of its schedule).
  enum class FetchStep {
    kDone,   // nothing is followed there any more
    kIdle,   // nothing to ask now (copied whole, or fenced until a newer map)
    kMore,   // asked, and took what came
    kRetry,  // the leader did not answer, or refused: wait for the map that settles it
  };
  FetchStep FetchRound(const std::string& leader);

  // Scrape-time metrics: partition sizes and offsets, consumer lag per group, epoch.
  std::shared_ptr<prometheus::Collectable> StateCollectable();

  void Start();
  Status Close();

  // One round of the ticker's and of the peer ticker's work, for tests and the protocol
  // simulation, which drive a Topic without its threads (Start not called).
  void TickOnce(bool sync_due);
  void PeerTickOnce();

 private:
  Topic(TopicOptions options, Clock& clock, SidecarProbe& probe, PeerClient* peers);
  // Whether `group` may read successor `info` yet (SuccessorGate); requires map_mu_ shared.
  bool Released(const PartitionInfo& info, const std::string& group) REQUIRES_SHARED(map_mu_);
  // Where `group` stands in `partition` over `range`, held here or fetched; requires map_mu_
  // shared.
  std::optional<uint64_t> StandingOf(PartitionId partition, const std::string& group,
                                     const HashRange& range) REQUIRES_SHARED(map_mu_);
  // One read of a Consume: a whole partition held here, an ancestor's ranges held here, or an
  // ancestor's ranges held by a peer.
  struct ReadJob {
    PartitionId id;
    Partition* local = nullptr;  // null: remote
    bool whole = false;
    std::vector<HashRange> ranges;
    PeerAddress peer;
  };
  // What `group` reads here now, in the order to try (see Consume). Requires map_mu_ shared.
  std::vector<ReadJob> PlanReads(const std::string& group) REQUIRES_SHARED(map_mu_);
  // A remote ancestor's ranges may be read for `group` now: no batch of ours out there, and no
  // empty or failed answer just before.
  bool RemoteReadDue(const std::string& group, PartitionId id, int64_t now);
  // Reads one remote job into `out`; returns how many events.
  size_t ReadRemote(const std::string& group, const ReadJob& job, size_t max, size_t max_bytes,
                    bool comma_first, std::string* out, wire::Format format);
  // Takes a peer's answer about `id`'s commits into remote_commits_ (unless the map retired it
  // or gives the id another range); returns whether it changed.
  bool TakeRemoteCommits(PartitionId id, RemoteCommits commits, uint64_t deletions);
  // The end offset a group must reach in sealed `partition`: its seal's end where it is held or
  // its owner told it, never less than what the map records; requires map_mu_ shared.
  uint64_t SealedEndOf(const PartitionInfo& partition) REQUIRES_SHARED(map_mu_);
  // The partition whose commits GET .../commits answers: the one led here, or with `copy` the
  // copy followed here first; null when neither.
  const Partition* CommitsHolder(PartitionId id, bool copy) const REQUIRES_SHARED(map_mu_);
  // Ok unless this pod knows of a leader of `id` newer than `leader_epoch` (0: not asked): its
  // copy `p` is fenced at a newer leader epoch, or its map has one (CommitsOf).
  Status CheckAskingLeaderLocked(PartitionId id, const Partition& p, Epoch leader_epoch) const
      REQUIRES_SHARED(map_mu_);
  // What a commit to `p` waits for: a quorum of its copies holding the commit store's current
  // version, for a replicated partition under acks quorum.
  std::optional<QuorumWait> CommitWait(const Partition& p) const;
  // Quorum waits go to the caller's `quorum` when given (it waits without a thread), else are
  // waited for here up to replication_timeout_ms.
  Status HandOverOrAwait(std::vector<QuorumWait> awaited, std::vector<QuorumWait>* quorum) const;
  void RefreshRemoteCommits();
  // A copy made the leader by a failover gathers its groups' commits from its followers' copies
  // (Partition::StartGathering), asked on the peer tick.
  void GatherCommits();
  // Deletes groups idle on every sidecar of the map for group_expiry_ms.
  void ExpireGroups();
  // What the peers said before a map that retires partitions is installed (invariant 4): every
  // peer's groups, and of each partition of another pod that the map retires, what its holder
  // says (absent: its holder retired it already).
  struct RetirementFacts {
    std::set<std::string> peer_groups;
    std::map<PartitionId, HeldPartition> remote;
  };
  // Asks them, with no lock held: a slow or paused peer then holds up this install only, never
  // the seals and prepares of other changes on this sidecar. For the map `held`.
  Result<RetirementFacts> AskBeforeRetiring(const PartitionMap& held, const PartitionMap& next);
  // InstallMap under install_mu_, with the facts asked for the map it holds.
  Result<InstallOutcome> InstallLocked(const PartitionMap& next, const RetirementFacts& facts)
      REQUIRES(install_mu_);
  // Refuses `next` when it disagrees with what is held here (nothing changes): a held active
  // partition it drops or seals without the seal here, a seal here it records with another end
  // or other successors (common/map_transition.h), a retirement before a parent's or of a
  // partition some group the topic knows (here or at any peer) has not consumed to its end
  // (common/retirement_rule.h). Requires install_mu_.
  Status CheckAgainstHeld(const PartitionMap& held, const PartitionMap& next,
                          const RetirementFacts& facts) REQUIRES(install_mu_);
  // InstallMap's steps, in order; each requires install_mu_.
  // Validation and fencing: a value when the install is already decided (kAlreadyHeld), none
  // when it goes ahead, an error when it is refused (nothing changed).
  Result<std::optional<InstallOutcome>> CheckInstall(const PartitionMap& held,
                                                     const PartitionMap& next,
                                                     const RetirementFacts& facts)
      REQUIRES(install_mu_);
  using OwnedPartitions = std::map<PartitionId, std::unique_ptr<Partition>>;
  using RetiredPartitions = std::vector<std::pair<PartitionId, std::unique_ptr<Partition>>>;
  // Opens the partitions `next` gives this pod that are not held here yet.
  Result<OwnedPartitions> OpenOwned(const PartitionMap& next) REQUIRES(install_mu_);
  // Seeds the successors among them; on failure keeps them as prepared for the retry.
  Status SeedOpened(const PartitionMap& next, OwnedPartitions& opened) REQUIRES(install_mu_);
  // Gives the copies among `opened` that were followed here back to followed_.
  void ReturnCopies(OwnedPartitions& opened) REQUIRES(install_mu_);
  // Undoes seals made for changes that lost to `next`: of the partitions led here, of the copies
  // followed here, and of the copies among `opened` that `next` makes this pod lead.
  // For a pod that holds no map: DataLost when a partition `next` makes and gives this pod,
  // replicated, already has events on one of its copies (this pod led it before its volume was
  // emptied). Asks the copies (FetchCopyCommits); holds no lock.
  Status CheckCopiesOfNewPartitions(const PartitionMap& next);
  Status UnsealLostSeals(const PartitionMap& next, const OwnedPartitions& opened)
      REQUIRES(install_mu_);
  // Seals the partitions led here that `next`, a failover, gives back to this pod sealed
  // elsewhere at the very end its log has (TakesSealGivenBack), at that end.
  Status TakeSealsGivenBack(const PartitionMap& held, const PartitionMap& next)
      REQUIRES(install_mu_);
  // Makes `next` the map with `opened` held; moves what it no longer lists to `retired`.
  // Returns how many partitions are held now.
  size_t TakeEffect(const PartitionMap& next, OwnedPartitions opened, RetiredPartitions* retired)
      REQUIRES(install_mu_);
  // Moves partitions prepared for a map that `next` overrides to `retired`.
  void DropPreparedFor(const PartitionMap& next, RetiredPartitions* retired)
      REQUIRES(install_mu_);
  // Closes the retired partitions and removes their directories.
  void RemoveRetired(const PartitionMap& next, RetiredPartitions retired);
  bool Accepting(const PartitionInfo& info, const Partition& p) const;
  // Makes each successor this pod owns in `map` inherit its parents' producer state, if it has
  // not yet. `held` finds a partition held here (or about to be). With `defer`, a successor
  // whose parents all confirmed its seal but are not all whole yet, or that a failover gave to
  // a copy and that cannot be seeded now, is left unseeded (it takes no append) for SeedPending
  // instead of failing the whole (see the definition).
  Status SeedSuccessors(const PartitionMap& map, const std::function<Partition*(PartitionId)>& held,
                        bool defer);
  // Seeds one successor, `part`, that `info` describes. `confirmed` is set when it failed only
  // because some parent, which confirmed the seal, does not hold its whole producer state yet
  // (FailedPrecondition).
  Status SeedSuccessor(const PartitionMap& map, const PartitionInfo& info, Partition& part,
                       const std::function<Partition*(PartitionId)>& held, bool* confirmed);
  // Seeds successors left unseeded by a restart (their parents' owners may be down a while).
  void SeedPending();
  // Whether the sealed end of `p` (a parent, `info` in the map that makes it one) is held by a
  // quorum of its copies, as a successor that takes its producer state over needs (true when
  // not sealed, not replicated or under acks leader).
  bool SealedEndHeldByQuorum(const PartitionInfo& info, const Partition& p) const;
  Status LoadOrCreateMap() REQUIRES(map_mu_);
  Status LoadOrNameVolume();
  Status OpenPartitions() REQUIRES(map_mu_);
  // Removes directories of partitions the map on disk retired that a crash left behind.
  void RemoveRetiredLeftovers() REQUIRES_SHARED(map_mu_);
  std::string MapPath() const;
  std::string PartitionDir(PartitionId id) const;
  // The partitions `next` makes this pod the leader of by a failover that it holds nothing of
  // and answered a fence for as such (FenceCopies), with that fence: they start empty
  // (CheckNothingLost).
  std::vector<std::pair<PartitionId, Epoch>> FencedAbsent(const PartitionMap& next) const;
  PartitionOptions OptionsFor(const PartitionInfo& info) const;
  // Whether this pod holds `info`'s events: it owns it and the coordinator has not declared it
  // lost (a lost partition's events went with this pod's volume; nothing is opened for it).
  bool HeldHere(const PartitionInfo& info) const { return info.owner == opts_.pod && !info.lost; }
  // DataLost when partition `id`, not held here, should be (`asked` says what was asked of it);
  // Ok otherwise. Called with map_mu_ held.
  Status NotLostHere(PartitionId id, const std::string& asked) const REQUIRES_SHARED(map_mu_);
  // Whether `id` is a partition the map's lineage had and retired (ids only grow, and a retired
  // partition's successors, with larger ids, stay in the map).  Requires map_mu_.
  bool RetiredInMap(PartitionId id) const REQUIRES_SHARED(map_mu_);
  void TickLoop();
  void PeerTickLoop();
  // Replication (topic_replication.cc). Brings the copies this pod follows in line with the map
  // held (opening new ones, closing and removing those it no longer names), tells the
  // partitions it leads who follows them, and starts a fetcher per leader. Requires install_mu_
  // or the sidecar not started.
  void ReconcileReplicas();
  // One follower's fetch loop from `leader`, until this pod follows nothing of it.
  void FetchLoop(const std::string& leader);
  // Waits up to `ms` on the ticker's condition; false once the topic stops.
  bool PauseMs(int64_t ms);

  const TopicOptions opts_;
  storage::FileSystem& fs_;
  Clock& clock_;
  SidecarProbe& probe_;
  std::function<void()> on_data_;
  std::function<void()> on_append_;

  mutable SharedMutex map_mu_;
  PartitionMap map_ GUARDED_BY(map_mu_);
  bool map_from_disk_ = false;                                 // set by LoadOrCreateMap
  std::map<PartitionId, std::unique_ptr<Partition>> partitions_ GUARDED_BY(map_mu_);
  std::atomic<uint32_t> consume_rotor_{0};
  PeerClient* peers_;
  Mutex install_mu_ ACQUIRED_BEFORE(map_mu_);  // one map change at a time
  // Partitions opened ahead of a map (Prepare, or an install that failed after opening them),
  // with the partition of the map they were opened for. Ids are fixed for a partition's life in
  // one history of maps, but two coordinators can mint two maps that give one id two meanings:
  // a prepared partition serves only a map that gives its id the same range, owner and parents
  // (TakePrepared), else it is discarded.
  struct Prepared {
    PartitionInfo as;
    std::unique_ptr<Partition> partition;
  };
  std::map<PartitionId, Prepared> prepared_ GUARDED_BY(install_mu_);
  // The partition prepared for `info`, if one matches it; a prepared one for another meaning of
  // the id is closed and its directory removed. Requires install_mu_.
  std::unique_ptr<Partition> TakePrepared(const PartitionInfo& info) REQUIRES(install_mu_);

  // Replication, follower side: the copies of partitions other pods lead that this pod follows
  // (PartitionInfo::replicas), by id. As for partitions_, a Partition* taken from it is valid
  // only while map_mu_ is held.
  std::map<PartitionId, std::unique_ptr<Partition>> followed_ GUARDED_BY(map_mu_);
  // One fetcher thread per leader this pod follows partitions of; `done` once it found nothing
  // more to follow there.
  struct Fetcher {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  Mutex fetch_mu_ ACQUIRED_AFTER(install_mu_);
  // This process found no map on disk (a volume that was emptied, or a first start): the empty
  // copies of partitions its first map already knew (born at or before that map's epoch) may
  // have acknowledged what the volume held, and refetch it before they count for a failover
  // (Partition::MarkRefetching). A partition a later change makes was held here from its start.
  std::atomic<bool> started_without_map_{false};
  std::atomic<uint64_t> first_map_epoch_{0};  // the first map installed in this process (0: none)
  // Named when the topic was first opened on this volume (VolumePath); a coordinator that saw
  // another volume here before knows the marks above are real (see volume()).
  VolumeId volume_ = 0;
  std::atomic<bool> started_{false};  // Start ran: fetchers may run
  std::map<std::string, Fetcher> fetchers_ GUARDED_BY(fetch_mu_);

  std::unique_ptr<GroupRegistry> registry_;
  // Parents-first gating (invariant 3).
  SuccessorGate gate_;
  // Commits of remote partitions of local successors' lineages, as last fetched; guarded by
  // remote_mu_.
  Mutex remote_mu_;
  std::map<PartitionId, RemoteCommits> remote_commits_ GUARDED_BY(remote_mu_);
  // A commits fetch begun before a deletion is dropped.
  uint64_t group_deletions_ GUARDED_BY(remote_mu_) = 0;
  // Remote reads of this pod's consumers, per (group, ancestor): whether a batch is out with
  // them and since when, or when an answer came back empty or failed.
  struct RemoteRead {
    bool out = false;
    uint64_t last = 0;  // one past the batch's last event
    int64_t at_ms = 0;
    bool idle = false;    // the last answer held nothing (or failed): wait a little
    bool failed = false;  // it failed: wait longer
  };
  std::map<std::pair<std::string, PartitionId>, RemoteRead> remote_reads_ GUARDED_BY(remote_mu_);
  // Some local successor reads a remote ancestor: the peer ticker wakes parked consumers so
  // that reads held back a moment (RemoteReadDue) are tried again.
  std::atomic<bool> reads_remote_{false};
  int64_t last_expiry_ms_ = 0;    // peer ticker only
  int64_t last_registry_flush_ms_ = 0;  // ticker only

  Mutex tick_mu_;
  CondVar tick_cv_;
  bool stopping_ GUARDED_BY(tick_mu_) = false;
  std::thread ticker_;
  std::thread peer_ticker_;
};

}  // namespace shoal::broker
