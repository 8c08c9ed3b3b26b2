// HttpPeerClient: broker::PeerClient over cpprestsdk's http_client. One client per peer address,
// created on first use and kept (connections are reused). A follower's replication fetch, one
// request per round and the most frequent call, goes over a blocking connection instead
// (RawHttpConnection: no thread hand-offs). The admin token is the topic's shared
// bearer token. With TLS files, every call is HTTPS with the pod's own certificate, and the
// peer must show a certificate of the topic's CA with the topic's peer name (shoal/common/tls.h).
// Thread-safe; owned by main, outlives the Topic.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "broker/topic.h"
#include "shoal/common/raw_http.h"
#include "shoal/common/tls.h"

namespace web::http::client {
class http_client;
}

namespace shoal::http {

class HttpPeerClient final : public broker::PeerClient {
 public:
  // `forward_timeout`: how long a forwarded produce waits for the key's owner before it gives up
  // (Unavailable: the client retries), so that a paused or hung owner cannot stall every
  // producer that reaches this sidecar.
  explicit HttpPeerClient(std::string admin_token,
                          std::chrono::milliseconds forward_timeout = std::chrono::seconds(2),
                          TlsClientFiles tls = {});
  ~HttpPeerClient() override;

  Result<std::string> FetchProducers(const PeerAddress& peer, PartitionId partition,
                                     const broker::SuccessorRef* successor,
                                     uint64_t end) override;
  Result<broker::RemoteCommits> FetchCommits(const PeerAddress& peer,
                                             PartitionId partition) override;
  Result<broker::RemoteCommits> FetchCopyCommits(const PeerAddress& peer, PartitionId partition,
                                                 Epoch leader_epoch) override;
  Result<std::map<std::string, broker::GroupRegistry::Group>> FetchGroups(
      const PeerAddress& peer) override;
  Result<broker::RemoteBatch> ReadRange(const PeerAddress& peer, PartitionId partition,
                                        const std::string& group, const PodName& reader,
                                        const std::vector<HashRange>& ranges, size_t max,
                                        size_t max_bytes) override;
  Result<std::string> FetchReplica(const PeerAddress& leader, const std::string& body) override;
  Status ForwardCommit(const PeerAddress& leader, const std::string& topic,
                       const wire::CommitRequest& request) override;
  Result<broker::RemoteCommits> CommitFor(const PeerAddress& peer, PartitionId partition,
                                          const std::string& group, const PodName& reader,
                                          Offset offset) override;

  // The owner's answer to a forwarded produce: its results, or why there are none (with the
  // indices, in the forwarded body, of the events a sequence_unknown answer names).
  struct ForwardAnswer {
    Status status;
    std::vector<wire::ProduceResult> results;
    std::vector<size_t> unknown;
  };
  // Sends a produce body to the owner's data plane, marked as forwarded. Asynchronous: `done`
  // runs on a pool thread.
  void ForwardAsync(const PeerAddress& peer, const std::string& topic, std::string body,
                    wire::Format format, std::function<void(ForwardAnswer)> done);

 private:
  web::http::client::http_client& ClientFor(const std::string& host_port, bool forwarding);
  // `prompt`: waits no longer than a forward (the consumers' read or commit waits on it).
  // `forwarded`: marked as forwarded by a sidecar (X-Shoal-Forwarded), not sent on again.
  Result<std::string> Call(const std::string& host_port, const std::string& method,
                           const std::string& path, const std::string& body, bool admin,
                           bool prompt = false, bool forwarded = false);

  const std::string token_;
  const std::chrono::milliseconds forward_timeout_;
  const TlsClientFiles tls_;
  std::mutex mu_;
  // Replication fetches: one blocking connection per leader, taken out while a fetch uses it
  // (each leader has one fetcher thread; a second caller opens its own).
  std::map<std::string, std::unique_ptr<RawHttpConnection>> fetchers_;
  std::map<std::string, std::unique_ptr<web::http::client::http_client>> clients_;
  std::map<std::string, std::unique_ptr<web::http::client::http_client>> forwarders_;
};

}  // namespace shoal::http
