#include "shoal/common/wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shoal::wire {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// ProduceRequestParser: accepted bodies

TEST(ProduceRequestParserTest, MinifiesValuesOfEveryJsonType) {
  struct Case {
    const char* value_in;
    const char* value_out;
  };
  // Values are re-serialized by simdjson: whitespace goes, escapes that JSON does not require
  // (\/, \u00e9) are decoded. Consumers see an equivalent, canonical value.
  const Case cases[] = {
      {R"("text")", R"("text")"},
      {R"("q\"b\\s\u0001\/\u00e9")", "\"q\\\"b\\\\s\\u0001/\xC3\xA9\""},
      {"0", "0"},
      {"-42", "-42"},
      {"18446744073709551615", "18446744073709551615"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"1.5", "1.5"},
      {"true", "true"},
      {"false", "false"},
      {"null", "null"},
      {"{ }", "{}"},
      {"[ ]", "[]"},
      {R"( { "a" : [ 1 , { "b" : null } , "x y" ] ,  "c" : false } )",
       R"({"a":[1,{"b":null},"x y"],"c":false})"},
  };
  ProduceRequestParser parser;
  for (const auto& c : cases) {
    const std::string body = std::string(R"({"events":[{"key":"k","value":)") + c.value_in + "}]}";
    SCOPED_TRACE(body);
    Status st = parser.Parse(body, Limits{});
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(parser.events().size(), 1u);
    EXPECT_EQ(parser.events()[0].key, "k");
    EXPECT_EQ(parser.events()[0].value, c.value_out);
  }
}

TEST(ProduceRequestParserTest, FillsDefaultsAndIdempotencyFields) {
  ProduceRequestParser parser;
  const std::string body = R"({"events":[
      {"key":"user_1"},
      {"value":{"n":1},"key":"user_2","seq":7,"producer":"p1"},
      {"key":"k\"\\\u00e9","producer":"p2","seq":0,"value":[1]},
      {"key":"user_1","value":"second","producer":"p1","seq":18446744073709551615}]})";
  Status st = parser.Parse(body, Limits{});
  ASSERT_TRUE(st.ok()) << st.ToString();
  const auto& ev = parser.events();
  ASSERT_EQ(ev.size(), 4u);

  EXPECT_EQ(ev[0].key, "user_1");
  EXPECT_EQ(ev[0].value, "null");  // no value is the JSON null, never an empty text
  EXPECT_EQ(ev[0].producer, "");
  EXPECT_FALSE(ev[0].seq.has_value());

  EXPECT_EQ(ev[1].key, "user_2");
  EXPECT_EQ(ev[1].value, R"({"n":1})");
  EXPECT_EQ(ev[1].producer, "p1");
  EXPECT_EQ(ev[1].seq, 7u);

  EXPECT_EQ(ev[2].key, "k\"\\\xC3\xA9");  // keys are decoded, not raw JSON
  EXPECT_EQ(ev[2].producer, "p2");
  EXPECT_EQ(ev[2].seq, 0u);

  // Request order is kept: the broker relies on it for per-key order within a request.
  EXPECT_EQ(ev[3].key, "user_1");
  EXPECT_EQ(ev[3].value, R"("second")");
  EXPECT_EQ(ev[3].seq, UINT64_MAX);
}

TEST(ProduceRequestParserTest, ViewsSurviveManyEventsAndEachParseReplacesTheLast) {
  // Enough values to make the arena reallocate several times: views must point at final data.
  std::string body = R"({"events":[)";
  for (int i = 0; i < 3000; ++i) {
    if (i) body += ',';
    body += R"({"key":"k)" + std::to_string(i) + R"(","value":")" + std::string(i % 50, 'v') +
            std::to_string(i) + "\"}";
  }
  body += "]}";
  ProduceRequestParser parser;
  ASSERT_TRUE(parser.Parse(body, Limits{}).ok());
  ASSERT_EQ(parser.events().size(), 3000u);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(parser.events()[i].key, "k" + std::to_string(i));
    ASSERT_EQ(parser.events()[i].value, "\"" + std::string(i % 50, 'v') + std::to_string(i) + "\"");
  }

  ASSERT_TRUE(parser.Parse(R"({"events":[{"key":"only"}]})", Limits{}).ok());
  ASSERT_EQ(parser.events().size(), 1u);
  EXPECT_EQ(parser.events()[0].key, "only");
  EXPECT_EQ(parser.events()[0].value, "null");
}

