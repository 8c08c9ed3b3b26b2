#include "shoal/client/admin_client.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <cpprest/http_client.h>
#include <simdjson.h>

#include "shoal/common/wire.h"

namespace shoal::client {

AdminClient::AdminClient(std::string token) : token_(std::move(token)) {}
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
      c = std::make_unique<web::http::client::http_client>("http://" + host_port, config);
    }
    client = c.get();
  }
  try {
    web::http::http_request req(method);
    req.set_request_uri(path);
    if (admin) req.headers().add("Authorization", "Bearer " + token_);
    if (!body.empty()) req.set_body(body, "application/json");
    auto resp = client->request(req).get();
    auto bytes = resp.extract_vector().get();
    std::string text(bytes.begin(), bytes.end());
    const int code = resp.status_code();
    if (code == 200) return text;
    const std::string msg =
        method + " " + host_port + path + " answered " + std::to_string(code) + ": " + text;
    if (code == 409) return Status::FailedPrecondition(msg);
    if (code == 404) return Status::NotFound(msg);
    if (code == 401) return Status::Unauthenticated(msg);
    if (code >= 500) return Status::Unavailable(msg);
    return Status::InvalidArgument(msg);
  } catch (const std::exception& e) {
    return Status::Unavailable(method + " " + host_port + path + ": " + e.what());
  }
}

Result<PartitionMap> AdminClient::GetMap(const std::string& admin) {
  auto body = Call(admin, "GET", "/v1/admin/map", "", true);
  if (!body.ok()) return body.status();
  return PartitionMap::FromJson(*body);
}

Status AdminClient::InstallMap(const std::string& admin, const PartitionMap& map) {
  auto r = Call(admin, "POST", "/v1/admin/map", map.ToJson(), true);
  return r.ok() ? Status::Ok() : r.status();
}

Status AdminClient::Prepare(const std::string& admin, const PartitionMap& map) {
  auto r = Call(admin, "POST", "/v1/admin/prepare", map.ToJson(), true);
  return r.ok() ? Status::Ok() : r.status();
}

Result<uint64_t> AdminClient::Seal(const std::string& admin, Epoch epoch, PartitionId partition) {
  auto r = Call(admin, "POST", "/v1/admin/seal",
                "{\"epoch\":" + std::to_string(epoch.value()) +
                    ",\"partition\":" + std::to_string(partition.value()) + "}",
                true);
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

}  // namespace shoal::client
