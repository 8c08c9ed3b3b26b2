#include "sim/protocol_sim.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "broker/sidecar_probe.h"
#include "broker/topic.h"
#include "shoal/client/admin_client.h"
#include "shoal/client/admin_plane.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "shoal/common/json.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/replication.h"
#include "shoal/common/wire.h"
#include "shoal/control/admin_partitions.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/failover.h"
#include "shoal/control/retirement.h"
#include "shoal/harness/verifier.h"
#include "storage/record.h"
#include "support/manual_clock.h"
#include "support/sim/mem_file_system.h"

namespace shoal::sim {
namespace {

constexpr char kTopic[] = "orders";
constexpr int64_t kRedeliveryMs = 3000;
// Replicated seeds: how long a produce waits for its quorum at the leader (sim time), and how
// long the producer waits for an answer before it gives the request up and retries.
constexpr int64_t kReplicationTimeoutMs = 1500;
constexpr int64_t kClientTimeoutMs = 2500;

class World;

// A sidecar's peers, as function calls into the other Topics of the world.
class SimPeers final : public broker::PeerClient {
 public:
  explicit SimPeers(World& w) : w_(w) {}
  Result<std::string> FetchProducers(const PeerAddress& peer, PartitionId partition,
                                     const broker::SuccessorRef* successor,
                                     uint64_t end) override;
  Result<broker::RemoteCommits> FetchCommits(const PeerAddress& peer,
                                             PartitionId partition) override;
  Result<broker::RemoteCommits> FetchCopyCommits(const PeerAddress& peer, PartitionId partition,
                                                 Epoch leader_epoch) override;
  Result<std::map<std::string, broker::GroupRegistry::Group>> FetchGroups(
      const PeerAddress& peer) override;
  // Reads and commits through ranges: lost on the way there or back, and now and then the
  // owner loses power right after it handed the batch out (the answer never arrives).
  Result<broker::RemoteBatch> ReadRange(const PeerAddress& peer, PartitionId partition,
                                        const std::string& group, const PodName& reader,
                                        const std::vector<HashRange>& ranges, size_t max,
                                        size_t max_bytes) override;
  Result<broker::RemoteCommits> CommitFor(const PeerAddress& peer, PartitionId partition,
                                          const std::string& group, const PodName& reader,
                                          Offset offset) override;
  // A follower's fetch: the leader's ServeFetch, called in place; lost on the way there or
  // back, and now and then other actions run while the answer is on its way.
  Result<std::string> FetchReplica(const PeerAddress& leader, const std::string& body) override;

 private:
  World& w_;
};

// A coordinator's admin plane, as function calls into the Topics, lost on the way there or back
// with the world's fault rate.
class SimAdmin final : public client::AdminPlane {
 public:
  SimAdmin(World& w, std::string who) : w_(w), who_(std::move(who)) {}
  Result<PartitionMap> GetMap(const std::string& admin) override;
  Result<client::InstallOutcome> InstallMap(const std::string& admin,
                                            const PartitionMap& map) override;
  Result<uint64_t> VolumeOf(const std::string& admin) override;
  Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> FollowedCopies(
      const std::string& admin) override;
  Status Prepare(const std::string& admin, const PartitionMap& map) override;
  Result<uint64_t> Seal(const std::string& admin, const PartitionMap& target,
                        PartitionId partition) override;
  Result<std::string> DeleteGroup(const std::string& admin, const std::string& group,
                                  bool force) override;
  Result<std::string> Get(const std::string& host_port, const std::string& path,
                          bool admin) override;

 private:
  World& w_;
  const std::string who_;
};

struct Pod {
  std::string name;
  std::unique_ptr<broker::SidecarProbe> probe;
  std::unique_ptr<SimPeers> peers;
  std::unique_ptr<broker::Topic> topic;  // null while crashed
  bool paused = false;
  // Cut off from the coordinators (their requests get no answer) but not from producers,
  // consumers or peers: a leader that a failover replaces and that goes on taking writes.
  bool isolated = false;
  bool slow = false;  // a follower that fetches rarely
};

// One part of a produce request that waits for a quorum of its partition's copies (the events of
// one replicated partition at the pod that stored them), as DataFrontend waits for it.
struct QuorumPart {
  std::string pod;
  uint32_t partition = 0;
  uint64_t leader_epoch = 0;
  uint64_t end = 0;
  struct Event {
    std::string producer;
    uint64_t seq = 0;
    uint32_t partition = 0;  // where it is stored (a duplicate's: maybe an ancestor)
    uint64_t offset = 0;
    bool duplicate = false;
  };
  std::vector<Event> events;
};

// A produce request whose answer waits for quorums: answered when the last part is (the first
// refusal wins), or given up by the producer after kClientTimeoutMs.
struct PendingProduce {
  size_t left = 0;
  Status error;
  bool answered = false;     // every part is done
  bool answer_lost = false;  // the answer never reaches the producer
  int64_t give_up_ms = 0;
  std::vector<QuorumPart> parts;
};

struct Producer {
  std::string id;
  uint64_t next_seq = 0;
  std::map<std::string, uint64_t> counter;
  std::vector<client::OutgoingEvent> batch;  // the batch being sent until acknowledged
  std::vector<harness::AckedEvent> meta;     // its events as the verifier knows them
  std::vector<harness::AckedEvent> acked;
  std::shared_ptr<PendingProduce> pending;   // the batch's request, waiting for quorums
  std::string last_answer;                   // the last answer that was not an ack
};

struct Group {
  std::string name;
  enum class Kind { kFast, kSlow, kStopper, kLate } kind = Kind::kFast;
  int start_step = 0;                 // kLate: not before
  int stop_from = 0, stop_until = 0;  // kStopper: silent in between
  uint64_t first_request = UINT64_MAX;
  std::vector<harness::SeenEvent> seen;
  // Events (partition, offset) it committed, or may have: a commit whose answer was lost may
  // have taken effect.
  std::set<std::pair<uint32_t, uint64_t>> committed;
  std::map<std::pair<std::string, std::string>, uint64_t> last_n;  // per (producer, key)
  std::set<std::pair<std::string, uint64_t>> seen_ids;  // committed
  // Seen, but the commit of them failed: they may come again (redelivery), not as duplicates.
  std::set<std::pair<std::string, uint64_t>> uncommitted;
};

// The coordinators' record in their consensus store (the PartitionedTopic's status, written over
// the resourceVersion read): the map last installed and the change being carried out, saved
// before any sidecar sees it. Written only with compare-and-set on `version`.
struct Record {
  uint64_t version = 0;
  PartitionMap map;
  std::optional<PartitionMap> target;
  Epoch floor{0};
  // A failover begun: its partitions and the leader epoch their copies are fenced at. Recorded
  // before the first fence, finished by whoever reads it: a copy fenced stays fenced until a
  // map names a leader of that epoch or newer.
  std::vector<PartitionId> failing_over;
  Epoch fence{0};
};

// A coordinator that follows the protocol: it reads the record, plans only with a
// compare-and-set of it, and resumes a recorded change. It may crash anywhere (its memory is
// gone; the record stays) or freeze (a paused leader: it keeps the change it was carrying out
// and, when it wakes, goes on with it from memory, without reading the record: a deposed
// coordinator's late requests).
struct Coordinator {
  std::string name;
  std::unique_ptr<SimAdmin> admin;
  uint64_t view = 0;  // the record's version it last read or wrote
  std::optional<PartitionMap> base, target;  // the change in its memory
  bool frozen = false;
};

class World {
 public:
  explicit World(const ScheduleOptions& o)
      : opts_(o),
        rng_(o.seed),
        fs_(&clock_),
        setup_admin_(*this, "setup"),
        rogue_admin_(*this, "rogue") {}

  ~World() {
    // Produces waiting for a quorum are answered when their partitions close: nothing of the
    // world may be touched then.
    dying_ = true;
    for (auto& p : pods_) p->topic.reset();
  }

  ScheduleResult Run();