TEST(ProduceRequestParserTest, LimitsAreInclusive) {
  const Limits limits{
      .max_key_bytes = 8, .max_value_bytes = 10, .max_producer_bytes = 3, .max_events = 2};
  ProduceRequestParser parser;
  // Key of 8 bytes, value of 10 bytes ("12345678" with quotes), producer of 3, 2 events.
  const std::string at_limit =
      R"({"events":[{"key":"12345678","value":"12345678","producer":"abc","seq":1},{"key":"k"}]})";
  Status st = parser.Parse(at_limit, limits);
  EXPECT_TRUE(st.ok()) << st.ToString();

  struct Case {
    std::string body;
    Status::Code code;
    const char* reason;
  };
  const Case over[] = {
      {R"({"events":[{"key":"123456789"}]})", Status::Code::kTooLarge,
       "events[0].key is 9 bytes; the limit is 8"},
      {R"({"events":[{"key":"k"},{"key":"k","value":"123456789"}]})", Status::Code::kTooLarge,
       "events[1].value is 11 bytes; the limit is 10"},
      // A multi-byte key is measured in bytes, not characters: 3 x 3 bytes.
      {"{\"events\":[{\"key\":\"\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\"}]}", Status::Code::kTooLarge,
       "events[0].key is 9 bytes"},
      {R"({"events":[{"key":"k","producer":"abcd","seq":1}]})", Status::Code::kInvalidArgument,
       "events[0].producer must be 1..3 bytes"},
      {R"({"events":[{"key":"a"},{"key":"b"},{"key":"c"}]})", Status::Code::kTooLarge,
       "at most 2 events"},
  };
  for (const auto& c : over) {
    SCOPED_TRACE(c.body);
    st = parser.Parse(c.body, limits);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), c.code) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(c.reason));
  }
}

// ---------------------------------------------------------------------------------------------
// ProduceRequestParser: rejected bodies. The reason is what a user reads in the 400 answer, so
// it must name the event index and the field.

struct RejectCase {
  const char* name;
  std::string body;
  Status::Code code;
  std::vector<std::string> reason;  // substrings the message must contain
};

// Test names and failure messages show the case name instead of the struct's raw bytes.
void PrintTo(const RejectCase& c, std::ostream* os) { *os << c.name; }

class ProduceRequestRejectTest : public ::testing::TestWithParam<RejectCase> {};

TEST_P(ProduceRequestRejectTest, RejectsTheWholeBody) {
  const RejectCase& c = GetParam();
  ProduceRequestParser parser;
  Status st = parser.Parse(c.body, Limits{.max_key_bytes = 16, .max_value_bytes = 16});
  ASSERT_FALSE(st.ok()) << c.body;
  EXPECT_EQ(st.code(), c.code) << st.ToString();
  for (const auto& s : c.reason) EXPECT_THAT(st.message(), HasSubstr(s));
}

const auto kInvalid = Status::Code::kInvalidArgument;
const auto kTooLarge = Status::Code::kTooLarge;

