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

#include "broker/sidecar_probe.h"
#include "broker/topic.h"
#include "shoal/client/admin_plane.h"
#include "shoal/client/shoal_client.h"
#include "shoal/client/verifier.h"
#include "shoal/common/json.h"
#include "shoal/common/hash.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/wire.h"
#include "shoal/control/admin_partitions.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/retirement.h"
#include "support/manual_clock.h"
#include "support/sim/mem_file_system.h"

namespace shoal::sim {
namespace {

constexpr char kTopic[] = "orders";
constexpr int64_t kRedeliveryMs = 3000;

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
};

struct Producer {
  std::string id;
  uint64_t next_seq = 0;
  std::map<std::string, uint64_t> counter;
  std::vector<client::OutgoingEvent> batch;  // the batch being sent until acknowledged
  std::vector<client::AckedEvent> meta;      // its events as the verifier knows them
  std::vector<client::AckedEvent> acked;
};

struct Group {
  std::string name;
  enum class Kind { kFast, kSlow, kStopper, kLate } kind = Kind::kFast;
  int start_step = 0;                 // kLate: not before
  int stop_from = 0, stop_until = 0;  // kStopper: silent in between
  uint64_t first_request = UINT64_MAX;
  std::vector<client::SeenEvent> seen;
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

  ScheduleResult Run();

  // Transport: the Topic at `name` if it answers now (up and not paused).
  broker::Topic* Reach(const std::string& name) {
    for (auto& p : pods_) {
      if (p->name == name) return p->topic && !p->paused ? p->topic.get() : nullptr;
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
      if (p->name == name && p->topic) Crash(*p);
    }
  }
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
             p.owner.value().substr(4) + "[" + std::to_string(p.range.lo >> 24) + "," +
             std::to_string(p.range.hi >> 24) + ")";
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

  // Actions.
  void Act(bool quiet);
  void ProduceAction(Producer& prod, bool quiet);
  void ConsumeAction(Group& g, Pod& pod, bool quiet);
  void Tick();
  void CoordinatorStep(Coordinator& c, bool quiet);
  void RogueStep();
  void MaybeInterleave();
  std::optional<PartitionMap> PickChange(const PartitionMap& base, bool allow_retire);
  std::map<std::string, control::AdminPartitionsReport> Reports(const PartitionMap& map);
  // Compare-and-set of the record: writes it only if `c` read the version it holds now.
  bool WriteRecord(Coordinator& c, const Record& next);
  void Reconcile(Coordinator& c, const Status& why);

  // Checks.
  void RecordStored(const std::string& producer, uint64_t seq, const wire::ProduceResult& r,
                    uint32_t hash);
  // Invariant 3 per hash point, for event `e` (hash `h`) just handed to `g` at `pod`: every
  // event with hash h known to be stored in e's lineage was committed by g before.
  void CheckParentsFirst(const Group& g, const wire::ConsumedEvent& e, uint32_t h,
                         const PartitionMap& held, const std::string& pod);
  void CheckDuplicate(const std::string& producer, uint64_t seq, const wire::ProduceResult& r);
  void Settle();
  void FinalChecks();

  const ScheduleOptions opts_;
  std::mt19937_64 rng_;
  testing::ManualClock clock_;
  testing::MemFileSystem fs_;
  SimAdmin setup_admin_;
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
  // Every event known to be stored (acknowledged, or handed to some group), per partition id:
  // hash -> offset.
  std::map<uint32_t, std::multimap<uint32_t, uint64_t>> known_;
  std::map<uint64_t, std::string> maps_by_epoch_;
  std::deque<std::string> recent_;
  ScheduleResult result_;
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

Result<PartitionMap> SimAdmin::GetMap(const std::string& admin) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.Reach(admin);
  if (!t) return Status::Unavailable(admin + " does not answer");
  // As the admin client reads GET /v1/admin/map of a sidecar that holds no map.
  if (t->map().epoch().value() == 0) return Status::NotFound(admin + " holds no map");
  return t->map();
}

Result<client::InstallOutcome> SimAdmin::InstallMap(const std::string& admin,
                                                    const PartitionMap& map) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.Reach(admin);
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
  broker::Topic* t = w_.Reach(admin);
  if (!t) return Status::Unavailable(admin + " does not answer");
  return t->Prepare(map);
}

Result<uint64_t> SimAdmin::Seal(const std::string& admin, const PartitionMap& target,
                                PartitionId partition) {
  w_.BeforeRequest(who_);
  broker::Topic* t = w_.Reach(admin);
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
  broker::Topic* t = w_.Reach(admin);
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
  broker::Topic* t = w_.Reach(host_port);
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
  auto t = broker::Topic::Open(o, clock_, *p.probe, p.peers.get());
  if (!t.ok()) return t.status();
  p.topic = std::move(t).value();
  return Status::Ok();
}

