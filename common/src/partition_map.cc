#include "shoal/common/partition_map.h"

#include <simdjson.h>

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "shoal/common/json.h"

namespace shoal {

std::string_view ToString(PartitionState s) {
  return s == PartitionState::kActive ? "active" : "sealed";
}

PartitionMap::PartitionMap(std::string topic, Epoch epoch, std::vector<PartitionInfo> partitions)
    : topic_(std::move(topic)), epoch_(epoch), partitions_(std::move(partitions)) {
  std::sort(partitions_.begin(), partitions_.end(),
            [](const PartitionInfo& a, const PartitionInfo& b) { return a.id < b.id; });
  BuildIndex();
}

namespace {
// Sets `born` to `epoch` on the partitions with ids from `first_new` on: the ones a change made.
void MarkBorn(std::vector<PartitionInfo>& parts, PartitionId first_new, Epoch epoch) {
  for (auto& p : parts) {
    if (p.id >= first_new) p.born = epoch;
  }
}
}  // namespace

Result<PartitionMap> PartitionMap::Initial(std::string topic, uint32_t count, PodName owner) {
  if (count == 0) return Status::InvalidArgument("a topic needs at least 1 partition");
  if (count > 65536) return Status::InvalidArgument("at most 65536 partitions");
  std::vector<PartitionInfo> parts;
  parts.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    PartitionInfo p;
    p.id = PartitionId(i);
    p.range = {kHashSpace * i / count, kHashSpace * (i + 1) / count};
    p.owner = owner;
    p.born = Epoch(1);
    parts.push_back(std::move(p));
  }
  return PartitionMap(std::move(topic), Epoch(1), std::move(parts));
}

Result<PartitionMap> PartitionMap::Initial(std::string topic, uint32_t count,
                                           const std::vector<PodName>& owners) {
  if (owners.empty()) return Status::InvalidArgument("a topic needs at least one owner pod");
  auto m = Initial(std::move(topic), count, owners[0]);
  if (!m.ok()) return m.status();
  for (size_t i = 0; i < m->partitions_.size(); ++i) {
    m->partitions_[i].owner = owners[i % owners.size()];
  }
  return m;
}

void PartitionMap::BuildIndex() {
  std::vector<uint32_t> idx;
  for (uint32_t i = 0; i < partitions_.size(); ++i) {
    if (partitions_[i].active()) idx.push_back(i);
  }
  std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
    return partitions_[a].range.lo < partitions_[b].range.lo;
  });
  active_index_ = idx;
  active_lo_.clear();
  for (uint32_t i : idx) active_lo_.push_back(static_cast<uint32_t>(partitions_[i].range.lo));

  // Route's slice table. A map without active partitions cannot route (it is not valid), so it
  // gets no table; the others get the answer of the plain search at each slice start.
  if (active_lo_.empty()) {
    prefix_index_.reset();
    return;
  }
  constexpr uint32_t kSlices = uint32_t{1} << (32 - kPrefixShift);
  auto table = std::make_shared<std::vector<uint32_t>>(kSlices + 1);
  // One pass: the owner of each slice start only moves forward. Like Route's search, it is the
  // last start <= the point, or index 0 when there is none (never the case in a valid map).
  uint32_t owner = 0;
  for (uint32_t p = 0; p < kSlices; ++p) {
    const uint32_t start = p << kPrefixShift;
    while (owner + 1 < active_lo_.size() && active_lo_[owner + 1] <= start) ++owner;
    (*table)[p] = owner;
  }
  (*table)[kSlices] = static_cast<uint32_t>(active_lo_.size() - 1);  // every start is <= 2^32 - 1
  prefix_index_ = std::move(table);
}