INSTANTIATE_TEST_SUITE_P(
    Cases, ProduceRequestRejectTest,
    ::testing::Values(
        RejectCase{"empty_body", "", kInvalid, {"not valid JSON"}},
        RejectCase{"truncated", R"({"events":[{"key":"a")", kInvalid, {"not valid JSON"}},
        RejectCase{"trailing_comma", R"({"events":[{"key":"a"},]})", kInvalid, {"not valid JSON"}},
        RejectCase{"two_documents", R"({"events":[{"key":"a"}]}{})", kInvalid, {"not valid JSON"}},
        RejectCase{
            "invalid_utf8", "{\"events\":[{\"key\":\"\xFF\"}]}", kInvalid, {"not valid JSON"}},
        RejectCase{"seq_beyond_uint64",
                   R"({"events":[{"key":"a","producer":"p",
                   "seq":18446744073709551616}]})",
                   kInvalid,
                   {"not valid JSON"}},
        RejectCase{"array_body", R"([{"key":"a"}])", kInvalid, {"JSON object"}},
        RejectCase{"string_body", R"("events")", kInvalid, {"JSON object"}},
        RejectCase{"missing_events", "{}", kInvalid, {"\"events\" is missing or empty"}},
        RejectCase{
            "empty_events", R"({"events":[]})", kInvalid, {"\"events\" is missing or empty"}},
        RejectCase{"events_not_array",
                   R"({"events":{"key":"a"}})",
                   kInvalid,
                   {"\"events\" must be an array"}},
        RejectCase{"unknown_top_field",
                   R"({"events":[{"key":"a"}],"topic":"t"})",
                   kInvalid,
                   {"unknown field \"topic\""}},
        RejectCase{"event_not_object",
                   R"({"events":[{"key":"a"},"b"]})",
                   kInvalid,
                   {"events[1] must be an object"}},
        RejectCase{"unknown_event_field",
                   R"({"events":[{"key":"a","vaule":1}]})",
                   kInvalid,
                   {"events[0]", "unknown field \"vaule\""}},
        RejectCase{"missing_key",
                   R"({"events":[{"key":"a"},{"value":1}]})",
                   kInvalid,
                   {"events[1].key is missing or empty"}},
        RejectCase{"empty_key",
                   R"({"events":[{"key":""}]})",
                   kInvalid,
                   {"events[0].key is missing or empty"}},
        RejectCase{"number_key",
                   R"({"events":[{"key":"a"},{"key":"b"},{"key":1}]})",
                   kInvalid,
                   {"events[2].key must be a string"}},
        RejectCase{"null_key",
                   R"({"events":[{"key":null}]})",
                   kInvalid,
                   {"events[0].key must be a string"}},
        RejectCase{"object_key",
                   R"({"events":[{"key":{"a":1}}]})",
                   kInvalid,
                   {"events[0].key must be a string"}},
        RejectCase{"key_too_large",
                   R"({"events":[{"key":"a"},{"key":"0123456789abcdefg"}]})",
                   kTooLarge,
                   {"events[1].key is 17 bytes; the limit is 16"}},
        RejectCase{"value_too_large",
                   R"({"events":[{"key":"a","value":[1,2,3,4,5,6,7,8,9]}]})",
                   kTooLarge,
                   {"events[0].value is 19 bytes; the limit is 16"}},
        RejectCase{"producer_without_seq",
                   R"({"events":[{"key":"a","producer":"p"}]})",
                   kInvalid,
                   {"events[0] has producer without seq"}},
        RejectCase{"seq_without_producer",
                   R"({"events":[{"key":"a"},{"key":"b","seq":3}]})",
                   kInvalid,
                   {"events[1] has seq without producer"}},
        RejectCase{"empty_producer",
                   R"({"events":[{"key":"a","producer":"","seq":1}]})",
                   kInvalid,
                   {"events[0].producer must be 1.."}},
        RejectCase{"producer_not_string",
                   R"({"events":[{"key":"a","producer":7,"seq":1}]})",
                   kInvalid,
                   {"events[0].producer must be a string"}},
        RejectCase{"negative_seq",
                   R"({"events":[{"key":"a","producer":"p","seq":-1}]})",
                   kInvalid,
                   {"events[0].seq must be a non-negative integer"}},
        RejectCase{"fractional_seq",
                   R"({"events":[{"key":"a","producer":"p","seq":1.5}]})",
                   kInvalid,
                   {"events[0].seq must be a non-negative integer"}},
        RejectCase{"float_integral_seq",
                   R"({"events":[{"key":"a","producer":"p","seq":1e2}]})",
                   kInvalid,
                   {"events[0].seq must be a non-negative integer"}},
        RejectCase{"string_seq",
                   R"({"events":[{"key":"a","producer":"p","seq":"1"}]})",
                   kInvalid,
                   {"events[0].seq must be a non-negative integer"}}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Commit requests

TEST(ParseCommitRequestTest, AcceptsValidBodies) {
  auto r = ParseCommitRequest(
      R"({"group":"billing-v2","offsets":[{"partition":3,"offset":121},
          {"offset":0,"partition":4294967295},{"partition":0,"offset":18446744073709551615}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->group, "billing-v2");
  ASSERT_EQ(r->offsets.size(), 3u);
  EXPECT_EQ(r->offsets[0].partition, PartitionId(3));
  EXPECT_EQ(r->offsets[0].offset, Offset(121));
  EXPECT_EQ(r->offsets[1].partition, PartitionId(UINT32_MAX));
  EXPECT_EQ(r->offsets[1].offset, Offset(0));
  EXPECT_EQ(r->offsets[2].offset, Offset(UINT64_MAX));

  auto reordered = ParseCommitRequest(R"({"offsets":[{"partition":1,"offset":2}],"group":"g"})");
  ASSERT_TRUE(reordered.ok()) << reordered.status().ToString();
  EXPECT_EQ(reordered->group, "g");
}

