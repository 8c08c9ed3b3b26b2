#include "shoal/client/admin_client.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <cpprest/http_client.h>
#include <simdjson.h>

#include "shoal/common/json.h"
#include "shoal/common/tls_cpprest.h"
#include "shoal/common/wire.h"

namespace shoal::client {

AdminClient::AdminClient(std::string token, TlsClientFiles tls)
    : token_(std::move(token)), tls_(std::move(tls)) {}
AdminClient::~AdminClient() = default;

Result<std::string> AdminClient::Call(const std::string& host_port, const std::string& method,
                                      const std::string& path, const std::string& body,
                                      bool admin) {
  web::http::client::http_client* client;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& c = clients_[host_port];
    if (!c) {
      web::http::client::http_client_config config;
      config.set_timeout(std::chrono::seconds(5));
      UseTls(config, tls_);
      c = std::make_unique<web::http::client::http_client>(BaseUrl(host_port, tls_), config);
    }
    client = c.get();
  }
  try {
    web::http::http_request req(method);
    req.set_request_uri(path);
    if (admin) req.headers().add("Authorization", "Bearer " + token_);
    NameTheServer(req, tls_);
    if (!body.empty()) req.set_body(body, "application/json");
    auto resp = client->request(req).get();
    auto bytes = resp.extract_vector().get();
    std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const int code = resp.status_code();
    if (code == 200) return text;
    return wire::ErrorFromAnswer(code, text, method + " " + host_port + path);
  } catch (const std::exception& e) {
    return Status::Unavailable(method + " " + host_port + path + ": " + e.what());
  }
}

Result<PartitionMap> AdminClient::GetMap(const std::string& admin) {
  auto body = Call(admin, "GET", "/v1/admin/map", "", true);
  if (!body.ok()) return body.status();
  auto map = PartitionMap::FromJson(*body);
  if (map.ok()) return map;
  // A sidecar that holds no map yet answers one of epoch 0 without a topic, which is no map.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  uint64_t epoch = 1;
  if (!parser.parse(simdjson::padded_string(*body)).get(doc) && !doc["epoch"].get(epoch) &&
      epoch == 0) {
    return Status::NotFound(admin + " holds no partition map yet");
  }
  return map;
}

Result<InstallOutcome> AdminClient::InstallMap(const std::string& admin, const PartitionMap& map) {
  auto r = Call(admin, "POST", "/v1/admin/map", map.ToJson(), true);
  if (!r.ok()) return r.status();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view outcome;
  if (parser.parse(*r).get(doc)) return Status::Internal("malformed install answer: " + *r);
  // A sidecar from before outcomes were named answers {"epoch":E} alone: it installed the map.
  if (doc["outcome"].get(outcome)) return InstallOutcome::kInstalled;
  if (outcome == "installed") return InstallOutcome::kInstalled;
  if (outcome == "already_held") return InstallOutcome::kAlreadyHeld;
  return Status::Internal("unknown install outcome \"" + std::string(outcome) + "\"");
}

Status AdminClient::Prepare(const std::string& admin, const PartitionMap& map) {
  auto r = Call(admin, "POST", "/v1/admin/prepare", map.ToJson(), true);
  return r.ok() ? Status::Ok() : r.status();
}

Result<uint64_t> AdminClient::Seal(const std::string& admin, const PartitionMap& target,
                                   PartitionId partition) {
  std::string successors = "[";
  bool first = true;
  for (const PartitionInfo* s : target.SuccessorsOf(partition)) {
    if (!first) successors += ',';
    first = false;
    successors += "{\"id\":" + std::to_string(s->id.value()) + ",\"owner\":";
    json::AppendString(successors, s->owner.value());
    successors += ",\"lo\":" + std::to_string(s->range.lo) +
                  ",\"hi\":" + std::to_string(s->range.hi) + "}";
  }
  successors += ']';
  // The partition's own range as the change has it, which the sidecar checks against its own.
  const PartitionInfo* self = target.Find(partition);
  return SealFor(admin, target.epoch(), partition, target.Digest(), successors,
                 self ? std::optional<HashRange>(self->range) : std::nullopt,
                 self ? self->owner.value() : std::string(), self ? self->leader_epoch : Epoch(0),
                 self && !self->active() && self->end_known
                     ? std::optional<uint64_t>(self->end_offset)
                     : std::nullopt);
}