  // Transport: the Topic at `name` if it answers now (up and not paused).
  broker::Topic* Reach(const std::string& name) {
    for (auto& p : pods_) {
      if (p->name == name) return p->topic && !p->paused ? p->topic.get() : nullptr;
    }
    return nullptr;
  }
  // The same for a coordinator's request: an isolated pod does not answer them.
  broker::Topic* ReachAdmin(const std::string& name) {
    for (auto& p : pods_) {
      if (p->name == name) {
        return p->topic && !p->paused && !p->isolated ? p->topic.get() : nullptr;
      }
    }
    return nullptr;
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  uint64_t Pick(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool faults() const { return faults_; }
  void BeforeRequest(const std::string& who) {
    ++event_;
    if (who != "setup" && who != "rogue" && in_legit_change_) MaybeInterleave();
  }
  void CheckInvariants();
  void AfterRequest() { CheckInvariants(); }
  void NoteRemoteRead(size_t n) { result_.remote_read += n; }
  // A power cut of pod `name` (its admin address is its name).
  void PowerCut(const std::string& name) {
    for (auto& p : pods_) {
      if (p->name == name && p->topic && p.get() != busy_) Crash(*p);
    }
  }
  // Replication: while a fetch's answer is on its way, other actions may run.
  void InterleaveFetch();
  void NoteInstalled(const std::string& pod, const PartitionMap& before, const PartitionMap& after) {
    (void)pod;
    for (const auto& p : before.partitions()) {
      if (!after.Find(p.id)) {
        auto [it, fresh] = retired_at_.emplace(p.id.value(), event_);
        if (fresh) ++result_.retired;
      }
    }
    // Every partition's parents and final end, as the maps that went in say (the oracle of
    // invariant 3 walks this whole lineage, retired partitions included).
    for (const auto& p : after.partitions()) {
      auto& node = lineage_[p.id.value()];
      node.parents = p.parents;
      if (!p.active()) node.end = std::max(node.end, p.end_offset);
    }
    NoteMap(after);
  }
  // What a map says of replication: each partition's copies, its newest leader epoch, and
  // (replicated seeds) which partitions are declared lost.
  void NoteMap(const PartitionMap& m) {
    if (!replicated_) return;
    for (const auto& p : m.partitions()) {
      auto& copies = copies_[p.id.value()];
      copies.insert(p.owner.value());
      for (const auto& r : p.replicas) copies.insert(r.value());
      auto& newest = newest_leader_epoch_[p.id.value()];
      newest = std::max(newest, p.LeaderEpoch().value());
      if (p.lost && lost_partitions_.insert(p.id.value()).second && copies.size() > 1) {
        ++result_.lost_with_copies;
        Trace("  p" + std::to_string(p.id.value()) + " declared lost though it has copies");
      }
    }
  }
  void Trace(const std::string& s) {
    if (opts_.trace) {
      result_.trace.push_back(std::to_string(event_) + " " + s);
    } else {
      recent_.push_back(std::to_string(event_) + " " + s);
      if (recent_.size() > 40) recent_.pop_front();
    }
  }
  void TraceMap(const PartitionMap& m) {
    if (!opts_.trace) return;
    std::string out = "    map e" + std::to_string(m.epoch().value()) + ":";
    for (const auto& p : m.partitions()) {
      out += " p" + std::to_string(p.id.value()) + (p.active() ? "" : "s") + "@" +
             p.owner.value().substr(4);
      for (const auto& r : p.replicas) out += "+" + r.value().substr(4);
      if (p.leader_epoch.value()) out += "/le" + std::to_string(p.leader_epoch.value());
      out += "[" + std::to_string(p.range.lo >> 24) + "," + std::to_string(p.range.hi >> 24) + ")";
      if (!p.parents.empty()) {
        out += "<";
        for (auto q : p.parents) out += std::to_string(q.value()) + ",";
        out.back() = '>';
      }
    }
    Trace(out);
  }
  void Violation(const std::string& what) {
    if (result_.violations.size() < 20) {
      result_.violations.push_back("event " + std::to_string(event_) + ": " + what);
    }
  }

 private:
  // Setup and the pods' lives.
  void Setup();
  Status OpenPod(Pod& p);
  void Crash(Pod& p);
  // The pod's volume is emptied and the process restarted on it: its partitions are gone (one
  // copy of each event), to be declared lost by the coordinator.
  void Wipe(Pod& p);
  // With no change recorded: a pod of the map that holds no map while the map gives it
  // partitions that are not lost. Its name, or "" when there is none.
  // `change`: `map` is a change not carried out yet (its new partitions are not expected).
  std::string PodWithoutData(Coordinator& c, const PartitionMap& map, bool change);
  // A pod of `map` that leads partitions with copies and does not answer `c` (down, paused, cut
  // off from the coordinators): its name, or "" when every such pod answers.
  std::string SilentLeader(Coordinator& c, const PartitionMap& map);

  // Actions.
  void Act(bool quiet);
  void GroupAction(bool quiet);
  void ActReplicated(uint64_t roll, bool quiet);
  void ProduceAction(Producer& prod, bool quiet);
  void ConsumeAction(Group& g, Pod& pod, bool quiet);
  void Tick();
  void CoordinatorStep(Coordinator& c, bool quiet);
  void RogueStep();
  void MaybeInterleave();
  // `c`: the coordinator that plans it (null: a rogue one), which asks whether a leaving pod's
  // copies may go (Placed).
  std::optional<PartitionMap> PickChange(const PartitionMap& base, bool allow_retire,
                                         Coordinator* c);
  std::map<std::string, control::AdminPartitionsReport> Reports(const PartitionMap& map);
  // Compare-and-set of the record: writes it only if `c` read the version it holds now.
  bool WriteRecord(Coordinator& c, const Record& next);
  void Reconcile(Coordinator& c, const Status& why);

  // Checks.
  // `leader_epoch`: of the partition at the pod that stored it (replicated partitions; else 0).
  void RecordStored(const std::string& producer, uint64_t seq, const wire::ProduceResult& r,
                    uint32_t hash, uint64_t leader_epoch = 0);
  // Invariant 3 per hash point, for event `e` (hash `h`) just handed to `g` at `pod`: every
  // event with hash h known to be stored in e's lineage was committed by g before.
  void CheckParentsFirst(const Group& g, const wire::ConsumedEvent& e, uint32_t h,
                         const PartitionMap& held, const std::string& pod);
  void CheckDuplicate(const std::string& producer, uint64_t seq, const wire::ProduceResult& r);
  void Settle();
  void FinalChecks();

  // Replication (replicated seeds).
  struct LogRec {
    uint64_t offset = 0;
    std::string key, producer;
    std::optional<uint64_t> seq;
    std::string bytes;  // the record as stored
  };
  // A copy's log as its files hold it (what the pod sees; a crashed pod's, what it will recover,
  // torn tails left out).
  std::vector<LogRec> ReadLog(const std::string& pod, uint32_t partition);
  // A copy's leader epochs (its `epochs` file), and the epoch of the entry at `offset` by them.
  std::vector<replication::EpochStart> ReadEpochs(const std::string& pod, uint32_t partition);
  static uint64_t EpochOf(const std::vector<replication::EpochStart>& epochs, uint64_t offset);
  // Whether `pod`'s copy holds (producer, seq) at `offset`.
  bool Holds(const std::string& pod, uint32_t partition, uint64_t offset,
             const std::string& producer, uint64_t seq);
  // How many of the partition's copies hold it, and how many make a quorum: the copies `pod`'s
  // map names (the acknowledging leader's: its quorum), or with none given (or that map not
  // knowing the partition) every pod any map made a copy of it.
  std::pair<size_t, size_t> Holders(uint32_t partition, uint64_t offset,
                                    const std::string& producer, uint64_t seq, std::string* who,
                                    const std::string& pod = "");
  // The partition's leader in the record's map ("" when none).
  std::string RecordLeader(uint32_t partition, uint64_t* leader_epoch);
  void FetchAction(Pod& f, bool quiet);
  // A part of a produce was answered by its leader's quorum tracker (OnReached, Expire, Abandon
  // or Close): at the moment an Ok comes, the sidecar acknowledges those events.
  void PartAnswered(const std::shared_ptr<PendingProduce>& pending, size_t part, Status st);
  // A producer's request waiting for quorums: false while it still waits.
  bool FinishPending(Producer& prod);
  void CheckReadCommitted(const Group& g, const wire::ConsumedEvent& e,
                          const std::string& producer, const std::string& pod);
  // Leaders of active replicated partitions of `base` that do not answer the coordinator (or
  // that it suspects), whose followers can make a quorum.
  std::vector<PartitionId> FailOverCandidates(const PartitionMap& base, bool quiet,
                                              const std::string& wiped);
  // Records a failover of `ids`, then carries it out (FinishFailOver). False: nothing done.
  bool StartFailOver(Coordinator& c, const std::vector<PartitionId>& ids, bool quiet);
  // Fences, chooses the new leaders, records the failover map and installs it.
  void FinishFailOver(Coordinator& c, bool quiet);
  // Installs the record's map on every pod that answers and holds an older one (the control
  // loop's re-install of the current map). False when the coordinator must stop (fenced).
  bool CatchUpInstalls(Coordinator& c);
  // `m` with its followers placed (replication::PlaceReplicas over every pod of the map). With
  // pods leaving (--pods-leave), one pod now and then has its copies moved off as the control
  // loop's scale-down does: replacements join beside them, and a change planned by `c` drops
  // them once `c` hears every replacement caught up (LeavingCopiesCaughtUp). A change picks
  // another pod to leave only once the last one's copies are gone.
  PartitionMap Placed(const PartitionMap& m, bool change = false, Coordinator* c = nullptr);
  // Whether `m` names copies on `pod` of partitions `pod` does not lead.
  static bool FollowsAny(const PartitionMap& m, const std::string& pod);
  // Whether every partition of `m` with a copy on `leaving` has a replacement joined beside it
  // and every replacement's pod tells `c` it caught up (ControlLoop::CopiesJoining).
  bool LeavingCopiesCaughtUp(Coordinator& c, const PartitionMap& m, const std::string& leaving);
  // Quiet phase: every follower fetches until nothing moves.
  void CatchUpAll();
  // Log matching (11, 10): where `pod`'s copy of `partition` and its leader's log have an entry
  // of the same leader epoch at one offset, the two are the same up to there.
  void CheckLogMatching(const std::string& pod, const std::string& leader, uint32_t partition,
                        const std::vector<LogRec>& copy);
  // After the quiet phase: every copy is its leader's log (11) and no log has an event twice (6).
  void CheckCopies();
  // Partitions whose leader hands out less than it holds after the quiet phase (its high
  // watermark stays below its end), for a loss's message.
  std::string Unreadable();

  const ScheduleOptions opts_;
  std::mt19937_64 rng_;
  testing::ManualClock clock_;
  testing::MemFileSystem fs_;
  SimAdmin setup_admin_;
  // Volumes are named in order (TopicOptions::new_volume_id); per pod, the volume the
  // coordinators first saw it hold a map on, kept with their record (control/failover.h).
  uint64_t volumes_named_ = 0;
  control::FirstVolumes first_volumes_;
  SimAdmin rogue_admin_;
  std::vector<Coordinator> coordinators_;
  bool hand_rogue_ = false;      // this seed also has a coordinator that ignores the record
  bool had_hand_rogue_ = false;  // (invariant 5 cannot hold then; 2 must)
  std::vector<std::unique_ptr<Pod>> pods_;
  std::vector<Producer> producers_;
  std::vector<Group> groups_;
  std::vector<std::string> hot_keys_, cold_keys_;
  Record record_;
  std::optional<PartitionMap> rogue_target_;
  PartitionMap rogue_base_;

  uint64_t event_ = 0;      // every action and request, in order
  uint64_t delivered_ = 0;  // every event handed to a group, in order
  int step_ = 0;
  bool faults_ = true;
  // Wiped volumes (a third of the seeds without a hand rogue; at most kMaxWipes each): the
  // partitions whose only copy went with them, and the events stored again after such a loss
  // (a retry of a batch stored in a lost partition is taken again: its producer state went too).
  static constexpr int kMaxWipes = 2;
  bool wipes_ = false;
  int wiped_ = 0;
  std::set<uint32_t> lost_partitions_;
  std::set<std::pair<std::string, uint64_t>> stored_again_;
  // With copies: the events whose stored entry was on a wiped volume and on no other pod.
  std::map<std::pair<std::string, uint64_t>, std::pair<uint32_t, uint64_t>> gone_with_wipe_;
  bool in_legit_change_ = false;
  Coordinator* active_ = nullptr;  // the coordinator whose change is being carried out
  bool interleaving_ = false;
  std::map<uint32_t, uint64_t> retired_at_;  // partition id -> event it first left a pod's map
  struct LineageNode {
    std::vector<PartitionId> parents;
    uint64_t end = 0;
  };
  std::map<uint32_t, LineageNode> lineage_;
  std::map<std::pair<std::string, uint64_t>, std::pair<uint32_t, uint64_t>> stored_;
  // The events a quorum of their copies held when a volume was wiped (Wipe): acknowledged or
  // read after it, they were held by a quorum when their leader's high watermark passed them,
  // though one of those copies is gone now.
  std::set<std::pair<std::string, uint64_t>> quorum_held_;
  // The events the record's leader of their partition held when its volume was wiped (Wipe):
  // (partition, leader epoch, offset, producer, seq). That leader held them when it was made
  // the leader; a replaced leader that acknowledges one after the wipe (a retry answered from
  // its producer state) claims nothing the leader of the newer epoch did not hold (10). The
  // copies that hold it still make a quorum (9), and the wiped leader is failed over again.
  std::set<std::tuple<uint32_t, uint64_t, uint64_t, std::string, uint64_t>> wiped_leader_held_;
  // Every event known to be stored (acknowledged, or handed to some group), per partition id:
  // hash -> offset.
  std::map<uint32_t, std::multimap<uint32_t, uint64_t>> known_;
  std::map<uint64_t, std::string> maps_by_epoch_;
  std::deque<std::string> recent_;
  ScheduleResult result_;

  // Replication.
  bool replicated_ = false;
  uint32_t factor_ = 1;
  bool pods_leave_ = false;  // ScheduleOptions::pods_leave
  std::string leaving_;      // the pod a change's copies are placed off ("": none)
  std::string wiped_pod_;
  std::string last_refusal_;  // the last refusal a coordinator reconciled after
  bool dying_ = false;
  Pod* busy_ = nullptr;  // mid-fetch: not crashed, wiped or paused by interleaved actions
  std::map<uint32_t, std::set<std::string>> copies_;      // partition -> pods with a copy
  std::map<uint32_t, uint64_t> newest_leader_epoch_;      // partition -> in any map
  std::map<std::pair<uint32_t, uint64_t>, std::string> acked_by_;  // (partition, leader epoch)
  std::set<std::pair<uint32_t, uint64_t>> committed_;    // (partition, offset) quorum-held
  std::map<uint32_t, uint64_t> failed_over_at_;           // partition -> event of its failover
  // Per stored (producer, seq): the leader epoch it was stored in, and whether a sidecar
  // acknowledged it (to its producer or, for a forward, to the entry pod).
  struct StoredMeta {
    uint64_t leader_epoch = 0;
    bool acked = false;
  };
  std::map<std::pair<std::string, uint64_t>, StoredMeta> stored_meta_;
  // Per event, the entries of it that a failover replaced before they were acknowledged.
  std::map<std::pair<std::string, uint64_t>, std::vector<std::pair<uint32_t, uint64_t>>> replaced_;
};

// --- transports ------------------------------------------------------------------------------

Result<std::string> SimPeers::FetchProducers(const PeerAddress& peer, PartitionId partition,
                                             const broker::SuccessorRef* successor,
                                             uint64_t end) {
  broker::Topic* t = w_.Reach(peer.admin);
  if (!t) return Status::Unavailable(peer.admin + " does not answer");
  return t->ExportProducers(partition, successor, end);
}

Result<broker::RemoteCommits> SimPeers::FetchCommits(const PeerAddress& peer,
                                                     PartitionId partition) {
  broker::Topic* t = w_.Reach(peer.admin);
  if (!t) return Status::Unavailable(peer.admin + " does not answer");
  return t->CommitsOf(partition);
}

Result<broker::RemoteCommits> SimPeers::FetchCopyCommits(const PeerAddress& peer,
                                                         PartitionId partition,
                                                         Epoch leader_epoch) {
  broker::Topic* t = w_.Reach(peer.admin);
  if (!t || (w_.faults() && w_.Chance(0.03))) return Status::Unavailable(peer.admin + ": lost");
  return t->CommitsOf(partition, /*copy=*/true, leader_epoch);
}

Result<std::map<std::string, broker::GroupRegistry::Group>> SimPeers::FetchGroups(
    const PeerAddress& peer) {
  broker::Topic* t = w_.Reach(peer.admin);
  if (!t) return Status::Unavailable(peer.admin + " does not answer");
  return t->Groups();
}

Result<broker::RemoteBatch> SimPeers::ReadRange(const PeerAddress& peer, PartitionId partition,
                                                const std::string& group, const PodName& reader,
                                                const std::vector<HashRange>& ranges,
                                                size_t max, size_t max_bytes) {
  broker::Topic* t = w_.Reach(peer.admin);
  if (!t || (w_.faults() && w_.Chance(0.03))) return Status::Unavailable(peer.admin + ": lost");
  auto batch = t->ReadFor(partition, group, reader, ranges, max, max_bytes);
  w_.NoteRemoteRead(batch.ok() ? batch->batch.count : 0);
  if (w_.faults() && w_.Chance(0.02)) {
    w_.PowerCut(peer.admin);  // in the middle of the read: the batch went out, the answer not
    return Status::Unavailable(peer.admin + ": crashed");
  }
  if (w_.faults() && w_.Chance(0.03)) return Status::Unavailable(peer.admin + ": answer lost");
  return batch;
}

Result<broker::RemoteCommits> SimPeers::CommitFor(const PeerAddress& peer, PartitionId partition,
                                                  const std::string& group,
                                                  const PodName& reader, Offset offset) {
  broker::Topic* t = w_.Reach(peer.admin);
  if (!t || (w_.faults() && w_.Chance(0.03))) return Status::Unavailable(peer.admin + ": lost");
  auto after = t->CommitFor(partition, group, reader, offset);
  if (w_.faults() && w_.Chance(0.03)) return Status::Unavailable(peer.admin + ": answer lost");
  return after;
}

Result<std::string> SimPeers::FetchReplica(const PeerAddress& leader, const std::string& body) {
  broker::Topic* t = w_.Reach(leader.admin);
  if (!t || (w_.faults() && w_.Chance(0.03))) return Status::Unavailable(leader.admin + ": lost");
  auto request = broker::ParseFetchRequest(body);
  if (!request.ok()) return request.status();
  std::string answer = broker::StartFetchAnswer();
  (void)t->ServeFetch(*request, &answer);  // never parks: the sim asks again
  w_.AfterRequest();
  // The answer on its way: the world goes on meanwhile (a failover may fence the follower).
  if (w_.faults() && w_.Chance(0.15)) w_.InterleaveFetch();
  if (w_.faults() && w_.Chance(0.03)) return Status::Unavailable(leader.admin + ": answer lost");
  return answer;
}

Result<PartitionMap> SimAdmin::GetMap(const std::string& admin) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.ReachAdmin(admin);
  if (!t) return Status::Unavailable(admin + " does not answer");
  // As the admin client reads GET /v1/admin/map of a sidecar that holds no map.
  if (t->map().epoch().value() == 0) return Status::NotFound(admin + " holds no map");
  return t->map();
}

Result<uint64_t> SimAdmin::VolumeOf(const std::string& admin) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.ReachAdmin(admin);
  if (!t || (w_.faults() && w_.Chance(0.03))) return Status::Unavailable(admin + ": lost");
  const uint64_t volume = t->volume();
  w_.AfterRequest();
  return volume;
}

Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> SimAdmin::FollowedCopies(
    const std::string& admin) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.ReachAdmin(admin);
  if (!t || (w_.faults() && w_.Chance(0.03))) return Status::Unavailable(admin + ": lost");
  auto copies = client::ParseFollowedCopies(t->FollowedJson());
  w_.AfterRequest();
  return copies;
}

Result<client::InstallOutcome> SimAdmin::InstallMap(const std::string& admin,
                                                    const PartitionMap& map) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.ReachAdmin(admin);
  if (!t || (w_.faults() && w_.Chance(0.03))) return Status::Unavailable(admin + ": lost");
  const PartitionMap before = t->map();
  auto r = t->InstallMap(map);
  w_.Trace(who_ + " install e" + std::to_string(map.epoch().value()) + " " + map.Digest() +
           " on " + admin + ": " + (r.ok() ? "ok" : r.status().ToString()));
  if (r.ok()) w_.NoteInstalled(admin, before, map);
  if (r.ok()) w_.TraceMap(map);
  w_.AfterRequest();
  if (w_.faults() && w_.Chance(0.03)) return Status::Unavailable(admin + ": answer lost");
  if (!r.ok()) return r.status();
  return *r == broker::InstallOutcome::kInstalled ? client::InstallOutcome::kInstalled
                                                  : client::InstallOutcome::kAlreadyHeld;
}

Status SimAdmin::Prepare(const std::string& admin, const PartitionMap& map) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.ReachAdmin(admin);
  if (!t) return Status::Unavailable(admin + " does not answer");
  return t->Prepare(map);
}

Result<uint64_t> SimAdmin::Seal(const std::string& admin, const PartitionMap& target,
                                PartitionId partition) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.ReachAdmin(admin);
  if (!t || (w_.faults() && w_.Chance(0.03))) return Status::Unavailable(admin + ": lost");
  auto r = t->Seal(target, partition);
  w_.Trace(who_ + " seal p" + std::to_string(partition.value()) + " for e" +
           std::to_string(target.epoch().value()) + " " + target.Digest() + " at " + admin +
           ": " + (r.ok() ? "end " + std::to_string(*r) : r.status().ToString()));
  w_.AfterRequest();
  if (w_.faults() && w_.Chance(0.03)) return Status::Unavailable(admin + ": answer lost");
  return r;
}

Result<std::string> SimAdmin::DeleteGroup(const std::string& admin, const std::string& group,
                                          bool force) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.ReachAdmin(admin);
  if (!t) return Status::Unavailable(admin + " does not answer");
  auto had = t->DeleteGroup(group, force);
  if (!had.ok()) return had.status();
  std::string out = "{\"group\":";
  json::AppendString(out, group);
  return out + "}";
}

Result<std::string> SimAdmin::Get(const std::string& host_port, const std::string& path,
                                  bool admin) {
  (void)admin;
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.ReachAdmin(host_port);
  if (!t) return Status::Unavailable(host_port + " does not answer");
  if (path == "/v1/admin/partitions") return t->PartitionsJson();
  return Status::NotFound(path);
}

// --- setup -----------------------------------------------------------------------------------

Status World::OpenPod(Pod& p) {
  broker::TopicOptions o;
  o.topic = kTopic;
  o.data_dir = "/" + p.name;
  o.fs = &fs_;
  o.pod = PodName(p.name);
  o.wait_for_map = true;
  o.partition.fsync = broker::FsyncPolicy::kAlways;
  o.partition.segment_bytes = 4096;  // several segments per partition
  // Batches read through ranges whose answer was lost come back after this (sim time).
  o.partition.redelivery_ms = kRedeliveryMs;
  // Replication: acks quorum; a fetch never parks at the leader (the sim asks again); a produce
  // waits for its quorum on the simulated clock. Topic::Start is never called: no fetcher
  // threads, the schedule's fetch actions are the fetchers.
  o.acks_quorum = true;
  o.fetch_wait_ms = 0;
  o.replication_timeout_ms = kReplicationTimeoutMs;
  o.new_volume_id = [this] { return ++volumes_named_; };
  auto t = broker::Topic::Open(o, clock_, *p.probe, p.peers.get());
  if (!t.ok()) return t.status();
  p.topic = std::move(t).value();
  return Status::Ok();
}