Status PartitionMap::Validate() const {
  if (topic_.empty()) return Status::InvalidArgument("map has no topic");
  if (topic_.size() > kMaxNameBytes) return Status::InvalidArgument("the topic name is too long");
  if (partitions_.size() > kMaxMapPartitions) {
    return Status::InvalidArgument("the map lists " + std::to_string(partitions_.size()) +
                                   " partitions; at most " + std::to_string(kMaxMapPartitions));
  }
  if (peers_.size() > kMaxMapPeers) {
    return Status::InvalidArgument("the map lists " + std::to_string(peers_.size()) +
                                   " peers; at most " + std::to_string(kMaxMapPeers));
  }
  for (const auto& [pod, addr] : peers_) {
    if (pod.empty() || pod.size() > kMaxNameBytes || addr.data.size() > kMaxNameBytes ||
        addr.admin.size() > kMaxNameBytes) {
      return Status::InvalidArgument("a peer's name or address is empty or too long");
    }
  }
  // partitions_ is sorted by id: a repeat is a neighbour.
  for (size_t i = 0; i < partitions_.size(); ++i) {
    const auto& p = partitions_[i];
    if (i > 0 && partitions_[i - 1].id == p.id) {
      return Status::InvalidArgument("duplicate partition id " + std::to_string(p.id.value()));
    }
    if (p.id.value() > kMaxPartitionId) {
      return Status::InvalidArgument("partition id " + std::to_string(p.id.value()) +
                                     " is out of range; ids are at most " +
                                     std::to_string(kMaxPartitionId));
    }
    if (p.range.lo >= p.range.hi || p.range.hi > kHashSpace) {
      return Status::InvalidArgument("partition " + std::to_string(p.id.value()) +
                                     " has an empty or out-of-space range");
    }
    if (p.owner.value().empty() || p.owner.value().size() > kMaxNameBytes) {
      return Status::InvalidArgument("partition " + std::to_string(p.id.value()) +
                                     " has an empty or too long owner name");
    }
    if (p.parents.size() > kMaxParents) {
      return Status::InvalidArgument("partition " + std::to_string(p.id.value()) +
                                     " has too many parents");
    }
    if (p.replicas.size() > kMaxFollowers) {
      return Status::InvalidArgument("partition " + std::to_string(p.id.value()) +
                                     " has more than " + std::to_string(kMaxFollowers) +
                                     " followers");
    }
    for (size_t r = 0; r < p.replicas.size(); ++r) {
      const auto& name = p.replicas[r].value();
      if (name.empty() || name.size() > kMaxNameBytes) {
        return Status::InvalidArgument("partition " + std::to_string(p.id.value()) +
                                       " has a follower with an empty or too long name");
      }
      if (p.replicas[r] == p.owner ||
          std::find(p.replicas.begin(), p.replicas.begin() + r, p.replicas[r]) !=
              p.replicas.begin() + r) {
        return Status::InvalidArgument("partition " + std::to_string(p.id.value()) +
                                       " names pod " + name +
                                       " twice among its replicas; each copy is on its own pod");
      }
    }
    for (size_t j = 0; j < p.joined.size(); ++j) {
      const PodName& pod = p.joined[j].pod;
      const bool twice = std::any_of(p.joined.begin(), p.joined.begin() + j,
                                     [&](const JoinedCopy& o) { return o.pod == pod; });
      if (!p.FollowedBy(pod) || twice || p.joined[j].at.value() == 0 || p.joined[j].at > epoch_) {
        return Status::InvalidArgument("partition " + std::to_string(p.id.value()) + " names pod " +
                                       pod.value() +
                                       " as joined, which is not one of its followers, is named "
                                       "twice or was added at no epoch up to the map's");
      }
    }
    if (p.lost && p.active()) {
      return Status::InvalidArgument("partition " + std::to_string(p.id.value()) +
                                     " is lost and active; a lost partition is sealed");
    }
  }
  for (const auto& p : partitions_) {
    for (auto parent : p.parents) {
      if (parent == p.id) return Status::InvalidArgument("a partition cannot be its own parent");
      // A retired parent has left the map (every group it knew consumed it); one still listed
      // must be sealed: only a sealed partition has successors.
      const PartitionInfo* pi = Find(parent);
      if (pi && pi->active()) {
        return Status::InvalidArgument("partition " + std::to_string(p.id.value()) +
                                       " has parent " + std::to_string(parent.value()) +
                                       ", which is active");
      }
    }
  }
  // Invariant 1, Cover: active ranges, sorted by start, tile [0, 2^32) with no gap or overlap.
  uint64_t next = 0;
  for (uint32_t i : active_index_) {
    const auto& r = partitions_[i].range;
    if (r.lo != next) {
      return Status::InvalidArgument(
          next < r.lo ? "active partitions leave a gap at hash " + std::to_string(next)
                      : "active partitions overlap at hash " + std::to_string(r.lo));
    }
    next = r.hi;
  }
  if (next != kHashSpace) {
    return Status::InvalidArgument("active partitions leave a gap at hash " + std::to_string(next));
  }
  return Status::Ok();
}

