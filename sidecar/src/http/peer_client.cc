#include "http/peer_client.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <cpprest/http_client.h>
#include <simdjson.h>

#include "broker/replica_fetch.h"
#include "shoal/common/tls_cpprest.h"
#include "shoal/common/wire.h"

namespace shoal::http {

HttpPeerClient::HttpPeerClient(std::string admin_token, std::chrono::milliseconds forward_timeout,
                               TlsClientFiles tls)
    : token_(std::move(admin_token)), forward_timeout_(forward_timeout), tls_(std::move(tls)) {}

HttpPeerClient::~HttpPeerClient() = default;

web::http::client::http_client& HttpPeerClient::ClientFor(const std::string& host_port,
                                                          bool forwarding) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& c = (forwarding ? forwarders_ : clients_)[host_port];
  if (!c) {
    web::http::client::http_client_config config;
    // Bounded: a paused owner costs a forwarded produce one forward timeout (cpprestsdk's
    // timeout runs while nothing arrives), then a retryable 503.
    config.set_timeout(forwarding ? std::chrono::milliseconds(forward_timeout_)
                                  : std::chrono::milliseconds(10000));
    UseTls(config, tls_);
    c = std::make_unique<web::http::client::http_client>(BaseUrl(host_port, tls_), config);
  }
  return *c;
}

Result<std::string> HttpPeerClient::Call(const std::string& host_port, const std::string& method,
                                         const std::string& path, const std::string& body,
                                         bool admin, bool prompt, bool forwarded) {
  const std::string what = method + " " + host_port + path;
  try {
    web::http::http_request req(method);
    req.set_request_uri(path);
    if (admin) req.headers().add("Authorization", "Bearer " + token_);
    if (forwarded) req.headers().add("X-Shoal-Forwarded", "1");
    NameTheServer(req, tls_);
    if (!body.empty()) req.set_body(body, "application/json");
    auto resp = ClientFor(host_port, prompt).request(req).get();
    auto bytes = resp.extract_vector().get();
    std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (resp.status_code() == 200) return text;
    return wire::ErrorFromAnswer(resp.status_code(), text, what);
  } catch (const std::exception& e) {
    return Status::Unavailable(what + ": " + e.what());
  }
}

Result<std::string> HttpPeerClient::FetchProducers(const PeerAddress& peer, PartitionId partition,
                                                   const broker::SuccessorRef* successor,
                                                   uint64_t end) {
  std::string query = "end=" + std::to_string(end);
  if (successor) {
    query += "&successor=" + std::to_string(successor->id.value()) +
             "&owner=" + web::uri::encode_data_string(successor->owner.value()) +
             "&lo=" + std::to_string(successor->range.lo) +
             "&hi=" + std::to_string(successor->range.hi);
  }
  return Call(peer.admin, "GET",
              "/v1/admin/partitions/" + std::to_string(partition.value()) + "/producers?" + query,
              "", true);
}

namespace {
// The answer of GET .../commits (and of a range commit): {"commits":{G:O},"ranges":{G:[[lo,hi,
// offset],...]},"sealed","start_offset","end_offset","lo","hi"}.
Result<broker::RemoteCommits> ParseCommits(const std::string& body, const std::string& from) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object commits;
  broker::RemoteCommits out;
  const Status bad = Status::Internal("malformed commits answer from " + from);
  if (parser.parse(body).get(doc) || doc["commits"].get(commits) ||
      doc["start_offset"].get(out.start_offset) || doc["end_offset"].get(out.end_offset) ||
      doc["sealed"].get(out.sealed) || doc["lo"].get(out.range.lo) ||
      doc["hi"].get(out.range.hi)) {
    return bad;
  }
  if (doc["mirror"].get(out.mirror) != simdjson::SUCCESS) out.mirror = false;
  for (auto field : commits) {
    uint64_t v = 0;
    if (field.value.get(v)) return Status::Internal("malformed commit value");
    out.commits[std::string(field.key)] = Offset(v);
  }
  simdjson::dom::object ranges;
  if (doc["ranges"].get(ranges) == simdjson::SUCCESS) {
    for (auto field : ranges) {
      simdjson::dom::array pieces;
      if (field.value.get(pieces)) return bad;
      auto& list = out.ranges[std::string(field.key)];
      for (auto piece : pieces) {
        simdjson::dom::array t;
        RangeOffset r;
        if (piece.get(t) || t.size() != 3 || t.at(0).get(r.lo) || t.at(1).get(r.hi) ||
            t.at(2).get(r.offset)) {
          return bad;
        }
        list.push_back(r);
      }
    }
  }
  simdjson::dom::object leases;
  if (doc["leases"].get(leases) == simdjson::SUCCESS) {
    for (auto group : leases) {
      simdjson::dom::object readers;
      if (group.value.get(readers)) return bad;
      auto& by_reader = out.leases[std::string(group.key)];
      for (auto reader : readers) {
        storage::ReadLease lease;
        lease.reader = std::string(reader.key);
        simdjson::dom::array ranges;
        if (reader.value["ranges"].get(ranges) || reader.value["last"].get(lease.last) ||
            reader.value["scanned_to"].get(lease.scanned_to)) {
          return bad;
        }
        for (auto r : ranges) {
          simdjson::dom::array t;
          HashRange h;
          if (r.get(t) || t.size() != 2 || t.at(0).get(h.lo) || t.at(1).get(h.hi) || h.lo >= h.hi ||
              h.hi > kHashSpace) {
            return bad;
          }
          lease.ranges.push_back(h);
        }
        lease.ranges = NormalizeRanges(std::move(lease.ranges));
        by_reader.emplace(lease.reader, std::move(lease));
      }
    }
  }
  return out;
}
}  // namespace

