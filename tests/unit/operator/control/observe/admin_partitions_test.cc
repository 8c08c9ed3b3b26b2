#include "shoal/control/admin_partitions.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

namespace shoal::control {
namespace {

// One partition entry of GET /v1/admin/partitions.
std::string Entry(uint32_t id, uint64_t appended, const std::vector<uint64_t>& buckets,
                  const std::string& top_hashes, const std::string& extra = "") {
  std::string b;
  for (size_t i = 0; i < buckets.size(); ++i) b += (i ? "," : "") + std::to_string(buckets[i]);
  return "{\"id\":" + std::to_string(id) +
         ",\"state\":\"active\",\"lo\":0,\"hi\":1073741824,\"start_offset\":0,"
         "\"end_offset\":120,\"producers_durable\":true,\"appended\":" +
         std::to_string(appended) + ",\"load_buckets\":[" + b + "],\"top_hashes\":" + top_hashes +
         ",\"commits\":{\"groupA\":100}" + extra + "}";
}

std::string Report(const std::string& entries) {
  return "{\"topic\":\"orders\",\"pod\":\"orders-0\",\"epoch\":7,\"groups\":[\"groupA\"],"
         "\"partitions\":[" +
         entries + "]}";
}

std::vector<uint64_t> Buckets(uint64_t each) { return std::vector<uint64_t>(kLoadBuckets, each); }

TEST(ParseAdminPartitionsTest, ReadsEveryField) {
  const std::string body =
      R"({"topic":"orders","pod":"orders-0","epoch":7,"groups":["groupA","groupB","late"],
        "partitions":[
        {"id":3,"state":"active","lo":0,"hi":1073741824,"start_offset":5,"end_offset":120,
         "producers_durable":true,"appended":12345,
         "load_buckets":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],
         "top_hashes":[{"hash":123456,"count":789},{"hash":4294967295,"count":1}],
         "commits":{"groupA":100,"groupB":0},"future_field":{"x":[1]}},
        {"id":9,"state":"sealed","lo":3221225472,"hi":4294967296,"start_offset":0,
         "end_offset":0,"producers_durable":false,"appended":0,
         "load_buckets":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"top_hashes":[],"commits":{}}]})";
  auto r = ParseAdminPartitions(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->topic, "orders");
  EXPECT_EQ(r->pod, "orders-0");
  EXPECT_EQ(r->epoch, Epoch(7));
  EXPECT_EQ(r->groups, (std::vector<std::string>{"groupA", "groupB", "late"}));
  ASSERT_EQ(r->partitions.size(), 2u);
  const AdminPartition& p = r->partitions[0];
  EXPECT_EQ(p.id, PartitionId(3));
  EXPECT_EQ(p.state, PartitionState::kActive);
  EXPECT_EQ(p.range, (HashRange{0, 1073741824}));
  EXPECT_EQ(p.start_offset, 5u);
  EXPECT_EQ(p.end_offset, 120u);
  EXPECT_TRUE(p.producers_durable);
  EXPECT_EQ(p.appended, 12345u);
  for (size_t i = 0; i < kLoadBuckets; ++i) EXPECT_EQ(p.load_buckets[i], i + 1);
  EXPECT_EQ(p.top_hashes, (std::vector<HashCount>{{123456, 789}, {4294967295u, 1}}));
  EXPECT_EQ(p.commits, (std::map<std::string, uint64_t>{{"groupA", 100}, {"groupB", 0}}));
  const AdminPartition& s = r->partitions[1];
  EXPECT_EQ(s.state, PartitionState::kSealed);
  EXPECT_EQ(s.range.hi, kHashSpace);
  EXPECT_FALSE(s.producers_durable);
  EXPECT_TRUE(s.top_hashes.empty());
  EXPECT_TRUE(s.commits.empty());
}

TEST(ParseAdminPartitionsTest, NoPartitions) {
  auto r = ParseAdminPartitions(Report(""));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->partitions.empty());
}

