// Bad input against a real sidecar process (docs/data-plane.md: "Bad input ... gets a 4xx answer
// with a JSON body {"error": "...", "reason": "..."} and changes nothing"). Good events go in
// first; then every kind of bad request is sent and must be refused with its code and a JSON
// reason; after all of them the partitions' end offsets and the group's commits are what they were,
// the sidecar still takes a good produce, and /metrics counted every refusal.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "shoal/common/json.h"
#include "shoal/common/wire.h"
#include "support/http_test_client.h"
#include "support/sidecar_process.h"
#include "support/topic_view.h"

namespace shoal::testing {
namespace {

constexpr char kTopic[] = "orders";
const std::string kTopicPath = std::string("/v1/topics/") + kTopic;
const std::string kEvents = kTopicPath + "/events";
const std::string kCommits = kTopicPath + "/commits";
constexpr size_t kMaxBody = 65536, kMaxKey = 64, kMaxValue = 1024;

std::map<uint32_t, PartitionView> TopicView(HttpTestClient& client) {
  HttpResponse r = client.Get(kTopicPath);
  EXPECT_EQ(r.status, 200) << r.Describe();
  auto view = ParseTopicView(r.body);
  if (!view.ok()) {
    ADD_FAILURE() << "topic view: " << view.status().ToString();
    return {};
  }
  return view->partitions;
}

std::string Event(const std::string& key, const std::string& value_json) {
  std::string out = "{\"key\":";
  json::AppendString(out, key);
  out += ",\"value\":" + value_json + "}";
  return out;
}

std::string Batch(const std::vector<std::string>& events) {
  std::string out = "{\"events\":[";
  for (size_t i = 0; i < events.size(); ++i) out += (i ? "," : "") + events[i];
  return out + "]}";
}

struct BadCase {
  std::string name;
  std::string method;
  std::string path;
  std::string body;
  int want;
  bool chunked = false;
};

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SidecarOptions o;
    o.binary = SHOAL_SIDECAR_BIN;
    o.topic = kTopic;
    o.partitions = 4;
    o.fsync = "never";
    o.extra_args = {"--max-body-bytes",      std::to_string(kMaxBody), "--max-key-bytes",
                    std::to_string(kMaxKey), "--max-value-bytes",      std::to_string(kMaxValue)};
    sidecar_ = std::make_unique<SidecarProcess>(o);
    ASSERT_TRUE(sidecar_->Start().ok()) << sidecar_->Describe();
    client_ = sidecar_->DataClient();
  }

  void TearDown() override {
    if (HasFailure() && sidecar_) std::fprintf(stderr, "%s\n", sidecar_->Describe().c_str());
  }

  double Rejected() {
    auto metrics = sidecar_->MetricsClient();
    HttpResponse r = metrics->Get("/metrics");
    EXPECT_EQ(r.status, 200) << r.Describe();
    return SumMetric(r.body, "shoal_requests_rejected_total");
  }

  std::unique_ptr<SidecarProcess> sidecar_;
  std::unique_ptr<HttpTestClient> client_;
};

