// The partition map of one topic at one epoch: which partitions exist, which hash range each owns,
// which are active or sealed, who owns them, and their lineage (sealed parents).
//
// This is the single implementation of the map and of the seal-and-succeed changes (split, merge,
// move); the sidecar's router, the operator's planner and the verifier all use it. A PartitionMap
// is a value: copyable, immutable through its const interface, not synchronized. Changes return
// a new map at epoch + 1 and never modify the original.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/status.h"

namespace shoal {

inline constexpr uint64_t kHashSpace = uint64_t{1} << 32;

// Bounds every map is validated against, so that no size a sidecar allocates follows a number
// from the wire: partition ids stay below 2^32 - 1 (so NextId cannot wrap), a map lists at most
// kMaxMapPartitions partitions (active and sealed) and kMaxMapPeers pods, and a partition has at
// most kMaxParents parents.
inline constexpr uint32_t kMaxPartitionId = UINT32_MAX - 1;
inline constexpr size_t kMaxMapPartitions = size_t{1} << 20;
inline constexpr size_t kMaxMapPeers = 65536;
inline constexpr size_t kMaxParents = 65536;
inline constexpr size_t kMaxNameBytes = 253;
// A partition has at most this many followers (replication factor 5).
inline constexpr size_t kMaxFollowers = 4;

// A contiguous range [lo, hi) of the 32-bit hash space; hi may equal 2^32.
struct HashRange {
  uint64_t lo = 0;
  uint64_t hi = kHashSpace;

  bool Contains(uint32_t h) const { return h >= lo && h < hi; }
  uint64_t Width() const { return hi - lo; }
  bool operator==(const HashRange&) const = default;
};

enum class PartitionState { kActive, kSealed };
std::string_view ToString(PartitionState s);

// A follower that a map added to a partition made before it, and the epoch of that map
// (PartitionInfo::joined).
struct JoinedCopy {
  PodName pod;
  Epoch at{0};
  bool operator==(const JoinedCopy&) const = default;
};

struct PartitionInfo {
  PartitionId id;
  HashRange range;
  PartitionState state = PartitionState::kActive;
  PodName owner;
  // Sealed partitions whose events come before this one's, per key (see invariants 2 and 3).
  std::vector<PartitionId> parents;
  // For a sealed partition: its final end offset, once the seal is acknowledged.
  uint64_t end_offset = 0;
  // Whether end_offset is the end a seal was answered with once a quorum of the partition's
  // copies held it (WithEndOffset), not a change's placeholder before its seal nor the end of a
  // copy sealed as a failover's new leader (answered before its followers held it): a copy made
  // the leader of the partition later is sealed at exactly that end (its tail past it, never
  // acknowledged, is cut), because successors may have taken writes after it.
  bool end_known = false;
  // Declared lost by the coordinator (DeclareLost): its only copy went with its pod's volume.
  // Always sealed; nothing of it can be read or committed, and a successor's gate walks past it
  // to its parents, which may still hold a key's earlier events. Retired once its parents are.
  bool lost = false;
  // The epoch of the map that created it (0: not known, a map written before this was kept).
  // Its owner has held it since that map was installed there (a change installs its map on the
  // successors' owners before it completes), so a pod asked to take a map of a later epoch that
  // gives it this partition and holds nothing of it has lost its data (Topic refuses it).
  Epoch born{0};
  // Replication: the pods that keep copies of this partition beside its owner, which leads it
  // (accepts its appends and serves its reads); followers fetch from the leader and count toward
  // its high watermark. Distinct pods, none the owner, in the order failover prefers them. Empty
  // with a replication factor of 1.
  std::vector<PodName> replicas = {};
  // The followers among `replicas` that a map added after the partition was made (one that
  // replaces a copy on a pod that leaves, or one more for a higher factor), each in none of the
  // quorums that acknowledged what the partition held before, with the epoch of the map that
  // added it. Such a copy is joining until it holds its leader's end (replication::
  // JoiningCopies): a failover does not count it before. The pods that copied the partition
  // from its start, and a leader's old owner, are not.
  std::vector<JoinedCopy> joined = {};
  // The epoch of the map that made `owner` this partition's leader (Kafka's leader epoch): a
  // follower fetches naming it, and a leader refuses a fetch that names another (a newer one
  // fences it). 0: since the partition was made (`born`).
  Epoch leader_epoch{0};