TEST(ParseAdminPartitionsTest, LimitsSayHowManyPartitionsThePodCanHold) {
  auto r = ParseAdminPartitions(
      R"({"topic":"orders","pod":"orders-0","epoch":1,"groups":[],)"
      R"("limits":{"open_files_limit":100,"open_files":30,"files_per_partition":2,)"
      R"("memory_limit_bytes":536870912,"memory_bytes":1048576},"partitions":[]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->limits.open_files_limit, 100u);
  EXPECT_EQ(r->limits.memory_limit_bytes, 536870912u);
  // 30 open of which 2 x 5 for its 5 partitions: 20 besides; (100 - 20 - 64) / 2 = 8.
  EXPECT_EQ(r->limits.MaxPartitions(5), 8u);
  // A limit already used up by what is not partitions: none.
  PodLimits tight{.open_files_limit = 80, .open_files = 20};
  EXPECT_EQ(tight.MaxPartitions(0), 0u);
  // Older sidecars say nothing: unknown, not zero.
  auto old = ParseAdminPartitions(Report(""));
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->limits.MaxPartitions(0).has_value());
  auto bad = ParseAdminPartitions(
      R"({"topic":"o","pod":"p","epoch":1,"groups":[],"limits":{"open_files":-1},"partitions":[]})");
  EXPECT_FALSE(bad.ok());
}

struct BadCase {
  std::string what;
  std::string body;
  std::string mentions;
};

class ParseAdminPartitionsBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ParseAdminPartitionsBadTest, IsInvalidArgument) {
  auto r = ParseAdminPartitions(GetParam().body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(GetParam().mentions), std::string::npos)
      << r.status().message();
}