void World::Crash(Pod& p) {
  p.topic.reset();  // the process is gone: no Close, nothing flushed
  fs_.Crash("/" + p.name + "/", &rng_);
  p.paused = false;
  p.isolated = false;
  ++result_.crashes;
  Trace("crash " + p.name);
}

void World::Wipe(Pod& p) {
  if (replicated_) {
    for (const auto& [key, at] : stored_) {
      const auto [have, need] = Holders(at.first, at.second, key.first, key.second, nullptr);
      if (have >= need) quorum_held_.insert(key);
      // An entry on this volume only (never acknowledged: no quorum held it) goes with it,
      // and the producer state that knew it too: a retry may be stored again.
      if (Holds(p.name, at.first, at.second, key.first, key.second)) {
        uint64_t leader_epoch = 0;
        if (RecordLeader(at.first, &leader_epoch) == p.name) {
          wiped_leader_held_.insert({at.first, leader_epoch, at.second, key.first, key.second});
        }
        bool elsewhere = false;
        for (const auto& other : pods_) {
          if (other.get() != &p) {
            elsewhere |= Holds(other->name, at.first, at.second, key.first, key.second);
          }
        }
        if (!elsewhere) gone_with_wipe_[key] = at;
      }
    }
  }
  const PartitionMap held = p.topic->map();
  for (const auto& info : held.partitions()) {
    // With copies, what the coordinator declares lost counts (NoteMap): an active partition
    // with followers is failed over instead.
    if (replicated_) break;
    if (info.owner.value() == p.name && !info.lost) lost_partitions_.insert(info.id.value());
  }
  // A group registered only here is forgotten with the volume (its positions too): to the topic
  // it is a new group from its next request on, which may start after partitions that retire
  // meanwhile, as a group that appears late does.
  const auto here = p.topic->Groups();
  for (auto& g : groups_) {
    if (!here.count(g.name)) continue;
    bool elsewhere = false;
    for (const auto& other : pods_) {
      if (other.get() == &p) continue;
      elsewhere |= !other->topic || other->topic->Groups().count(g.name) > 0;
    }
    if (!elsewhere) {
      g.first_request = UINT64_MAX;
      Trace("  " + g.name + " was known only to " + p.name);
    }
  }
  p.topic.reset();
  if (Status st = fs_.RemoveAll("/" + p.name); !st.ok()) {
    Violation("wiping " + p.name + ": " + st.ToString());
  }
  p.paused = false;
  p.isolated = false;
  ++wiped_;
  ++result_.wipes;
  Trace("wipe " + p.name + " (held e" + std::to_string(held.epoch().value()) + ")");
  if (Status st = OpenPod(p); !st.ok()) Violation("restarting " + p.name + ": " + st.ToString());
}

std::string World::SilentLeader(Coordinator& c, const PartitionMap& map) {
  for (const auto& [pod, addr] : map.peers()) {
    const bool leads_copied =
        std::any_of(map.partitions().begin(), map.partitions().end(), [&](const PartitionInfo& p) {
          return p.owner.value() == pod && !p.lost && !p.replicas.empty();
        });
    if (!leads_copied) continue;
    auto held = c.admin->GetMap(addr.admin);
    if (!held.ok() && held.status().code() == Status::Code::kUnavailable) return pod;
  }
  return "";
}

std::string World::PodWithoutData(Coordinator& c, const PartitionMap& map, bool change) {
  const Epoch before(map.epoch().value() + (change ? 0 : 1));
  for (const auto& [pod, addr] : map.peers()) {
    if (PartitionsMadeBefore(map, PodName(pod), before).empty()) continue;
    // A sidecar without a map answers one of epoch 0 here (over HTTP: 404, as the control
    // loop reads it).
    auto held = c.admin->GetMap(addr.admin);
    if ((held.ok() && held->epoch().value() == 0) ||
        (!held.ok() && held.status().code() == Status::Code::kNotFound)) {
      return pod;
    }
  }
  return "";
}

void World::Setup() {
  // Whether the seed is replicated comes from a generator of its own, so that the seeds without
  // replication run the very schedules they ran before replication was simulated.
  {
    std::mt19937_64 r(opts_.seed * 0x9E3779B97F4A7C15ull + 25);
    replicated_ = opts_.replicated < 0 ? (r() % 2 == 0) : opts_.replicated > 0;
  }
  pods_leave_ = replicated_ && opts_.pods_leave > 0;
  result_.replicated = replicated_;
  const size_t n_pods = replicated_ ? 3 + Pick(2) : 2 + Pick(2);
  for (size_t i = 0; i < n_pods; ++i) {
    auto p = std::make_unique<Pod>();
    p->name = "pod-" + std::to_string(i);
    p->probe = std::make_unique<broker::SidecarProbe>(kTopic);
    p->peers = std::make_unique<SimPeers>(*this);
    if (Status st = OpenPod(*p); !st.ok()) Violation("opening " + p->name + ": " + st.ToString());
    pods_.push_back(std::move(p));
  }
  // Skewed keys: most events go to keys hashing into the lowest sixteenth of the space, so most
  // ranges stay empty (the normal case after a surge).
  for (uint64_t i = 0; hot_keys_.size() < 10 || cold_keys_.size() < 6; ++i) {
    std::string k = "k" + std::to_string(i);
    const uint32_t h = KeyHash(k);
    if (h < (uint32_t{1} << 28) && hot_keys_.size() < 10) {
      hot_keys_.push_back(k);
    } else if (h >= (uint32_t{1} << 28) && cold_keys_.size() < 6) {
      cold_keys_.push_back(k);
    }
  }
  for (int i = 0; i < 2 + static_cast<int>(Pick(2)); ++i) {
    Producer p;
    p.id = "p" + std::to_string(i);
    producers_.push_back(std::move(p));
  }
  const int steps = opts_.steps;
  auto group = [](std::string name, Group::Kind kind) {
    Group g;
    g.name = std::move(name);
    g.kind = kind;
    return g;
  };
  groups_.push_back(group("fast", Group::Kind::kFast));
  groups_.push_back(group("slow", Group::Kind::kSlow));
  Group stopper = group("stopper", Group::Kind::kStopper);
  stopper.stop_from = static_cast<int>(Pick(steps / 2));
  stopper.stop_until = stopper.stop_from + steps / 4 + static_cast<int>(Pick(steps / 4 + 1));
  groups_.push_back(stopper);
  Group late = group("late", Group::Kind::kLate);
  late.start_step = steps / 4 + static_cast<int>(Pick(steps / 2 + 1));
  groups_.push_back(late);

  // Epoch 1: 1 or 2 partitions per pod, owners round robin.
  const uint32_t count = static_cast<uint32_t>(n_pods * (1 + Pick(2)));
  std::vector<PodName> owners;
  for (const auto& p : pods_) owners.push_back(PodName(p->name));
  auto initial = PartitionMap::Initial(kTopic, count, owners);
  PartitionMap map = *initial;
  for (const auto& p : pods_) map = map.WithPeer(PodName(p->name), {p->name, p->name});
  if (replicated_) {
    // Factor 3 mostly; 2 now and then (it cannot fail over: a quorum of 2 needs both).
    factor_ = Chance(0.2) ? 2 : 3;
    map = Placed(map);
    pods_[Pick(pods_.size())]->slow = true;
  }
  for (int i = 0; i < 2; ++i) {
    Coordinator c;
    c.name = "c" + std::to_string(i);
    c.admin = std::make_unique<SimAdmin>(*this, c.name);
    coordinators_.push_back(std::move(c));
  }
  hand_rogue_ = had_hand_rogue_ = result_.hand_rogue = !replicated_ && Chance(0.2);
  // A wiped leader of factor 2 cannot be failed over (see above): its partitions would wait for
  // ever, so those seeds wipe nothing.
  wipes_ = !hand_rogue_ && Chance(0.35) && (!replicated_ || factor_ >= 3);
  control::ChangeExecutor::Options eo;
  eo.step_timeout = std::chrono::milliseconds(0);
  control::ChangeExecutor executor(setup_admin_, eo);
  faults_ = false;
  if (Status st = executor.InstallEverywhere(map); !st.ok()) {
    Violation("installing the first map: " + st.ToString());
  }
  for (const auto& [pod, addr] : map.peers()) {
    (void)control::RecordFirstVolume(setup_admin_, PodName(pod), addr.admin, &first_volumes_);
  }
  faults_ = true;
  record_.map = map;
  record_.version = 1;
  NoteMap(map);
  std::string slow;
  for (const auto& p : pods_) slow += p->slow ? " (" + p->name + " fetches slowly)" : "";
  Trace("setup: " + std::to_string(n_pods) + " pods, " + std::to_string(count) + " partitions, " +
        std::to_string(producers_.size()) + " producers" +
        (replicated_ ? ", replication factor " + std::to_string(factor_) + slow : ""));
}

// --- the coordinator -------------------------------------------------------------------------

std::map<std::string, control::AdminPartitionsReport> World::Reports(const PartitionMap& map) {
  std::map<std::string, control::AdminPartitionsReport> out;
  for (const auto& [pod, addr] : map.peers()) {
    auto body = setup_admin_.Get(addr.admin, "/v1/admin/partitions", true);
    if (!body.ok()) continue;
    auto r = control::ParseAdminPartitions(*body);
    if (!r.ok()) {
      Violation("unparsable admin report of " + pod + ": " + r.status().ToString());
      continue;
    }
    out.emplace(pod, std::move(r).value());
  }
  return out;
}

std::optional<PartitionMap> World::PickChange(const PartitionMap& base, bool allow_retire,
                                              Coordinator* c) {
  std::vector<const PartitionInfo*> active;
  size_t sealed = 0;
  for (const auto& p : base.partitions()) {
    if (p.active()) {
      active.push_back(&p);
    } else {
      ++sealed;
    }
  }
  std::sort(active.begin(), active.end(),
            [](auto* a, auto* b) { return a->range.lo < b->range.lo; });
  std::vector<std::string> pods;
  for (const auto& [pod, addr] : base.peers()) pods.push_back(pod);
  MapChange change(base);
  const uint64_t kind = Pick(10);
  if (allow_retire && (kind < 2 || sealed > 12)) {
    const auto all = control::RetirablePartitions(base, Reports(base));
    for (PartitionId id : control::OneHoldersRetirement(base, all)) {
      if (!change.Retire(id).ok()) return std::nullopt;
    }
  } else if (kind < 5 && active.size() < 12) {
    // Split one or two partitions, at random points: hot ranges and empty ones alike.
    for (int n = 0; n < 1 + static_cast<int>(Pick(2)); ++n) {
      const PartitionInfo* p = active[Pick(active.size())];
      if (p->range.Width() < 2) continue;
      const uint64_t at = p->range.lo + 1 + Pick(p->range.Width() - 1);
      (void)change.Split(p->id, {at});
    }
  } else if (kind < 8 && active.size() >= 2) {
    const size_t i = Pick(active.size() - 1);
    (void)change.Merge(active[i]->id, active[i + 1]->id);
  } else if (pods.size() >= 2) {
    const PartitionInfo* p = active[Pick(active.size())];
    const std::string to = pods[Pick(pods.size())];
    if (to != p->owner.value()) (void)change.Move(p->id, PodName(to));
  }
  if (change.empty()) return std::nullopt;
  auto built = change.Build();
  if (!built.ok()) return std::nullopt;
  return Placed(*built, /*change=*/true, c);
}

bool World::WriteRecord(Coordinator& c, const Record& next) {
  if (record_.version != c.view) {
    Trace(c.name + " lost the record to another coordinator (read v" + std::to_string(c.view) +
          ", now v" + std::to_string(record_.version) + ")");
    c.view = record_.version;
    c.base.reset();
    c.target.reset();
    return false;
  }
  record_ = next;
  record_.version = c.view + 1;
  c.view = record_.version;
  return true;
}

// Stop and re-read (ControlLoop::Reconcile): a sidecar named another map or change. The newest
// map the sidecars hold is taken over when it is newer than the record's; otherwise the record's
// map is minted again at a later epoch and installed, which undoes the seals of the change that
// lost (no range stays without a writer). Only over the record's compare-and-set.
void World::Reconcile(Coordinator& c, const Status& why) {
  ++result_.fenced;
  last_refusal_ = why.message();
  c.base.reset();
  c.target.reset();
  if (record_.version != c.view) {  // somebody else wrote the record: read it, act next time
    c.view = record_.version;
    return;
  }
  std::optional<PartitionMap> newest;
  for (const auto& p : pods_) {
    broker::Topic* t = Reach(p->name);
    if (!t) continue;
    PartitionMap held = t->map();
    if (held.epoch() > record_.map.epoch() && (!newest || held.epoch() > newest->epoch())) {
      newest = held;
    }
  }
  Record next = record_;
  const Epoch tried = record_.target ? record_.target->epoch() : record_.map.epoch();
  next.floor = Epoch(std::max({record_.floor.value(), tried.value() + 1,
                               newest ? newest->epoch().value() + 1 : 0}));
  if (newest) {
    next.map = *newest;
    next.target.reset();
    Trace(c.name + " adopts e" + std::to_string(newest->epoch().value()) + " after: " +
          why.message());
  } else {
    next.target = record_.map.Reissued(next.floor);
    Trace(c.name + " re-mints its map at e" + std::to_string(next.floor.value()) + " after: " +
          why.message());
  }
  WriteRecord(c, next);
}