  Epoch LeaderEpoch() const { return leader_epoch.value() ? leader_epoch : born; }
  // Whether `pod` holds a copy of this partition as a follower.
  // Whether `pod`'s copy is among `joined` (nullptr: not).
  const JoinedCopy* JoinedBy(const PodName& pod) const {
    for (const auto& j : joined) {
      if (j.pod == pod) return &j;
    }
    return nullptr;
  }
  bool FollowedBy(const PodName& pod) const {
    for (const auto& r : replicas) {
      if (r == pod) return true;
    }
    return false;
  }
  bool active() const { return state == PartitionState::kActive; }
  bool operator==(const PartitionInfo&) const = default;
};

// Where a pod's sidecar listens: "host:port" of its data and admin planes.
struct PeerAddress {
  std::string data;
  std::string admin;
  bool operator==(const PeerAddress&) const = default;
};

// Appends one partition's fields as the map's JSON has them, without the braces:
// "id":N,"lo":L,"hi":H,"state":"active"|"sealed","owner":"pod","parents":[...] (then "born":E
// when known, and "lost":true for a partition declared lost). The one shape of
// a partition in every JSON Shoal writes (the map, the topic view); readers add their own fields.
void AppendPartitionFields(std::string& out, const PartitionInfo& p);

class PartitionMap {
 public:
  PartitionMap() = default;
  PartitionMap(std::string topic, Epoch epoch, std::vector<PartitionInfo> partitions);

  // Epoch 1: `count` active partitions with ids 0..count-1 over equal ranges, all owned by `owner`.
  static Result<PartitionMap> Initial(std::string topic, uint32_t count, PodName owner);
  // The same, with partition i owned by owners[i % owners.size()].
  static Result<PartitionMap> Initial(std::string topic, uint32_t count,
                                      const std::vector<PodName>& owners);

  // Checks invariant 1 (the active partitions cover [0, 2^32) exactly), unique ids within the
  // bounds above, names within kMaxNameBytes, and that every parent still listed is sealed.
  Status Validate() const;

  // Identifies the change this map is (invariant 5, one map per epoch): a hash of the topic, the
  // epoch, every partition but its end offset, and the peers, as 16 hex digits. End offsets are
  // left out because the coordinator learns them from the seals it sends with this digest; a map
  // that differs from another of its epoch only there is still another map (operator==).
  std::string Digest() const;

  // The partitions that list `id` among their parents, in id order.
  std::vector<const PartitionInfo*> SuccessorsOf(PartitionId id) const;
  // The position of `p`, which must be an element of partitions(): for tables indexed by
  // partition rather than by id (an id is not a size).
  size_t IndexOf(const PartitionInfo& p) const {
    return static_cast<size_t>(&p - partitions_.data());
  }

  const std::string& topic() const { return topic_; }
  Epoch epoch() const { return epoch_; }
  const std::vector<PartitionInfo>& partitions() const { return partitions_; }
  size_t active_count() const { return active_lo_.size(); }

  // Indexes into partitions() of the active partitions, in hash order.
  const std::vector<uint32_t>& active_in_order() const { return active_index_; }

  // nullptr when no partition has this id.
  const PartitionInfo* Find(PartitionId id) const;