std::string WithField(const std::string& field, const std::string& value) {
  // A valid entry whose `field` is replaced by `value` (or removed when value is empty).
  std::string e = Entry(3, 10, Buckets(1), "[]");
  const std::string key = "\"" + field + "\":";
  const size_t at = e.find(key);
  size_t end = at + key.size();
  int depth = 0;
  for (; end < e.size(); ++end) {
    const char c = e[end];
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') {
      if (depth == 0) break;
      --depth;
    }
    if (c == ',' && depth == 0) break;
  }
  if (value.empty()) {
    // Drop the field and the comma before it, or after it when it is the first.
    if (e[at - 1] == '{') return Report(e.substr(0, at) + e.substr(end + 1));
    return Report(e.substr(0, at - 1) + e.substr(end));
  }
  return Report(e.substr(0, at + key.size()) + value + e.substr(end));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseAdminPartitionsBadTest,
    ::testing::Values(
        BadCase{"not json", "{\"topic\":", "not valid JSON"},
        BadCase{"not an object", "[1,2]", "must be a JSON object"},
        BadCase{"no partitions", R"({"topic":"orders","pod":"p","epoch":1,"groups":[]})",
                "partitions"},
        BadCase{"partitions not an array",
                R"({"topic":"orders","pod":"p","epoch":1,"groups":[],"partitions":{}})",
                "must be an array"},
        BadCase{"negative epoch",
                R"({"topic":"orders","pod":"p","epoch":-1,"groups":[],"partitions":[]})", "epoch"},
        BadCase{"no groups", R"({"topic":"orders","pod":"p","epoch":1,"partitions":[]})",
                "\"groups\""},
        BadCase{"groups not names",
                R"({"topic":"orders","pod":"p","epoch":1,"groups":[3],"partitions":[]})",
                "group names"},
        BadCase{"entry not an object", Report("3"), "must be an object"},
        BadCase{"no id", WithField("id", ""), "\"id\""},
        BadCase{"id too large", WithField("id", "4294967296"), "out of range"},
        BadCase{"bad state", WithField("state", "\"open\""), "\"active\" or \"sealed\""},
        BadCase{"state not a string", WithField("state", "1"), "state"},
        BadCase{"no commits", WithField("commits", ""), "commits"},
        BadCase{"commit not a number", WithField("commits", R"({"g":"x"})"), "commits"},
        BadCase{"no end offset", WithField("end_offset", ""), "end_offset"},
        BadCase{"float appended", WithField("appended", "1.5"), "appended"},
        BadCase{"producers_durable not bool", WithField("producers_durable", "1"),
                "producers_durable"},
        BadCase{"15 buckets", WithField("load_buckets", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]"),
                "load_buckets"},
        BadCase{"17 buckets", WithField("load_buckets", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]"),
                "load_buckets"},
        BadCase{"negative bucket", WithField("load_buckets", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,-1]"),
                "load_buckets"},
        BadCase{"top hash without count", WithField("top_hashes", R"([{"hash":1}])"), "count"},
        BadCase{"top hash too large", WithField("top_hashes", R"([{"hash":4294967296,"count":1}])"),
                "out of range"},
        BadCase{"empty range", WithField("hi", "0"), "range"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name;
      for (char c : info.param.what) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

AdminPartition Part(uint64_t appended, std::array<uint64_t, kLoadBuckets> buckets,
                    std::vector<HashCount> tops) {
  AdminPartition p;
  p.id = PartitionId(3);
  p.appended = appended;
  p.load_buckets = buckets;
  p.top_hashes = std::move(tops);
  return p;
}

std::array<uint64_t, kLoadBuckets> B(std::initializer_list<std::pair<size_t, uint64_t>> set,
                                     uint64_t rest = 0) {
  std::array<uint64_t, kLoadBuckets> b;
  b.fill(rest);
  for (auto [i, v] : set) b[i] = v;
  return b;
}

struct DiffCase {
  std::string what;
  AdminPartition before, now;
  std::array<double, kLoadBuckets> buckets;
  uint32_t top_hash;
  double top_share;
};

class DiffHashLoadTest : public ::testing::TestWithParam<DiffCase> {};

TEST_P(DiffHashLoadTest, Diffs) {
  const DiffCase& c = GetParam();
  const HashLoad got = DiffHashLoad(c.before, c.now);
  for (size_t i = 0; i < kLoadBuckets; ++i) {
    EXPECT_DOUBLE_EQ(got.buckets[i], c.buckets[i]) << "bucket " << i;
  }
  EXPECT_EQ(got.top_hash, c.top_hash);
  EXPECT_DOUBLE_EQ(got.top_share, c.top_share);
}

std::array<double, kLoadBuckets> D(std::initializer_list<std::pair<size_t, double>> set,
                                   double rest = 0) {
  std::array<double, kLoadBuckets> d;
  d.fill(rest);
  for (auto [i, v] : set) d[i] = v;
  return d;
}

INSTANTIATE_TEST_SUITE_P(
    Table, DiffHashLoadTest,
    ::testing::Values(
        DiffCase{"nothing appended", Part(100, B({}, 5), {{7, 50}}), Part(100, B({}, 5), {{7, 50}}),
                 D({}), 0, 0},
        DiffCase{"all in one bucket", Part(100, B({{2, 100}}), {}), Part(300, B({{2, 300}}), {}),
                 D({{2, 1.0}}), 0, 0},
        DiffCase{"even", Part(0, B({}), {}), Part(160, B({}, 10), {}), D({}, 1.0 / 16), 0, 0},
        // Earlier counts do not matter, only the increase: 30 vs 10 of 40 new events.
        DiffCase{"shape of the increase only", Part(1000, B({{0, 990}, {15, 10}}), {}),
                 Part(1040, B({{0, 1020}, {15, 20}}), {}), D({{0, 0.75}, {15, 0.25}}), 0, 0},
        DiffCase{"top hash", Part(100, B({{0, 100}}), {{7, 40}, {9, 10}}),
                 Part(300, B({{0, 300}}), {{7, 90}, {9, 110}}), D({{0, 1.0}}), 9, 0.5},
        // Hash 5 is new to the list: its count since the start says nothing about the interval.
        DiffCase{"new hash is not compared", Part(100, B({{0, 100}}), {{7, 40}}),
                 Part(200, B({{0, 200}}), {{5, 1000}, {7, 60}}), D({{0, 1.0}}), 7, 0.2},
        DiffCase{"tie goes to the smaller hash", Part(0, B({}), {{9, 0}, {4, 0}}),
                 Part(10, B({{1, 10}}), {{9, 5}, {4, 5}}), D({{1, 1.0}}), 4, 0.5},
        DiffCase{"no growth means no top hash", Part(0, B({}), {{9, 3}}),
                 Part(10, B({{1, 10}}), {{9, 3}}), D({{1, 1.0}}), 0, 0},
        // Counters read at slightly different moments can put a hash above the total: clamp.
        DiffCase{"share clamped to 1", Part(0, B({}), {{9, 0}}), Part(10, B({{1, 10}}), {{9, 12}}),
                 D({{1, 1.0}}), 9, 1.0},
        DiffCase{"restart: appended went down", Part(500, B({{0, 500}}), {{7, 100}}),
                 Part(50, B({{0, 50}}), {{7, 10}}), D({}), 0, 0},
        DiffCase{"restart: a bucket went down", Part(500, B({{0, 500}}), {}),
                 Part(600, B({{0, 100}, {1, 500}}), {}), D({}), 0, 0}),
    [](const ::testing::TestParamInfo<DiffCase>& info) {
      std::string name;
      for (char c : info.param.what) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(DiffHashLoadTest, BucketsSumToOneWhenSomethingWasAppended) {
  const HashLoad got =
      DiffHashLoad(Part(0, B({}), {}), Part(7, B({{0, 1}, {3, 2}, {9, 1}, {15, 3}}), {}));
  double sum = 0;
  for (double b : got.buckets) sum += b;
  EXPECT_DOUBLE_EQ(sum, 1.0);
}

}  // namespace
}  // namespace shoal::control
