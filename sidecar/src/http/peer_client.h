// HttpPeerClient: broker::PeerClient over cpprestsdk's http_client. One client per peer address,
// created on first use and kept (connections are reused). The admin token is the topic's shared
// bearer token. Thread-safe; owned by main, outlives the Topic.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "broker/topic.h"

namespace web::http::client {
class http_client;
}

namespace shoal::http {

class HttpPeerClient final : public broker::PeerClient {
 public:
  explicit HttpPeerClient(std::string admin_token);
  ~HttpPeerClient() override;

  Result<std::string> FetchProducers(const PeerAddress& peer, PartitionId partition) override;
  Result<std::map<std::string, uint64_t>> FetchCommits(const PeerAddress& peer,
                                                       PartitionId partition) override;
  // Sends a produce body to the owner's data plane, marked as forwarded. Asynchronous: `done`
  // runs on a pool thread with the owner's results or why there are none.
  void ForwardAsync(const PeerAddress& peer, const std::string& topic, std::string body,
                    std::function<void(Result<std::vector<wire::ProduceResult>>)> done);

 private:
  web::http::client::http_client& ClientFor(const std::string& host_port);
  Result<std::string> Call(const std::string& host_port, const std::string& method,
                           const std::string& path, const std::string& body, bool admin,
                           bool forwarded);

  const std::string token_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<web::http::client::http_client>> clients_;
};

}  // namespace shoal::http