void World::CoordinatorStep(Coordinator& c, bool quiet) {
  const bool woke = c.frozen;
  if (c.frozen) {
    // A paused leader wakes and goes on with the change in its memory, record unread.
    if (!quiet && !Chance(0.3)) return;
    c.frozen = false;
    Trace(c.name + " wakes with e" + (c.target ? std::to_string(c.target->epoch().value()) : "-"));
  } else {
    c.view = record_.version;
    c.base = record_.map;
    c.target = record_.target;
  }
  // A failover begun is finished first (into the change in progress, when there is one).
  if (replicated_ && !woke && !record_.failing_over.empty()) {
    FinishFailOver(c, quiet);
    return;
  }
  if (!c.target) {
    if (replicated_) {
      // Pods behind get the record's map again (a leader that comes back follows from then on).
      if (!CatchUpInstalls(c)) return;
    }
    // A pod that lost its data first: its partitions are declared lost (any other change would
    // need them), as the control loop does. With copies, the partitions it leads are failed
    // over instead (it counts as down), and only the rest is declared lost.
    std::optional<PartitionMap> next;
    if (const std::string pod = PodWithoutData(c, *c.base, false); !pod.empty()) {
      if (replicated_) {
        const auto ids = FailOverCandidates(*c.base, true, pod);
        if (!ids.empty()) {
          StartFailOver(c, ids, quiet);
          return;
        }
      }
      auto lost = c.base->DeclareLost(PodName(pod));
      if (lost.ok()) next = Placed(std::move(lost).value());
      // It still leads partitions with copies that cannot be failed over yet: nothing else
      // until they are.
      if (!next && replicated_) return;
    }
    if (!next && replicated_ && (quiet || Chance(0.5))) {
      const auto ids = FailOverCandidates(*c.base, quiet, "");
      if (!ids.empty() && StartFailOver(c, ids, quiet)) return;
    }
    if (!next) next = PickChange(*c.base, true, &c);
    if (!next) return;
    if (next->epoch() < record_.floor) next = next->WithEpoch(record_.floor);
    Record r = record_;
    r.target = next;
    if (!WriteRecord(c, r)) return;  // recorded before any sidecar sees it, or not at all
    c.target = std::move(next);
    Trace(c.name + " plans e" + std::to_string(c.target->epoch().value()) + " " +
          c.target->Digest());
  }
  // It may crash or freeze before any of its requests.
  const bool stops = !quiet && Chance(0.3);
  int budget = stops ? static_cast<int>(Pick(8)) : INT32_MAX;
  control::ChangeExecutor::Options eo;
  eo.step_timeout = std::chrono::milliseconds(0);
  eo.may_act = [&budget] { return budget-- > 0; };
  control::ChangeExecutor executor(*c.admin, eo);
  const PartitionMap base = *c.base, target = *c.target;  // the step may run other steps
  Coordinator* outer = active_;
  active_ = &c;
  in_legit_change_ = !quiet;
  // The ends of the seals a quorum held are saved with the change before any pod gets its map,
  // as the control loop saves its step: in the record, if it is still this coordinator's.
  auto keep_ends = [&](const PartitionMap& ends) -> Status {
    if (record_.version != c.view || !record_.target || record_.target->epoch() != target.epoch() ||
        record_.target->Digest() != target.Digest()) {
      return Status::Ok();
    }
    record_.target = ends;
    if (c.target && c.target->epoch() == target.epoch()) c.target = ends;
    return Status::Ok();
  };
  auto applied = executor.Apply(base, target, nullptr, keep_ends);
  in_legit_change_ = false;
  active_ = outer;
  if (applied.ok()) {
    Trace(c.name + " done: e" + std::to_string(applied->epoch().value()));
    Record r = record_;
    r.map = *applied;
    r.target.reset();
    if (WriteRecord(c, r)) ++result_.changes;
    c.base.reset();
    c.target.reset();
    return;
  }
  const Status& st = applied.status();
  if (budget < 0) {
    if (Chance(0.5)) {
      c.frozen = true;
      Trace(c.name + " freezes mid-change (a paused leader)");
    } else {
      ++result_.coordinator_crashes;
      c.base.reset();
      c.target.reset();
      Trace(c.name + " crashed mid-change");
    }
    return;
  }
  if (st.code() == Status::Code::kUnavailable) {
    // A pod is down, or behind the record's map (a copy that missed a failover's map does not
    // fetch from the new leader, and a seal waits for a quorum of copies): pods behind get the
    // record's map, as the control loop's failed step does; the change is resumed later.
    if (replicated_) (void)CatchUpInstalls(c);
    return;
  }
  if (st.code() == Status::Code::kDataLost && replicated_) {
    // A pod the change needs lost its data: the partitions of the change's map it leads are
    // failed over inside the change (their copies elsewhere hold them).
    const std::string pod = PodWithoutData(c, target, true);
    if (pod.empty() && !SilentLeader(c, target).empty()) {
      // The pod that lost it does not answer the coordinator (paused, down, isolated): a
      // successor's owner passed its loss on ("it waits for the parent's failover"), after it
      // may have confirmed the seals of its other parents. The change is kept, as for a pod
      // that does not answer (Unavailable above), and tried again: once the pod answers, it
      // holds no map and is named here. Dropping the change (Reconcile mints the record's map
      // again, its parents active) would be refused for ever by the pod whose seal a successor
      // confirmed.
      Trace(c.name + " waits for the pod that lost its data to answer: " + st.ToString());
      return;
    }
    {
      const auto ids = FailOverCandidates(target, true, pod);
      if (!ids.empty()) {
        StartFailOver(c, ids, quiet);  // or another coordinator wrote the record: read it next
        return;
      }
      // Too few of their copies answer yet: the failover waits for them (declaring the pod's
      // partitions lost, or dropping the change, would lose what the copies hold). Sealed ones
      // too: a partition with copies is never declared lost (PartitionMap::DeclareLost), so
      // there is nothing to compose, and dropping the change would undo seals that its
      // successors may have confirmed already (the sidecars refuse that map for ever).
      const auto& parts = target.partitions();
      if (std::any_of(parts.begin(), parts.end(), [&](const PartitionInfo& p) {
            return p.owner.value() == pod && !p.lost && !p.replicas.empty();
          })) {
        return;
      }
    }
  }
  if (st.code() == Status::Code::kDataLost) {
    // A pod the change needs lost its data: its partitions are declared lost on top of the
    // change, which goes on as one (parts of it may have taken effect already).
    if (const std::string pod = PodWithoutData(c, target, true); !pod.empty()) {
      auto composed = target.DeclareLost(PodName(pod), /*in_change=*/true);
      if (composed.ok()) *composed = Placed(*composed);
      if (composed.ok()) {
        Record r = record_;
        r.target = *composed;
        if (WriteRecord(c, r)) {
          Trace(c.name + " declares " + pod + " lost on top of e" +
                std::to_string(target.epoch().value()) + ": e" +
                std::to_string(composed->epoch().value()) + " " + composed->Digest());
        }
        c.base.reset();
        c.target.reset();
        return;
      }
    }
  }
  // Fencing (another coordinator acted), or the change no longer fits what the sidecars hold.
  Trace(c.name + " refused: " + st.ToString());
  Reconcile(c, st);
}

// A coordinator that ignores the record (the admin plane driven by hand, or a coordinator
// without the consensus store): it may mint an epoch another map has, which the sidecars cannot
// see and invariant 5 cannot survive, but it must never make two writers for one hash point.
void World::RogueStep() {
  if (!hand_rogue_) return;
  if (!rogue_target_ || Chance(0.3)) {
    rogue_base_ = record_.map;
    rogue_target_ = PickChange(rogue_base_, false, nullptr);
  }
  if (!rogue_target_) return;
  control::ChangeExecutor::Options eo;
  eo.step_timeout = std::chrono::milliseconds(0);
  int budget = static_cast<int>(1 + Pick(10));
  eo.may_act = [&budget] { return budget-- > 0; };
  control::ChangeExecutor executor(rogue_admin_, eo);
  if (Chance(0.2)) {
    // The target straight onto one pod, no seal.
    const auto& pods = rogue_target_->peers();
    if (pods.empty()) return;
    auto it = pods.begin();
    std::advance(it, static_cast<long>(Pick(pods.size())));
    auto r = rogue_admin_.InstallMap(it->second.admin, *rogue_target_);
    Trace("rogue installs by hand on " + it->first + ": " +
          (r.ok() ? "ok" : r.status().ToString()));
    return;
  }
  auto applied = executor.Apply(rogue_base_, *rogue_target_, nullptr);
  Trace(std::string("rogue applies e") + std::to_string(rogue_target_->epoch().value()) + ": " +
        (applied.ok() ? "ok" : applied.status().ToString()));
  if (applied.ok()) {
    ++result_.rogue_changes;
    rogue_target_.reset();
  }
}

void World::MaybeInterleave() {
  if (interleaving_ || !faults_) return;
  interleaving_ = true;
  const int n = static_cast<int>(Pick(3));
  for (int i = 0; i < n; ++i) Act(false);
  // The other coordinator steps in the middle of this one's change.
  if (Chance(0.15)) {
    Coordinator& other = coordinators_[Pick(coordinators_.size())];
    if (&other != active_) {
      in_legit_change_ = false;
      CoordinatorStep(other, false);
      in_legit_change_ = true;
    }
  }
  if (Chance(0.1)) RogueStep();
  interleaving_ = false;
}

// --- producers and consumers -----------------------------------------------------------------

void World::RecordStored(const std::string& producer, uint64_t seq, const wire::ProduceResult& r,
                         uint32_t hash, uint64_t leader_epoch) {
  known_[r.partition].emplace(hash, r.offset);
  if (opts_.trace) {
    Trace("  stored (" + producer + ", " + std::to_string(seq) + ") at p" +
          std::to_string(r.partition) + "@" + std::to_string(r.offset));
  }
  auto [it, fresh] = stored_.emplace(std::make_pair(producer, seq),
                                     std::make_pair(r.partition, r.offset));
  if (replicated_) {
    auto& meta = stored_meta_[it->first];
    if (fresh) {
      meta = {leader_epoch, false};
      return;
    }
    if (auto newest = newest_leader_epoch_.find(r.partition);
        leader_epoch > 0 && newest != newest_leader_epoch_.end() && leader_epoch < newest->second) {
      // Taken again by a leader that a failover replaced and that does not know it yet: that
      // entry reaches no quorum and is cut when its pod follows again; the first stays known.
      // Unless the leader that replaced it loses the first entry unacknowledged (its volume
      // wiped before a copy held it) and this pod leads again by a later failover, its entry
      // the most complete of the copies: then this entry is where the event is stored, and a
      // retry is answered duplicate here (CheckDuplicate).
      Trace("  (" + producer + ", " + std::to_string(seq) + ") taken again by a replaced leader at p" +
            std::to_string(r.partition) + "@" + std::to_string(r.offset) + ", leader epoch " +
            std::to_string(leader_epoch));
      replaced_[it->first].emplace_back(r.partition, r.offset);
      return;
    }
    auto newest = newest_leader_epoch_.find(it->second.first);
    if (!meta.acked && meta.leader_epoch > 0 && newest != newest_leader_epoch_.end() &&
        meta.leader_epoch < newest->second) {
      // Stored before by a leader that a failover replaced, and never acknowledged: that entry
      // is on no quorum, and its copy is cut when its pod follows again (invariant 11); taken
      // again. (Should it survive anywhere, the final logs and the groups show it twice.)
      Trace("  (" + producer + ", " + std::to_string(seq) + ") stored again: its entry at p" +
            std::to_string(it->second.first) + "@" + std::to_string(it->second.second) +
            " was taken at leader epoch " + std::to_string(meta.leader_epoch) +
            ", replaced since");
      replaced_[it->first].push_back(it->second);
      it->second = {r.partition, r.offset};
      meta = {leader_epoch, false};
      return;
    }
  }
  if (auto gone = gone_with_wipe_.find(it->first);
      !fresh && gone != gone_with_wipe_.end() && gone->second == it->second) {
    // Its only entry went with a wiped volume before any copy held it (so unacknowledged), and
    // the producer state that knew it too: the lineage lost it, and this is its one append.
    Trace("  (" + producer + ", " + std::to_string(seq) + ") stored again: its entry at p" +
          std::to_string(it->second.first) + "@" + std::to_string(it->second.second) +
          " was on a wiped volume only");
    gone_with_wipe_.erase(gone);
    it->second = {r.partition, r.offset};
    stored_meta_[it->first] = {leader_epoch, false};
    return;
  }
  if (!fresh && lost_partitions_.count(it->second.first)) {
    // Its first copy went with a wiped volume, and its producer state too: taken again.
    it->second = {r.partition, r.offset};
    stored_again_.insert(it->first);
    return;
  }
  if (!fresh && replicated_) {
    // Its entry is on no copy any more and was never acknowledged nor held by a quorum: a power
    // cut took the append before it was synced (a request refused part way was never synced for
    // an answer), and this is the event's one entry (at the very place, often).
    const auto id = std::make_pair(producer, seq);
    const bool same_place = it->second == std::make_pair(r.partition, r.offset);
    if (!stored_meta_[id].acked && !quorum_held_.count(id) &&
        (same_place ||
         Holders(it->second.first, it->second.second, producer, seq, nullptr).first == 0)) {
      Trace("  (" + producer + ", " + std::to_string(seq) + ") stored again: its entry at p" +
            std::to_string(it->second.first) + "@" + std::to_string(it->second.second) +
            " is on no copy any more, never acknowledged");
      it->second = {r.partition, r.offset};
      stored_meta_[id] = {leader_epoch, false};
      return;
    }
  }
  if (!fresh && !had_hand_rogue_) {
    Violation("invariant 6: (" + producer + ", " + std::to_string(seq) +
              ") appended twice: p" + std::to_string(it->second.first) + "@" +
              std::to_string(it->second.second) + " and p" + std::to_string(r.partition) + "@" +
              std::to_string(r.offset));
  }
}

void World::CheckDuplicate(const std::string& producer, uint64_t seq,
                           const wire::ProduceResult& r) {
  auto it = stored_.find(std::make_pair(producer, seq));
  if (had_hand_rogue_) return;  // two histories of one id: invariant 6 cannot be told apart
  if (it == stored_.end()) {
    Violation("invariant 6: (" + producer + ", " + std::to_string(seq) +
              ") answered duplicate, but it is stored nowhere");
  } else if (it->second != std::make_pair(r.partition, r.offset)) {
    // An entry a failover replaced before it was acknowledged, answered again: the leader that
    // stored it again lost it unacknowledged (its volume wiped before a quorum held it) and the
    // replaced entry's copy leads again. It is where the event is stored now (were the other
    // entry to survive somewhere too, the groups would read the event twice: checked at the end).
    const auto named = std::make_pair(r.partition, r.offset);
    auto rep = replaced_.find(it->first);
    auto meta = stored_meta_.find(it->first);
    if (rep != replaced_.end() && meta != stored_meta_.end() && !meta->second.acked &&
        std::find(rep->second.begin(), rep->second.end(), named) != rep->second.end()) {
      Trace("  (" + producer + ", " + std::to_string(seq) + ") answered duplicate at its entry p" +
            std::to_string(r.partition) + "@" + std::to_string(r.offset) +
            ", which leads again: the entry that replaced it was lost unacknowledged");
      it->second = named;
      return;
    }
    Violation("invariant 6: (" + producer + ", " + std::to_string(seq) +
              ") answered duplicate at p" + std::to_string(r.partition) + "@" +
              std::to_string(r.offset) + ", but it is stored at p" +
              std::to_string(it->second.first) + "@" + std::to_string(it->second.second));
  }
}