const PartitionInfo* PartitionMap::Find(PartitionId id) const {
  auto it = std::lower_bound(partitions_.begin(), partitions_.end(), id,
                             [](const PartitionInfo& p, PartitionId v) { return p.id < v; });
  return (it != partitions_.end() && it->id == id) ? &*it : nullptr;
}

PartitionId PartitionMap::NextId() const {
  // Sorted by id; a valid map's largest id is at most kMaxPartitionId, so this cannot wrap.
  return PartitionId(partitions_.empty() ? 0 : partitions_.back().id.value() + 1);
}

std::vector<const PartitionInfo*> PartitionMap::SuccessorsOf(PartitionId id) const {
  std::vector<const PartitionInfo*> out;
  for (const auto& p : partitions_) {
    if (std::find(p.parents.begin(), p.parents.end(), id) != p.parents.end()) out.push_back(&p);
  }
  return out;
}

std::string PartitionMap::Digest() const {
  // FNV-1a, 64 bits: a name for a change that two coordinators would compute alike, not a
  // defence against forgery (the admin plane's token is that).
  const std::string text = Serialize(/*with_ends=*/false);
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = kHex[h & 15];
  return out;
}

namespace {
Result<const PartitionInfo*> FindActive(const PartitionMap& m, PartitionId id) {
  const PartitionInfo* p = m.Find(id);
  if (!p) return Status::NotFound("no partition " + std::to_string(id.value()));
  if (!p->active()) {
    return Status::FailedPrecondition("partition " + std::to_string(id.value()) + " is sealed");
  }
  return p;
}
}  // namespace

Result<PartitionMap> PartitionMap::Split(PartitionId id, uint64_t at) const {
  auto found = FindActive(*this, id);
  if (!found.ok()) return found.status();
  const PartitionInfo parent = **found;
  if (at <= parent.range.lo || at >= parent.range.hi) {
    return Status::InvalidArgument("split point " + std::to_string(at) + " is not inside [" +
                                   std::to_string(parent.range.lo) + ", " +
                                   std::to_string(parent.range.hi) + ")");
  }
  std::vector<PartitionInfo> parts = partitions_;
  PartitionId next = NextId();
  for (auto& p : parts) {
    if (p.id == id) p.state = PartitionState::kSealed;
  }
  PartitionInfo left{
      .id = next, .range = {parent.range.lo, at}, .owner = parent.owner, .parents = {id}};
  PartitionInfo right{.id = PartitionId(next.value() + 1),
                      .range = {at, parent.range.hi},
                      .owner = parent.owner,
                      .parents = {id}};
  parts.push_back(std::move(left));
  parts.push_back(std::move(right));
  return Next(std::move(parts));
}

Result<PartitionMap> PartitionMap::Merge(PartitionId a, PartitionId b) const {
  auto fa = FindActive(*this, a);
  if (!fa.ok()) return fa.status();
  auto fb = FindActive(*this, b);
  if (!fb.ok()) return fb.status();
  const PartitionInfo* pa = *fa;
  const PartitionInfo* pb = *fb;
  if (pa->range.lo > pb->range.lo) std::swap(pa, pb);
  if (pa->range.hi != pb->range.lo) {
    return Status::InvalidArgument("partitions " + std::to_string(a.value()) + " and " +
                                   std::to_string(b.value()) + " are not adjacent");
  }
  PartitionInfo merged{.id = NextId(),
                       .range = {pa->range.lo, pb->range.hi},
                       .owner = pa->owner,
                       .parents = {pa->id, pb->id}};
  std::vector<PartitionInfo> parts = partitions_;
  for (auto& p : parts) {
    if (p.id == a || p.id == b) p.state = PartitionState::kSealed;
  }
  parts.push_back(std::move(merged));
  return Next(std::move(parts));
}

