// libFuzzer target for every parser that reads bytes from outside the process: produce and
// commit requests (the sidecar's data plane), in JSON and in binary batches, partition maps
// (admin plane, operator status) and the answers a client decodes, in either format. Sanitizers
// catch memory errors; the checks below catch parsers that accept what they promise to reject. Run
// it with scripts/fuzz.sh.
#include <simdjson.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"
#include "shoal/common/wire.h"

namespace {

using shoal::PartitionMap;
using shoal::Status;
namespace wire = shoal::wire;

[[noreturn]] void Fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "invariant violated: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

void Check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) Fail(what, detail);
}

bool IsJson(std::string_view text) {
  static simdjson::dom::parser parser;
  simdjson::dom::element doc;
  return parser.parse(text.data(), text.size(), true).get(doc) == simdjson::SUCCESS;
}

// A JSON value as the JSON decoder hands it out (parsed and written back: no whitespace between
// tokens, numbers in simdjson's form): a binary answer's JSON value is kept as the producer sent
// it (docs/data-plane.md), so "8e52\t" from a binary answer is "8e+52" through JSON.
std::string Normalized(std::string_view text) {
  static simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text.data(), text.size(), true).get(doc) != simdjson::SUCCESS) {
    return std::string(text);
  }
  return simdjson::minify(doc);
}

// A rejection must say why and be one of the codes the sidecar maps to 400/413.
void CheckRejection(const Status& st, const char* parser) {
  Check(st.code() == Status::Code::kInvalidArgument || st.code() == Status::Code::kTooLarge, parser,
        st.ToString());
  Check(!st.message().empty(), parser, "rejection without a reason");
}

// What a successful produce parse promises the broker (wire.h, docs/data-plane.md).
void CheckProduceEvents(const wire::ProduceRequestParser& parser, const wire::Limits& limits) {
  const auto& events = parser.events();
  Check(!events.empty(), "produce: accepted an empty batch");
  Check(events.size() <= limits.max_events, "produce: more events than max_events");
  for (const auto& e : events) {
    Check(!e.key.empty(), "produce: empty key accepted");
    Check(e.key.size() <= limits.max_key_bytes, "produce: key over the limit", e.key);
    Check(e.raw || !e.value.empty(), "produce: empty value text (missing value must be null)");
    Check(e.value.size() <= limits.max_value_bytes, "produce: value over the limit", e.value);
    Check(e.raw || IsJson(e.value), "produce: value does not re-parse as JSON", e.value);
    Check(simdjson::validate_utf8(e.key.data(), e.key.size()), "produce: key not UTF-8", e.key);
    Check(e.producer.size() <= limits.max_producer_bytes, "produce: producer over the limit",
          e.producer);
    Check(e.producer.empty() == !e.seq.has_value(), "produce: producer and seq not paired",
          e.producer);
  }
}

void FuzzProduce(std::string_view body, wire::Format format) {
  // Reused across inputs, like the sidecar's thread_local parser, so stale state between
  // parses is exercised too.
  static wire::ProduceRequestParser parser;
  static wire::ProduceRequestParser small_parser;
  // Small limits make the TooLarge paths reachable with short inputs.
  static const wire::Limits kSmall{
      .max_key_bytes = 8, .max_value_bytes = 16, .max_producer_bytes = 4, .max_events = 3};
  static const wire::Limits kDefault{};

  Status st = parser.Parse(format, body, kDefault);
  if (st.ok()) {
    CheckProduceEvents(parser, kDefault);
  } else {
    CheckRejection(st, "produce");
  }

  Status small = small_parser.Parse(format, body, kSmall);
  if (!small.ok()) {
    CheckRejection(small, "produce (small limits)");
    return;
  }
  CheckProduceEvents(small_parser, kSmall);
  // Tighter limits can only reject more: what passes them passes the defaults, unchanged.
  Check(st.ok(), "produce: accepted under small limits but rejected under defaults", st.ToString());
  Check(parser.events().size() == small_parser.events().size(), "produce: limits change count");
  for (size_t i = 0; i < parser.events().size(); ++i) {
    const auto& a = parser.events()[i];
    const auto& b = small_parser.events()[i];
    Check(a.key == b.key && a.value == b.value && a.producer == b.producer && a.seq == b.seq &&
              a.raw == b.raw,
          "produce: limits change an event", a.key);
  }
  // What was accepted, encoded again as a binary batch, parses to the same events (the
  // encoding a client and a forwarding sidecar use).
  std::vector<const wire::ProduceEvent*> ptrs;
  for (const auto& e : parser.events()) ptrs.push_back(&e);
  const std::string again = wire::EncodeBinaryProduceRequest(ptrs);
  static wire::ProduceRequestParser again_parser;
  Status back = again_parser.ParseBinary(again, kDefault);
  Check(back.ok(), "produce: a re-encoded binary batch is refused", back.ToString());
  Check(again_parser.events().size() == parser.events().size(), "produce: re-encoding count");
  for (size_t i = 0; i < parser.events().size(); ++i) {
    const auto& a = parser.events()[i];
    const auto& b = again_parser.events()[i];
    Check(a.key == b.key && a.value == b.value && a.producer == b.producer && a.seq == b.seq &&
              a.raw == b.raw,
          "produce: binary re-encoding changed an event", a.key);
  }
}

