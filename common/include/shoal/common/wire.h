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

// The two body formats of produce and consume (docs/data-plane.md "Binary batches"): JSON, and a
// length-prefixed binary batch negotiated by Content-Type (produce) and Accept (the answers).
enum class Format { kJson, kBinary };
inline constexpr std::string_view kBinaryType = "application/vnd.shoal.batch";
inline constexpr std::string_view kProduceMagic = "SHP1";  // a binary produce request
inline constexpr std::string_view kResultsMagic = "SHR1";  // a binary produce answer
inline constexpr std::string_view kEventsMagic = "SHC1";   // a binary consume answer
// Flags of a binary event.
inline constexpr uint8_t kFlagSeq = 1;   // seq is meaningful (the event has a producer id)
inline constexpr uint8_t kFlagJson = 2;  // the value is JSON text (otherwise: opaque bytes)
inline constexpr size_t kBinaryProduceHeader = 17;  // u8 flags, u16, u16, u32 lengths, u64 seq
inline constexpr size_t kBinaryEventHeader = 37;    // u32 partition, u64 offset, i64 ts, + above
// The format a Content-Type or Accept header asks for: binary when it names kBinaryType (case
// aside, parameters after ';' ignored, any one of a comma-separated list), JSON otherwise.
Format FormatOf(std::string_view header);

struct ProduceEvent {
  std::string_view key;
  std::string_view value;     // JSON text, "null" when the event had no value; bytes when raw
  std::string_view producer;  // empty when the event has no producer id
  std::optional<uint64_t> seq;
  bool raw = false;  // the value is opaque bytes (a binary batch's event without kFlagJson)
};

// Parses {"events":[{"key":..,"value":..,"producer":..,"seq":..}, ...]}. Rejects the whole body
// on the first bad event, naming the event's index and the field, so nothing of it is appended.
class ProduceRequestParser {
 public:
  Status Parse(std::string_view body, const Limits& limits);
  // Parses a binary batch (docs/data-plane.md "Binary batches"). Views point into `body`, which
  // must outlive them. A value flagged JSON is checked to be one JSON value and kept as sent.
  Status ParseBinary(std::string_view body, const Limits& limits);
  Status Parse(Format format, std::string_view body, const Limits& limits) {
    return format == Format::kBinary ? ParseBinary(body, limits) : Parse(body, limits);
  }
  const std::vector<ProduceEvent>& events() const { return events_; }

 private:
  simdjson::dom::parser parser_;
  simdjson::internal::string_builder<> builder_;
  std::string arena_;  // minified values, back to back
  std::vector<ProduceEvent> events_;
};

// Encodes events as a produce body {"events":[...]} (values are JSON text, copied verbatim).
// Every event's value must be JSON text (none raw): a batch with raw values goes in binary.
std::string EncodeProduceRequest(const std::vector<const ProduceEvent*>& events);
// Encodes events as a binary produce batch; raw values as bytes, the others flagged JSON. Keys
// and producer ids must be at most 65,535 bytes (u16 lengths; callers check, as the sidecar's
// limits do).
std::string EncodeBinaryProduceRequest(const std::vector<const ProduceEvent*>& events);

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
// Parses a consume's `commit` parameter, "3:121,4:7" (partition:offset, comma-separated, at
// most kMaxCommitParamOffsets, digits only): the commit a consume carries of the previous batch.
inline constexpr size_t kMaxCommitParamOffsets = 4096;
Result<std::vector<CommitOffset>> ParseCommitParam(std::string_view text);
std::string EncodeCommitParam(const std::vector<CommitOffset>& offsets);
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
// "SHR1", u32 count, then per result u32 partition, u64 offset, u8 duplicate.
void EncodeBinaryProduceResults(const std::vector<ProduceResult>& results, std::string& out);

// One delivered event, as the consume answer carries it.
struct ConsumedEvent {
  std::string key;
  std::string value;  // JSON text; the bytes as produced when raw
  uint32_t partition = 0;
  uint64_t offset = 0;
  std::string producer;
  std::optional<uint64_t> seq;
  int64_t timestamp_ms = 0;
  bool raw = false;  // produced in a binary batch as opaque bytes (JSON shows it as value_b64)
};
// Appends one event object of the consume answer to `out` (the caller writes the envelope). A
// raw value goes as "value_b64" (base64), a JSON one as "value".
void AppendConsumedEvent(std::string& out, std::string_view key, std::string_view value, bool raw,
                         uint32_t partition, uint64_t offset, std::string_view producer,
                         std::optional<uint64_t> seq, int64_t timestamp_ms);
// Appends one event of a binary consume answer (docs/data-plane.md "Binary batches").
void AppendBinaryEvent(std::string& out, std::string_view key, std::string_view value, bool raw,
                       uint32_t partition, uint64_t offset, std::string_view producer,
                       std::optional<uint64_t> seq, int64_t timestamp_ms);
// A consume answer in either format: its opening, one event (`comma`: events precede it, which
// JSON separates with commas), its end.
void OpenConsumeAnswer(Format format, std::string& out);
inline void AppendAnswerEvent(Format format, std::string& out, bool comma, std::string_view key,
                              std::string_view value, bool raw, uint32_t partition, uint64_t offset,
                              std::string_view producer, std::optional<uint64_t> seq,
                              int64_t timestamp_ms) {
  if (format == Format::kBinary) {
    AppendBinaryEvent(out, key, value, raw, partition, offset, producer, seq, timestamp_ms);
    return;
  }
  if (comma) out.push_back(',');
  AppendConsumedEvent(out, key, value, raw, partition, offset, producer, seq, timestamp_ms);
}
void CloseConsumeAnswer(Format format, std::string& out);
// An empty consume answer.
std::string EmptyConsumeAnswer(Format format);
// The bytes between OpenConsumeAnswer and CloseConsumeAnswer of one format, in the other (a
// range read's events, which peers exchange as JSON, for a binary consumer).
Result<std::string> ConvertAnswerEvents(std::string_view events, Format from, Format to);

std::string Base64(std::string_view bytes);
// Standard alphabet with padding; nullopt for anything else.
std::optional<std::string> FromBase64(std::string_view text);

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
Result<std::vector<ProduceResult>> ParseBinaryProduceResponse(std::string_view body);
Result<std::vector<ConsumedEvent>> ParseBinaryConsumeResponse(std::string_view body);
// By the answer's format (its first four bytes name a binary one).
Result<std::vector<ConsumedEvent>> ParseAnyConsumeResponse(std::string_view body);
Result<std::vector<ProduceResult>> ParseAnyProduceResponse(std::string_view body);

}  // namespace shoal::wire
