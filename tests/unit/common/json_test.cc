#include "shoal/common/json.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace shoal::json {
namespace {

// Lowercases the hex digits of \u escapes so the comparison does not depend on their case,
// which RFC 8259 leaves open.
std::string LowerHex(std::string s) {
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s.compare(i, 2, "\\u") == 0) {
      for (size_t j = i + 2; j < i + 6 && j < s.size(); ++j) {
        s[j] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[j])));
      }
    }
  }
  return s;
}

// RFC 8259 section 7: '"', '\' and U+0000..U+001F must be escaped; nothing else needs to be.
// Escaping more (e.g. '/', DEL or non-ASCII) would still be valid JSON but would bloat every key
// on the consume path, so the test pins "exactly".
std::string RequiredEscape(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (c < 0x20) {
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string("\\u00") + kHex[c >> 4] + kHex[c & 0xF];
  }
  return std::string(1, static_cast<char>(c));
}

TEST(AppendStringTest, EscapesExactlyWhatRfc8259Requires) {
  for (int b = 0; b < 256; ++b) {
    const auto c = static_cast<unsigned char>(b);
    std::string in = "x";
    in.push_back(static_cast<char>(c));
    in += "y";
    std::string out;
    AppendString(out, in);
    EXPECT_EQ(LowerHex(out), "\"x" + RequiredEscape(c) + "y\"") << "byte 0x" << std::hex << b;
  }
}

TEST(AppendStringTest, AppendsWithoutClearing) {
  std::string out = "{\"k\":";
  AppendString(out, "v");
  EXPECT_EQ(out, "{\"k\":\"v\"");
  AppendString(out, "");
  EXPECT_EQ(out, "{\"k\":\"v\"\"\"");
}

std::string ParseBackString(const std::string& json) {
  simdjson::dom::parser parser;
  std::string_view s;
  auto err = parser.parse(json).get(s);
  EXPECT_EQ(err, simdjson::SUCCESS) << json << ": " << simdjson::error_message(err);
  return std::string(s);
}

TEST(AppendStringTest, ParsesBackWithSimdjsonToTheSameString) {
  std::vector<std::string> inputs = {
      "",
      "plain",
      std::string("\0", 1),
      std::string("nul\0inside", 10),
      "\"",
      "\\",
      "\\\"\\\"",
      "\n\r\t\b\f\x01\x1f",  // only escapes
      "/ and </script> and \x7f",
      "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80",  // 2-, 3- and 4-byte UTF-8
      "\xE2\x80\xA8\xE2\x80\xA9",              // U+2028, U+2029: legal raw in JSON
      "\"quoted\" at both ends\"",
  };
  std::string all_ascii;
  for (int c = 0; c < 128; ++c) all_ascii.push_back(static_cast<char>(c));
  inputs.push_back(all_ascii);
  // Long runs between escapes exercise the run-copy logic at its boundaries.
  std::string long_mixed;
  for (int i = 0; i < 200; ++i) long_mixed += std::string(i % 17, 'a') + "\n\"\\\x02";
  inputs.push_back(long_mixed);
  for (int c = 0; c < 128; ++c) inputs.push_back(std::string(1, static_cast<char>(c)));

  for (const auto& in : inputs) {
    std::string out;
    AppendString(out, in);
    EXPECT_EQ(ParseBackString(out), in) << "encoded as " << out;
  }
}

// ---------------------------------------------------------------------------------------------
// Numbers and the error body

TEST(AppendNumberTest, IntegersAtTheirExtremes) {
  std::string out;
  AppendUint(out, 0);
  out += ',';
  AppendUint(out, UINT64_MAX);
  out += ',';
  AppendInt(out, INT64_MIN);
  out += ',';
  AppendInt(out, INT64_MAX);
  out += ',';
  AppendInt(out, -1);
  EXPECT_EQ(out, "0,18446744073709551615,-9223372036854775808,9223372036854775807,-1");
}

TEST(AppendNumberTest, DoublesRoundTripAndNonFiniteBecomesNull) {
  for (double v :
       {0.0, -0.0, 0.1, -2.5, 1e300, 5e-324, 123456789.125, std::numeric_limits<double>::max()}) {
    std::string out;
    AppendDouble(out, v);
    simdjson::dom::parser parser;
    double back = 0;
    ASSERT_EQ(parser.parse(out).get(back), simdjson::SUCCESS) << out;
    EXPECT_EQ(back, v) << out;
  }
  for (double v : {std::nan(""), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    std::string out;
    AppendDouble(out, v);
    EXPECT_EQ(out, "null");
  }
}

TEST(ErrorBodyTest, IsTheDocumentedShapeAndEscapesItsFields) {
  EXPECT_EQ(ErrorBody("invalid_argument", "bad"), R"({"error":"invalid_argument","reason":"bad"})");
  const std::string body = ErrorBody("invalid_argument", "events[0] has unknown field \"x\"\n");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(body).get(doc), simdjson::SUCCESS) << body;
  std::string_view error, reason;
  ASSERT_EQ(doc["error"].get(error), simdjson::SUCCESS);
  ASSERT_EQ(doc["reason"].get(reason), simdjson::SUCCESS);
  EXPECT_EQ(error, "invalid_argument");
  EXPECT_EQ(reason, "events[0] has unknown field \"x\"\n");
}

}  // namespace
}  // namespace shoal::json
