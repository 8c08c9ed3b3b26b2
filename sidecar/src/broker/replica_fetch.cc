#include "broker/replica_fetch.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>

#include "shoal/common/json.h"
#include "shoal/common/partition_map.h"

namespace shoal::broker {

std::string EncodeFetchRequest(const FetchRequest& r) {
  std::string out = "{\"follower\":";
  json::AppendString(out, r.follower);
  out += ",\"wait_ms\":" + std::to_string(r.wait_ms);
  out += ",\"max_bytes\":" + std::to_string(r.max_bytes);
  out += ",\"partitions\":[";
  for (size_t i = 0; i < r.partitions.size(); ++i) {
    const auto& p = r.partitions[i];
    if (i) out += ',';
    out += "{\"id\":" + std::to_string(p.id.value()) +
           ",\"leader_epoch\":" + std::to_string(p.leader_epoch.value()) +
           ",\"from\":" + std::to_string(p.from) +
           ",\"last_epoch\":" + std::to_string(p.last_epoch) +
           ",\"commits_incarnation\":" + std::to_string(p.commits_incarnation) +
           ",\"commits_version\":" + std::to_string(p.commits_version) +
           ",\"seeded\":" + (p.seeded ? "true" : "false") + "}";
  }
  out += "]}";
  return out;
}

Result<FetchRequest> ParseFetchRequest(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(body);
  simdjson::dom::element doc;
  if (auto err = parser.parse(padded).get(doc); err) {
    return Status::InvalidArgument(std::string("a fetch is JSON: ") +
                                   simdjson::error_message(err));
  }
  FetchRequest r;
  std::string_view follower;
  simdjson::dom::array parts;
  if (doc["follower"].get(follower) || doc["partitions"].get(parts)) {
    return Status::InvalidArgument("a fetch needs follower and partitions");
  }
  if (follower.empty() || follower.size() > kMaxNameBytes) {
    return Status::InvalidArgument("follower must be a pod name");
  }
  r.follower = std::string(follower);
  int64_t wait = 0;
  if (doc["wait_ms"].get(wait) == simdjson::SUCCESS) {
    r.wait_ms = std::clamp<int64_t>(wait, 0, kMaxFetchWaitMs);
  }
  uint64_t max_bytes = 0;
  if (doc["max_bytes"].get(max_bytes) == simdjson::SUCCESS) {
    r.max_bytes = static_cast<size_t>(std::clamp<uint64_t>(max_bytes, 1, kMaxFetchBytes));
  }
  if (parts.size() > kMaxMapPartitions) {
    return Status::InvalidArgument("a fetch names at most " + std::to_string(kMaxMapPartitions) +
                                   " partitions");
  }
  bool names_seeded = false;
  for (auto el : parts) {
    uint64_t id = 0, epoch = 0, from = 0;
    if (el["id"].get(id) || el["leader_epoch"].get(epoch) || el["from"].get(from)) {
      return Status::InvalidArgument("each fetched partition needs id, leader_epoch and from");
    }
    if (id > kMaxPartitionId) return Status::InvalidArgument("partition id out of range");
    uint64_t last_epoch = 0;
    if (el["last_epoch"].get(last_epoch) != simdjson::SUCCESS) last_epoch = 0;  // none held
    uint64_t incarnation = 0, version = 0;  // none mirrored, when absent
    if (el["commits_incarnation"].get(incarnation) != simdjson::SUCCESS) incarnation = 0;
    if (el["commits_version"].get(version) != simdjson::SUCCESS) version = 0;
    bool seeded = false;  // not held, when absent
    if (el["seeded"].get(seeded) == simdjson::SUCCESS) {
      names_seeded = true;
    } else {
      seeded = false;
    }
    r.partitions.push_back({PartitionId(static_cast<uint32_t>(id)), Epoch(epoch), from, last_epoch,
                            incarnation, version, seeded});
  }
  if (!r.partitions.empty() && !names_seeded) r.version = 2;  // a follower of an earlier release
  return r;
}

Result<FenceRequest> ParseFenceRequest(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(body);
  simdjson::dom::element doc;
  if (auto err = parser.parse(padded).get(doc); err) {
    return Status::InvalidArgument(std::string("a fence is JSON: ") +
                                   simdjson::error_message(err));
  }
  FenceRequest r;
  uint64_t epoch = 0;
  simdjson::dom::array parts;
  if (doc["leader_epoch"].get(epoch) || doc["partitions"].get(parts)) {
    return Status::InvalidArgument("a fence needs leader_epoch and partitions");
  }
  if (epoch == 0) return Status::InvalidArgument("leader_epoch must be positive");
  if (parts.size() > kMaxMapPartitions) {
    return Status::InvalidArgument("a fence names at most " + std::to_string(kMaxMapPartitions) +
                                   " partitions");
  }
  r.leader_epoch = Epoch(epoch);
  for (auto el : parts) {
    uint64_t id = 0;
    if (el.get(id) || id > kMaxPartitionId) {
      return Status::InvalidArgument("partitions must be partition ids");
    }
    r.partitions.push_back(PartitionId(static_cast<uint32_t>(id)));
  }
  return r;
}

std::string_view ToString(FetchCode c) {
  switch (c) {
    case FetchCode::kOk: return "ok";
    case FetchCode::kNotLeader: return "not_leader";
    case FetchCode::kFenced: return "fenced";
    case FetchCode::kNotFollower: return "not_follower";
    case FetchCode::kDiverged: return "diverged";
    case FetchCode::kBehindStart: return "behind_start";
  }
  return "unknown";
}

namespace {

// SRF2's block header; SRF3's adds u32 producers_bytes.
constexpr size_t kBlockHeaderV2 = 4 + 4 + 8 * 5 + 4 + 4 + 4 + 8 + 8 + 4;

template <typename T>
void Put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

FetchBlockMark StartFetchBlock(const FetchBlock& b, std::string& out, int version) {
  FetchBlockMark mark;
  Put<uint32_t>(out, b.id.value());
  Put<uint32_t>(out, static_cast<uint32_t>(b.code));
  Put<uint64_t>(out, b.high_watermark);
  Put<uint64_t>(out, b.log_start);
  Put<uint64_t>(out, b.log_end);
  Put<uint64_t>(out, b.leader_epoch.value());
  Put<uint64_t>(out, b.first);
  mark.counts_at = out.size();
  Put<uint32_t>(out, b.count);
  Put<uint32_t>(out, static_cast<uint32_t>(b.records.size()));
  Put<uint32_t>(out, static_cast<uint32_t>(b.epochs.size()));
  Put<uint64_t>(out, b.commits_incarnation);
  Put<uint64_t>(out, b.commits_version);
  Put<uint32_t>(out, static_cast<uint32_t>(b.commits_incarnation ? b.commits.size() : 0));
  if (version >= 3) Put<uint32_t>(out, static_cast<uint32_t>(b.producers.size()));
  for (const auto& e : b.epochs) {
    Put<uint64_t>(out, e.epoch);
    Put<uint64_t>(out, e.start);
  }
  mark.records_at = out.size();
  return mark;
}

void EndFetchBlock(const FetchBlock& b, std::string& out, int version, const FetchBlockMark& mark,
                   uint32_t count) {
  const auto bytes = static_cast<uint32_t>(out.size() - mark.records_at);
  std::memcpy(out.data() + mark.counts_at, &count, 4);
  std::memcpy(out.data() + mark.counts_at + 4, &bytes, 4);
  if (b.commits_incarnation) out += b.commits;
  if (version >= 3) out += b.producers;
}

void AppendFetchBlock(const FetchBlock& b, std::string& out, int version) {
  const FetchBlockMark mark = StartFetchBlock(b, out, version);
  out += b.records;
  EndFetchBlock(b, out, version, mark, b.count);
}

void FinishFetchAnswer(std::string& body, uint32_t blocks, int version) {
  std::memcpy(body.data(), version >= 3 ? "SRF3" : "SRF2", 4);
  std::memcpy(body.data() + 4, &blocks, 4);
}

Result<std::vector<FetchBlock>> ParseFetchAnswer(std::string_view body) {
  if (body.size() < 8 || (body.substr(0, 4) != "SRF3" && body.substr(0, 4) != "SRF2")) {
    return Status::Corruption("a fetch answer starts with SRF3 (or SRF2) and a block count");
  }
  const bool v3 = body.substr(0, 4) == "SRF3";
  const size_t header = kBlockHeaderV2 + (v3 ? 4 : 0);
  const uint32_t n = Get<uint32_t>(body.data() + 4);
  std::vector<FetchBlock> out;
  size_t pos = 8;
  for (uint32_t i = 0; i < n; ++i) {
    if (body.size() - pos < header) return Status::Corruption("a fetch answer cut short");
    const char* p = body.data() + pos;
    FetchBlock b;
    b.id = PartitionId(Get<uint32_t>(p));
    const uint32_t code = Get<uint32_t>(p + 4);
    if (code > static_cast<uint32_t>(FetchCode::kBehindStart)) {
      return Status::Corruption("a fetch block with unknown code " + std::to_string(code));
    }
    b.code = static_cast<FetchCode>(code);
    b.high_watermark = Get<uint64_t>(p + 8);
    b.log_start = Get<uint64_t>(p + 16);
    b.log_end = Get<uint64_t>(p + 24);
    b.leader_epoch = Epoch(Get<uint64_t>(p + 32));
    b.first = Get<uint64_t>(p + 40);
    b.count = Get<uint32_t>(p + 48);
    const uint32_t bytes = Get<uint32_t>(p + 52);
    const uint32_t epochs = Get<uint32_t>(p + 56);
    b.commits_incarnation = Get<uint64_t>(p + 60);
    b.commits_version = Get<uint64_t>(p + 68);
    const uint32_t commit_bytes = Get<uint32_t>(p + 76);
    const uint32_t producer_bytes = v3 ? Get<uint32_t>(p + 80) : 0;
    pos += header;
    if (epochs > kMaxFetchEpochs || (body.size() - pos) / 16 < epochs) {
      return Status::Corruption("a fetch block's epochs cut short");
    }
    for (uint32_t e = 0; e < epochs; ++e) {
      b.epochs.push_back({Get<uint64_t>(body.data() + pos), Get<uint64_t>(body.data() + pos + 8)});
      pos += 16;
    }
    if (body.size() - pos < bytes) return Status::Corruption("a fetch block cut short");
    b.records = body.substr(pos, bytes);
    pos += bytes;
    if (body.size() - pos < commit_bytes) return Status::Corruption("a fetch block cut short");
    b.commits.assign(body.data() + pos, commit_bytes);
    pos += commit_bytes;
    if (body.size() - pos < producer_bytes) return Status::Corruption("a fetch block cut short");
    b.producers.assign(body.data() + pos, producer_bytes);
    pos += producer_bytes;
    out.push_back(std::move(b));
  }
  if (pos != body.size()) return Status::Corruption("bytes after the last fetch block");
  return out;
}

}  // namespace shoal::broker
