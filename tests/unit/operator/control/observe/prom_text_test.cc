#include "shoal/control/prom_text.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace shoal::control {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Expected {
  std::string name;
  std::map<std::string, std::string> labels;
  double value;  // NaN matches NaN
  std::optional<int64_t> timestamp_ms = std::nullopt;
};

struct GoodCase {
  std::string what;
  std::string text;
  std::vector<Expected> samples;
};

class PromTextGoodTest : public ::testing::TestWithParam<GoodCase> {};

TEST_P(PromTextGoodTest, Parses) {
  const GoodCase& c = GetParam();
  auto parsed = ParsePromText(c.text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), c.samples.size());
  for (size_t i = 0; i < c.samples.size(); ++i) {
    const PromSample& got = (*parsed)[i];
    const Expected& want = c.samples[i];
    EXPECT_EQ(got.name, want.name) << "sample " << i;
    EXPECT_EQ(got.labels, want.labels) << "sample " << i;
    if (std::isnan(want.value)) {
      EXPECT_TRUE(std::isnan(got.value)) << "sample " << i << ": " << got.value;
    } else {
      EXPECT_EQ(got.value, want.value) << "sample " << i;
    }
    EXPECT_EQ(got.timestamp_ms, want.timestamp_ms) << "sample " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, PromTextGoodTest,
    ::testing::Values(
        GoodCase{"empty", "", {}},
        GoodCase{"only comments and blanks",
                 "# HELP x help text\n# TYPE x counter\n\n   \n# just a comment\n\t# indented\n",
                 {}},
        GoodCase{"bare name", "up 1\n", {{"up", {}, 1}}},
        GoodCase{"no final newline", "up 1", {{"up", {}, 1}}},
        GoodCase{"crlf line ends", "a 1\r\nb 2\r\n", {{"a", {}, 1}, {"b", {}, 2}}},
        GoodCase{
            "counter with labels",
            "# HELP shoal_events_appended_total Events\n"
            "# TYPE shoal_events_appended_total counter\n"
            "shoal_events_appended_total{topic=\"orders\",partition=\"3\"} 12345\n",
            {{"shoal_events_appended_total", {{"topic", "orders"}, {"partition", "3"}}, 12345}}},
        GoodCase{"empty braces", "a{} 3\n", {{"a", {}, 3}}},
        GoodCase{"trailing comma in labels", "a{x=\"1\",} 3\n", {{"a", {{"x", "1"}}, 3}}},
        GoodCase{"blanks between tokens",
                 "  a {  x = \"1\" ,\ty=\"2\"  }   3   \n",
                 {{"a", {{"x", "1"}, {"y", "2"}}, 3}}},
        GoodCase{"escapes in label values",
                 R"(a{p="C:\\dir",q="say \"hi\"",r="two\nlines"} 1)",
                 {{"a", {{"p", "C:\\dir"}, {"q", "say \"hi\""}, {"r", "two\nlines"}}, 1}}},
        GoodCase{"label value with braces, commas and #",
                 "a{x=\"}{,# =\"} 1\n",
                 {{"a", {{"x", "}{,# ="}}, 1}}},
        GoodCase{"empty label value", "a{x=\"\"} 1\n", {{"a", {{"x", ""}}, 1}}},
        GoodCase{"utf-8 label value", "a{x=\"h\xC3\xA9\"} 1\n", {{"a", {{"x", "h\xC3\xA9"}}, 1}}},
        GoodCase{"floats",
                 "a 1.5\nb -2\nc 1e3\nd 2.5E-1\ne .5\nf +7\ng 0\nh 1.0e+2\n",
                 {{"a", {}, 1.5},
                  {"b", {}, -2},
                  {"c", {}, 1000},
                  {"d", {}, 0.25},
                  {"e", {}, 0.5},
                  {"f", {}, 7},
                  {"g", {}, 0},
                  {"h", {}, 100}}},
        GoodCase{"special values",
                 "a NaN\nb +Inf\nc -Inf\nd nan\ne inf\nf -infinity\n",
                 {{"a", {}, std::numeric_limits<double>::quiet_NaN()},
                  {"b", {}, kInf},
                  {"c", {}, -kInf},
                  {"d", {}, std::numeric_limits<double>::quiet_NaN()},
                  {"e", {}, kInf},
                  {"f", {}, -kInf}}},
        GoodCase{"timestamps",
                 "a 1 1700000000000\nb{x=\"y\"} 2 -5\nc 3\t42  \n",
                 {{"a", {}, 1, 1700000000000}, {"b", {{"x", "y"}}, 2, -5}, {"c", {}, 3, 42}}},
        GoodCase{"histogram lines",
                 "h_bucket{le=\"0.1\"} 4\nh_bucket{le=\"+Inf\"} 9\nh_sum 1.25\nh_count 9\n",
                 {{"h_bucket", {{"le", "0.1"}}, 4},
                  {"h_bucket", {{"le", "+Inf"}}, 9},
                  {"h_sum", {}, 1.25},
                  {"h_count", {}, 9}}},
        GoodCase{"colons and underscores in names",
                 "job:rate_5m:sum{_l=\"v\"} 2\n_x 1\n",
                 {{"job:rate_5m:sum", {{"_l", "v"}}, 2}, {"_x", {}, 1}}}),
    [](const ::testing::TestParamInfo<GoodCase>& info) {
      std::string name;
      for (char c : info.param.what) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

struct BadCase {
  std::string what;
  std::string text;
  std::string line;      // "line N:" expected in the message
  std::string mentions;  // and this too
};

class PromTextBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(PromTextBadTest, FailsNamingTheLine) {
  const BadCase& c = GetParam();
  auto parsed = ParsePromText(c.text);
  ASSERT_FALSE(parsed.ok()) << "parsed " << parsed->size() << " samples";
  EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
  const std::string& msg = parsed.status().message();
  EXPECT_TRUE(msg.starts_with(c.line + ":")) << msg;
  EXPECT_NE(msg.find(c.mentions), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Table, PromTextBadTest,
    ::testing::Values(
        BadCase{"no value", "a\n", "line 1", "expected a value"},
        BadCase{"no value after labels", "a{x=\"1\"}\n", "line 1", "expected a value"},
        BadCase{"later line", "# HELP a x\na 1\n\nb{x=\"1\" 2\n", "line 4", "expected ',' or '}'"},
        BadCase{"name starts with digit", "1abc 2\n", "line 1", "expected a metric name"},
        BadCase{"bad character in name", "a-b 2\n", "line 1", "malformed value"},
        BadCase{"unterminated label value", "a{x=\"abc} 1\n", "line 1", "unterminated value"},
        BadCase{"unterminated label set", "a{x=\"1\"\n", "line 1", "unterminated label set"},
        BadCase{"missing equals", "a{x \"1\"} 1\n", "line 1", "expected '='"},
        BadCase{"unquoted label value", "a{x=1} 1\n", "line 1", "expected '\"'"},
        BadCase{"bad label name", "a{1x=\"1\"} 1\n", "line 1", "expected a label name"},
        BadCase{"bad escape", "a{x=\"\\t\"} 1\n", "line 1", "invalid escape"},
        BadCase{"backslash at the end", "a{x=\"\\", "line 1", "unterminated value"},
        BadCase{"duplicate label", "a{x=\"1\",x=\"2\"} 1\n", "line 1", "appears twice"},
        BadCase{"bad value", "a abc\n", "line 1", "malformed value"},
        BadCase{"hex float", "a 0x10\n", "line 1", "malformed value"},
        BadCase{"nan with payload", "a nan(1)\n", "line 1", "malformed value"},
        BadCase{"signed nan", "a -NaN\n", "line 1", "malformed value"},
        BadCase{"two dots", "a 1.2.3\n", "line 1", "malformed value"},
        BadCase{"value out of range", "a 1e999\n", "line 1", "malformed value"},
        BadCase{"bad timestamp", "a 1 12x\n", "line 1", "malformed timestamp"},
        BadCase{"float timestamp", "a 1 1.5\n", "line 1", "malformed timestamp"},
        BadCase{"text after timestamp", "a 1 2 3\n", "line 1", "after the timestamp"},
        BadCase{"comma between label sets", "a{x=\"1\"}{y=\"2\"} 1\n", "line 1", "malformed value"},
        BadCase{"nul byte", std::string("a 1\nb\0 2\n", 9), "line 2", "malformed value"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name;
      for (char c : info.param.what) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(PromTextTest, LabelLookup) {
  auto parsed = ParsePromText("a{topic=\"orders\"} 1\n");
  ASSERT_TRUE(parsed.ok());
  ASSERT_NE((*parsed)[0].Label("topic"), nullptr);
  EXPECT_EQ(*(*parsed)[0].Label("topic"), "orders");
  EXPECT_EQ((*parsed)[0].Label("partition"), nullptr);
}

// Every prefix of a valid exposition either parses or fails with a line number; nothing crashes
// (run under ASan in CI) and nothing throws.
TEST(PromTextTest, EveryPrefixParsesOrFailsCleanly) {
  const std::string text =
      "# HELP shoal_consumer_lag_events lag\n"
      "# TYPE shoal_consumer_lag_events gauge\n"
      "shoal_consumer_lag_events{topic=\"orders\",partition=\"0\",group=\"a\\\"b\\\\c\\n\"} 17 "
      "1700000000000\n"
      "x_bucket{le=\"+Inf\"} +Inf\n";
  for (size_t n = 0; n <= text.size(); ++n) {
    auto parsed = ParsePromText(std::string_view(text).substr(0, n));
    if (!parsed.ok()) {
      EXPECT_TRUE(parsed.status().message().starts_with("line ")) << parsed.status().message();
    }
  }
}

}  // namespace
}  // namespace shoal::control
