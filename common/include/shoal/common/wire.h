// The data plane's wire format (docs/data-plane.md): parsing of produce and
// commit requests on the sidecar, encoding of their answers, and the client-side decoders of those
// answers. Pure functions of bytes; no I/O, so the parsers can be fuzzed on their own.
//
// A parser object owns reusable buffers; one per thread. The views it hands out stay valid until
// its next Parse call. Not thread-safe.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"

namespace shoal::wire {

struct Limits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  size_t max_producer_bytes = 256;
  size_t max_events = 100000;
};

struct ProduceEvent {
  std::string_view key;
  std::string_view value;     // minified JSON text; "null" when the event had no value
  std::string_view producer;  // empty when the event has no producer id
  std::optional<uint64_t> seq;
};

// Parses {"events":[{"key":..,"value":..,"producer":..,"seq":..}, ...]}. Rejects the whole body
// on the first bad event, naming the event's index and the field, so nothing of it is appended.
class ProduceRequestParser {
 public:
  Status Parse(std::string_view body, const Limits& limits);
  const std::vector<ProduceEvent>& events() const { return events_; }

 private:
  simdjson::dom::parser parser_;
  simdjson::internal::string_builder<> builder_;
  std::string arena_;  // minified values, back to back
  std::vector<ProduceEvent> events_;
};

// Encodes events as a produce body {"events":[...]} (values are JSON text, copied verbatim).
std::string EncodeProduceRequest(const std::vector<const ProduceEvent*>& events);

struct CommitOffset {
  PartitionId partition{0};
  Offset offset{0};  // the next offset the group will read (one past its last processed event)
};

struct CommitRequest {
  std::string group;
  std::vector<CommitOffset> offsets;
};

// Parses {"group":"G","offsets":[{"partition":3,"offset":121}, ...]}.
Result<CommitRequest> ParseCommitRequest(std::string_view body);
std::string EncodeCommitRequest(const CommitRequest& request);

// A consumer group name: 1..200 bytes of [A-Za-z0-9._:-]. Returns why not, or OK.
Status ValidateGroup(std::string_view group);

// One result of a produce request, in request order.
struct ProduceResult {
  uint32_t partition = 0;
  uint64_t offset = 0;
  bool duplicate = false;
};
void EncodeProduceResults(const std::vector<ProduceResult>& results, std::string& out);

// One delivered event, as the consume answer carries it.
struct ConsumedEvent {
  std::string key;
  std::string value;  // raw JSON text
  uint32_t partition = 0;
  uint64_t offset = 0;
  std::string producer;
  std::optional<uint64_t> seq;
  int64_t timestamp_ms = 0;
};
// Appends one event object of the consume answer to `out` (the caller writes the envelope).
void AppendConsumedEvent(std::string& out, std::string_view key, std::string_view value,
                         uint32_t partition, uint64_t offset, std::string_view producer,
                         std::optional<uint64_t> seq, int64_t timestamp_ms);

// Reads through hash ranges between sidecars, on the admin plane (docs/admin-api.md): a
// successor's owner reads its range of an ancestor from the ancestor's owner for the consumers
// of its pod (`reader`), and commits what they took.
struct RangeReadRequest {
  std::string group;
  std::string reader;
  std::vector<HashRange> ranges;
  size_t max = 100;
  size_t max_bytes = 4 << 20;
};
// {"group":G,"reader":POD,"ranges":[[lo,hi],...],"max":N,"max_bytes":B}; at most
// kMaxRangeReadRanges ranges, max <= 10000, max_bytes <= 64 MiB.
inline constexpr size_t kMaxRangeReadRanges = 4096;
Result<RangeReadRequest> ParseRangeReadRequest(std::string_view body);
std::string EncodeRangeReadRequest(const RangeReadRequest& request);
// The answer: a JSON header on the first line, {"count":N,"last":L,"scanned_to":T,
// "consumed":bool,"ranges":[[lo,hi],...]}, then the events as a consume answer lists them,
// comma-separated (so that the reader's sidecar puts them into its own answer as they are).
struct RangeReadAnswer {
  size_t count = 0;
  uint64_t last = 0;
  uint64_t scanned_to = 0;
  bool consumed = false;
  std::vector<HashRange> ranges;
  std::string events;
};
std::string EncodeRangeReadAnswer(size_t count, uint64_t last, uint64_t scanned_to,
                                  bool consumed, const std::vector<HashRange>& ranges,
                                  std::string_view events);
Result<RangeReadAnswer> ParseRangeReadAnswer(std::string_view body);
// {"group":G,"reader":POD,"offset":O}: the consumers of pod POD processed everything below O of
// the batch they were handed through ranges.
struct RangeCommitRequest {
  std::string group;
  std::string reader;
  uint64_t offset = 0;
};
Result<RangeCommitRequest> ParseRangeCommitRequest(std::string_view body);
std::string EncodeRangeCommitRequest(const RangeCommitRequest& request);

// Client side: decoders of the sidecar's answers.

// The status an error answer stands for: the code its JSON body's "error" names (the body is
// {"error": name, "reason": text}, docs/data-plane.md), so that outcomes such as stale_epoch and
// conflict, which share HTTP 409, stay apart; the HTTP code decides only for a body without a known
// name. The message is `context`, the HTTP code and the reason.
Status ErrorFromAnswer(int http_code, std::string_view body, std::string_view context);
// The "unknown" array of a sequence_unknown answer to a produce request: the indices, in the
// request, of the events whose (producer, seq) the sidecar could not decide. Empty when absent.
std::vector<size_t> ParseUnknownIndices(std::string_view body);
// The body of that answer.
std::string SequenceUnknownBody(std::string_view reason, const std::vector<size_t>& indices);
Result<std::vector<ProduceResult>> ParseProduceResponse(std::string_view body);
Result<std::vector<ConsumedEvent>> ParseConsumeResponse(std::string_view body);

}  // namespace shoal::wire