Result<PartitionMap> PartitionMap::Move(PartitionId id, const PodName& to) const {
  auto found = FindActive(*this, id);
  if (!found.ok()) return found.status();
  if ((*found)->owner == to) {
    return Status::InvalidArgument("partition " + std::to_string(id.value()) + " is already on " +
                                   to.value());
  }
  PartitionInfo successor{.id = NextId(), .range = (*found)->range, .owner = to, .parents = {id}};
  std::vector<PartitionInfo> parts = partitions_;
  for (auto& p : parts) {
    if (p.id == id) p.state = PartitionState::kSealed;
  }
  parts.push_back(std::move(successor));
  return Next(std::move(parts));
}

Result<PartitionMap> PartitionMap::DeclareLost(const PodName& pod, bool in_change) const {
  std::vector<PartitionInfo> parts = partitions_;
  std::vector<PartitionInfo> successors;
  uint32_t next = NextId().value();
  bool any = false;
  for (auto& p : parts) {
    if (p.owner != pod || p.lost) continue;
    // A partition with copies is not lost: a failover gives it to one of them (a sealed one
    // too: its seal's end is held by a quorum of its copies).
    if (!p.replicas.empty()) continue;
    any = true;
    if (p.active()) {
      successors.push_back({.id = PartitionId(next++), .range = p.range, .owner = pod,
                            .parents = {p.id}});
    }
    p.state = PartitionState::kSealed;
    p.lost = true;
  }
  if (!any) {
    return Status::InvalidArgument("pod " + pod.value() + " owns no partition that is not lost");
  }
  for (auto& s : successors) parts.push_back(std::move(s));
  PartitionMap out = Next(std::move(parts));
  if (in_change) {
    for (auto& p : out.partitions_) {
      if (p.born == epoch_) p.born = out.epoch_;
    }
  }
  return out;
}

PartitionMap PartitionMap::Next(std::vector<PartitionInfo> partitions) const {
  MarkBorn(partitions, NextId(), Epoch(epoch_.value() + 1));
  PartitionMap m(topic_, Epoch(epoch_.value() + 1), std::move(partitions));
  m.peers_ = peers_;
  return m;
}

Result<PartitionMap> PartitionMap::FailOver(PartitionId id, const PodName& leader) const {
  return FailOver(std::vector<std::pair<PartitionId, PodName>>{{id, leader}});
}

Result<PartitionMap> PartitionMap::FailOver(
    const std::vector<std::pair<PartitionId, PodName>>& leaders) const {
  std::vector<PartitionInfo> parts = partitions_;
  for (const auto& [id, leader] : leaders) {
    const PartitionInfo* p = Find(id);
    if (!p) return Status::NotFound("no partition " + std::to_string(id.value()));
    PartitionInfo& q = parts[IndexOf(*p)];
    if (leader == q.owner && !q.replicas.empty()) {
      // The old leader, fenced with its copies, was the most complete: it leads again from a
      // new leader epoch, its copies following it.
      q.leader_epoch = Epoch(epoch_.value() + 1);
      continue;
    }
    if (!p->FollowedBy(leader)) {
      return Status::InvalidArgument(leader.value() + " does not follow partition " +
                                     std::to_string(id.value()) + "; only a copy can lead it");
    }
    std::vector<PodName> followers;
    for (const auto& r : q.replicas) {
      if (r != leader) followers.push_back(r);
    }
    followers.push_back(q.owner);
    q.owner = leader;
    q.replicas = std::move(followers);
    std::erase_if(q.joined, [&q](const JoinedCopy& j) { return j.pod == q.owner; });  // leads
    q.leader_epoch = Epoch(epoch_.value() + 1);
  }
  PartitionMap next = Next(std::move(parts));
  SHOAL_RETURN_IF_ERROR(next.Validate());
  return next;
}

Result<PartitionMap> PartitionMap::WithReplicas(PartitionId p, std::vector<PodName> replicas) const {
  auto it = std::lower_bound(partitions_.begin(), partitions_.end(), p,
                             [](const PartitionInfo& a, PartitionId id) { return a.id < id; });
  if (it == partitions_.end() || it->id != p) {
    return Status::NotFound("no partition " + std::to_string(p.value()));
  }
  PartitionMap out = *this;
  PartitionInfo& q = out.partitions_[static_cast<size_t>(it - partitions_.begin())];
  q.replicas = std::move(replicas);
  std::erase_if(q.joined, [&](const JoinedCopy& j) { return !q.FollowedBy(j.pod); });
  SHOAL_RETURN_IF_ERROR(out.Validate());
  return out;
}