TEST(ParseCommitRequestTest, RejectsBadBodies) {
  struct Case {
    const char* body;
    const char* reason;
  };
  const Case cases[] = {
      {"", "not valid JSON"},
      {R"({"group":"g","offsets":[)", "not valid JSON"},
      {R"([])", "JSON object"},
      {R"({"offsets":[{"partition":1,"offset":2}]})", "\"group\" is missing"},
      {R"({"group":7,"offsets":[{"partition":1,"offset":2}]})", "\"group\" must be a string"},
      {R"({"group":"","offsets":[{"partition":1,"offset":2}]})", "group must be 1..200"},
      {R"({"group":"a b","offsets":[{"partition":1,"offset":2}]})", "group may hold only"},
      {R"({"group":"g"})", "\"offsets\" is missing or empty"},
      {R"({"group":"g","offsets":[]})", "\"offsets\" is missing or empty"},
      {R"({"group":"g","offsets":{"partition":1,"offset":2}})", "\"offsets\" must be an array"},
      {R"({"group":"g","offsets":[{"partition":1,"offset":2},3]})", "offsets[1] needs"},
      {R"({"group":"g","offsets":[{"offset":2}]})", "offsets[0] needs integer \"partition\""},
      {R"({"group":"g","offsets":[{"partition":1}]})", "offsets[0] needs"},
      {R"({"group":"g","offsets":[{"partition":1,"offset":-2}]})", "offsets[0] needs"},
      {R"({"group":"g","offsets":[{"partition":1,"offset":2.5}]})", "offsets[0] needs"},
      {R"({"group":"g","offsets":[{"partition":"1","offset":2}]})", "offsets[0] needs"},
      {R"({"group":"g","offsets":[{"partition":4294967296,"offset":2}]})", "offsets[0] needs"},
      {R"({"group":"g","offsets":[{"partition":1,"offset":2}],"epoch":3})",
       "unknown field \"epoch\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    auto r = ParseCommitRequest(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.reason));
  }
}

TEST(ValidateGroupTest, AcceptsTheDocumentedAlphabetAndLength) {
  EXPECT_TRUE(ValidateGroup("g").ok());
  EXPECT_TRUE(ValidateGroup("Billing-v2.eu_west:1").ok());
  EXPECT_TRUE(ValidateGroup("0123456789").ok());
  EXPECT_TRUE(ValidateGroup(std::string(200, 'x')).ok());

  for (const std::string& bad :
       {std::string(""), std::string(201, 'x'), std::string("a b"), std::string("a/b"),
        std::string("a\nb"), std::string("a\0b", 3), std::string("caf\xC3\xA9"), std::string("g*"),
        std::string("\"g\"")}) {
    Status st = ValidateGroup(bad);
    EXPECT_FALSE(st.ok()) << "group \"" << bad << "\"";
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  }
}

// ---------------------------------------------------------------------------------------------
// Answers: encoder -> client decoder round trips

TEST(ProduceResponseTest, RoundTrips) {
  const std::vector<std::vector<ProduceResult>> cases = {
      {},
      {{.partition = 3, .offset = 120, .duplicate = false}},
      {{.partition = 0, .offset = 0, .duplicate = true},
       {.partition = UINT32_MAX, .offset = UINT64_MAX, .duplicate = false},
       {.partition = 7, .offset = 1, .duplicate = true}},
  };
  for (const auto& results : cases) {
    std::string out;
    EncodeProduceResults(results, out);
    SCOPED_TRACE(out);
    auto back = ParseProduceResponse(out);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ((*back)[i].partition, results[i].partition);
      EXPECT_EQ((*back)[i].offset, results[i].offset);
      EXPECT_EQ((*back)[i].duplicate, results[i].duplicate);
    }
  }
  std::string out;
  EncodeProduceResults({{.partition = 3, .offset = 120}}, out);
  EXPECT_EQ(out, R"({"results":[{"partition":3,"offset":120,"duplicate":false}]})");
}