void World::ProduceAction(Producer& prod, bool quiet) {
  // A request waiting for quorums: the producer's turn is to take its answer, if it came.
  if (prod.pending) {
    (void)FinishPending(prod);
    return;
  }
  if (prod.batch.empty()) {
    if (quiet) return;
    // Mostly small batches; now and then one larger than a producer window (256) per range, so
    // that windows overflow, merges mix them and half-stored retries meet what they forgot.
    const bool big = Chance(0.04);
    const int n = big ? 300 + static_cast<int>(Pick(300)) : 1 + static_cast<int>(Pick(8));
    for (int i = 0; i < n; ++i) {
      const std::string& key =
          big ? (i % 2 ? cold_keys_[Pick(cold_keys_.size())] : hot_keys_[Pick(hot_keys_.size())])
          : Chance(0.8) ? hot_keys_[Pick(hot_keys_.size())]
                        : cold_keys_[Pick(cold_keys_.size())];
      const uint64_t count = ++prod.counter[key];
      const uint64_t seq = prod.next_seq++;
      prod.batch.push_back({key,
                            "{\"p\":\"" + prod.id + "\",\"k\":\"" + key +
                                "\",\"n\":" + std::to_string(count) + "}",
                            prod.id, seq});
      prod.meta.push_back({prod.id, key, seq, count});
    }
  }
  Pod& entry = *pods_[Pick(pods_.size())];
  broker::Topic* t = Reach(entry.name);
  if (!t) return;
  std::vector<wire::ProduceEvent> events;
  for (const auto& e : prod.batch) events.push_back({e.key, e.value_json, e.producer, e.seq});
  std::vector<wire::ProduceResult> results;
  std::vector<broker::ForwardPlan> forwards;
  std::vector<size_t> unknown;
  // What the events of replicated partitions wait for (the frontend's quorum waits), in the
  // order of `pending->parts`.
  auto pending = std::make_shared<PendingProduce>();
  std::vector<broker::QuorumWait> waits;
  std::vector<QuorumPart> immediate;  // replicated partitions the sidecar gave no wait for
  // The results one sidecar gave (`indices` of the request): stored events are recorded, and
  // the events of each replicated partition become a part that waits for its quorum.
  auto take = [&](const std::string& pod, const PartitionMap& held,
                  const std::vector<size_t>& indices,
                  const std::vector<wire::ProduceResult>& res,
                  std::vector<broker::QuorumWait>& quorum) {
    // Grouped as Produce groups them: by the partition each event is routed to (a duplicate's
    // result may name the partition of the lineage that stored it).
    std::vector<uint32_t> order;
    std::map<uint32_t, QuorumPart> parts;
    for (size_t k = 0; k < indices.size(); ++k) {
      const size_t i = indices[k];
      const wire::ProduceResult& r = res[k];
      const PartitionInfo& routed = held.Route(KeyHash(events[i].key));
      const bool repl = !routed.replicas.empty();
      const uint64_t le = repl ? routed.LeaderEpoch().value() : 0;
      if (!r.duplicate) {
        RecordStored(prod.id, *events[i].seq, r, KeyHash(events[i].key), le);
        if (repl && newest_leader_epoch_[r.partition] > le) ++result_.zombie_appends;
      } else if (!repl) {
        CheckDuplicate(prod.id, *events[i].seq, r);
      }
      if (!repl) continue;
      const uint32_t id = routed.id.value();
      auto [it, fresh] = parts.try_emplace(id);
      if (fresh) {
        order.push_back(id);
        it->second.pod = pod;
        it->second.partition = id;
        it->second.leader_epoch = le;
      }
      // Only what the partition itself stored is waited for: a duplicate answered from a
      // parent's producer state names the parent, whose sealed end a quorum held already.
      if (r.partition == id) it->second.end = std::max(it->second.end, r.offset + 1);
      it->second.events.push_back({prod.id, *events[i].seq, r.partition, r.offset, r.duplicate});
    }
    // Each replicated partition's events wait for their quorum, in order; one the sidecar gave
    // no wait for is acknowledged with the request (checked as such, PartAnswered).
    size_t w = 0;
    for (uint32_t id : order) {
      QuorumPart& part = parts[id];
      if (w < quorum.size() && quorum[w].end == part.end) {
        pending->parts.push_back(std::move(part));
        waits.push_back(std::move(quorum[w++]));
      } else {
        immediate.push_back(std::move(part));
      }
    }
    // Then the waits for parents held there whose producer state answered duplicates (their
    // copies may not hold the parent's sealed end yet): those duplicates are acknowledged when
    // the parent's quorum holds them.
    for (; w < quorum.size(); ++w) {
      const uint32_t parent = quorum[w].partition.value();
      QuorumPart part{pod, parent, 0, quorum[w].end, {}};
      auto take_from = [&](QuorumPart& from) {
        if (from.pod != pod) return;
        std::erase_if(from.events, [&](const QuorumPart::Event& e) {
          if (e.partition != parent) return false;
          part.events.push_back(e);
          return true;
        });
      };
      for (auto& p : pending->parts) take_from(p);
      for (auto& p : immediate) take_from(p);
      if (part.events.empty()) break;
      part.leader_epoch = held.Find(PartitionId(parent)) != nullptr
                              ? held.Find(PartitionId(parent))->LeaderEpoch().value()
                              : 0;
      pending->parts.push_back(std::move(part));
      waits.push_back(std::move(quorum[w]));
    }
    if (w != quorum.size()) {
      Violation("sim: " + pod + " gave " + std::to_string(quorum.size()) +
                " quorum waits, which match " + std::to_string(w) + " of its " +
                std::to_string(order.size()) + " replicated partitions");
    }
  };
  // A request refused part way (one partition's group appended, the next refused: fenced,
  // sealed, ...) is not acknowledged, but what it appended is stored: a retry is answered
  // duplicate from it. The results of the groups appended before the refusal name their entries
  // (checked against the pod's log: the others are left zero). A result left zero names p0@0,
  // which the pod's log may hold the very event at from before the request (an entry of a
  // replaced leader that was never cut): that is no append of this request. So whether the pod
  // held each event at p0@0 is read before the request (`held_at_zero`).
  auto held_at_zero = [&](const std::string& pod, const std::vector<size_t>& indices) {
    std::vector<bool> held(indices.size());
    for (size_t k = 0; k < indices.size(); ++k) {
      held[k] = Holds(pod, 0, 0, prod.id, *events[indices[k]].seq);
    }
    return held;
  };
  auto take_refused =
      [&](const std::string& pod, broker::Topic& at, const std::vector<size_t>& indices,
          const std::vector<wire::ProduceResult>& res, const std::vector<bool>& zero_before) {
        const PartitionMap held = at.map();
        if (held.active_count() == 0) return;
        for (size_t k = 0; k < indices.size() && k < res.size(); ++k) {
          const size_t i = indices[k];
          const wire::ProduceResult& r = res[k];
          if (r.duplicate || !Holds(pod, r.partition, r.offset, prod.id, *events[i].seq)) continue;
          if (r.partition == 0 && r.offset == 0 && k < zero_before.size() && zero_before[k]) {
            Trace("  (" + prod.id + ", " + std::to_string(*events[i].seq) + ") at p0@0 at " + pod +
                  " from before the refused request: not appended by it");
            continue;  // a result the refusal left zero
          }
          auto known = stored_.find(std::make_pair(prod.id, *events[i].seq));
          if (known != stored_.end() && known->second == std::make_pair(r.partition, r.offset)) {
            continue;
          }
          const PartitionInfo& routed = held.Route(KeyHash(events[i].key));
          const uint64_t le = routed.replicas.empty() ? 0 : routed.LeaderEpoch().value();
          RecordStored(prod.id, *events[i].seq, r, KeyHash(events[i].key), le);
          Trace("  (appended by a request refused part way)");
        }
      };
  std::vector<broker::QuorumWait> local_waits;
  std::vector<size_t> all(events.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  const std::vector<bool> zero_before = held_at_zero(entry.name, all);
  Status st = t->Produce(events, &results, false, &forwards, &unknown, &local_waits);
  if (!st.ok()) take_refused(entry.name, *t, all, results, zero_before);
  std::set<size_t> give_up;
  bool failed = !st.ok();
  if (st.code() == Status::Code::kSequenceUnknown) {
    give_up.insert(unknown.begin(), unknown.end());
  }
  if (st.ok()) {
    std::vector<bool> local(events.size(), true);
    for (const auto& f : forwards) {
      for (size_t i : f.indices) local[i] = false;
    }
    std::vector<size_t> here;
    std::vector<wire::ProduceResult> here_results;
    for (size_t i = 0; i < events.size(); ++i) {
      if (!local[i]) continue;
      here.push_back(i);
      here_results.push_back(results[i]);
    }
    take(entry.name, t->map(), here, here_results, local_waits);
    // Forwards: lost on the way there (not executed) or back (executed, answer lost).
    for (const auto& f : forwards) {
      broker::Topic* owner = Reach(f.peer.data);
      if (!owner || (faults_ && Chance(0.08))) {
        failed = true;
        continue;
      }
      wire::ProduceRequestParser parser;
      Status parsed = parser.Parse(f.body, wire::Limits{});
      if (!parsed.ok()) {
        Violation("a forward body does not parse: " + parsed.ToString());
        failed = true;
        continue;
      }
      std::vector<wire::ProduceResult> fr;
      std::vector<size_t> funknown;
      std::vector<broker::QuorumWait> fwaits;
      const std::vector<bool> fzero_before = held_at_zero(f.peer.data, f.indices);
      Status fst = owner->Produce(parser.events(), &fr, true, nullptr, &funknown, &fwaits);
      if (fst.code() == Status::Code::kSequenceUnknown) {
        for (size_t k : funknown) give_up.insert(f.indices.at(k));
      }
      if (!fst.ok()) {
        take_refused(f.peer.data, *owner, f.indices, fr, fzero_before);
        failed = true;
        continue;
      }
      take(f.peer.data, owner->map(), f.indices, fr, fwaits);
      if (faults_ && Chance(0.05)) {
        failed = true;  // the answer is lost
        pending->answer_lost = true;
      }
    }
  }
  // The quorum waits are registered as the frontend does: each is answered when its leader's
  // high watermark passes its events, or refused (deadline, failover, the partition leaving).
  // A request that failed meanwhile is still watched: a part answered Ok is an acknowledgement
  // given by that sidecar, checked like any other.
  pending->left = waits.size();
  pending->give_up_ms = clock_.NowMs() + kClientTimeoutMs;
  if (failed) pending->error = Status::Unavailable("a part of the request failed");
  const auto deadline =
      clock_.SteadyNow() + std::chrono::milliseconds(kReplicationTimeoutMs);
  for (size_t j = 0; j < waits.size(); ++j) {
    waits[j].tracker->OnReached(waits[j].end, deadline,
                                [this, pending, j](Status s) { PartAnswered(pending, j, s); });
  }
  if (!immediate.empty()) {
    // Replicated partitions whose events the sidecar acknowledges without waiting: now.
    auto now = std::make_shared<PendingProduce>();
    now->parts = std::move(immediate);
    now->left = now->parts.size();
    for (size_t j = 0; j < now->parts.size(); ++j) PartAnswered(now, j, Status::Ok());
  }
  Trace("produce " + prod.id + " " + std::to_string(prod.batch.size()) + " via " + entry.name +
        ": " +
        (failed ? (st.ok() ? std::string("forward failed") : st.ToString())
                : waits.empty() ? "acked" : "waits for " + std::to_string(waits.size()) +
                                                " quorum(s)"));
  if (!give_up.empty()) {
    std::vector<client::OutgoingEvent> batch;
    std::vector<harness::AckedEvent> meta;
    for (size_t i = 0; i < prod.batch.size(); ++i) {
      if (give_up.count(i)) continue;
      batch.push_back(prod.batch[i]);
      meta.push_back(prod.meta[i]);
    }
    result_.abandoned += prod.batch.size() - batch.size();
    prod.batch = std::move(batch);
    prod.meta = std::move(meta);
    return;
  }
  if (failed) {
    prod.last_answer = st.ok() ? "a forward failed" : st.ToString();
    return;
  }
  if (!waits.empty()) {
    prod.pending = pending;
    if (pending->answered) (void)FinishPending(prod);
    return;
  }
  result_.acked += prod.meta.size();
  prod.acked.insert(prod.acked.end(), prod.meta.begin(), prod.meta.end());
  prod.batch.clear();
  prod.meta.clear();
}

bool World::FinishPending(Producer& prod) {
  PendingProduce& p = *prod.pending;
  bool failed;
  std::string why;
  if (p.answered) {
    failed = !p.error.ok() || p.answer_lost;
    why = p.answer_lost ? "answer lost" : p.error.ok() ? "acked" : p.error.ToString();
    if (!p.error.ok()) ++result_.quorum_refusals;
  } else if (clock_.NowMs() >= p.give_up_ms) {
    failed = true;
    why = "no answer; given up";
  } else {
    return false;
  }
  prod.pending.reset();
  Trace("produce " + prod.id + " " + std::to_string(prod.batch.size()) + " answered: " + why);
  if (failed) {
    prod.last_answer = why;
    return true;
  }
  result_.acked += prod.meta.size();
  prod.acked.insert(prod.acked.end(), prod.meta.begin(), prod.meta.end());
  prod.batch.clear();
  prod.meta.clear();
  return true;
}

void World::PartAnswered(const std::shared_ptr<PendingProduce>& pending, size_t j, Status st) {
  if (dying_) return;
  const QuorumPart& part = pending->parts[j];
  if (st.ok()) {
    // The sidecar acknowledges these events now: a quorum of the copies must hold them (9),
    // and a newer leader of the partition too (10).
    for (const auto& e : part.events) {
      uint64_t newest = 0;
      const std::string leader = RecordLeader(e.partition, &newest);
      std::string who;
      const auto [have, need] = Holders(e.partition, e.offset, e.producer, e.seq, &who, part.pod);
      const std::string what = "(" + e.producer + ", " + std::to_string(e.seq) + ") at p" +
                               std::to_string(e.partition) + "@" + std::to_string(e.offset);
      // A retry answered from the producer state for an event acknowledged before claims
      // nothing new: a quorum held it when it was first acknowledged (checked then), and a copy
      // lost since (a wiped volume) takes nothing back that a retry could restore.
      const auto first = stored_meta_.find(std::make_pair(e.producer, e.seq));
      const bool acked_before =
          (e.duplicate && first != stored_meta_.end() && first->second.acked) ||
          quorum_held_.count(std::make_pair(e.producer, e.seq)) > 0;
      if (have < need && !acked_before) {
        Violation("invariant 9: " + part.pod + " acknowledged " + what + " at leader epoch " +
                  std::to_string(part.leader_epoch) + " while " + std::to_string(have) +
                  " of its copies hold it (" + who + "); a quorum is " + std::to_string(need));
      }
      if (e.partition == part.partition && !leader.empty() && leader != part.pod &&
          newest > part.leader_epoch && !Holds(leader, e.partition, e.offset, e.producer, e.seq) &&
          !wiped_leader_held_.count({e.partition, newest, e.offset, e.producer, e.seq})) {
        Violation("invariant 10: " + part.pod + " acknowledged " + what + " at leader epoch " +
                  std::to_string(part.leader_epoch) + ", but the leader of epoch " +
                  std::to_string(newest) + ", " + leader + ", does not hold it");
      }
      committed_.insert({e.partition, e.offset});
      const auto id = std::make_pair(e.producer, e.seq);
      auto at = stored_.find(id);
      if (at != stored_.end() && at->second == std::make_pair(e.partition, e.offset)) {
        stored_meta_[id].acked = true;
      }
      if (e.duplicate) {
        wire::ProduceResult r;
        r.partition = e.partition;
        r.offset = e.offset;
        r.duplicate = true;
        CheckDuplicate(e.producer, e.seq, r);
      }
    }
    auto [it, fresh] =
        acked_by_.emplace(std::make_pair(part.partition, part.leader_epoch), part.pod);
    if (!fresh && it->second != part.pod) {
      Violation("invariant 10: p" + std::to_string(part.partition) + " at leader epoch " +
                std::to_string(part.leader_epoch) + " acknowledged writes at " + it->second +
                " and at " + part.pod);
    }
    if (opts_.trace) {
      Trace("  " + part.pod + " acknowledges " + std::to_string(part.events.size()) +
            " event(s) of p" + std::to_string(part.partition) + " below " +
            std::to_string(part.end));
    }
  } else {
    // A duplicate answered from the state a successor inherited names its ancestor's offset:
    // the wait for it is a wait for the successor's own high watermark to pass that offset.
    std::string why = st.ToString();
    for (const auto& e : part.events) {
      if (e.duplicate && e.partition != part.partition) {
        why += " [waited for p" + std::to_string(part.partition) + " to reach " +
               std::to_string(part.end) + " for a duplicate stored at p" +
               std::to_string(e.partition) + "@" + std::to_string(e.offset) + "]";
        st = Status::Unavailable(why);
        break;
      }
    }
    if (pending->error.ok()) pending->error = st;
    Trace("  " + part.pod + " refuses the events of p" + std::to_string(part.partition) + ": " +
          why);
  }
  if (pending->left > 0 && --pending->left == 0) pending->answered = true;
}

void World::CheckParentsFirst(const Group& g, const wire::ConsumedEvent& e, uint32_t h,
                              const PartitionMap& held, const std::string& pod) {
  // The lineage is the one every installed map agreed on, retired partitions included, unless one
  // retired before g first asked (g starts after it, and after its lineage, which retired before
  // it). With a coordinator that ignores the record ids may name two partitions, so then only
  // the lineage in the pod's own map is walked.
  std::vector<uint32_t> todo{e.partition};
  std::set<uint32_t> seen;
  while (!todo.empty()) {
    const uint32_t cur = todo.back();
    todo.pop_back();
    std::vector<PartitionId> parents;
    if (had_hand_rogue_) {
      const PartitionInfo* info = held.Find(PartitionId(cur));
      if (info) parents = info->parents;
    } else if (auto node = lineage_.find(cur); node != lineage_.end()) {
      parents = node->second.parents;
    }
    for (PartitionId parent : parents) {
      if (!seen.insert(parent.value()).second) continue;
      if (!had_hand_rogue_) {
        auto retired = retired_at_.find(parent.value());
        if (retired != retired_at_.end() && retired->second < g.first_request) continue;
      } else if (!held.Find(parent)) {
        continue;
      }
      todo.push_back(parent.value());
      if (lost_partitions_.count(parent.value())) continue;  // its events are gone
      auto events = known_.find(parent.value());
      if (events == known_.end()) continue;
      auto [from, to] = events->second.equal_range(h);
      // With copies, an event a replaced leader took (never acknowledged, cut when it follows)
      // may sit past the end its partition was sealed at: it is not in the partition's history.
      const auto node = lineage_.find(parent.value());
      const uint64_t sealed_end =
          replicated_ && node != lineage_.end() && !had_hand_rogue_ ? node->second.end : UINT64_MAX;
      for (auto it = from; it != to; ++it) {
        if (it->second >= sealed_end) continue;
        if (g.committed.count({parent.value(), it->second})) continue;
        Violation("invariant 3: " + g.name + " got p" + std::to_string(e.partition) + "@" +
                  std::to_string(e.offset) + " (hash " + std::to_string(h) + ") at " + pod +
                  " while p" + std::to_string(parent.value()) + "@" +
                  std::to_string(it->second) + " of its lineage, of the same hash point, is not "
                  "committed");
        return;
      }
    }
  }
}

void World::ConsumeAction(Group& g, Pod& pod, bool quiet) {
  broker::Topic* t = Reach(pod.name);
  if (!t) return;
  const size_t max = g.kind == Group::Kind::kSlow && !quiet ? 1 + Pick(3) : 1 + Pick(50);
  std::string out;
  g.first_request = std::min(g.first_request, event_);
  // The frontend answers once a quorum holds the batches' leases or the replication timeout
  // passed (DataFrontend::Hand), whichever comes first: the simulation answers at once, the
  // timeout's case.
  std::vector<broker::QuorumWait> lease_waits;
  auto n = t->Consume(g.name, max, &out, &lease_waits);
  if (!n.ok()) {
    Trace("consume " + g.name + " at " + pod.name + ": " + n.status().ToString());
    return;
  }
  if (!Reach(pod.name)) return;  // lost power while it read from a peer: the answer is lost
  auto events = wire::ParseConsumeResponse(out);
  if (!events.ok()) {
    Violation("a consume answer does not parse: " + events.status().ToString());
    return;
  }
  if (events->empty()) return;
  const PartitionMap held = t->map();
  std::map<uint32_t, uint64_t> next;
  std::vector<std::pair<std::string, uint64_t>> batch_ids;
  for (const auto& e : *events) {
    const uint32_t h = KeyHash(e.key);
    known_[e.partition].emplace(h, e.offset);
    CheckParentsFirst(g, e, h, held, pod.name);
    next[e.partition] = std::max(next[e.partition], e.offset + 1);
    std::string_view p, k;
    uint64_t cnt = 0;
    simdjson::dom::parser parser;
    simdjson::dom::element v;
    if (!e.seq || parser.parse(simdjson::padded_string(e.value)).get(v) || v["p"].get(p) ||
        v["k"].get(k) || v["n"].get(cnt)) {
      Violation("an event without the test's value format");
      continue;
    }
    const auto id = std::make_pair(std::string(p), *e.seq);
    batch_ids.push_back(id);
    CheckReadCommitted(g, e, id.first, pod.name);
    if (g.uncommitted.count(id)) continue;  // handed out again: its commit had failed
    if (opts_.tolerate_known_gaps && failed_over_at_.count(e.partition) &&
        g.seen_ids.count(id)) {
      // Committed on a leader a failover replaced: the new one does not know the commit yet.
      ++result_.redelivered_after_failover;
      continue;
    }
    if (!g.seen_ids.insert(id).second && !had_hand_rogue_ && !stored_again_.count(id)) {
      Violation(g.name + " got (" + id.first + ", " + std::to_string(id.second) +
                ") twice (invariant 4: a committed event handed out again)");
    }
    auto& last = g.last_n[{std::string(p), std::string(k)}];
    if (cnt < last && !had_hand_rogue_ && !stored_again_.count(id)) {
      Violation("invariant 7: " + g.name + " got " + std::string(k) + "#" + std::to_string(cnt) +
                " of " + std::string(p) + " after #" + std::to_string(last));
    }
    last = std::max(last, cnt);
    g.seen.push_back(
        {std::string(p), std::string(k), *e.seq, cnt, ++delivered_, e.partition, e.offset});
  }
  result_.seen += events->size();
  wire::CommitRequest c{g.name, {}};
  for (auto [part, off] : next) c.offsets.push_back({PartitionId(part), Offset(off)});
  // A commit of ancestors read from peers goes to their owners and may be lost: tried a few
  // times; if it never gets through, its events may come again (redelivery), and may also have
  // been committed (an answer lost): the oracle of invariant 3 counts them as committed.
  Status st;
  std::vector<broker::QuorumWait> waits;  // replicated partitions: the frontend's quorum waits
  for (int attempt = 0; attempt < 3; ++attempt) {
    broker::Topic* at = Reach(pod.name);
    if (!at) break;
    waits.clear();
    st = at->Commit(c, &waits);
    if (st.code() != Status::Code::kUnavailable) break;
  }
  for (const auto& e : *events) g.committed.insert({e.partition, e.offset});
  if (st.ok() && !waits.empty()) {
    // Answered once a quorum of the copies holds the commit: until then the events may come
    // again (a failover to a copy without the commit), as for a commit that failed; once
    // answered, never (invariant 4).
    for (const auto& id : batch_ids) {
      if (g.seen_ids.erase(id)) g.uncommitted.insert(id);
    }
    struct Pending {
      size_t left = 0;
      bool failed = false;
    };
    auto pending = std::make_shared<Pending>();
    pending->left = waits.size();
    const auto deadline = clock_.SteadyNow() + std::chrono::milliseconds(kReplicationTimeoutMs);
    for (auto& w : waits) {
      w.tracker->OnReached(w.end, deadline, [this, pending, gp = &g, batch_ids](Status s) {
        if (dying_) return;
        pending->failed |= !s.ok();
        if (--pending->left > 0 || pending->failed) return;
        for (const auto& id : batch_ids) {
          if (gp->uncommitted.erase(id)) gp->seen_ids.insert(id);
        }
        Trace("  commit of " + gp->name + " held by a quorum");
      });
    }
  } else if (st.ok()) {
    for (const auto& id : batch_ids) {
      if (g.uncommitted.erase(id)) g.seen_ids.insert(id);
    }
  } else if (st.code() == Status::Code::kUnavailable || !Reach(pod.name)) {
    for (const auto& id : batch_ids) {
      if (g.seen_ids.erase(id)) g.uncommitted.insert(id);
    }
    Trace("commit " + g.name + " at " + pod.name + " failed: " + st.ToString());
  } else {
    Violation("a commit of what was just read was refused: " + st.ToString());
  }
  Trace("consume " + g.name + " at " + pod.name + ": " + std::to_string(events->size()));
}

void World::Tick() {
  clock_.AdvanceMs(1 + static_cast<int64_t>(Pick(200)));
  for (auto& p : pods_) {
    if (!p->topic || p->paused) continue;
    p->topic->TickOnce(true);
    p->topic->PeerTickOnce();
  }
  // The quiet phase: the fetchers keep up (in the random phase fetching is an action).
  if (replicated_ && !faults_) {
    for (auto& p : pods_) FetchAction(*p, true);
  }
}

void World::Act(bool quiet) {
  ++event_;
  const uint64_t roll = Pick(100);
  if (replicated_) {
    ActReplicated(roll, quiet);
    CheckInvariants();
    return;
  }
  if (roll < 30) {
    ProduceAction(producers_[Pick(producers_.size())], quiet);
  } else if (roll < 62) {
    GroupAction(quiet);
  } else if (roll < 80) {
    Tick();
  } else if (!quiet && faults_ && roll < 86) {
    Pod& p = *pods_[Pick(pods_.size())];
    if (p.topic) {
      Crash(p);
    } else if (Status st = OpenPod(p); !st.ok()) {
      Violation("restarting " + p.name + ": " + st.ToString());
    } else {
      Trace("restart " + p.name);
    }
  } else if (!quiet && faults_ && roll < 91) {
    Pod& p = *pods_[Pick(pods_.size())];
    p.paused = !p.paused && p.topic != nullptr;
    Trace(std::string(p.paused ? "pause " : "resume ") + p.name);
  } else if (!quiet && faults_ && wipes_ && wiped_ < kMaxWipes && roll < 92) {
    Pod& p = *pods_[Pick(pods_.size())];
    if (p.topic) Wipe(p);
  }
  CheckInvariants();
}

// A random group reads through a random pod, as its kind allows at this step.
void World::GroupAction(bool quiet) {
    Group& g = groups_[Pick(groups_.size())];
    const bool active = quiet || (g.kind != Group::Kind::kLate || step_ >= g.start_step);
    const bool stopped =
        !quiet && g.kind == Group::Kind::kStopper && step_ >= g.stop_from && step_ < g.stop_until;
    const bool slow_skips = !quiet && g.kind == Group::Kind::kSlow && Chance(0.7);
    if (active && !stopped && !slow_skips) ConsumeAction(g, *pods_[Pick(pods_.size())], quiet);
}

// The actions of a replicated seed: fetches besides the rest, and leaders cut off from the
// coordinators.
void World::ActReplicated(uint64_t roll, bool quiet) {
  if (roll < 26) {
    ProduceAction(producers_[Pick(producers_.size())], quiet);
  } else if (roll < 52) {
    GroupAction(quiet);
  } else if (roll < 64) {
    Tick();
  } else if (roll < 82) {
    FetchAction(*pods_[Pick(pods_.size())], quiet);
  } else if (quiet || !faults_) {
    return;
  } else if (roll < 86) {
    Pod& p = *pods_[Pick(pods_.size())];
    if (&p == busy_) return;
    if (p.topic) {
      Crash(p);
    } else if (Status st = OpenPod(p); !st.ok()) {
      Violation("restarting " + p.name + ": " + st.ToString());
    } else {
      Trace("restart " + p.name);
    }
  } else if (roll < 90) {
    Pod& p = *pods_[Pick(pods_.size())];
    if (&p == busy_) return;
    p.paused = !p.paused && p.topic != nullptr;
    Trace(std::string(p.paused ? "pause " : "resume ") + p.name);
  } else if (roll < 94) {
    // Cut off from the coordinators (now and then), or back.
    Pod& p = *pods_[Pick(pods_.size())];
    if (!p.topic || (!p.isolated && !Chance(0.4))) return;
    p.isolated = !p.isolated;
    if (p.isolated) ++result_.isolations;
    Trace(std::string(p.isolated ? "isolate " : "reconnect ") + p.name +
          " (from the coordinators)");
  } else if (wipes_ && wiped_ < kMaxWipes && roll < 96) {
    // One pod's volume (once or twice): a minority of every partition's copies, which is what
    // replication promises to survive (invariant 4).
    Pod& p = *pods_[Pick(pods_.size())];
    if (p.topic && &p != busy_ && (wiped_pod_.empty() || wiped_pod_ == p.name)) {
      wiped_pod_ = p.name;
      Wipe(p);
    }
  }
}

// --- invariants ------------------------------------------------------------------------------

void World::CheckInvariants() {
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> accepting;
  std::map<std::pair<uint32_t, uint64_t>, std::string> leading;
  for (const auto& p : pods_) {
    if (!p->topic) continue;
    const PartitionMap m = p->topic->map();
    if (m.epoch().value() == 0) continue;
    // 1: cover.
    if (Status st = m.Validate(); !st.ok()) {
      Violation("invariant 1: " + p->name + " holds an invalid map: " + st.ToString());
    }
    // 5: one map per epoch in the whole system.
    const std::string text = m.ToJson();
    auto [it, fresh] = maps_by_epoch_.emplace(m.epoch().value(), text);
    if (!fresh && it->second != text && !had_hand_rogue_) {
      Violation("invariant 5: two maps of epoch " + std::to_string(m.epoch().value()) + " (" +
                p->name + " holds " + m.Digest() + ")");
      it->second = text;
    }
    // 2: one writer per hash point (a paused process still holds what it accepts). With
    // copies, 10 too: one pod per partition and leader epoch. A leader that a failover replaced
    // and that does not know it yet may still take appends at its older leader epoch (they reach
    // no quorum: its copies are fenced); it is no second writer of the partition.
    for (const auto& [id, range] : p->topic->AcceptingPartitions()) {
      if (replicated_) {
        const PartitionInfo* info = m.Find(id);
        const uint64_t le = info ? info->LeaderEpoch().value() : 0;
        auto [at, first] = leading.emplace(std::make_pair(id.value(), le), p->name);
        if (!first) {
          Violation("invariant 10: " + at->second + " and " + p->name + " both take writes for p" +
                    std::to_string(id.value()) + " at leader epoch " + std::to_string(le));
        }
        auto newest = newest_leader_epoch_.find(id.value());
        if (newest != newest_leader_epoch_.end() && le < newest->second) continue;
      }
      accepting.emplace_back(range.lo, range.hi, p->name + "/p" + std::to_string(id.value()));
    }
  }
  std::sort(accepting.begin(), accepting.end());
  for (size_t i = 1; i < accepting.size(); ++i) {
    if (std::get<0>(accepting[i]) < std::get<1>(accepting[i - 1])) {
      Violation("invariant 2: two writers for one hash point: " + std::get<2>(accepting[i - 1]) +
                " and " + std::get<2>(accepting[i]));
    }
  }
}

// The quiet phase: no faults; every pod back; the coordinator finishes what it does and brings
// every pod to its map; producers finish their batches; groups read everything; what is
// consumed is retired.
void World::Settle() {
  faults_ = false;
  hand_rogue_ = false;
  for (auto& c : coordinators_) {
    if (c.frozen) CoordinatorStep(c, true);  // the paused one wakes and finds its place
  }
  for (auto& p : pods_) {
    p->paused = false;
    p->isolated = false;
    if (!p->topic) {
      if (Status st = OpenPod(*p); !st.ok()) Violation("restarting " + p->name + ": " + st.ToString());
    }
  }
  auto converge = [&] {
    for (int round = 0; round < 60; ++round) {
      Coordinator& c = coordinators_[0];
      if (record_.target || !record_.failing_over.empty()) {
        CoordinatorStep(c, true);
      } else {
        control::ChangeExecutor::Options eo;
        eo.step_timeout = std::chrono::milliseconds(0);
        control::ChangeExecutor executor(*c.admin, eo);
        Status st = executor.InstallEverywhere(record_.map);
        if (st.code() == Status::Code::kConflict || st.code() == Status::Code::kStaleEpoch) {
          c.view = record_.version;
          Reconcile(c, st);
          continue;
        }
        if (st.code() == Status::Code::kDataLost) {  // a wiped pod: declared lost next
          CoordinatorStep(c, true);
          continue;
        }
        if (st.ok()) {
          bool all = true;
          for (const auto& p : pods_) all &= p->topic->map() == record_.map;
          if (all) return true;
        }
      }
      Tick();
    }
    return false;
  };
  // With a coordinator that ignored the record, two maps of one epoch may have met; the sidecars
  // kept every safety invariant, but bringing the pods back to one map may need an operator, so
  // liveness is only checked without it.
  if (!converge() && !had_hand_rogue_) {
    Violation("invariant 8: the pods never came to one map after the faults" +
              (last_refusal_.empty() ? "" : std::string(" (last refusal: ") + last_refusal_ + ")"));
  }
  for (int round = 0; round < 200; ++round) {
    bool pending = false;
    for (auto& prod : producers_) {
      if (!prod.batch.empty()) {
        pending = true;
        ProduceAction(prod, true);
      }
    }
    Tick();
    if (!pending) break;
  }
  for (const auto& prod : producers_) {
    if (!prod.batch.empty() && !had_hand_rogue_) {
      Violation("a producer's batch was never acknowledged after the faults (liveness)" +
                (prod.last_answer.empty() ? "" : ": " + prod.last_answer));
    }
  }
  auto drain = [&] {
    for (int quiet_rounds = 0, round = 0; round < 400 && quiet_rounds < 6; ++round) {
      const uint64_t before = result_.seen;
      for (auto& g : groups_) {
        for (auto& p : pods_) ConsumeAction(g, *p, true);
      }
      Tick();
      quiet_rounds = result_.seen == before ? quiet_rounds + 1 : 0;
      // Quiet for a while: batches whose answer was lost come back once redelivery is due.
      if (quiet_rounds == 3) clock_.AdvanceMs(kRedeliveryMs + 1);
    }
  };
  drain();
  // Retire what every group consumed, as the coordinator does (pod by pod), until nothing is
  // left to retire.
  for (int round = 0; round < 20; ++round) {
    auto ids = control::OneHoldersRetirement(
        record_.map, control::RetirablePartitions(record_.map, Reports(record_.map)));
    if (ids.empty()) break;
    MapChange change(record_.map);
    for (PartitionId id : ids) (void)change.Retire(id);
    auto target = change.Build();
    if (!target.ok()) break;
    record_.target = *target;
    ++record_.version;
    converge();
    drain();
  }
}

void World::FinalChecks() {
  CatchUpAll();
  CheckCopies();
  std::vector<harness::AckedEvent> acked;
  for (const auto& p : producers_) acked.insert(acked.end(), p.acked.begin(), p.acked.end());
  // With a coordinator that ignored the record, two maps of one epoch may have given one id two
  // partitions: an event retried across the two histories is stored in both. The sidecars keep
  // one writer per hash point (2) and parents first (3) even then; 4, 6 and 7 hold only with one
  // map per epoch (5), which a coordinator without the record cannot be held to.
  for (const auto& g : groups_) {
    if (had_hand_rogue_) break;
    if (g.first_request == UINT64_MAX) continue;  // never read
    // A late group may start after partitions retired before its first request.
    std::vector<harness::AckedEvent> expected;
    for (const auto& e : acked) {
      auto at = stored_.find({e.producer, e.seq});
      if (at == stored_.end()) {
        Violation("an acknowledged event (" + e.producer + ", " + std::to_string(e.seq) +
                  ") is stored nowhere");
        continue;
      }
      auto retired = retired_at_.find(at->second.first);
      if (retired != retired_at_.end() && retired->second < g.first_request) continue;
      // Stored only in a partition whose volume was wiped: lost, and declared so. With copies
      // a partition is never lost to one wiped volume (4): its loss counts, unless it is the
      // known gap (a sealed partition whose leader was wiped is declared lost, copies or not).
      if (lost_partitions_.count(at->second.first) &&
          (!replicated_ || opts_.tolerate_known_gaps ||
           copies_[at->second.first].size() < 2)) {
        continue;
      }
      expected.push_back(e);
    }
    // What a group read of a lost partition before the wipe, of events stored again after it,
    // comes again from the new copy: only the last sighting counts.
    std::vector<harness::SeenEvent> seen;
    for (const auto& s : g.seen) {
      if (lost_partitions_.count(s.partition) && stored_again_.count({s.producer, s.seq}) &&
          (!replicated_ || opts_.tolerate_known_gaps ||
           copies_[s.partition].size() < 2)) {
        continue;
      }
      seen.push_back(s);
    }
    auto report = harness::Verify(expected, seen);
    if (had_hand_rogue_) report.lost = 0;  // stored, but maybe only in a map the record lost
    if (!report.ok()) {
      Violation("group " + g.name + ": " + std::to_string(report.lost) + " lost, " +
                std::to_string(report.reordered) + " reordered, " +
                std::to_string(report.duplicated) + " duplicated of " +
                std::to_string(report.acked) + " (invariants 4, 6, 7)" +
                (report.examples.empty() ? "" : ": " + report.examples.front()) +
                (report.lost ? Unreadable() : ""));
    }
  }
  CheckInvariants();
}

// --- replication ------------------------------------------------------------------------------

std::vector<World::LogRec> World::ReadLog(const std::string& pod, uint32_t partition) {
  std::vector<LogRec> out;
  const std::string dir =
      "/" + pod + "/" + kTopic + "/partitions/" + std::to_string(partition);
  auto names = fs_.List(dir);
  if (!names.ok()) return out;
  for (const auto& name : *names) {  // in order: the names are zero-padded base offsets
    if (name.size() != 24 || !name.ends_with(".log")) continue;
    std::string data;
    if (!fs_.ReadWholeFile(dir + "/" + name, &data).ok()) continue;
    size_t pos = 0;
    while (pos < data.size()) {
      storage::RecordView rec;
      size_t size = 0;
      if (storage::record::Decode(data.data() + pos, data.size() - pos, &rec, &size) !=
          storage::record::DecodeResult::kOk) {
        break;  // a torn tail (a crashed pod's): what it recovers ends here
      }
      LogRec r;
      r.offset = rec.offset;
      r.key = std::string(rec.key);
      r.producer = std::string(rec.producer);
      r.seq = rec.seq;
      r.bytes = data.substr(pos, size);
      out.push_back(std::move(r));
      pos += size;
    }
  }
  return out;
}

std::vector<replication::EpochStart> World::ReadEpochs(const std::string& pod,
                                                     uint32_t partition) {
  std::vector<replication::EpochStart> out;
  std::string text;
  if (!fs_.ReadWholeFile("/" + pod + "/" + kTopic + "/partitions/" + std::to_string(partition) +
                             "/epochs",
                         &text)
           .ok()) {
    return out;
  }
  std::istringstream in(text);
  replication::EpochStart e;
  while (in >> e.epoch >> e.start) out.push_back(e);
  return out;
}

uint64_t World::EpochOf(const std::vector<replication::EpochStart>& epochs, uint64_t offset) {
  uint64_t epoch = 0;
  for (const auto& e : epochs) {
    if (e.start <= offset) epoch = e.epoch;
  }
  return epoch;
}

bool World::Holds(const std::string& pod, uint32_t partition, uint64_t offset,
                  const std::string& producer, uint64_t seq) {
  const std::string dir =
      "/" + pod + "/" + kTopic + "/partitions/" + std::to_string(partition);
  auto names = fs_.List(dir);
  if (!names.ok()) return false;
  // The segment the offset falls in: the last whose base is not above it.
  std::string segment;
  for (const auto& name : *names) {
    if (name.size() != 24 || !name.ends_with(".log")) continue;
    if (std::stoull(name.substr(0, 20)) <= offset) segment = name;
  }
  if (segment.empty()) return false;
  std::string data;
  if (!fs_.ReadWholeFile(dir + "/" + segment, &data).ok()) return false;
  for (size_t pos = 0; pos < data.size();) {
    storage::RecordView rec;
    size_t size = 0;
    if (storage::record::Decode(data.data() + pos, data.size() - pos, &rec, &size) !=
        storage::record::DecodeResult::kOk) {
      return false;
    }
    if (rec.offset == offset) return rec.producer == producer && rec.seq == seq;
    if (rec.offset > offset) return false;
    pos += size;
  }
  return false;
}

std::pair<size_t, size_t> World::Holders(uint32_t partition, uint64_t offset,
                                         const std::string& producer, uint64_t seq,
                                         std::string* who, const std::string& pod) {
  std::set<std::string> named;
  for (const auto& p : pods_) {
    if (pod.empty() || p->name != pod || !p->topic) continue;
    // Pods leave and join partitions (--pods-leave): the leader's quorum is over the copies its
    // map names.
    const PartitionMap held = p->topic->map();
    if (const PartitionInfo* info = held.Find(PartitionId(partition))) {
      named.insert(info->owner.value());
      for (const auto& r : info->replicas) named.insert(r.value());
    }
  }
  const auto& copies = named.empty() ? copies_[partition] : named;
  size_t have = 0;
  for (const auto& pod : copies) {
    if (!Holds(pod, partition, offset, producer, seq)) continue;
    ++have;
    if (who) *who += (who->empty() ? "" : ", ") + pod;
  }
  if (who && who->empty()) *who = "none";
  return {have, replication::QuorumOf(std::max<size_t>(copies.size(), 1))};
}

std::string World::RecordLeader(uint32_t partition, uint64_t* leader_epoch) {
  const PartitionInfo* info = record_.map.Find(PartitionId(partition));
  if (!info || info->lost) return "";
  if (leader_epoch) *leader_epoch = info->LeaderEpoch().value();
  return info->owner.value();
}

void World::FetchAction(Pod& f, bool quiet) {
  if (busy_) return;  // one fetch at a time (no fetch inside another's interleaving)
  broker::Topic* t = Reach(f.name);
  if (!t) return;
  if (!quiet && f.slow && Chance(0.8)) return;
  const PartitionMap held = t->map();
  std::vector<std::string> leaders;
  for (const auto& p : held.partitions()) {
    if (!p.lost && p.FollowedBy(PodName(f.name)) &&
        std::find(leaders.begin(), leaders.end(), p.owner.value()) == leaders.end()) {
      leaders.push_back(p.owner.value());
    }
  }
  if (leaders.empty()) return;
  std::sort(leaders.begin(), leaders.end());
  // In the quiet phase every leader in turn; otherwise one.
  const size_t from = quiet ? 0 : Pick(leaders.size());
  const size_t to = quiet ? leaders.size() : from + 1;
  for (size_t li = from; li < to; ++li) {
    const std::string& leader = leaders[li];
    t = Reach(f.name);
    if (!t) return;
    const PartitionMap before_map = t->map();
    std::map<uint32_t, std::vector<LogRec>> before;
    std::map<uint32_t, std::vector<replication::EpochStart>> before_epochs;
    for (const auto& p : before_map.partitions()) {
      if (!p.lost && p.FollowedBy(PodName(f.name)) && p.owner.value() == leader) {
        before[p.id.value()] = ReadLog(f.name, p.id.value());
        before_epochs[p.id.value()] = ReadEpochs(f.name, p.id.value());
      }
    }
    busy_ = &f;
    const broker::Topic::FetchStep step = t->FetchRound(leader);
    busy_ = nullptr;
    ++result_.fetch_rounds;
    std::string what;
    t = Reach(f.name);
    const PartitionMap after_map = t ? t->map() : before_map;
    for (auto& [id, old] : before) {
      const PartitionInfo* info = after_map.Find(PartitionId(id));
      // Promoted or dropped meanwhile (an install interleaved): its log is not a copy's now.
      if (!info || info->lost || !info->FollowedBy(PodName(f.name))) continue;
      const auto now = ReadLog(f.name, id);
      size_t same = 0;
      while (same < old.size() && same < now.size() && old[same].bytes == now[same].bytes) ++same;
      if (same < old.size() && same < now.size()) {
        Violation("invariant 11: " + f.name + "'s copy of p" + std::to_string(id) + " changed at @" +
                  std::to_string(old[same].offset) + " without a cut");
        continue;
      }
      CheckLogMatching(f.name, leader, id, now);
      if (now.size() > old.size()) {
        what += " p" + std::to_string(id) + "+" + std::to_string(now.size() - old.size());
        continue;
      }
      if (now.size() == old.size()) continue;
      // Cut: exactly the entries after the point where its log leaves the leader's, every one
      // of them unacknowledged (11). An entry of the same leader epoch at the same offset as
      // the leader's is the leader's entry (one leader per epoch, 10): cutting it is cutting too
      // much.
      what += " p" + std::to_string(id) + " cut " + std::to_string(old.size()) + "->" +
              std::to_string(now.size());
      const auto leader_log = ReadLog(leader, id);
      const auto leader_epochs = ReadEpochs(leader, id);
      for (size_t i = now.size(); i < old.size(); ++i) {
        const LogRec& r = old[i];
        ++result_.cut_entries;
        const LogRec* there = nullptr;
        for (const auto& l : leader_log) {
          if (l.offset == r.offset) there = &l;
        }
        const uint64_t epoch_here = EpochOf(before_epochs[id], r.offset);
        if (there && there->bytes == r.bytes && epoch_here == EpochOf(leader_epochs, r.offset)) {
          Violation("invariant 11: " + f.name + " cut p" + std::to_string(id) + "@" +
                    std::to_string(r.offset) + ", which is its leader " + leader +
                    "'s entry of leader epoch " + std::to_string(epoch_here) +
                    ": it cut more than the tail that left the leader's log");
          continue;
        }
        if (!r.seq) continue;
        const auto key = std::make_pair(r.producer, *r.seq);
        auto at = stored_.find(key);
        if (at == stored_.end() || at->second != std::make_pair(id, r.offset)) continue;
        // The same event stored again at the same offset by the leader: that one is known.
        if (there && there->producer == r.producer && there->seq == r.seq) continue;
        if (stored_meta_[key].acked) {
          Violation("invariant 11: " + f.name + " cut p" + std::to_string(id) + "@" +
                    std::to_string(r.offset) + " (" + r.producer + ", " +
                    std::to_string(*r.seq) + "), which was acknowledged and which its leader " +
                    leader + " does not hold");
          continue;
        }
        // The event may still be in the leader's log where a replaced leader took it before
        // (its entry there outlived the one that replaced it: that pod leads again as the most
        // complete copy): that is where it is stored now, and a retry is answered duplicate.
        const LogRec* kept = nullptr;
        for (const auto& l : leader_log) {
          if (l.producer == r.producer && l.seq == r.seq) kept = &l;
        }
        if (kept) {
          Trace("  (" + r.producer + ", " + std::to_string(*r.seq) + ") is kept at p" +
                std::to_string(id) + "@" + std::to_string(kept->offset) + ", its leader's entry");
          at->second = {id, kept->offset};
          continue;
        }
        // That entry is gone for good: a retry stores it again.
        stored_.erase(at);
        stored_meta_.erase(key);
        auto& known = known_[id];
        auto [lo, hi] = known.equal_range(KeyHash(r.key));
        for (auto it = lo; it != hi; ++it) {
          if (it->second == r.offset) {
            known.erase(it);
            break;
          }
        }
      }
    }
    static const char* const kSteps[] = {"done", "idle", "more", "retry"};
    Trace("fetch " + f.name + " <- " + leader + ": " + kSteps[static_cast<int>(step)] + what);
    CheckInvariants();
  }
}

void World::CheckLogMatching(const std::string& pod, const std::string& leader, uint32_t partition,
                             const std::vector<LogRec>& copy) {
  if (copy.empty()) return;
  const auto mine = ReadEpochs(pod, partition);
  const auto theirs = ReadEpochs(leader, partition);
  const auto log = ReadLog(leader, partition);
  // The highest offset both hold in the same epoch.
  size_t n = std::min(copy.size(), log.size());
  while (n > 0) {
    const uint64_t e = EpochOf(mine, copy[n - 1].offset);
    if (e != 0 && e == EpochOf(theirs, copy[n - 1].offset) &&
        copy[n - 1].offset == log[n - 1].offset) {
      break;
    }
    --n;
  }
  for (size_t i = 0; i < n; ++i) {
    if (copy[i].bytes == log[i].bytes) continue;
    Violation("invariant 11: " + pod + "'s copy of p" + std::to_string(partition) + " and its leader " +
              leader + "'s log both hold @" + std::to_string(copy[n - 1].offset) +
              " in leader epoch " + std::to_string(EpochOf(mine, copy[n - 1].offset)) +
              " but differ at @" + std::to_string(copy[i].offset) + " (" + copy[i].producer + "/" +
              std::to_string(copy[i].seq.value_or(0)) + " here, " + log[i].producer + "/" +
              std::to_string(log[i].seq.value_or(0)) + " there)");
    return;
  }
}

void World::InterleaveFetch() {
  if (interleaving_ || !faults_) return;
  interleaving_ = true;
  const int n = static_cast<int>(Pick(3));
  for (int i = 0; i < n; ++i) Act(false);
  if (Chance(0.5)) CoordinatorStep(coordinators_[Pick(coordinators_.size())], false);
  interleaving_ = false;
}

void World::CheckReadCommitted(const Group& g, const wire::ConsumedEvent& e,
                               const std::string& producer, const std::string& pod) {
  if (!replicated_ || !e.seq || copies_[e.partition].size() < 2) return;
  if (committed_.count({e.partition, e.offset})) return;
  std::string who;
  // Over the copies the partition's leader names (its high watermark's quorum).
  const auto [have, need] =
      Holders(e.partition, e.offset, producer, *e.seq, &who, RecordLeader(e.partition, nullptr));
  if (have >= need || quorum_held_.count(std::make_pair(producer, *e.seq))) {
    committed_.insert({e.partition, e.offset});
    return;
  }
  Violation("invariant 9: " + g.name + " got p" + std::to_string(e.partition) + "@" +
            std::to_string(e.offset) + " (" + producer + ", " + std::to_string(*e.seq) +
            ") at " + pod + " while " + std::to_string(have) + " of its copies hold it (" + who +
            "): above the high watermark");
}

bool World::FollowsAny(const PartitionMap& m, const std::string& pod) {
  return std::any_of(m.partitions().begin(), m.partitions().end(), [&](const PartitionInfo& p) {
    return p.owner.value() != pod && p.FollowedBy(PodName(pod));
  });
}

bool World::LeavingCopiesCaughtUp(Coordinator& c, const PartitionMap& m,
                                  const std::string& leaving) {
  std::map<std::string, std::set<uint32_t>> caught_up;  // by pod, as it answered
  for (const auto& p : m.partitions()) {
    if (p.owner.value() == leaving || !p.FollowedBy(PodName(leaving))) continue;
    size_t replacements = 0;
    for (const auto& j : p.joined) {
      if (j.pod.value() == leaving) continue;
      ++replacements;
      if (!caught_up.count(j.pod.value())) {
        const PeerAddress* addr = m.Peer(j.pod);
        if (!addr) return false;
        auto copies = c.admin->FollowedCopies(addr->admin);
        if (!copies.ok()) return false;
        auto& ids = caught_up[j.pod.value()];
        for (const auto& [id, held] : *copies) {
          if (!held.joining && !held.refetching) ids.insert(id.value());
        }
      }
      if (!caught_up[j.pod.value()].count(p.id.value())) return false;
    }
    if (replacements == 0) return false;
  }
  return true;
}

PartitionMap World::Placed(const PartitionMap& m, bool change, Coordinator* c) {
  if (!replicated_) return m;
  if (change && pods_leave_ && !FollowsAny(m, leaving_) && Chance(0.5)) {
    // Another pod leaves (its copies go to the others), or none: the one that left is back.
    leaving_ = Chance(0.3) ? "" : pods_[Pick(pods_.size())]->name;
  }
  std::vector<PodName> pods;
  std::set<PodName> keep;
  for (const auto& [pod, addr] : m.peers()) {
    if (!pods_leave_ || pod != leaving_) pods.push_back(PodName(pod));
  }
  if (pods_leave_ && !leaving_.empty() && FollowsAny(m, leaving_) &&
      !(change && c && LeavingCopiesCaughtUp(*c, m, leaving_))) {
    keep.insert(PodName(leaving_));
  }
  auto placed = replication::PlaceReplicas(m, pods, factor_, {}, keep);
  if (!placed.ok()) {
    Violation("placing followers: " + placed.status().ToString());
    return m;
  }
  if (change) {
    for (const auto& p : placed->partitions()) {
      const PartitionInfo* before = m.Find(p.id);
      for (const auto& j : p.joined) {
        if (!before || !before->JoinedBy(j.pod)) ++result_.copies_joined;
      }
    }
  }
  return std::move(placed).value();
}

std::vector<PartitionId> World::FailOverCandidates(const PartitionMap& base, bool quiet,
                                                   const std::string& wiped) {
  std::vector<PartitionId> out;
  std::map<std::string, bool> down;
  for (const auto& p : base.partitions()) {
    if (p.lost || p.replicas.empty()) continue;  // active or sealed
    const std::string& leader = p.owner.value();
    auto it = down.find(leader);
    if (it == down.end()) {
      bool is_down;
      if (!wiped.empty()) {
        is_down = leader == wiped;
      } else {
        // Down for the coordinator: no answer (crashed, paused, isolated); or, now and then, a
        // live leader whose answers were lost and that it takes for down.
        is_down = !ReachAdmin(leader) || (!quiet && faults_ && Chance(0.01));
      }
      it = down.emplace(leader, is_down).first;
    }
    if (!it->second) continue;
    // A quorum of the copies must answer the fence, the leader's left out: with factor 2 never.
    size_t reachable = 0;
    for (const auto& r : p.replicas) reachable += ReachAdmin(r.value()) ? 1 : 0;
    if (reachable < replication::QuorumOf(1 + p.replicas.size())) continue;
    out.push_back(p.id);
  }
  return out;
}

bool World::StartFailOver(Coordinator& c, const std::vector<PartitionId>& ids, bool quiet) {
  Record r = record_;
  r.failing_over = ids;
  // With a change in progress the failover goes into its target (parts of the change may have
  // taken effect), at a leader epoch above the target's.
  const PartitionMap& base = record_.target ? *record_.target : record_.map;
  r.fence = Epoch(std::max(base.epoch().value() + 1, record_.floor.value()));
  r.floor = r.fence;
  if (!WriteRecord(c, r)) return false;  // recorded before the first fence, or not at all
  std::string what;
  for (PartitionId id : ids) what += " p" + std::to_string(id.value());
  Trace(c.name + " fails over" + what + " at leader epoch " + std::to_string(r.fence.value()));
  FinishFailOver(c, quiet);
  return true;
}

void World::FinishFailOver(Coordinator& c, bool quiet) {
  const bool in_change = record_.target.has_value();
  const PartitionMap base = in_change ? *record_.target : record_.map;
  const Epoch fence = record_.fence;
  std::vector<PartitionId> ids;
  std::map<std::string, std::vector<PartitionId>> per_pod;
  for (PartitionId id : record_.failing_over) {
    const PartitionInfo* info = base.Find(id);
    if (!info || info->lost) continue;
    ids.push_back(id);
    for (const auto& f : info->replicas) per_pod[f.value()].push_back(id);
    // The old leader too, as the control loop fences it: one back with its data answers and
    // counts among the copies (a wiped one holds nothing to answer for).
    per_pod[info->owner.value()].push_back(id);
  }
  // Fence the copies: from now on they take nothing from a leader of an older leader epoch,
  // and say what they hold.
  std::map<uint32_t, std::vector<replication::ReplicaState>> answered;
  for (auto& [pod, pids] : per_pod) {
    ++event_;
    broker::Topic* t = ReachAdmin(pod);
    if (!t || (faults_ && Chance(0.03))) {
      Trace(c.name + " fence at " + pod + ": no answer");
      continue;
    }
    const auto fenced = t->FenceCopies(pids, fence);
    std::string held;
    for (const auto& f : fenced) {
      held += " p" + std::to_string(f.id.value()) + "=" + std::to_string(f.end) + "/le" +
              std::to_string(f.last_epoch.value());
    }
    Trace(c.name + " fences " + pod + " at leader epoch " + std::to_string(fence.value()) + ":" +
          held);
    CheckInvariants();
    if (faults_ && Chance(0.03)) {
      Trace("  (the answer is lost)");
      continue;
    }
    std::optional<uint64_t> first;
    if (auto v = first_volumes_.find(pod); v != first_volumes_.end()) first = v->second;
    for (const auto& f : fenced) {
      replication::ReplicaState state{PodName(pod), f.last_epoch, f.end,   f.refetching,
                                      t->volume(),  f.joining,    f.absent};
      state.refetching = replication::RefetchingCounts(state, first, base.Find(f.id));
      answered[f.id.value()].push_back(state);
    }
  }
  std::vector<std::pair<PartitionId, PodName>> leaders;
  for (PartitionId id : ids) {
    const PartitionInfo* info = base.Find(id);
    auto leader = replication::ChooseLeader(
        answered[id.value()], 1 + info->replicas.size(),
        info->active() ? std::nullopt : std::optional<uint64_t>(info->end_offset));
    if (leader.ok()) leaders.emplace_back(id, *leader);
  }
  Record r = record_;
  if (leaders.empty()) {
    if (ids.empty()) {  // nothing left to fail over
      r.failing_over.clear();
      WriteRecord(c, r);
    }
    return;  // the next step tries again
  }
  auto target = base.FailOver(leaders);
  if (!target.ok()) {
    Violation("the failover map is refused: " + target.status().ToString());
    return;
  }
  PartitionMap next = std::move(target).value();
  const Epoch want(std::max(fence.value(), record_.floor.value()));
  if (next.epoch() < want) next = next.WithEpoch(want);
  if (in_change) next = next.CarryingChange(base.epoch());
  // Invariant 10: the new leader holds every event acknowledged in the partition.
  for (const auto& [id, leader] : leaders) {
    for (const auto& [key, at] : stored_) {
      if (at.first != id.value()) continue;
      auto meta = stored_meta_.find(key);
      if (meta == stored_meta_.end() || !meta->second.acked) continue;
      if (!Holds(leader.value(), at.first, at.second, key.first, key.second)) {
        Violation("invariant 10: " + leader.value() + " is made the leader of p" +
                  std::to_string(id.value()) + " without the acknowledged (" + key.first + ", " +
                  std::to_string(key.second) + ") at @" + std::to_string(at.second));
      }
    }
  }
  if (in_change) {
    r.target = next;
  } else {
    r.map = next;
  }
  r.failing_over.clear();
  for (PartitionId id : ids) {
    if (std::none_of(leaders.begin(), leaders.end(),
                     [&](const auto& l) { return l.first == id; })) {
      r.failing_over.push_back(id);
    }
  }
  if (!WriteRecord(c, r)) return;
  NoteMap(next);
  std::string moved;
  for (const auto& [id, leader] : leaders) {
    failed_over_at_[id.value()] = event_;
    ++result_.failovers;
    // The old leader still runs and reaches its peers (isolated from the coordinators, or its
    // answers lost): it goes on taking writes that its fenced copies must refuse.
    if (const PartitionInfo* old = base.Find(id); old && Reach(old->owner.value())) {
      ++result_.live_leaders_replaced;
    }
    moved += " p" + std::to_string(id.value()) + "->" + leader.value();
  }
  Trace(c.name + " failed over at e" + std::to_string(next.epoch().value()) + ":" + moved +
        (in_change ? " (into the change in progress)" : ""));
  TraceMap(next);
  // Composed into a change, the map goes out as the change's (its parents are sealed first):
  // the coordinator's next step applies it.
  if (in_change) {
    c.base.reset();
    c.target.reset();
    return;
  }
  // New leaders first: they take writes as soon as they hold the map; then every other pod
  // (one that does not answer gets it later, CatchUpInstalls).
  std::vector<std::string> order;
  for (const auto& [id, leader] : leaders) order.push_back(leader.value());
  for (const auto& [pod, addr] : next.peers()) order.push_back(pod);
  std::set<std::string> done;
  // Now and then only the new leaders get it at once; the others when the coordinator next
  // brings pods up to date (its requests to them lost): the window in which a fenced copy
  // still holds the map of the old leader.
  const size_t first = leaders.size();
  const bool leaders_only = !quiet && faults_ && Chance(0.5);
  Coordinator* outer = active_;
  active_ = &c;
  in_legit_change_ = !quiet;
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string& pod = order[i];
    if (leaders_only && i >= first) {
      Trace("  (the failover map's installs on the other pods are lost)");
      break;
    }
    if (!done.insert(pod).second) continue;
    const PeerAddress* addr = next.Peer(PodName(pod));
    if (!addr) continue;
    (void)c.admin->InstallMap(addr->admin, next);
  }
  in_legit_change_ = false;
  active_ = outer;
  if (leaders_only) {
    // Before the coordinator's next round the world goes on: writes reach the replaced leader
    // if it still runs, and the copies that hold the old map fetch from it (they are fenced).
    for (int i = 0, n = 1 + static_cast<int>(Pick(3)); i < n; ++i) {
      ProduceAction(producers_[Pick(producers_.size())], false);
      for (auto& p : pods_) FetchAction(*p, true);
      CheckInvariants();
    }
  }
}

