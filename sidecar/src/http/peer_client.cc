#include "http/peer_client.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <cpprest/http_client.h>
#include <simdjson.h>

namespace shoal::http {

HttpPeerClient::HttpPeerClient(std::string admin_token) : token_(std::move(admin_token)) {}
HttpPeerClient::~HttpPeerClient() = default;

web::http::client::http_client& HttpPeerClient::ClientFor(const std::string& host_port) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& c = clients_[host_port];
  if (!c) {
    web::http::client::http_client_config config;
    config.set_timeout(std::chrono::seconds(10));
    c = std::make_unique<web::http::client::http_client>("http://" + host_port, config);
  }
  return *c;
}

Result<std::string> HttpPeerClient::Call(const std::string& host_port, const std::string& method,
                                         const std::string& path, const std::string& body,
                                         bool admin, bool forwarded) {
  try {
    web::http::http_request req(method);
    req.set_request_uri(path);
    if (admin) req.headers().add("Authorization", "Bearer " + token_);
    if (forwarded) req.headers().add("X-Shoal-Forwarded", "1");
    if (!body.empty()) req.set_body(body, "application/json");
    auto resp = ClientFor(host_port).request(req).get();
    auto bytes = resp.extract_vector().get();
    std::string text(bytes.begin(), bytes.end());
    const int code = resp.status_code();
    if (code == 200) return text;
    const std::string msg = method + " " + host_port + path + " answered " + std::to_string(code) +
                            ": " + text.substr(0, 300);
    if (code == 409) return Status::FailedPrecondition(msg);
    if (code == 404) return Status::NotFound(msg);
    if (code >= 500) return Status::Unavailable(msg);
    return Status::InvalidArgument(msg);
  } catch (const std::exception& e) {
    return Status::Unavailable(method + " " + host_port + path + ": " + e.what());
  }
}

Result<std::string> HttpPeerClient::FetchProducers(const PeerAddress& peer, PartitionId partition) {
  return Call(peer.admin, "GET",
              "/v1/admin/partitions/" + std::to_string(partition.value()) + "/producers", "", true,
              false);
}

Result<std::map<std::string, uint64_t>> HttpPeerClient::FetchCommits(const PeerAddress& peer,
                                                                     PartitionId partition) {
  auto body = Call(peer.admin, "GET",
                   "/v1/admin/partitions/" + std::to_string(partition.value()) + "/commits", "",
                   true, false);
  if (!body.ok()) return body.status();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object commits;
  if (parser.parse(*body).get(doc) || doc["commits"].get(commits)) {
    return Status::Internal("malformed commits answer from " + peer.admin);
  }
  std::map<std::string, uint64_t> out;
  for (auto field : commits) {
    uint64_t v = 0;
    if (field.value.get(v)) return Status::Internal("malformed commit value");
    out[std::string(field.key)] = v;
  }
  return out;
}

void HttpPeerClient::ForwardAsync(
    const PeerAddress& peer, const std::string& topic, std::string body,
    std::function<void(Result<std::vector<wire::ProduceResult>>)> done) {
  const std::string what = "forwarding to " + peer.data;
  try {
    web::http::http_request req(web::http::methods::POST);
    req.set_request_uri("/v1/topics/" + topic + "/events");
    req.headers().add("X-Shoal-Forwarded", "1");
    req.set_body(std::move(body), "application/json");
    ClientFor(peer.data)
        .request(req)
        .then([](web::http::http_response resp) {
          return resp.extract_vector().then([resp](std::vector<unsigned char> bytes) {
            return std::make_pair(resp.status_code(), std::string(bytes.begin(), bytes.end()));
          });
        })
        .then([done, what](pplx::task<std::pair<web::http::status_code, std::string>> t) {
          try {
            auto [code, text] = t.get();
            if (code == 200) {
              done(wire::ParseProduceResponse(text));
            } else if (code == 409) {
              done(Status::FailedPrecondition(what + ": " + text));
            } else if (code >= 500) {
              done(Status::Unavailable(what + ": " + text));
            } else {
              done(Status::InvalidArgument(what + ": " + text));
            }
          } catch (const std::exception& e) {
            done(Status::Unavailable(what + ": " + e.what()));
          }
        });
  } catch (const std::exception& e) {
    done(Status::Unavailable(what + ": " + e.what()));
  }
}

}  // namespace shoal::http