TEST(ProduceResponseTest, RejectsMalformedAnswers) {
  for (const char* body : {"", "[]", R"({"error":"bad"})", R"({"results":{}})",
                           R"({"results":[{"partition":1,"offset":2}]})",
                           R"({"results":[{"partition":1,"offset":-2,"duplicate":false}]})"}) {
    auto r = ParseProduceResponse(body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << body;
  }
}

TEST(ConsumeResponseTest, RoundTripsKeysNeedingEscapes) {
  // Columns: key, value, partition, offset, producer, seq, timestamp_ms.
  const std::vector<ConsumedEvent> events = {
      {"user_1", R"({"n":1})", 3, 120, "", std::nullopt, 0},
      {"say \"hi\"", R"("quoted \"value\"")", 0, 0, "p\"1", 7, 1'700'000'000'000},
      {"back\\slash\\", "[1,true,null,1.5]", UINT32_MAX, UINT64_MAX, "p", UINT64_MAX, -1},
      {std::string("ctl\x01\x1f\n\r\t\b\f\x7f\0end", 15), "null", 1, 2, "", 0, 0},
      {"\xD0\xBA\xD0\xBB\xD1\x8E\xD1\x87 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",
       "\"\xE2\x82\xAC\"", 2, 5, "\xC3\xA9", std::nullopt, INT64_MIN},
      {"/not/escaped</script>", "{}", 4, 6, "", std::nullopt, 0},
  };
  std::string body = R"({"events":[)";
  for (size_t i = 0; i < events.size(); ++i) {
    if (i) body += ',';
    const auto& e = events[i];
    AppendConsumedEvent(body, e.key, e.value, e.raw, e.partition, e.offset, e.producer, e.seq,
                        e.timestamp_ms);
  }
  body += "]}";
  SCOPED_TRACE(body);

  auto back = ParseConsumeResponse(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    const auto& got = (*back)[i];
    const auto& want = events[i];
    EXPECT_EQ(got.key, want.key);
    EXPECT_EQ(got.value, want.value);
    EXPECT_EQ(got.partition, want.partition);
    EXPECT_EQ(got.offset, want.offset);
    EXPECT_EQ(got.producer, want.producer);
    EXPECT_EQ(got.seq, want.seq);
    EXPECT_EQ(got.timestamp_ms, want.timestamp_ms);
  }
}

TEST(ConsumeResponseTest, EmptyAnswerAndMalformedAnswers) {
  auto empty = ParseConsumeResponse(R"({"events":[]})");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());

  for (const char* body :
       {"", "{", R"({"error":"not_found","reason":"no topic"})", R"({"events":{}})",
        R"({"events":[{"value":1,"partition":1,"offset":2}]})",
        R"({"events":[{"key":"k","partition":1,"offset":2}]})",
        R"({"events":[{"key":1,"value":1,"partition":1,"offset":2}]})",
        R"({"events":[{"key":"k","value":1,"partition":-1,"offset":2}]})"}) {
    auto r = ParseConsumeResponse(body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << body;
  }
}