void FuzzCommitParam(std::string_view text) {
  auto offsets = wire::ParseCommitParam(text);
  if (!offsets.ok()) {
    CheckRejection(offsets.status(), "commit param");
    return;
  }
  Check(!offsets->empty() && offsets->size() <= wire::kMaxCommitParamOffsets,
        "commit param: count out of bounds", text);
  // Digits only: the accepted text is exactly what encoding the pairs gives, less leading zeros.
  auto back = wire::ParseCommitParam(wire::EncodeCommitParam(*offsets));
  Check(back.ok() && back->size() == offsets->size(), "commit param: round trip", text);
}

void FuzzCommit(std::string_view body) {
  auto req = wire::ParseCommitRequest(body);
  if (!req.ok()) {
    CheckRejection(req.status(), "commit");
    return;
  }
  Check(wire::ValidateGroup(req->group).ok(), "commit: invalid group accepted", req->group);
  Check(!req->offsets.empty(), "commit: empty offsets accepted");
}

void FuzzPartitionMap(std::string_view text) {
  auto map = PartitionMap::FromJson(text);
  if (!map.ok()) {
    Check(map.status().code() == Status::Code::kInvalidArgument, "map: unexpected code",
          map.status().ToString());
    return;
  }
  Check(map->Validate().ok(), "map: FromJson returned an invalid map", map->Validate().ToString());
  // Routing relies on Validate: every hash point, including both ends, has an active owner.
  for (uint32_t h : {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu}) {
    const auto& p = map->Route(h);
    Check(p.active() && p.range.Contains(h), "map: Route picked a partition not owning h");
  }
  // The map travels as JSON between operator and sidecars: encoding must round-trip.
  const std::string json = map->ToJson();
  auto back = PartitionMap::FromJson(json);
  Check(back.ok(), "map: ToJson output rejected by FromJson", back.status().ToString());
  Check(*back == *map, "map: JSON round trip changed the map", json);
}

void CheckSameEvents(const std::vector<wire::ConsumedEvent>& consumed, const std::string& again);

void FuzzAnswers(std::string_view body, wire::Format format) {
  auto produced = format == wire::Format::kBinary ? wire::ParseBinaryProduceResponse(body)
                                                  : wire::ParseProduceResponse(body);
  if (!produced.ok()) CheckRejection(produced.status(), "produce answer");

  auto consumed = format == wire::Format::kBinary ? wire::ParseBinaryConsumeResponse(body)
                                                  : wire::ParseConsumeResponse(body);
  if (!consumed.ok()) {
    CheckRejection(consumed.status(), "consume answer");
    return;
  }
  // Re-encode what was decoded with the sidecar's encoder, in both formats: each must decode to
  // the same events, which also checks that AppendString escapes every key a client can
  // receive (a binary answer's keys are any bytes; JSON keeps only what is UTF-8).
  for (auto to : {wire::Format::kJson, wire::Format::kBinary}) {
    std::string again;
    wire::OpenConsumeAnswer(to, again);
    bool all_utf8 = true;
    for (size_t i = 0; i < consumed->size(); ++i) {
      const auto& e = (*consumed)[i];
      Check(e.raw || format == wire::Format::kBinary || IsJson(e.value),
            "consume: value does not re-parse as JSON", e.value);
      all_utf8 = all_utf8 && simdjson::validate_utf8(e.key.data(), e.key.size()) &&
                 simdjson::validate_utf8(e.producer.data(), e.producer.size()) &&
                 (e.raw || IsJson(e.value));
      wire::AppendAnswerEvent(to, again, i > 0, e.key, e.value, e.raw, e.partition, e.offset,
                              e.producer, e.seq, e.timestamp_ms);
    }
    wire::CloseConsumeAnswer(to, again);
    if (to == wire::Format::kJson && !all_utf8) continue;  // no JSON answer carries these
    CheckSameEvents(*consumed, again);
  }
}

void CheckSameEvents(const std::vector<wire::ConsumedEvent>& consumed, const std::string& again) {
  auto back = wire::ParseAnyConsumeResponse(again);
  Check(back.ok(), "consume: re-encoded answer rejected", again);
  Check(back->size() == consumed.size(), "consume: re-encoding changed the count", again);
  for (size_t i = 0; i < back->size(); ++i) {
    const auto& a = (*back)[i];
    const auto& b = consumed[i];
    const bool same_value =
        a.value == b.value || (!a.raw && Normalized(a.value) == Normalized(b.value));
    Check(a.key == b.key && same_value && a.raw == b.raw && a.partition == b.partition &&
              a.offset == b.offset && a.producer == b.producer && a.seq == b.seq &&
              a.timestamp_ms == b.timestamp_ms,
          "consume: re-encoding changed an event", again);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  FuzzProduce(body, wire::Format::kJson);
  FuzzProduce(body, wire::Format::kBinary);
  FuzzCommit(body);
  FuzzCommitParam(body);
  FuzzPartitionMap(body);
  FuzzAnswers(body, wire::Format::kJson);
  FuzzAnswers(body, wire::Format::kBinary);
  return 0;
}