Result<PartitionMap> PartitionMap::WithJoined(PartitionId p, std::vector<JoinedCopy> joined) const {
  const PartitionInfo* info = Find(p);
  if (!info) return Status::NotFound("no partition " + std::to_string(p.value()));
  PartitionMap out = *this;
  out.partitions_[IndexOf(*info)].joined = std::move(joined);
  SHOAL_RETURN_IF_ERROR(out.Validate());
  return out;
}

PartitionMap PartitionMap::WithPeer(const PodName& pod, PeerAddress address) const {
  PartitionMap m = *this;
  m.peers_[pod.value()] = std::move(address);
  return m;
}

PartitionMap PartitionMap::WithoutPeer(const PodName& pod) const {
  PartitionMap m = *this;
  m.peers_.erase(pod.value());
  return m;
}

PartitionMap PartitionMap::Reissued(Epoch epoch) const {
  PartitionMap m = *this;
  m.epoch_ = epoch;
  return m;
}

PartitionMap PartitionMap::CarryingChange(Epoch change) const {
  PartitionMap m = *this;
  for (auto& p : m.partitions_) {
    if (p.born == change && p.leader_epoch.value() == 0) p.born = epoch_;
  }
  return m;
}

PartitionMap PartitionMap::WithEpoch(Epoch epoch) const {
  PartitionMap m = *this;
  for (auto& p : m.partitions_) {
    if (p.born == epoch_) p.born = epoch;  // made by the change this map is
    if (p.leader_epoch == epoch_) p.leader_epoch = epoch;  // led from the change this map is
    for (auto& j : p.joined) {
      if (j.at == epoch_) j.at = epoch;  // added by the change this map is
    }
  }
  m.epoch_ = epoch;
  return m;
}

Result<PartitionMap> PartitionMap::WithEndOffset(PartitionId id, uint64_t end_offset,
                                                 bool known) const {
  PartitionMap copy = *this;
  for (auto& p : copy.partitions_) {
    if (p.id == id) {
      if (p.active()) return Status::FailedPrecondition("an active partition has no end offset");
      p.end_offset = end_offset;
      p.end_known = known;
      return copy;
    }
  }
  return Status::NotFound("no partition " + std::to_string(id.value()));
}

Result<PartitionMap> PartitionMap::WithoutRetired(PartitionId id) const {
  std::vector<PartitionInfo> parts;
  bool found = false;
  for (const auto& p : partitions_) {
    if (p.id == id) {
      if (p.active()) return Status::FailedPrecondition("an active partition cannot be retired");
      found = true;
      continue;
    }
    parts.push_back(p);
  }
  if (!found) return Status::NotFound("no partition " + std::to_string(id.value()));
  PartitionMap m(topic_, epoch_, std::move(parts));
  m.peers_ = peers_;
  return m;
}

void AppendPartitionFields(std::string& out, const PartitionInfo& p) {
  out += "\"id\":";
  json::AppendUint(out, p.id.value());
  out += ",\"lo\":";
  json::AppendUint(out, p.range.lo);
  out += ",\"hi\":";
  json::AppendUint(out, p.range.hi);
  out += ",\"state\":\"";
  out += ToString(p.state);
  out += "\",\"owner\":";
  json::AppendString(out, p.owner.value());
  out += ",\"parents\":[";
  for (size_t i = 0; i < p.parents.size(); ++i) {
    if (i) out += ',';
    json::AppendUint(out, p.parents[i].value());
  }
  out += ']';
  if (p.born.value() > 0) {
    out += ",\"born\":";
    json::AppendUint(out, p.born.value());
  }
  if (p.lost) out += ",\"lost\":true";
  // A list of pods, left out when empty.
  const auto append_pods = [&out](std::string_view key, const std::vector<PodName>& pods) {
    if (pods.empty()) return;
    out += ",\"";
    out += key;
    out += "\":[";
    for (size_t i = 0; i < pods.size(); ++i) {
      if (i) out += ',';
      json::AppendString(out, pods[i].value());
    }
    out += ']';
  };
  append_pods("replicas", p.replicas);
  if (!p.joined.empty()) {
    out += ",\"joined\":[";
    for (size_t i = 0; i < p.joined.size(); ++i) {
      out += i ? ",{\"pod\":" : "{\"pod\":";
      json::AppendString(out, p.joined[i].pod.value());
      out += ",\"epoch\":";
      json::AppendUint(out, p.joined[i].at.value());
      out += '}';
    }
    out += ']';
  }
  if (p.leader_epoch.value() > 0) {
    out += ",\"leader_epoch\":";
    json::AppendUint(out, p.leader_epoch.value());
  }
}