TEST(RangeReadWireTest, RequestsRoundTripAndBadOnesAreRefused) {
  RangeReadRequest r{"billing", "orders-2", {{0, 10}, {20, kHashSpace}}, 500, 1 << 20};
  auto back = ParseRangeReadRequest(EncodeRangeReadRequest(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->group, "billing");
  EXPECT_EQ(back->reader, "orders-2");
  EXPECT_EQ(back->ranges, r.ranges);
  EXPECT_EQ(back->max, 500u);
  for (const char* bad : {
           "{",
           R"({"group":"g","reader":"p","ranges":[[5,5]],"max":1,"max_bytes":1})",
           R"({"group":"g","reader":"p","ranges":[[0,4294967297]],"max":1,"max_bytes":1})",
           R"({"group":"g","reader":"","ranges":[],"max":1,"max_bytes":1})",
           R"({"group":"bad group","reader":"p","ranges":[],"max":1,"max_bytes":1})",
           R"({"group":"g","reader":"p","ranges":[],"max":0,"max_bytes":1})",
           R"({"group":"g","reader":"p","ranges":[],"max":10001,"max_bytes":1})",
           R"({"group":"g","reader":"p","ranges":[[1]],"max":1,"max_bytes":1})",
       }) {
    EXPECT_EQ(ParseRangeReadRequest(bad).status().code(), Status::Code::kInvalidArgument) << bad;
  }
}

TEST(RangeReadWireTest, AnswersCarryTheEventsVerbatim) {
  const std::string events = R"({"key":"a","value":1,"partition":3,"offset":7})";
  auto a = ParseRangeReadAnswer(EncodeRangeReadAnswer(1, 8, 12, false, {{0, 100}}, events));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->count, 1u);
  EXPECT_EQ(a->last, 8u);
  EXPECT_EQ(a->scanned_to, 12u);
  EXPECT_FALSE(a->consumed);
  EXPECT_EQ(a->events, events);
  EXPECT_FALSE(ParseRangeReadAnswer("no header").ok());
  EXPECT_FALSE(ParseRangeReadAnswer(EncodeRangeReadAnswer(2, 8, 12, false, {}, "")).ok())
      << "a count without events";
  auto c = ParseRangeCommitRequest(EncodeRangeCommitRequest({"g", "pod-1", 42}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->offset, 42u);
  EXPECT_FALSE(ParseRangeCommitRequest(R"({"group":"g","reader":"p"})").ok());
}

// ---------------------------------------------------------------------------------------------
// Binary batches (docs/data-plane.md "Binary batches")

TEST(BinaryBatchTest, AProduceBatchRoundTripsOpaqueAndJsonValuesWithTheirFlags) {
  const std::string opaque("\0\xff bytes", 8);
  const std::vector<ProduceEvent> in = {
      {"k1", opaque, "", std::nullopt, true},
      {"k\xc3\xa9", "{\"a\": [1, 2]}", "prod", 7, false},
      {"k3", "", "", std::nullopt, true},  // an empty opaque value
  };
  std::vector<const ProduceEvent*> ptrs;
  for (const auto& e : in) ptrs.push_back(&e);
  const std::string body = EncodeBinaryProduceRequest(ptrs);
  ASSERT_EQ(body.substr(0, 4), "SHP1");
  ProduceRequestParser parser;
  ASSERT_TRUE(parser.Parse(Format::kBinary, body, Limits{}).ok());
  ASSERT_EQ(parser.events().size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& got = parser.events()[i];
    EXPECT_EQ(got.key, in[i].key);
    EXPECT_EQ(got.value, in[i].value) << "kept as sent, not minified";
    EXPECT_EQ(got.producer, in[i].producer);
    EXPECT_EQ(got.seq, in[i].seq);
    EXPECT_EQ(got.raw, in[i].raw);
  }
}

TEST(BinaryBatchTest, AJsonValueNestedDeeperThanAJsonProduceAllowsIsRefused) {
  // What passes here must pass every later parse of it: inside a JSON produce body (a forward)
  // and inside a consume answer, three levels down.
  auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  for (size_t depth : {size_t{1000}, size_t{1021}, size_t{1022}, size_t{1024}}) {
    const ProduceEvent e{"k", "", "", std::nullopt, false};
    ProduceEvent deep = e;
    const std::string value = nested(depth);
    deep.value = value;
    const std::string body = EncodeBinaryProduceRequest({&deep});
    ProduceRequestParser parser;
    const Status st = parser.ParseBinary(body, Limits{});
    ProduceRequestParser json;
    const Status as_json = json.Parse(EncodeProduceRequest({&deep}), Limits{});
    EXPECT_EQ(st.ok(), as_json.ok())
        << depth << ": " << st.ToString() << " / " << as_json.ToString();
    EXPECT_EQ(st.ok(), depth <= 1021) << depth;
  }
}

TEST(BinaryBatchTest, ConsumeAnswersCarryTheSameEventsInEitherFormat) {
  const std::string opaque("\x01\x02\0\x03", 4);
  std::string bin, json;
  OpenConsumeAnswer(Format::kBinary, bin);
  OpenConsumeAnswer(Format::kJson, json);
  AppendAnswerEvent(Format::kBinary, bin, false, "a", opaque, true, 3, 9, "", std::nullopt, 5);
  AppendAnswerEvent(Format::kJson, json, false, "a", opaque, true, 3, 9, "", std::nullopt, 5);
  AppendAnswerEvent(Format::kBinary, bin, true, "b", "[1]", false, 1, 2, "p", 4, -1);
  AppendAnswerEvent(Format::kJson, json, true, "b", "[1]", false, 1, 2, "p", 4, -1);
  CloseConsumeAnswer(Format::kBinary, bin);
  CloseConsumeAnswer(Format::kJson, json);
  EXPECT_THAT(json, HasSubstr("\"value_b64\":\"AQIAAw==\""));
  auto a = ParseAnyConsumeResponse(bin);
  auto b = ParseAnyConsumeResponse(json);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->size(), 2u);
  ASSERT_EQ(b->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& x = (*a)[i];
    const auto& y = (*b)[i];
    EXPECT_EQ(x.key, y.key);
    EXPECT_EQ(x.value, y.value);
    EXPECT_EQ(x.raw, y.raw);
    EXPECT_EQ(x.partition, y.partition);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.producer, y.producer);
    EXPECT_EQ(x.seq, y.seq);
    EXPECT_EQ(x.timestamp_ms, y.timestamp_ms);
  }
  EXPECT_EQ((*a)[0].value, opaque);
  EXPECT_TRUE((*a)[0].raw);
  EXPECT_FALSE((*a)[1].raw);
  // A range read's JSON events, converted for a binary consumer, are the binary answer's.
  const std::string json_events = json.substr(11, json.size() - 13);
  auto converted = ConvertAnswerEvents(json_events, Format::kJson, Format::kBinary);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  EXPECT_EQ("SHC1" + *converted, bin);
  EXPECT_EQ(EmptyConsumeAnswer(Format::kBinary), "SHC1");
  EXPECT_EQ(EmptyConsumeAnswer(Format::kJson), "{\"events\":[]}");
}