bool World::CatchUpInstalls(Coordinator& c) {
  const PartitionMap map = record_.map;
  for (const auto& [pod, addr] : map.peers()) {
    auto held = c.admin->GetMap(addr.admin);
    if (held.ok())
      (void)control::RecordFirstVolume(*c.admin, PodName(pod), addr.admin, &first_volumes_);
    if (held.ok() ? held->epoch() >= map.epoch()
                  : held.status().code() != Status::Code::kNotFound) {
      continue;
    }
    // A pod that holds no map and owns partitions lost its data (PodWithoutData), as the control
    // loop's InstallOnLaggingPods tells it: not given the map.
    if (!held.ok() &&
        !PartitionsMadeBefore(map, PodName(pod), Epoch(map.epoch().value() + 1)).empty()) {
      continue;
    }
    auto r = c.admin->InstallMap(addr.admin, map);
    if (r.ok()) continue;
    const auto code = r.status().code();
    if (code == Status::Code::kConflict || code == Status::Code::kStaleEpoch) {
      c.view = record_.version;
      Reconcile(c, r.status());
      return false;
    }
  }
  return true;
}

void World::CatchUpAll() {
  if (!replicated_) return;
  for (int round = 0; round < 100; ++round) {
    const uint64_t before = result_.fetch_rounds;
    std::string ends;
    for (auto& p : pods_) {
      if (p->topic) ends += p->topic->FollowedJson();
    }
    for (auto& p : pods_) FetchAction(*p, true);
    std::string after;
    for (auto& p : pods_) {
      if (p->topic) after += p->topic->FollowedJson();
    }
    if (after == ends || result_.fetch_rounds == before) return;
  }
}