Result<broker::RemoteCommits> HttpPeerClient::FetchCommits(const PeerAddress& peer,
                                                           PartitionId partition) {
  auto body = Call(peer.admin, "GET",
                   "/v1/admin/partitions/" + std::to_string(partition.value()) + "/commits", "",
                   true);
  if (!body.ok()) return body.status();
  return ParseCommits(*body, peer.admin);
}

Result<broker::RemoteCommits> HttpPeerClient::FetchCopyCommits(const PeerAddress& peer,
                                                               PartitionId partition,
                                                               Epoch leader_epoch) {
  std::string path =
      "/v1/admin/partitions/" + std::to_string(partition.value()) + "/commits?copy=true";
  if (leader_epoch.value() > 0) path += "&leader_epoch=" + std::to_string(leader_epoch.value());
  // Prompt (the forward timeout): a new leader asks its copies one after another on its peer
  // tick, and a hung copy must not hold the others' answers back for long.
  auto body = Call(peer.admin, "GET", path, "", true, /*prompt=*/true);
  if (!body.ok()) return body.status();
  return ParseCommits(*body, peer.admin);
}

Result<broker::RemoteBatch> HttpPeerClient::ReadRange(const PeerAddress& peer,
                                                      PartitionId partition,
                                                      const std::string& group,
                                                      const PodName& reader,
                                                      const std::vector<HashRange>& ranges,
                                                      size_t max, size_t max_bytes) {
  wire::RangeReadRequest r{group, reader.value(), ranges, max, max_bytes};
  auto body = Call(peer.admin, "POST",
                   "/v1/admin/partitions/" + std::to_string(partition.value()) + "/read",
                   wire::EncodeRangeReadRequest(r), true, /*prompt=*/true);
  if (!body.ok()) return body.status();
  auto a = wire::ParseRangeReadAnswer(*body);
  if (!a.ok()) return a.status().Annotate("the range read answer of " + peer.admin);
  broker::RemoteBatch out;
  out.events = std::move(a->events);
  out.batch.count = a->count;
  out.batch.last = a->last;
  out.batch.scanned_to = a->scanned_to;
  out.batch.consumed = a->consumed;
  out.batch.ranges = std::move(a->ranges);
  return out;
}

Result<broker::RemoteCommits> HttpPeerClient::CommitFor(const PeerAddress& peer,
                                                        PartitionId partition,
                                                        const std::string& group,
                                                        const PodName& reader, Offset offset) {
  wire::RangeCommitRequest r{group, reader.value(), offset.value()};
  auto body = Call(peer.admin, "POST",
                   "/v1/admin/partitions/" + std::to_string(partition.value()) + "/commit",
                   wire::EncodeRangeCommitRequest(r), true, /*prompt=*/true);
  if (!body.ok()) return body.status();
  return ParseCommits(*body, peer.admin);
}