TEST(BinaryBatchTest, ProduceResultsRoundTripAndABadLengthIsRefused) {
  const std::vector<ProduceResult> in = {{1, 2, false}, {7, 1ull << 40, true}};
  std::string out;
  EncodeBinaryProduceResults(in, out);
  auto back = ParseAnyProduceResponse(out);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].offset, 1ull << 40);
  EXPECT_TRUE((*back)[1].duplicate);
  out.pop_back();
  EXPECT_FALSE(ParseBinaryProduceResponse(out).ok());
}

TEST(CommitParamTest, ParsesPairsAndRefusesAnythingElse) {
  auto ok = ParseCommitParam("3:121,4:0,4294967295:18446744073709551615");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[0].partition.value(), 3u);
  EXPECT_EQ((*ok)[0].offset.value(), 121u);
  EXPECT_EQ((*ok)[2].offset.value(), UINT64_MAX);
  EXPECT_EQ(EncodeCommitParam(*ok), "3:121,4:0,4294967295:18446744073709551615");
  for (const char* bad : {"", ",", "3", "3:", ":3", "3:1,", ",3:1", "-1:2", "3:+1", "4294967296:1",
                          "1:18446744073709551616", "1:2:3", "1: 2"}) {
    EXPECT_FALSE(ParseCommitParam(bad).ok()) << bad;
  }
  std::string many;
  for (size_t i = 0; i <= kMaxCommitParamOffsets; ++i)
    many += (i ? ",1:" : "1:") + std::to_string(i);
  EXPECT_FALSE(ParseCommitParam(many).ok());
}

TEST(BinaryBatchTest, FormatFollowsTheHeader) {
  EXPECT_EQ(FormatOf("application/vnd.shoal.batch"), Format::kBinary);
  EXPECT_EQ(FormatOf("Application/Vnd.Shoal.Batch; v=1"), Format::kBinary);
  EXPECT_EQ(FormatOf("application/json, application/vnd.shoal.batch;q=0.9"), Format::kBinary);
  EXPECT_EQ(FormatOf("application/json"), Format::kJson);
  EXPECT_EQ(FormatOf(""), Format::kJson);
  EXPECT_EQ(FormatOf("application/vnd.shoal.batchx"), Format::kJson);
  EXPECT_EQ(FormatOf("*/*"), Format::kJson);
}

TEST(BinaryBatchTest, Base64RoundTripsEveryLengthAndRefusesWhatIsNotBase64) {
  std::string bytes;
  for (int n = 0; n < 70; ++n) {
    auto back = FromBase64(Base64(bytes));
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(*back, bytes);
    bytes.push_back(static_cast<char>(n * 37));
  }
  EXPECT_EQ(Base64("hi"), "aGk=");
  for (const char* bad : {"a", "aGk", "a=Gk", "aG=k", "aGk=aGk=", "a!k=", "===="}) {
    EXPECT_FALSE(FromBase64(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace shoal::wire
