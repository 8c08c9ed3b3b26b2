// ShoalClient: the data-plane client of one sidecar and topic, over cpprestsdk's http_client.
// Every call is blocking and returns a Status/Result (cpprestsdk's exceptions are caught here);
// a 4xx/5xx answer becomes a Status carrying the sidecar's {"error","reason"}.
//
// Thread-safe (http_client is); one instance may serve many threads. Owned by its caller.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
  std::string value_json = "null";  // any JSON text; the bytes themselves when raw
  std::string producer;             // empty: not idempotent
  std::optional<uint64_t> seq;
  // The value is opaque bytes (only a binary batch carries those: a request holding one goes in
  // binary whatever the client's format; consumers see it as ConsumedEvent::raw).
  bool raw = false;
};

// Builds the produce body {"events":[...]} for these events (none raw).
std::string EncodeProduceBody(const std::vector<OutgoingEvent>& events);
// Builds a binary produce batch of these events (docs/data-plane.md "Binary batches"): raw
// values as bytes, the others flagged JSON (the sidecar checks them).
std::string EncodeBinaryProduceBody(const std::vector<OutgoingEvent>& events);

// Whether a call that failed with `st` may succeed when made again as it was: 503 or no answer
// (kUnavailable), 507 a full volume (kNoSpace).
inline bool Retryable(const Status& st) {
  return st.code() == Status::Code::kUnavailable || st.code() == Status::Code::kNoSpace;
}

// An active partition's hash range [lo, hi) and the data address ("host:port") of the pod that
// owns it.
struct OwnedRange {
  uint64_t lo = 0, hi = 0;
  std::string data_address;
};
// The owned ranges a topic view (GET /v1/topics/{topic}: its partitions and "peers") shows, by
// lo: the active partitions whose owner's address it lists. An error when it is not a view.
Result<std::vector<OwnedRange>> OwnedRanges(std::string_view topic_view);
// The range of `ranges` (sorted by lo, disjoint, each with lo and hi) that holds hash `h`, or
// nullptr.
template <typename Range>
const Range* RangeHolding(const std::vector<Range>& ranges, uint64_t h) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), h,
                             [](uint64_t v, const Range& r) { return v < r.lo; });
  if (it == ranges.begin()) return nullptr;
  --it;
  return h < it->hi ? &*it : nullptr;
}
// The range holding `key` (by KeyHash, as the sidecars route), or nullptr.
const OwnedRange* RangeOf(const std::vector<OwnedRange>& ranges, std::string_view key);

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

  // The format of produce bodies and of the answers asked for (JSON by default; binary saves
  // the sidecar and this client a JSON parse and encoding per event). Set before the calls.
  void set_format(wire::Format format) { format_ = format; }

  // A sequence_unknown refusal (the sidecar could not decide some (producer, seq): nothing of
  // theirs was taken as stored) puts the indices of those events in `unknown`, when given.
  Result<std::vector<wire::ProduceResult>> Produce(const std::vector<OutgoingEvent>& events,
                                                   std::vector<size_t>* unknown = nullptr);
  // `commit`: the group's commit of what it processed before (its previous batch), carried by
  // this request and done first, saving the POST of it (docs/data-plane.md, Consume).
  Result<std::vector<wire::ConsumedEvent>> Consume(
      const std::string& group, size_t max, int64_t wait_ms,
      const std::vector<wire::CommitOffset>& commit = {});
  Status Commit(const std::string& group, const std::vector<wire::CommitOffset>& offsets);
  // GET /v1/topics/{topic}: the raw JSON of the topic view.
  Result<std::string> TopicView();

 private:
  // `error_body` receives the body of an error answer, when given.
  Result<std::string> Call(const std::string& method, const std::string& path_and_query,
                           const std::string& body, std::string* error_body = nullptr,
                           bool binary_body = false);

  const std::string topic_;
  wire::Format format_ = wire::Format::kJson;
  const TlsClientFiles tls_;
  std::unique_ptr<web::http::client::http_client> http_;
};

}  // namespace shoal::client