void World::Crash(Pod& p) {
  p.topic.reset();  // the process is gone: no Close, nothing flushed
  fs_.Crash("/" + p.name + "/", &rng_);
  p.paused = false;
  ++result_.crashes;
  Trace("crash " + p.name);
}

void World::Wipe(Pod& p) {
  const PartitionMap held = p.topic->map();
  for (const auto& info : held.partitions()) {
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
  ++wiped_;
  ++result_.wipes;
  Trace("wipe " + p.name + " (held e" + std::to_string(held.epoch().value()) + ")");
  if (Status st = OpenPod(p); !st.ok()) Violation("restarting " + p.name + ": " + st.ToString());
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
  const size_t n_pods = 2 + Pick(2);
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
  for (int i = 0; i < 2; ++i) {
    Coordinator c;
    c.name = "c" + std::to_string(i);
    c.admin = std::make_unique<SimAdmin>(*this, c.name);
    coordinators_.push_back(std::move(c));
  }
  hand_rogue_ = had_hand_rogue_ = result_.hand_rogue = Chance(0.2);
  wipes_ = !hand_rogue_ && Chance(0.35);
  control::ChangeExecutor::Options eo;
  eo.step_timeout = std::chrono::milliseconds(0);
  control::ChangeExecutor executor(setup_admin_, eo);
  faults_ = false;
  if (Status st = executor.InstallEverywhere(map); !st.ok()) {
    Violation("installing the first map: " + st.ToString());
  }
  faults_ = true;
  record_.map = map;
  record_.version = 1;
  Trace("setup: " + std::to_string(n_pods) + " pods, " + std::to_string(count) + " partitions, " +
        std::to_string(producers_.size()) + " producers");
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

std::optional<PartitionMap> World::PickChange(const PartitionMap& base, bool allow_retire) {
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
  return std::move(built).value();
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
  if (!c.target) {
    // A pod that lost its data first: its partitions are declared lost (any other change would
    // need them), as the control loop does.
    std::optional<PartitionMap> next;
    if (const std::string pod = PodWithoutData(c, *c.base, false); !pod.empty()) {
      auto lost = c.base->DeclareLost(PodName(pod));
      if (lost.ok()) next = std::move(lost).value();
    }
    if (!next) next = PickChange(*c.base, true);
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
  auto applied = executor.Apply(base, target, nullptr);
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
  if (st.code() == Status::Code::kUnavailable) return;  // a pod is down: resumed later
  if (st.code() == Status::Code::kDataLost) {
    // A pod the change needs lost its data: its partitions are declared lost on top of the
    // change, which goes on as one (parts of it may have taken effect already).
    if (const std::string pod = PodWithoutData(c, target, true); !pod.empty()) {
      auto composed = target.DeclareLost(PodName(pod), /*in_change=*/true);
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
    rogue_target_ = PickChange(rogue_base_, false);
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
                         uint32_t hash) {
  known_[r.partition].emplace(hash, r.offset);
  if (opts_.trace) {
    Trace("  stored (" + producer + ", " + std::to_string(seq) + ") at p" +
          std::to_string(r.partition) + "@" + std::to_string(r.offset));
  }
  auto [it, fresh] = stored_.emplace(std::make_pair(producer, seq),
                                     std::make_pair(r.partition, r.offset));
  if (!fresh && lost_partitions_.count(it->second.first)) {
    // Its first copy went with a wiped volume, and its producer state too: taken again.
    it->second = {r.partition, r.offset};
    stored_again_.insert(it->first);
    return;
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
    Violation("invariant 6: (" + producer + ", " + std::to_string(seq) +
              ") answered duplicate at p" + std::to_string(r.partition) + "@" +
              std::to_string(r.offset) + ", but it is stored at p" +
              std::to_string(it->second.first) + "@" + std::to_string(it->second.second));
  }
}

void World::ProduceAction(Producer& prod, bool quiet) {
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
  Status st = t->Produce(events, &results, false, &forwards, &unknown);
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
    for (size_t i = 0; i < events.size(); ++i) {
      if (!local[i]) continue;
      results[i].duplicate
          ? CheckDuplicate(prod.id, *events[i].seq, results[i])
          : RecordStored(prod.id, *events[i].seq, results[i], KeyHash(events[i].key));
    }
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
      Status fst = owner->Produce(parser.events(), &fr, true, nullptr, &funknown);
      if (fst.code() == Status::Code::kSequenceUnknown) {
        for (size_t k : funknown) give_up.insert(f.indices.at(k));
      }
      if (!fst.ok()) {
        failed = true;
        continue;
      }
      for (size_t k = 0; k < f.indices.size(); ++k) {
        const size_t i = f.indices[k];
        fr[k].duplicate ? CheckDuplicate(prod.id, *events[i].seq, fr[k])
                        : RecordStored(prod.id, *events[i].seq, fr[k], KeyHash(events[i].key));
      }
      if (faults_ && Chance(0.05)) failed = true;  // the answer is lost
    }
  }
  Trace("produce " + prod.id + " " + std::to_string(prod.batch.size()) + " via " + entry.name +
        ": " + (failed ? (st.ok() ? std::string("forward failed") : st.ToString()) : "acked"));
  if (!give_up.empty()) {
    std::vector<client::OutgoingEvent> batch;
    std::vector<client::AckedEvent> meta;
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
  if (!failed) {
    result_.acked += prod.meta.size();
    prod.acked.insert(prod.acked.end(), prod.meta.begin(), prod.meta.end());
    prod.batch.clear();
    prod.meta.clear();
  }
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
      for (auto it = from; it != to; ++it) {
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
  auto n = t->Consume(g.name, max, &out);
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
    if (g.uncommitted.count(id)) continue;  // handed out again: its commit had failed
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
  for (int attempt = 0; attempt < 3; ++attempt) {
    broker::Topic* at = Reach(pod.name);
    if (!at) break;
    st = at->Commit(c);
    if (st.code() != Status::Code::kUnavailable) break;
  }
  for (const auto& e : *events) g.committed.insert({e.partition, e.offset});
  if (st.ok()) {
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
}

void World::Act(bool quiet) {
  ++event_;
  const uint64_t roll = Pick(100);
  if (roll < 30) {
    ProduceAction(producers_[Pick(producers_.size())], quiet);
  } else if (roll < 62) {
    Group& g = groups_[Pick(groups_.size())];
    const bool active = quiet || (g.kind != Group::Kind::kLate || step_ >= g.start_step);
    const bool stopped =
        !quiet && g.kind == Group::Kind::kStopper && step_ >= g.stop_from && step_ < g.stop_until;
    const bool slow_skips = !quiet && g.kind == Group::Kind::kSlow && Chance(0.7);
    if (active && !stopped && !slow_skips) ConsumeAction(g, *pods_[Pick(pods_.size())], quiet);
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

// --- invariants ------------------------------------------------------------------------------

void World::CheckInvariants() {
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> accepting;
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
    // 2: one writer per hash point (a paused process still holds what it accepts).
    for (const auto& [id, range] : p->topic->AcceptingPartitions()) {
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
    if (!p->topic) {
      if (Status st = OpenPod(*p); !st.ok()) Violation("restarting " + p->name + ": " + st.ToString());
    }
  }
  auto converge = [&] {
    for (int round = 0; round < 60; ++round) {
      Coordinator& c = coordinators_[0];
      if (record_.target) {
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
    Violation("invariant 8: the pods never came to one map after the faults");
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
      Violation("a producer's batch was never acknowledged after the faults (liveness)");
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
  std::vector<client::AckedEvent> acked;
  for (const auto& p : producers_) acked.insert(acked.end(), p.acked.begin(), p.acked.end());
  // With a coordinator that ignored the record, two maps of one epoch may have given one id two
  // partitions: an event retried across the two histories is stored in both. The sidecars keep
  // one writer per hash point (2) and parents first (3) even then; 4, 6 and 7 hold only with one
  // map per epoch (5), which a coordinator without the record cannot be held to.
  for (const auto& g : groups_) {
    if (had_hand_rogue_) break;
    if (g.first_request == UINT64_MAX) continue;  // never read
    // A late group may start after partitions retired before its first request.
    std::vector<client::AckedEvent> expected;
    for (const auto& e : acked) {
      auto at = stored_.find({e.producer, e.seq});
      if (at == stored_.end()) {
        Violation("an acknowledged event (" + e.producer + ", " + std::to_string(e.seq) +
                  ") is stored nowhere");
        continue;
      }
      auto retired = retired_at_.find(at->second.first);
      if (retired != retired_at_.end() && retired->second < g.first_request) continue;
      // Stored only in a partition whose volume was wiped: lost, and declared so.
      if (lost_partitions_.count(at->second.first)) continue;
      expected.push_back(e);
    }
    // What a group read of a lost partition before the wipe, of events stored again after it,
    // comes again from the new copy: only the last sighting counts.
    std::vector<client::SeenEvent> seen;
    for (const auto& s : g.seen) {
      if (lost_partitions_.count(s.partition) && stored_again_.count({s.producer, s.seq})) {
        continue;
      }
      seen.push_back(s);
    }
    auto report = client::Verify(expected, seen);
    if (had_hand_rogue_) report.lost = 0;  // stored, but maybe only in a map the record lost
    if (!report.ok()) {
      Violation("group " + g.name + ": " + std::to_string(report.lost) + " lost, " +
                std::to_string(report.reordered) + " reordered, " +
                std::to_string(report.duplicated) + " duplicated of " +
                std::to_string(report.acked) + " (invariants 4, 6, 7)" +
                (report.examples.empty() ? "" : ": " + report.examples.front()));
    }
  }
  CheckInvariants();
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