std::string PartitionMap::ToJson() const { return Serialize(/*with_ends=*/true); }

std::string PartitionMap::Serialize(bool with_ends) const {
  std::string out = "{\"topic\":";
  json::AppendString(out, topic_);
  out += ",\"epoch\":";
  json::AppendUint(out, epoch_.value());
  out += ",\"partitions\":[";
  bool first = true;
  for (const auto& p : partitions_) {
    if (!first) out += ',';
    first = false;
    out += '{';
    AppendPartitionFields(out, p);
    out += ",\"end_offset\":";
    json::AppendUint(out, with_ends ? p.end_offset : 0);
    if (with_ends && p.end_known) out += ",\"end_known\":true";
    out += '}';
  }
  out += "],\"peers\":{";
  bool first_peer = true;
  for (const auto& [pod, addr] : peers_) {
    if (!first_peer) out += ',';
    first_peer = false;
    json::AppendString(out, pod);
    out += ":{\"data\":";
    json::AppendString(out, addr.data);
    out += ",\"admin\":";
    json::AppendString(out, addr.admin);
    out += '}';
  }
  out += "}}";
  return out;
}

Result<PartitionMap> PartitionMap::FromJson(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element doc;
  if (auto err = parser.parse(padded).get(doc); err) {
    return Status::InvalidArgument(std::string("partition map is not JSON: ") +
                                   simdjson::error_message(err));
  }
  std::string_view topic;
  uint64_t epoch = 0;
  simdjson::dom::array parts;
  if (doc["topic"].get(topic) || doc["epoch"].get(epoch) || doc["partitions"].get(parts)) {
    return Status::InvalidArgument("partition map needs topic, epoch and partitions");
  }
  if (parts.size() > kMaxMapPartitions) {
    return Status::InvalidArgument("the map lists more than " + std::to_string(kMaxMapPartitions) +
                                   " partitions");
  }
  std::vector<PartitionInfo> out;
  out.reserve(parts.size());
  for (auto el : parts) {
    PartitionInfo p;
    uint64_t id = 0, end = 0;
    std::string_view state, owner;
    simdjson::dom::array parents;
    if (el["id"].get(id) || el["lo"].get(p.range.lo) || el["hi"].get(p.range.hi) ||
        el["state"].get(state) || el["owner"].get(owner) || el["parents"].get(parents)) {
      return Status::InvalidArgument("partition entry needs id, lo, hi, state, owner, parents");
    }
    if (id > kMaxPartitionId) {
      return Status::InvalidArgument("partition id " + std::to_string(id) +
                                     " is out of range; ids are at most " +
                                     std::to_string(kMaxPartitionId));
    }
    if (parents.size() > kMaxParents) {
      return Status::InvalidArgument("partition " + std::to_string(id) + " has too many parents");
    }
    if (el["end_offset"].get(end) == simdjson::SUCCESS) p.end_offset = end;
    bool end_known = false;
    if (el["end_known"].get(end_known) == simdjson::SUCCESS) p.end_known = end_known;
    bool lost = false;
    if (el["lost"].get(lost) == simdjson::SUCCESS) p.lost = lost;
    uint64_t born = 0;
    if (el["born"].get(born) == simdjson::SUCCESS) p.born = Epoch(born);
    uint64_t leader_epoch = 0;
    if (el["leader_epoch"].get(leader_epoch) == simdjson::SUCCESS) {
      p.leader_epoch = Epoch(leader_epoch);
    }
    simdjson::dom::array replicas;
    if (el["replicas"].get(replicas) == simdjson::SUCCESS) {
      if (replicas.size() > kMaxFollowers) {
        return Status::InvalidArgument("partition " + std::to_string(id) + " lists " +
                                       std::to_string(replicas.size()) +
                                       " followers; at most " + std::to_string(kMaxFollowers));
      }
      for (auto r : replicas) {
        std::string_view name;
        if (r.get(name)) return Status::InvalidArgument("a follower's name must be a string");
        p.replicas.push_back(PodName(std::string(name)));
      }
    }
    simdjson::dom::array joined;
    if (el["joined"].get(joined) == simdjson::SUCCESS) {
      if (joined.size() > kMaxFollowers) {
        return Status::InvalidArgument(
            "partition " + std::to_string(id) + " lists " + std::to_string(joined.size()) +
            " joined followers; at most " + std::to_string(kMaxFollowers));
      }
      for (auto j : joined) {
        std::string_view name;
        uint64_t at = 0;
        if (j["pod"].get(name) || j["epoch"].get(at)) {
          return Status::InvalidArgument(
              "a joined follower is {\"pod\": its name, \"epoch\": the epoch that added it}");
        }
        p.joined.push_back({PodName(std::string(name)), Epoch(at)});
      }
    }
    p.id = PartitionId(static_cast<uint32_t>(id));
    if (state == "active") {
      p.state = PartitionState::kActive;
    } else if (state == "sealed") {
      p.state = PartitionState::kSealed;
    } else {
      return Status::InvalidArgument("partition state must be active or sealed");
    }
    p.owner = PodName(std::string(owner));
    for (auto parent : parents) {
      uint64_t v = 0;
      if (parent.get(v) || v > kMaxPartitionId) return Status::InvalidArgument("bad parent id");
      p.parents.push_back(PartitionId(static_cast<uint32_t>(v)));
    }
    out.push_back(std::move(p));
  }
  PartitionMap map(std::string(topic), Epoch(epoch), std::move(out));
  simdjson::dom::object peers;
  if (doc["peers"].get(peers) == simdjson::SUCCESS) {
    for (auto field : peers) {
      std::string_view data, admin;
      if (field.value["data"].get(data) || field.value["admin"].get(admin)) {
        return Status::InvalidArgument("peer entry needs data and admin addresses");
      }
      map.peers_[std::string(field.key)] = {std::string(data), std::string(admin)};
    }
  }
  SHOAL_RETURN_IF_ERROR(map.Validate());
  return map;
}

}  // namespace shoal