Result<uint64_t> AdminClient::SealFor(const std::string& admin, Epoch epoch, PartitionId partition,
                                      const std::string& digest, const std::string& successors_json,
                                      std::optional<HashRange> range, const std::string& leader,
                                      Epoch leader_epoch, std::optional<uint64_t> sealed_end) {
  std::string body = "{\"epoch\":" + std::to_string(epoch.value()) +
                     ",\"partition\":" + std::to_string(partition.value()) + ",\"digest\":";
  json::AppendString(body, digest);
  body += ",\"successors\":" + successors_json;
  if (range) {
    body += ",\"lo\":" + std::to_string(range->lo) + ",\"hi\":" + std::to_string(range->hi);
  }
  if (!leader.empty() && leader_epoch.value() > 0) {
    body += ",\"leader\":";
    json::AppendString(body, leader);
    body += ",\"leader_epoch\":" + std::to_string(leader_epoch.value());
  }
  if (sealed_end) body += ",\"sealed_end\":" + std::to_string(*sealed_end);
  body += "}";
  auto r = Call(admin, "POST", "/v1/admin/seal", body, true);
  if (!r.ok()) return r.status();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  uint64_t end = 0;
  if (parser.parse(*r).get(doc) || doc["end_offset"].get(end)) {
    return Status::Internal("malformed seal answer: " + *r);
  }
  return end;
}

Result<std::string> AdminClient::DeleteGroup(const std::string& admin, const std::string& group,
                                             bool force) {
  SHOAL_RETURN_IF_ERROR(wire::ValidateGroup(group));
  // "." and ".." are valid names but dot segments of a path: send their dots escaped.
  std::string segment = group;
  if (group.find_first_not_of('.') == std::string::npos) {
    segment.clear();
    for (size_t i = 0; i < group.size(); ++i) segment += "%2E";
  }
  return Call(admin, "DELETE", "/v1/admin/groups/" + segment + (force ? "?force=true" : ""), "",
              true);
}

Result<std::string> AdminClient::Get(const std::string& host_port, const std::string& path,
                                     bool admin) {
  return Call(host_port, "GET", path, "", admin);
}

namespace {

// The copies a replica answer lists under `list` ("fenced" or "followed"), each with the
// answer's volume; Unavailable for an answer without that list.
Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> ParseCopyList(
    const std::string& answer, const char* list) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array copies;
  if (parser.parse(answer).get(doc) || doc[list].get(copies)) {
    return Status::Unavailable(std::string("a replica answer without \"") + list +
                               "\": " + answer.substr(0, 200));
  }
  uint64_t volume = 0;
  if (doc["volume"].get(volume) != simdjson::SUCCESS) volume = 0;
  std::vector<std::pair<PartitionId, replication::ReplicaState>> out;
  for (auto f : copies) {
    uint64_t id = 0, end = 0, last_epoch = 0;
    if (f["id"].get(id) || f["end"].get(end) || f["last_epoch"].get(last_epoch)) continue;
    if (id > kMaxPartitionId) continue;
    replication::ReplicaState s;
    s.last_epoch = Epoch(last_epoch);
    s.end = end;
    s.volume = volume;
    bool flag = false;
    if (f["refetching"].get(flag) == simdjson::SUCCESS) s.refetching = flag;
    flag = false;
    if (f["joining"].get(flag) == simdjson::SUCCESS) s.joining = flag;
    flag = false;
    if (f["absent"].get(flag) == simdjson::SUCCESS) s.absent = flag;
    out.emplace_back(PartitionId(static_cast<uint32_t>(id)), s);
  }
  return out;
}

}  // namespace

Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> AdminClient::FenceCopies(
    const std::string& admin, const std::vector<PartitionId>& partitions, Epoch leader_epoch) {
  std::string body =
      "{\"leader_epoch\":" + std::to_string(leader_epoch.value()) + ",\"partitions\":[";
  for (size_t i = 0; i < partitions.size(); ++i) {
    if (i) body += ',';
    body += std::to_string(partitions[i].value());
  }
  body += "]}";
  auto answer = Call(admin, "POST", "/v1/admin/replica/fence", body, true);
  if (!answer.ok()) return answer.status();
  return ParseCopyList(*answer, "fenced");
}

Result<uint64_t> AdminClient::VolumeOf(const std::string& admin) {
  auto answer = Call(admin, "GET", "/v1/admin/replica", "", true);
  if (!answer.ok()) return answer.status();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  uint64_t volume = 0;
  if (parser.parse(*answer).get(doc) || doc["volume"].get(volume)) {
    return Status::Unavailable("a replica answer without \"volume\": " + answer->substr(0, 200));
  }
  return volume;
}

Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> AdminClient::FollowedCopies(
    const std::string& admin) {
  auto answer = Call(admin, "GET", "/v1/admin/replica", "", true);
  if (!answer.ok()) return answer.status();
  return ParseFollowedCopies(*answer);
}

Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>> ParseFollowedCopies(
    const std::string& answer) {
  return ParseCopyList(answer, "followed");
}

}  // namespace shoal::client