  // The active partition that owns hash point h. The map must be valid.
  //
  // Hot path: every produced event is routed. A binary search over all range starts costs a
  // dependent cache miss per level once the map is large, so a table on the top 16 bits of h
  // first narrows the search to the partitions that can own h's 2^16-wide slice: one or two when
  // the ranges are even, O(log n) of only the tiny ranges when many crowd into one slice.
  const PartitionInfo& Route(uint32_t h) const {
    const uint32_t* slice = prefix_index_->data() + (h >> kPrefixShift);
    size_t lo = slice[0], n = slice[1] - slice[0] + 1;
    while (n > 1) {  // branch-light binary search for the last start <= h in [lo, lo + n)
      size_t half = n / 2;
      lo = (active_lo_[lo + half] <= h) ? lo + half : lo;
      n -= half;
    }
    return partitions_[active_index_[lo]];
  }

  // Seal-and-succeed changes. Each seals the named active partitions (recording no end offset:
  // the owner fills it in when it acknowledges the seal) and creates successors with fresh ids
  // whose parents are the sealed partitions, in a new map at epoch + 1.
  Result<PartitionMap> Split(PartitionId p, uint64_t at) const;
  Result<PartitionMap> Merge(PartitionId a, PartitionId b) const;
  Result<PartitionMap> Move(PartitionId p, const PodName& to) const;
  // The recovery of a pod whose volume came back empty (with one copy of each partition, its
  // events are gone): every partition `pod` owns that is not lost already and has no followers
  // (a failover gives a partition with followers, active or sealed, to a copy) is declared lost
  // (sealed, `lost`), and each one that was active gets a successor on `pod` over the same
  // range, whose parents are the lost partition, so its range takes writes again. InvalidArgument
  // when the pod owns nothing that is not lost already. `in_change`: this map is a change not
  // carried out yet, on top of which the pod is declared lost: the partitions it makes are
  // made by the new map instead (PartitionInfo::born).
  Result<PartitionMap> DeclareLost(const PodName& pod, bool in_change = false) const;

  // A failover (invariant 10): a map at epoch + 1 in which partition p, replicated, is led by
  // `leader`, one of its followers, from a new leader epoch (this map's); its old leader becomes
  // the last of its followers (it cuts its unacknowledged tail and follows when it is back).
  // `leader` may also be p's leader itself (its copies and it were fenced, and it held the
  // most): the same leader from a new leader epoch. InvalidArgument when `leader` holds no copy
  // of p.
  Result<PartitionMap> FailOver(PartitionId p, const PodName& leader) const;
  // The same for several partitions in one map (one change, one epoch).
  Result<PartitionMap> FailOver(const std::vector<std::pair<PartitionId, PodName>>& leaders) const;

  // Returns a copy with one partition's fields replaced (same epoch); for recording end offsets.
  // `known`: the end is the one a seal was answered with once a quorum of the copies held it
  // (PartitionInfo::end_known).
  Result<PartitionMap> WithEndOffset(PartitionId p, uint64_t end_offset, bool known = true) const;
  // Returns a copy with partition p's followers replaced (same epoch; validated): for a
  // coordinator that places replicas on a change's target map before it is carried out.
  Result<PartitionMap> WithReplicas(PartitionId p, std::vector<PodName> replicas) const;
  // A copy in which partition `p`'s copies added after it was made are `joined` (a subset of its
  // replicas; PartitionInfo::joined). WithReplicas keeps those that stay among the replicas.
  Result<PartitionMap> WithJoined(PartitionId p, std::vector<JoinedCopy> joined) const;
  // Returns a copy without the named sealed partition (retired once every group consumed it).
  Result<PartitionMap> WithoutRetired(PartitionId p) const;

  PartitionId NextId() const;