TEST_F(BadInputTest, EveryBadRequestIsRefusedWithAReasonAndChangesNothing) {
  // Good events first, and a group with a commit, so that "nothing changed" has something to keep.
  std::vector<std::string> good;
  for (int i = 0; i < 40; ++i) {
    good.push_back(Event("user_" + std::to_string(i % 10), "{\"n\":" + std::to_string(i) + "}"));
  }
  HttpResponse produced = client_->Post(kEvents, Batch(good));
  ASSERT_EQ(produced.status, 200) << produced.Describe();
  // The group "keeper" commits offset 1 of the fullest partition; the bad commits below try to
  // move it further in the same request as a bad entry.
  auto fresh = TopicView(*client_);
  ASSERT_EQ(fresh.size(), 4u);
  uint32_t committed_partition = 0;
  for (const auto& [p, v] : fresh) {
    if (v.end_offset > fresh[committed_partition].end_offset) committed_partition = p;
  }
  ASSERT_GE(fresh[committed_partition].end_offset, 3u);
  HttpResponse commit =
      client_->Post(kCommits, "{\"group\":\"keeper\",\"offsets\":[{\"partition\":" +
                                  std::to_string(committed_partition) + ",\"offset\":1}]}");
  ASSERT_EQ(commit.status, 200) << commit.Describe();

  const auto before = TopicView(*client_);
  ASSERT_EQ(before.size(), 4u);
  uint32_t other_partition = 0;
  while (other_partition == committed_partition) ++other_partition;
  const std::string past_end = std::to_string(before.at(other_partition).end_offset + 100);
  const std::string keeper_commit =
      "{\"group\":\"keeper\",\"offsets\":[{\"partition\":" + std::to_string(committed_partition) +
      ",\"offset\":" + std::to_string(before.at(committed_partition).end_offset) + "}";
  const double rejected_before = Rejected();

  const std::string long_key(kMaxKey + 1, 'k');
  const std::string big_value = "\"" + std::string(kMaxValue, 'v') + "\"";  // 1026 bytes as JSON
  const std::string big_body = Batch({Event("big", "\"" + std::string(kMaxBody, 'x') + "\"")});
  const std::string deep_value = std::string(5000, '[') + std::string(5000, ']');
  const std::string huge_body =
      Batch({Event("huge", "\"" + std::string(32 * kMaxBody, 'x') + "\"")});
  const std::vector<BadCase> cases = {
      // Produce: the body.
      {"malformed JSON", "POST", kEvents, "{\"events\": [ {\"key\": \"a\", ", 400},
      {"empty body", "POST", kEvents, "", 400},
      {"body is an array", "POST", kEvents, "[{\"key\":\"a\",\"value\":1}]", 400},
      {"body is a string", "POST", kEvents, "\"events\"", 400},
      {"body is a number", "POST", kEvents, "42", 400},
      {"missing events", "POST", kEvents, "{}", 400},
      {"events is not an array", "POST", kEvents, "{\"events\":{\"key\":\"a\"}}", 400},
      {"empty events", "POST", kEvents, "{\"events\":[]}", 400},
      {"unknown top-level field", "POST", kEvents,
       "{\"events\":[{\"key\":\"a\",\"value\":1}],\"extra\":true}", 400},
      {"misspelled events", "POST", kEvents, "{\"evnts\":[{\"key\":\"a\",\"value\":1}]}", 400},
      // Produce: one event.
      {"event is not an object", "POST", kEvents, "{\"events\":[\"a\"]}", 400},
      {"value nested too deeply", "POST", kEvents, Batch({Event("deep", deep_value)}), 400},
      {"key not valid UTF-8", "POST", kEvents, "{\"events\":[{\"key\":\"\xff\xfe\",\"value\":1}]}",
       400},
      {"missing key", "POST", kEvents, "{\"events\":[{\"value\":1}]}", 400},
      {"empty key", "POST", kEvents, Batch({Event("", "1")}), 400},
      {"non-string key", "POST", kEvents, "{\"events\":[{\"key\":5,\"value\":1}]}", 400},
      {"null key", "POST", kEvents, "{\"events\":[{\"key\":null,\"value\":1}]}", 400},
      {"key over the limit", "POST", kEvents, Batch({Event(long_key, "1")}), 413},
      {"value over the limit", "POST", kEvents, Batch({Event("a", big_value)}), 413},
      {"unknown event field", "POST", kEvents,
       "{\"events\":[{\"key\":\"a\",\"value\":1,\"partition\":2}]}", 400},
      {"seq without producer", "POST", kEvents,
       "{\"events\":[{\"key\":\"a\",\"value\":1,\"seq\":1}]}", 400},
      {"producer without seq", "POST", kEvents,
       "{\"events\":[{\"key\":\"a\",\"value\":1,\"producer\":\"p\"}]}", 400},
      {"negative seq", "POST", kEvents,
       "{\"events\":[{\"key\":\"a\",\"value\":1,\"producer\":\"p\",\"seq\":-1}]}", 400},
      {"string seq", "POST", kEvents,
       "{\"events\":[{\"key\":\"a\",\"value\":1,\"producer\":\"p\",\"seq\":\"1\"}]}", 400},
      {"empty producer", "POST", kEvents,
       "{\"events\":[{\"key\":\"a\",\"value\":1,\"producer\":\"\",\"seq\":1}]}", 400},
      {"half-bad batch (bad key last)", "POST", kEvents,
       Batch({Event("ok1", "1"), Event("ok2", "2"), Event("ok3", "3"), Event("", "4")}), 400},
      {"half-bad batch (big value last)", "POST", kEvents,
       Batch({Event("ok1", "1"), Event("ok2", "2"), Event("ok4", big_value)}), 413},
      // Produce: the size of the whole body.
      {"body over --max-body-bytes with Content-Length", "POST", kEvents, big_body, 413},
      {"body over --max-body-bytes, chunked", "POST", kEvents, big_body, 413, true},
      {"body 32x over --max-body-bytes", "POST", kEvents, huge_body, 413},
      {"body 32x over --max-body-bytes, chunked", "POST", kEvents, huge_body, 413, true},
      // Routing.
      {"unknown topic", "POST", "/v1/topics/no-such-topic/events", Batch({Event("a", "1")}), 404},
      {"unknown topic view", "GET", "/v1/topics/no-such-topic", "", 404},
      {"PUT on events", "PUT", kEvents, Batch({Event("a", "1")}), 405},
      {"DELETE on events", "DELETE", kEvents, "", 405},
      {"GET on commits", "GET", kCommits, "", 405},
      {"POST on the topic view", "POST", kTopicPath, Batch({Event("a", "1")}), 405},
      {"unknown path", "GET", "/v1/nothing", "", 404},
      {"unknown topic subpath", "POST", kTopicPath + "/whatever", "{}", 404},
      {"too deep a path", "GET", kEvents + "/1/2", "", 404},
      // Consume.
      {"consume without group", "GET", kEvents + "?max=10", "", 400},
      {"consume with an empty group", "GET", kEvents + "?group=&max=10", "", 400},
      {"consume with a bad group name", "GET", kEvents + "?group=a%20b", "", 400},
      {"consume with a bad percent-encoding in the query", "GET", kEvents + "?group=%ZZ", "", 400},
      {"consume with max=0", "GET", kEvents + "?group=g&max=0", "", 400},
      {"consume with max=abc", "GET", kEvents + "?group=g&max=abc", "", 400},
      {"consume with max=-1", "GET", kEvents + "?group=g&max=-1", "", 400},
      {"consume with max too large", "GET", kEvents + "?group=g&max=100000000", "", 400},
      {"consume with wait_ms=abc", "GET", kEvents + "?group=g&wait_ms=abc", "", 400},
      {"consume with wait_ms=-5", "GET", kEvents + "?group=g&wait_ms=-5", "", 400},
      {"consume with wait_ms too large", "GET", kEvents + "?group=g&wait_ms=99999999", "", 400},
      // Commit.
      {"commit malformed JSON", "POST", kCommits, "{\"group\":", 400},
      {"commit without group", "POST", kCommits, "{\"offsets\":[{\"partition\":0,\"offset\":1}]}",
       400},
      {"commit without offsets", "POST", kCommits, "{\"group\":\"keeper\"}", 400},
      {"commit with empty offsets", "POST", kCommits, "{\"group\":\"keeper\",\"offsets\":[]}", 400},
      {"commit with a bad offset entry", "POST", kCommits,
       "{\"group\":\"keeper\",\"offsets\":[{\"partition\":0}]}", 400},
      {"commit unknown partition", "POST", kCommits,
       keeper_commit + ",{\"partition\":99,\"offset\":0}]}", 404},
      {"commit offset past the end", "POST", kCommits,
       keeper_commit + ",{\"partition\":" + std::to_string(other_partition) +
           ",\"offset\":" + past_end + "}]}",
       400},
  };

  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    HttpRequestOptions opts;
    opts.chunked = c.chunked;
    HttpResponse r = client_->Send(c.method, c.path, c.body, opts);
    EXPECT_EQ(r.status, c.want) << c.name << ": " << r.Describe();
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(simdjson::padded_string(r.body)).get(doc) != simdjson::SUCCESS) {
      ADD_FAILURE() << c.name << ": the answer is not JSON: " << r.Describe();
      continue;
    }
    std::string_view error, reason;
    EXPECT_EQ(doc["error"].get(error), simdjson::SUCCESS) << c.name << ": " << r.body;
    EXPECT_EQ(doc["reason"].get(reason), simdjson::SUCCESS) << c.name << ": " << r.body;
    EXPECT_FALSE(error.empty()) << c.name;
    EXPECT_FALSE(reason.empty()) << c.name;
  }

  // A path that is not valid percent-encoding never reaches the sidecar's handler: the listener
  // refuses it itself, with a JSON reason, and counts it.
  HttpResponse bad_uri = client_->Get("/v1/topics/%ZZ/events?group=g");
  EXPECT_EQ(bad_uri.status, 400) << bad_uri.Describe();
  EXPECT_NE(bad_uri.body.find("\"bad_uri\""), std::string::npos) << bad_uri.Describe();

  // Nothing changed: no event appended, no commit moved.
  const auto after = TopicView(*client_);
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [p, v] : before) {
    EXPECT_EQ(after.at(p).end_offset, v.end_offset) << "partition " << p;
    EXPECT_EQ(after.at(p).committed, v.committed) << "partition " << p;
  }
  // And /metrics counted every refusal. The sidecar counts a refusal just after answering it, so
  // the last ones may show up a moment later: wait for the count, with a deadline.
  const double want = static_cast<double>(cases.size() + 1);  // the cases and the bad URI
  double rejected = Rejected() - rejected_before;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (rejected < want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rejected = Rejected() - rejected_before;
  }
  EXPECT_EQ(rejected, want);
  std::printf("bad requests sent: %zu, shoal_requests_rejected_total grew by %.0f\n",
              cases.size() + 1, rejected);

  // The sidecar still serves: a good produce, and the rejected keys never show up.
  HttpResponse again = client_->Post(kEvents, Batch({Event("after", "{\"ok\":true}")}));
  ASSERT_EQ(again.status, 200) << again.Describe();
  size_t total = 0;
  for (const auto& [p, v] : after) total += v.end_offset;
  std::vector<wire::ConsumedEvent> all;
  while (true) {
    HttpResponse r = client_->Get(kEvents + "?group=auditor&max=1000");
    ASSERT_EQ(r.status, 200) << r.Describe();
    auto got = wire::ParseConsumeResponse(r.body);
    ASSERT_TRUE(got.ok()) << r.body;
    if (got->empty()) break;
    all.insert(all.end(), got->begin(), got->end());
  }
  EXPECT_EQ(all.size(), total + 1);
  for (const auto& e : all) {
    EXPECT_TRUE(e.key.starts_with("user_") || e.key == "after") << "appended: " << e.key;
  }
}

}  // namespace
}  // namespace shoal::testing
