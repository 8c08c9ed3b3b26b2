#include "shoal/control/admin_partitions.h"

#include <simdjson.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace shoal::control {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

Status Bad(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(where + ": " + what);
}

// Looks up a required field of `obj`.
Status Field(const object& obj, std::string_view key, const std::string& where, element* out) {
  if (obj[key].get(*out)) return Bad(where, "missing field \"" + std::string(key) + "\"");
  return Status::Ok();
}

Status Uint(const object& obj, std::string_view key, const std::string& where, uint64_t* out) {
  element e;
  SHOAL_RETURN_IF_ERROR(Field(obj, key, where, &e));
  if (e.get(*out)) {
    return Bad(where, "\"" + std::string(key) + "\" must be a non-negative integer");
  }
  return Status::Ok();
}

Status ParsePartition(const element& el, const std::string& where, AdminPartition* p) {
  object obj;
  if (el.get(obj)) return Bad(where, "must be an object");
  uint64_t v = 0;
  SHOAL_RETURN_IF_ERROR(Uint(obj, "id", where, &v));
  if (v > std::numeric_limits<uint32_t>::max()) return Bad(where, "\"id\" is out of range");
  p->id = PartitionId(static_cast<uint32_t>(v));
  const std::string at = where + " (partition " + std::to_string(v) + ")";

  element e;
  std::string_view state;
  SHOAL_RETURN_IF_ERROR(Field(obj, "state", at, &e));
  if (e.get(state)) return Bad(at, "\"state\" must be a string");
  if (state == "active") {
    p->state = PartitionState::kActive;
  } else if (state == "sealed") {
    p->state = PartitionState::kSealed;
  } else {
    return Bad(at,
               "\"state\" must be \"active\" or \"sealed\", not \"" + std::string(state) + "\"");
  }

  SHOAL_RETURN_IF_ERROR(Uint(obj, "lo", at, &p->range.lo));
  SHOAL_RETURN_IF_ERROR(Uint(obj, "hi", at, &p->range.hi));
  if (p->range.lo >= p->range.hi || p->range.hi > kHashSpace) {
    return Bad(at, "[lo, hi) is not a range of the hash space");
  }
  SHOAL_RETURN_IF_ERROR(Uint(obj, "start_offset", at, &p->start_offset));
  SHOAL_RETURN_IF_ERROR(Uint(obj, "end_offset", at, &p->end_offset));
  SHOAL_RETURN_IF_ERROR(Field(obj, "producers_durable", at, &e));
  if (e.get(p->producers_durable)) return Bad(at, "\"producers_durable\" must be a boolean");
  SHOAL_RETURN_IF_ERROR(Uint(obj, "appended", at, &p->appended));

  array buckets;
  SHOAL_RETURN_IF_ERROR(Field(obj, "load_buckets", at, &e));
  if (e.get(buckets) || buckets.size() != kLoadBuckets) {
    return Bad(at,
               "\"load_buckets\" must be an array of " + std::to_string(kLoadBuckets) + " counts");
  }
  size_t i = 0;
  for (element b : buckets) {
    if (b.get(p->load_buckets[i++])) return Bad(at, "\"load_buckets\" must hold counts");
  }

  array tops;
  SHOAL_RETURN_IF_ERROR(Field(obj, "top_hashes", at, &e));
  if (e.get(tops)) return Bad(at, "\"top_hashes\" must be an array");
  p->top_hashes.clear();
  for (element t : tops) {
    object to;
    if (t.get(to)) return Bad(at, "\"top_hashes\" entries must be objects");
    HashCount hc;
    SHOAL_RETURN_IF_ERROR(Uint(to, "hash", at + " top_hashes", &v));
    if (v > std::numeric_limits<uint32_t>::max()) return Bad(at, "a top hash is out of range");
    hc.hash = static_cast<uint32_t>(v);
    SHOAL_RETURN_IF_ERROR(Uint(to, "count", at + " top_hashes", &hc.count));
    p->top_hashes.push_back(hc);
  }

  object commits;
  SHOAL_RETURN_IF_ERROR(Field(obj, "commits", at, &e));
  if (e.get(commits)) return Bad(at, "\"commits\" must be an object");
  p->commits.clear();
  for (auto field : commits) {
    uint64_t offset = 0;
    if (field.value.get(offset)) return Bad(at, "\"commits\" values must be offsets");
    p->commits[std::string(field.key)] = offset;
  }
  return Status::Ok();
}

}  // namespace

std::optional<uint32_t> PodLimits::MaxPartitions(size_t held) const {
  if (open_files_limit == 0) return std::nullopt;
  const uint64_t per = std::max<uint64_t>(1, files_per_partition);
  const uint64_t by_partitions = per * held;
  // What the process holds besides its partitions' files.
  const uint64_t base = open_files > by_partitions ? open_files - by_partitions : 0;
  if (open_files_limit <= base + kFilesReserve) return 0;
  return static_cast<uint32_t>(
      std::min<uint64_t>((open_files_limit - base - kFilesReserve) / per, UINT32_MAX));
}