std::string World::Unreadable() {
  if (!replicated_) return "";
  std::string out;
  for (auto& p : pods_) {
    if (!p->topic) continue;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array parts;
    if (parser.parse(simdjson::padded_string(p->topic->ViewJson())).get(doc) ||
        doc["partitions"].get(parts)) {
      continue;
    }
    for (auto part : parts) {
      uint64_t id = 0, end = 0, visible = 0;
      if (part["id"].get(id) || part["end_offset"].get(end) ||
          part["visible_end_offset"].get(visible) || visible >= end) {
        continue;
      }
      out += " p" + std::to_string(id) + " at " + p->name + " hands out below " +
             std::to_string(visible) + " of " + std::to_string(end) + ";";
    }
  }
  return out.empty() ? "" : " [high watermark below the end:" + out + "]";
}

void World::CheckCopies() {
  if (!replicated_ || had_hand_rogue_) return;
  for (const auto& info : record_.map.partitions()) {
    if (info.lost) continue;
    const uint32_t id = info.id.value();
    const auto leader = ReadLog(info.owner.value(), id);
    // 6 over the final log: no (producer, seq) twice.
    std::set<std::pair<std::string, uint64_t>> ids;
    for (const auto& r : leader) {
      if (r.seq && !ids.insert({r.producer, *r.seq}).second) {
        Violation("invariant 6: p" + std::to_string(id) + " at its leader " +
                  info.owner.value() + " holds (" + r.producer + ", " + std::to_string(*r.seq) +
                  ") twice");
      }
    }
    // 11: every copy is its leader's log once the quiet phase let it catch up.
    for (const auto& f : info.replicas) {
      const auto copy = ReadLog(f.value(), id);
      size_t same = 0;
      while (same < copy.size() && same < leader.size() && copy[same].bytes == leader[same].bytes) {
        ++same;
      }
      if (same == copy.size() && same == leader.size()) continue;
      Violation("invariant 11: " + f.value() + "'s copy of p" + std::to_string(id) + " (" +
                std::to_string(copy.size()) + " entries) is not its leader " +
                info.owner.value() + "'s log (" + std::to_string(leader.size()) +
                " entries) after the quiet phase: they part at entry " + std::to_string(same) +
                (same < copy.size() && same < leader.size()
                     ? " (@" + std::to_string(copy[same].offset) + ": " + copy[same].producer +
                           "/" + std::to_string(copy[same].seq.value_or(0)) + " here, " +
                           leader[same].producer + "/" +
                           std::to_string(leader[same].seq.value_or(0)) + " there)"
                     : ""));
    }
  }
}

ScheduleResult World::Run() {
  result_.seed = opts_.seed;
  Setup();
  for (step_ = 0; step_ < opts_.steps; ++step_) {
    const uint64_t roll = Pick(100);
    if (roll < 12) {
      CoordinatorStep(coordinators_[Pick(coordinators_.size())], false);
    } else if (roll < 15) {
      RogueStep();
    } else {
      Act(false);
    }
    CheckInvariants();
    if (!result_.violations.empty()) break;
  }
  if (result_.violations.empty()) {
    Settle();
    FinalChecks();
  }
  if (!opts_.trace) result_.trace.assign(recent_.begin(), recent_.end());
  return result_;
}

}  // namespace

ScheduleResult RunSchedule(const ScheduleOptions& options) {
  World w(options);
  return w.Run();
}

}  // namespace shoal::sim