namespace shoal {

MapChange::MapChange(const PartitionMap& base)
    : base_(base), parts_(base.partitions()), next_id_(base.NextId().value()) {}

Result<PartitionInfo*> MapChange::TakeActive(PartitionId id) {
  // Base partitions are sorted by id and come first; successors are never changed again.
  const size_t n = base_.partitions().size();
  auto it = std::lower_bound(parts_.begin(), parts_.begin() + n, id,
                             [](const PartitionInfo& p, PartitionId v) { return p.id < v; });
  if (it == parts_.begin() + n || it->id != id) {
    return Status::NotFound("no partition " + std::to_string(id.value()));
  }
  if (touched_.count(id.value())) {
    return Status::FailedPrecondition("partition " + std::to_string(id.value()) +
                                      " is already changed by this change");
  }
  if (!it->active()) {
    return Status::FailedPrecondition("partition " + std::to_string(id.value()) + " is sealed");
  }
  touched_.insert(id.value());
  return &*it;
}

Status MapChange::Split(PartitionId id, const std::vector<uint64_t>& cuts) {
  if (cuts.empty()) return Status::InvalidArgument("a split needs at least one point");
  const PartitionInfo* found = base_.Find(id);
  if (!found) return Status::NotFound("no partition " + std::to_string(id.value()));
  uint64_t prev = found->range.lo;
  for (uint64_t c : cuts) {
    if (c <= prev || c >= found->range.hi) {
      return Status::InvalidArgument("split points of partition " + std::to_string(id.value()) +
                                     " must increase strictly inside [" +
                                     std::to_string(found->range.lo) + ", " +
                                     std::to_string(found->range.hi) + ")");
    }
    prev = c;
  }
  auto taken = TakeActive(id);
  if (!taken.ok()) return taken.status();
  PartitionInfo* p = *taken;
  p->state = PartitionState::kSealed;
  const HashRange range = p->range;
  const PodName owner = p->owner;
  uint64_t lo = range.lo;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const uint64_t hi = i < cuts.size() ? cuts[i] : range.hi;
    parts_.push_back(PartitionInfo{
        .id = PartitionId(next_id_++), .range = {lo, hi}, .owner = owner, .parents = {id}});
    lo = hi;
  }
  return Status::Ok();
}