Result<AdminPartitionsReport> ParseAdminPartitions(std::string_view body) {
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(body.data(), body.size(), true).get(doc); err) {
    return Status::InvalidArgument(std::string("not valid JSON: ") + simdjson::error_message(err));
  }
  object root;
  if (doc.get(root)) return Status::InvalidArgument("the answer must be a JSON object");
  AdminPartitionsReport out;
  element e;
  std::string_view s;
  SHOAL_RETURN_IF_ERROR(Field(root, "topic", "answer", &e));
  if (e.get(s)) return Bad("answer", "\"topic\" must be a string");
  out.topic = s;
  SHOAL_RETURN_IF_ERROR(Field(root, "pod", "answer", &e));
  if (e.get(s)) return Bad("answer", "\"pod\" must be a string");
  out.pod = s;
  uint64_t epoch = 0;
  SHOAL_RETURN_IF_ERROR(Uint(root, "epoch", "answer", &epoch));
  out.epoch = Epoch(epoch);
  // The groups the sidecar knows, whether or not they read there: the retirement rule needs
  // every one of them; a report without them cannot tell "no group" from "not said".
  array groups;
  SHOAL_RETURN_IF_ERROR(Field(root, "groups", "answer", &e));
  if (e.get(groups)) return Bad("answer", "\"groups\" must be an array");
  for (element g : groups) {
    if (g.get(s)) return Bad("answer", "\"groups\" must hold group names");
    out.groups.emplace_back(s);
  }
  // The process's limits, from sidecars that report them.
  if (element limits; !root["limits"].get(limits)) {
    object lo;
    if (limits.get(lo)) return Bad("answer", "\"limits\" must be an object");
    for (auto [key, field] : std::initializer_list<std::pair<const char*, uint64_t*>>{
             {"open_files_limit", &out.limits.open_files_limit},
             {"open_files", &out.limits.open_files},
             {"files_per_partition", &out.limits.files_per_partition},
             {"memory_limit_bytes", &out.limits.memory_limit_bytes},
             {"memory_bytes", &out.limits.memory_bytes}}) {
      element v;
      if (lo[key].get(v)) continue;
      if (v.get(*field))
        return Bad("answer", std::string("\"limits.") + key + "\" must be a count");
    }
    if (out.limits.files_per_partition == 0) out.limits.files_per_partition = 1;
  }
  array parts;
  SHOAL_RETURN_IF_ERROR(Field(root, "partitions", "answer", &e));
  if (e.get(parts)) return Bad("answer", "\"partitions\" must be an array");
  size_t i = 0;
  for (element el : parts) {
    AdminPartition p;
    SHOAL_RETURN_IF_ERROR(ParsePartition(el, "partitions[" + std::to_string(i++) + "]", &p));
    out.partitions.push_back(std::move(p));
  }
  return out;
}

HashLoad DiffHashLoad(const AdminPartition& before, const AdminPartition& now) {
  HashLoad out;
  // A counter below its earlier value means the sidecar restarted between the two reports:
  // `now` counts from the restart, so no difference of the two means anything.
  if (now.appended < before.appended) return out;
  std::array<uint64_t, kLoadBuckets> delta{};
  uint64_t sum = 0;
  for (size_t i = 0; i < kLoadBuckets; ++i) {
    if (now.load_buckets[i] < before.load_buckets[i]) return out;
    delta[i] = now.load_buckets[i] - before.load_buckets[i];
    sum += delta[i];
  }
  if (sum > 0) {
    for (size_t i = 0; i < kLoadBuckets; ++i) {
      out.buckets[i] = static_cast<double>(delta[i]) / static_cast<double>(sum);
    }
  }

  const uint64_t appended = now.appended - before.appended;
  if (appended == 0) return out;
  std::map<uint32_t, uint64_t> earlier;
  for (const auto& h : before.top_hashes) earlier[h.hash] = h.count;
  std::optional<HashCount> best;
  for (const auto& h : now.top_hashes) {
    auto it = earlier.find(h.hash);
    if (it == earlier.end() || h.count <= it->second) continue;
    const uint64_t d = h.count - it->second;
    if (!best || d > best->count || (d == best->count && h.hash < best->hash)) {
      best = HashCount{h.hash, d};
    }
  }
  if (best) {
    out.top_hash = best->hash;
    out.top_share =
        std::clamp(static_cast<double>(best->count) / static_cast<double>(appended), 0.0, 1.0);
  }
  return out;
}

}  // namespace shoal::control
