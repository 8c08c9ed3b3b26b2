// ShoalClient: the data-plane client of one sidecar and topic, over cpprestsdk's http_client.
// Every call is blocking and returns a Status/Result (cpprestsdk's exceptions are caught here);
// a 4xx/5xx answer becomes a Status carrying the sidecar's {"error","reason"}.
//
// Thread-safe (http_client is); one instance may serve many threads. Owned by its caller.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/status.h"
#include "shoal/common/tls.h"
#include "shoal/common/wire.h"

namespace web::http::client {
class http_client;
}

namespace shoal::client {

struct OutgoingEvent {
  std::string key;
  std::string value_json = "null";  // any JSON text
  std::string producer;             // empty: not idempotent
  std::optional<uint64_t> seq;
};

// Builds the produce body {"events":[...]} for these events.
std::string EncodeProduceBody(const std::vector<OutgoingEvent>& events);

class ShoalClient {
 public:
  // base_url like http://127.0.0.1:8080, or https://... with `tls` (a topic whose pods require
  // TLS: the topic's CA, this client's certificate and the topic's peer name).
  ShoalClient(const std::string& base_url, std::string topic,
              std::chrono::milliseconds timeout = std::chrono::seconds(30),
              TlsClientFiles tls = {});
  ~ShoalClient();
  ShoalClient(const ShoalClient&) = delete;
  ShoalClient& operator=(const ShoalClient&) = delete;

  // A sequence_unknown refusal (the sidecar could not decide some (producer, seq): nothing of
  // theirs was taken as stored) puts the indices of those events in `unknown`, when given.
  Result<std::vector<wire::ProduceResult>> Produce(const std::vector<OutgoingEvent>& events,
                                                   std::vector<size_t>* unknown = nullptr);
  Result<std::vector<wire::ConsumedEvent>> Consume(const std::string& group, size_t max,
                                                   int64_t wait_ms);
  Status Commit(const std::string& group, const std::vector<wire::CommitOffset>& offsets);
  // GET /v1/topics/{topic}: the raw JSON of the topic view.
  Result<std::string> TopicView();

 private:
  // `error_body` receives the body of an error answer, when given.
  Result<std::string> Call(const std::string& method, const std::string& path_and_query,
                           const std::string& body, std::string* error_body = nullptr);

  const std::string topic_;
  const TlsClientFiles tls_;
  std::unique_ptr<web::http::client::http_client> http_;
};

}  // namespace shoal::client