Status MapChange::MergeRun(const std::vector<PartitionId>& run) {
  if (run.size() < 2) return Status::InvalidArgument("a merge needs two or more partitions");
  std::vector<const PartitionInfo*> found;
  for (PartitionId id : run) {
    const PartitionInfo* p = base_.Find(id);
    if (!p) return Status::NotFound("no partition " + std::to_string(id.value()));
    found.push_back(p);
  }
  std::sort(found.begin(), found.end(), [](const PartitionInfo* x, const PartitionInfo* y) {
    return x->range.lo < y->range.lo;
  });
  for (size_t i = 1; i < found.size(); ++i) {
    if (found[i - 1]->range.hi != found[i]->range.lo) {
      return Status::InvalidArgument("partitions " + std::to_string(found[i - 1]->id.value()) +
                                     " and " + std::to_string(found[i]->id.value()) +
                                     " are not adjacent");
    }
  }
  std::vector<PartitionId> parents;
  for (const PartitionInfo* p : found) {
    auto taken = TakeActive(p->id);
    if (!taken.ok()) {
      for (PartitionId done : parents) {
        touched_.erase(done.value());
        auto it = std::lower_bound(parts_.begin(), parts_.begin() + base_.partitions().size(), done,
                                   [](const PartitionInfo& x, PartitionId v) { return x.id < v; });
        it->state = PartitionState::kActive;
      }
      return taken.status();
    }
    (*taken)->state = PartitionState::kSealed;
    parents.push_back(p->id);
  }
  parts_.push_back(PartitionInfo{.id = PartitionId(next_id_++),
                                 .range = {found.front()->range.lo, found.back()->range.hi},
                                 .owner = found.front()->owner,
                                 .parents = std::move(parents)});
  return Status::Ok();
}

Status MapChange::Move(PartitionId id, const PodName& to) {
  const PartitionInfo* found = base_.Find(id);
  if (found && found->owner == to) {
    return Status::InvalidArgument("partition " + std::to_string(id.value()) + " is already on " +
                                   to.value());
  }
  auto taken = TakeActive(id);
  if (!taken.ok()) return taken.status();
  (*taken)->state = PartitionState::kSealed;
  parts_.push_back(PartitionInfo{
      .id = PartitionId(next_id_++), .range = (*taken)->range, .owner = to, .parents = {id}});
  return Status::Ok();
}

Status MapChange::Retire(PartitionId id) {
  const PartitionInfo* found = base_.Find(id);
  if (!found) return Status::NotFound("no partition " + std::to_string(id.value()));
  if (found->active()) {
    return Status::FailedPrecondition("partition " + std::to_string(id.value()) +
                                      " is active; only sealed partitions retire");
  }
  if (!touched_.insert(id.value()).second) {
    return Status::FailedPrecondition("partition " + std::to_string(id.value()) +
                                      " is already changed by this change");
  }
  retired_.push_back(id.value());
  return Status::Ok();
}

Result<PartitionMap> MapChange::Build() const {
  std::vector<PartitionInfo> parts;
  parts.reserve(parts_.size());
  std::unordered_set<uint32_t> retired(retired_.begin(), retired_.end());
  for (const auto& p : parts_) {
    if (!retired.count(p.id.value())) parts.push_back(p);
  }
  MarkBorn(parts, base_.NextId(), Epoch(base_.epoch().value() + 1));
  PartitionMap next(base_.topic(), Epoch(base_.epoch().value() + 1), std::move(parts));
  next.peers_ = base_.peers();
  SHOAL_RETURN_IF_ERROR(next.Validate());
  return next;
}

}  // namespace shoal