  // Peers: the addresses of the pods that own partitions, so sidecars can forward and hand over.
  const std::map<std::string, PeerAddress>& peers() const { return peers_; }
  const PeerAddress* Peer(const PodName& pod) const {
    auto it = peers_.find(pod.value());
    return it == peers_.end() ? nullptr : &it->second;
  }
  // A copy with the pod's address set (same epoch).
  PartitionMap WithPeer(const PodName& pod, PeerAddress address) const;
  // A copy without the pod's address (same epoch): the pod is leaving and owns nothing.
  PartitionMap WithoutPeer(const PodName& pod) const;
  // A copy at another epoch (used when a planner composes several steps into one change, or
  // moves a change not yet carried out past a refused epoch): the partitions this map's change
  // made are born at the new epoch.
  PartitionMap WithEpoch(Epoch epoch) const;
  // The map of a change of epoch `change` carried on at this map's (later) epoch, as a failover
  // composed into that change makes it: the partitions the change made are born at this epoch
  // (no pod held them before it), except those a failover gave a new leader (their copies may
  // hold events of the change's first leader).
  PartitionMap CarryingChange(Epoch change) const;
  // The same map issued again at a later epoch (a coordinator that re-installs the map the
  // sidecars hold over a change that lost): every partition keeps its birth.
  PartitionMap Reissued(Epoch epoch) const;

  std::string ToJson() const;
  static Result<PartitionMap> FromJson(std::string_view json);

 private:
  // ToJson's text, with every end offset written as 0 when `with_ends` is false (Digest's input).
  std::string Serialize(bool with_ends) const;

 public:

  bool operator==(const PartitionMap& o) const {
    return topic_ == o.topic_ && epoch_ == o.epoch_ && partitions_ == o.partitions_ &&
           peers_ == o.peers_;
  }

 private:
  friend class MapChange;
  void BuildIndex();
  // The next map: same topic and peers, epoch + 1, these partitions.
  PartitionMap Next(std::vector<PartitionInfo> partitions) const;

  std::string topic_;
  Epoch epoch_{0};
  std::vector<PartitionInfo> partitions_;
  std::map<std::string, PeerAddress> peers_;
  // Routing index over the active partitions, sorted by range start.
  std::vector<uint32_t> active_lo_;
  std::vector<uint32_t> active_index_;
  // Route's table: entry p (p < 2^16) is the index into active_lo_ of the active partition that
  // owns hash point p << 16; entry 2^16 is the one that owns 2^32 - 1, so [entry p, entry p + 1]
  // holds every candidate for the slice p. 256 KiB that never changes once built: copies of the
  // map share it instead of copying it.
  static constexpr int kPrefixShift = 16;
  std::shared_ptr<const std::vector<uint32_t>> prefix_index_;
};

// MapChange composes several seal-and-succeed changes into one new map at epoch + 1: one change,
// one epoch, however many partitions it touches (a surge is answered by one change to the needed
// count, not by 1->2->4->8). Each base partition is changed at most once and only if it is active
// in the base; successors get fresh ids. Build() costs one copy of the partition list and one
// index build, so a planner can compose thousands of splits at 10,000 partitions.
// Refers to its base map, which must outlive it; not synchronized.
class MapChange {
 public:
  explicit MapChange(const PartitionMap& base);

  // Splits p at the given points (strictly increasing, strictly inside its range) into
  // cuts.size() + 1 successors on p's owner.
  Status Split(PartitionId p, const std::vector<uint64_t>& cuts);
  // Merges adjacent a and b into one successor on a's owner (the lower range's owner).
  Status Merge(PartitionId a, PartitionId b) { return MergeRun({a, b}); }
  // Merges a run of two or more adjacent partitions, given in hash order, into one successor on
  // the first one's owner.
  Status MergeRun(const std::vector<PartitionId>& run);
  // Moves p to pod `to`: a successor with the same range on `to`.
  Status Move(PartitionId p, const PodName& to);
  // Drops a sealed partition whose events every group has consumed.
  Status Retire(PartitionId p);

  bool empty() const { return touched_.empty(); }
  size_t size() const { return touched_.size(); }
  // The composed map at base epoch + 1, validated.
  Result<PartitionMap> Build() const;

 private:
  Result<PartitionInfo*> TakeActive(PartitionId id);

  const PartitionMap& base_;
  std::vector<PartitionInfo> parts_;  // base partitions (sorted by id), then successors
  std::vector<uint32_t> retired_;
  std::unordered_set<uint32_t> touched_;
  uint32_t next_id_;
};

}  // namespace shoal