Status HttpPeerClient::ForwardCommit(const PeerAddress& leader, const std::string& topic,
                                     const wire::CommitRequest& request) {
  return Call(leader.data, "POST", "/v1/topics/" + topic + "/commits",
              wire::EncodeCommitRequest(request), /*admin=*/false, /*prompt=*/true,
              /*forwarded=*/true)
      .status();
}

Result<std::string> HttpPeerClient::FetchReplica(const PeerAddress& leader,
                                                 const std::string& body) {
  static constexpr std::string_view kPath = "/v1/admin/replica/fetch";
  const std::string what = "POST " + leader.admin + std::string(kPath);
  std::unique_ptr<RawHttpConnection> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = fetchers_.find(leader.admin); it != fetchers_.end() && it->second) {
      conn = std::move(it->second);
    }
  }
  if (!conn) {
    // host:port, or [v6 address]:port.
    const size_t colon = leader.admin.rfind(':');
    if (colon == std::string::npos || colon + 1 == leader.admin.size()) {
      return Status::InvalidArgument("a leader's admin address without a port: " + leader.admin);
    }
    std::string host = leader.admin.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    const unsigned long port = std::strtoul(leader.admin.c_str() + colon + 1, nullptr, 10);
    if (port == 0 || port > 65535) {
      return Status::InvalidArgument("a leader's admin address with a bad port: " + leader.admin);
    }
    RawHttpOptions o;
    // The leader holds a fetch for its long-poll (kMaxFetchWaitMs at most) before it answers.
    o.timeout = std::chrono::milliseconds(broker::kMaxFetchWaitMs + 2000);
    o.max_body = 4 * broker::kMaxFetchBytes;  // records, commit stores, producer states
    o.headers = "Authorization: Bearer " + token_ + "\r\n";
    o.tls = tls_;
    conn = std::make_unique<RawHttpConnection>(std::move(host), static_cast<uint16_t>(port),
                                               std::move(o));
  }
  std::string answer;
  auto code = conn->Request("POST", kPath, body, &answer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fetchers_[leader.admin] = std::move(conn);
  }
  if (!code.ok()) return code.status().Annotate(what);
  if (*code == 200) return answer;
  return wire::ErrorFromAnswer(*code, answer, what);
}

Result<std::map<std::string, broker::GroupRegistry::Group>> HttpPeerClient::FetchGroups(
    const PeerAddress& peer) {
  auto body = Call(peer.admin, "GET", "/v1/admin/groups", "", true);
  if (!body.ok()) return body.status();
  auto groups = broker::GroupRegistry::ParseJson(*body);
  if (!groups.ok()) return groups.status().Annotate("the groups of " + peer.admin);
  return groups;
}

void HttpPeerClient::ForwardAsync(const PeerAddress& peer, const std::string& topic,
                                  std::string body, wire::Format format,
                                  std::function<void(ForwardAnswer)> done) {
  const std::string what = "forwarding to " + peer.data;
  try {
    web::http::http_request req(web::http::methods::POST);
    req.set_request_uri("/v1/topics/" + topic + "/events");
    req.headers().add("X-Shoal-Forwarded", "1");
    NameTheServer(req, tls_);
    req.set_body(std::move(body), format == wire::Format::kBinary
                                      ? std::string(wire::kBinaryType)
                                      : std::string("application/json"));
    ClientFor(peer.data, true)
        .request(req)
        .then([](web::http::http_response resp) {
          return resp.extract_vector().then([resp](std::vector<unsigned char> bytes) {
            return std::make_pair(
                resp.status_code(),
                std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
          });
        })
        .then([done, what](pplx::task<std::pair<web::http::status_code, std::string>> t) {
          ForwardAnswer a;
          try {
            auto [code, text] = t.get();
            if (code == 200) {
              auto parsed = wire::ParseProduceResponse(text);
              if (parsed.ok()) {
                a.results = std::move(parsed).value();
              } else {
                a.status = parsed.status();
              }
            } else {
              a.status = wire::ErrorFromAnswer(code, text, what);
              if (a.status.code() == Status::Code::kSequenceUnknown) {
                a.unknown = wire::ParseUnknownIndices(text);
              }
            }
          } catch (const std::exception& e) {
            a.status = Status::Unavailable(what + ": " + e.what());
          }
          done(std::move(a));
        });
  } catch (const std::exception& e) {
    done(ForwardAnswer{Status::Unavailable(what + ": " + e.what()), {}, {}});
  }
}

}  // namespace shoal::http
