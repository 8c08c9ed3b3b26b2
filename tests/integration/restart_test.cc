// Restarts of a real sidecar process: a consumer group's commits survive a clean stop (SIGTERM,
// exit code 0) and a kill -9 under --fsync always, the group resumes right after its commits,
// and an idempotent producer's retry after the restart is answered as a duplicate. Also the
// long-poll: a GET with wait_ms returns as soon as an event arrives, and an empty list once
// wait_ms has passed with nothing to hand out.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "shoal/common/json.h"
#include "shoal/common/wire.h"
#include "support/http_test_client.h"
#include "support/sidecar_process.h"
#include "support/topic_view.h"

namespace shoal::testing {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr char kTopic[] = "orders";
const std::string kEvents = std::string("/v1/topics/") + kTopic + "/events";
const std::string kCommits = std::string("/v1/topics/") + kTopic + "/commits";

struct Sent {
  std::string key;
  uint64_t seq;
};

std::string ProduceBody(const std::vector<Sent>& events, const std::string& producer) {
  std::string out = "{\"events\":[";
  for (size_t i = 0; i < events.size(); ++i) {
    if (i) out += ',';
    out += "{\"key\":";
    json::AppendString(out, events[i].key);
    out += ",\"value\":{\"seq\":";
    json::AppendUint(out, events[i].seq);
    out += "},\"producer\":";
    json::AppendString(out, producer);
    out += ",\"seq\":";
    json::AppendUint(out, events[i].seq);
    out += '}';
  }
  out += "]}";
  return out;
}

std::string CommitBody(const std::string& group, const std::map<uint32_t, uint64_t>& offsets) {
  std::string out = "{\"group\":";
  json::AppendString(out, group);
  out += ",\"offsets\":[";
  bool first = true;
  for (const auto& [p, o] : offsets) {
    if (!first) out += ',';
    first = false;
    out += "{\"partition\":" + std::to_string(p) + ",\"offset\":" + std::to_string(o) + "}";
  }
  out += "]}";
  return out;
}

// Per partition: (end_offset, committed offset of `group` or -1).
struct EndAndCommit {
  uint64_t end_offset = 0;
  int64_t committed = -1;
};
std::map<uint32_t, EndAndCommit> TopicView(HttpTestClient& client, const std::string& group) {
  HttpResponse r = client.Get(std::string("/v1/topics/") + kTopic);
  EXPECT_EQ(r.status, 200) << r.Describe();
  auto view = ParseTopicView(r.body);
  if (!view.ok()) {
    ADD_FAILURE() << "topic view: " << view.status().ToString();
    return {};
  }
  std::map<uint32_t, EndAndCommit> out;
  for (const auto& [id, p] : view->partitions) {
    auto c = p.committed.find(group);
    out[id] = {p.end_offset, c == p.committed.end() ? -1 : static_cast<int64_t>(c->second)};
  }
  return out;
}

std::vector<wire::ConsumedEvent> Consume(HttpTestClient& client, const std::string& group,
                                         size_t max, int wait_ms) {
  HttpResponse r = client.Get(kEvents + "?group=" + group + "&max=" + std::to_string(max) +
                              "&wait_ms=" + std::to_string(wait_ms));
  EXPECT_EQ(r.status, 200) << r.Describe();
  auto events = wire::ParseConsumeResponse(r.body);
  EXPECT_TRUE(events.ok()) << events.status().ToString() << ": " << r.body;
  return events.ok() ? std::move(events).value() : std::vector<wire::ConsumedEvent>{};
}

// Commits everything below each partition's highest delivered offset + 1.
void CommitAll(HttpTestClient& client, const std::string& group,
               const std::vector<wire::ConsumedEvent>& events) {
  std::map<uint32_t, uint64_t> next;
  for (const auto& e : events) next[e.partition] = std::max(next[e.partition], e.offset + 1);
  if (next.empty()) return;
  HttpResponse r = client.Post(kCommits, CommitBody(group, next));
  EXPECT_EQ(r.status, 200) << r.Describe();
}

SidecarOptions Options(const std::string& fsync) {
  SidecarOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.topic = kTopic;
  o.partitions = 4;
  o.fsync = fsync;
  return o;
}

enum class StopMode { kSigterm, kKill9 };
void PrintTo(StopMode mode, std::ostream* os) {
  *os << (mode == StopMode::kSigterm ? "SIGTERM" : "kill -9");
}

class RestartTest : public ::testing::TestWithParam<StopMode> {};

TEST_P(RestartTest, CommitsAndProducerStateSurviveTheRestart) {
  const bool clean = GetParam() == StopMode::kSigterm;
  // A clean stop must sync on its own, so it runs with the laziest policy that still syncs;
  // kill -9 keeps only what was made durable before the acknowledgement.
  SidecarProcess sidecar(Options(clean ? "interval" : "always"));
  ASSERT_TRUE(sidecar.Start().ok()) << sidecar.Describe();
  auto client = sidecar.DataClient();

  // 4 batches of 50 idempotent events over 16 keys.
  constexpr int kBatches = 4, kPerBatch = 50;
  std::vector<std::vector<Sent>> batches(kBatches);
  std::vector<std::vector<wire::ProduceResult>> first_results(kBatches);
  uint64_t seq = 0;
  for (int b = 0; b < kBatches; ++b) {
    for (int i = 0; i < kPerBatch; ++i, ++seq) {
      batches[b].push_back({"k" + std::to_string(seq % 16), seq});
    }
    HttpResponse r = client->Post(kEvents, ProduceBody(batches[b], "restarter"));
    ASSERT_EQ(r.status, 200) << r.Describe();
    auto results = wire::ParseProduceResponse(r.body);
    ASSERT_TRUE(results.ok()) << r.body;
    ASSERT_EQ(results->size(), batches[b].size());
    for (const auto& res : *results) EXPECT_FALSE(res.duplicate);
    first_results[b] = *results;
  }
  const size_t total = kBatches * kPerBatch;

  // The group processes and commits 80 events, then takes 40 more without committing them.
  const std::string group = "resumer";
  std::set<std::pair<uint32_t, uint64_t>> committed_events;
  std::map<uint32_t, uint64_t> committed_at;
  while (committed_events.size() < 80) {
    auto got = Consume(*client, group, 80 - committed_events.size(), 1000);
    ASSERT_FALSE(got.empty()) << "consume ran dry at " << committed_events.size();
    CommitAll(*client, group, got);
    for (const auto& e : got) {
      EXPECT_TRUE(committed_events.insert({e.partition, e.offset}).second)
          << "delivered twice: " << e.partition << "/" << e.offset;
      committed_at[e.partition] = std::max(committed_at[e.partition], e.offset + 1);
    }
  }
  ASSERT_EQ(Consume(*client, group, 40, 1000).size(), 40u);
  const auto before = TopicView(*client, group);

  if (clean) {
    auto code = sidecar.Terminate();
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    EXPECT_EQ(*code, 0) << "a clean stop exits 0\n" << sidecar.Describe();
  } else {
    sidecar.Kill9();
  }
  ASSERT_TRUE(sidecar.Restart().ok()) << sidecar.Describe();
  client = sidecar.DataClient();

  // Nothing acknowledged is lost and every commit is still there.
  const auto after = TopicView(*client, group);
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [p, v] : before) {
    EXPECT_EQ(after.at(p).end_offset, v.end_offset) << "partition " << p;
    const int64_t want = committed_at.count(p) ? static_cast<int64_t>(committed_at[p]) : -1;
    EXPECT_EQ(after.at(p).committed, want) << "partition " << p;
  }

  // The group resumes right after its commits: the 40 taken but uncommitted events come again,
  // then the rest; every event exactly once overall, each partition in offset order from its
  // committed offset.
  std::map<uint32_t, uint64_t> next_expected;
  for (const auto& [p, v] : after) next_expected[p] = v.committed < 0 ? 0 : v.committed;
  std::set<std::pair<uint32_t, uint64_t>> seen = committed_events;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  while (seen.size() < total && SteadyClock::now() < deadline) {
    auto got = Consume(*client, group, 64, 1000);
    for (const auto& e : got) {
      EXPECT_EQ(e.offset, next_expected[e.partition]) << "partition " << e.partition;
      next_expected[e.partition] = e.offset + 1;
      EXPECT_TRUE(seen.insert({e.partition, e.offset}).second)
          << "delivered again after its commit: " << e.partition << "/" << e.offset;
    }
    CommitAll(*client, group, got);
  }
  EXPECT_EQ(seen.size(), total);
  EXPECT_TRUE(Consume(*client, group, 10, 0).empty());

  // The producer's retries after the restart are duplicates with their original offsets.
  for (int b = 0; b < kBatches; ++b) {
    HttpResponse r = client->Post(kEvents, ProduceBody(batches[b], "restarter"));
    ASSERT_EQ(r.status, 200) << r.Describe();
    auto results = wire::ParseProduceResponse(r.body);
    ASSERT_TRUE(results.ok()) << r.body;
    ASSERT_EQ(results->size(), batches[b].size());
    for (size_t i = 0; i < results->size(); ++i) {
      EXPECT_TRUE((*results)[i].duplicate) << "batch " << b << " event " << i;
      EXPECT_EQ((*results)[i].partition, first_results[b][i].partition);
      EXPECT_EQ((*results)[i].offset, first_results[b][i].offset);
    }
  }
  const auto final_view = TopicView(*client, group);
  for (const auto& [p, v] : before) EXPECT_EQ(final_view.at(p).end_offset, v.end_offset);
  EXPECT_TRUE(Consume(*client, group, 10, 0).empty()) << "a duplicate was appended";

  // Once more after a kill -9 with new events since the restart: the producer state is rebuilt
  // from what the first stop left (a snapshot after a clean stop) plus the log past it.
  std::vector<Sent> fifth;
  for (int i = 0; i < kPerBatch; ++i, ++seq) fifth.push_back({"k" + std::to_string(seq % 16), seq});
  HttpResponse r = client->Post(kEvents, ProduceBody(fifth, "restarter"));
  ASSERT_EQ(r.status, 200) << r.Describe();
  auto fifth_results = wire::ParseProduceResponse(r.body);
  ASSERT_TRUE(fifth_results.ok()) << r.body;
  batches.push_back(fifth);
  first_results.push_back(*fifth_results);
  sidecar.Kill9();
  ASSERT_TRUE(sidecar.Restart().ok()) << sidecar.Describe();
  client = sidecar.DataClient();
  for (size_t b = 0; b < batches.size(); ++b) {
    r = client->Post(kEvents, ProduceBody(batches[b], "restarter"));
    ASSERT_EQ(r.status, 200) << r.Describe();
    auto results = wire::ParseProduceResponse(r.body);
    ASSERT_TRUE(results.ok() && results->size() == batches[b].size()) << r.body;
    for (size_t i = 0; i < results->size(); ++i) {
      EXPECT_TRUE((*results)[i].duplicate)
          << "after the second stop: batch " << b << " event " << i;
      EXPECT_EQ((*results)[i].offset, first_results[b][i].offset);
    }
  }
  if (HasFailure()) ADD_FAILURE() << sidecar.Describe();
}

INSTANTIATE_TEST_SUITE_P(StopModes, RestartTest,
                         ::testing::Values(StopMode::kSigterm, StopMode::kKill9),
                         [](const auto& info) {
                           return info.param == StopMode::kSigterm ? "Sigterm" : "Kill9";
                         });

TEST(LongPollTest, ReturnsAsSoonAsAnEventArrivesAndEmptyAfterWaitMs) {
  SidecarProcess sidecar(Options("always"));
  ASSERT_TRUE(sidecar.Start().ok()) << sidecar.Describe();
  auto client = sidecar.DataClient();
  const std::string group = "poller";
  ASSERT_TRUE(Consume(*client, group, 10, 0).empty());

  // Parked: no answer for a while, then the produce wakes it well before wait_ms.
  constexpr int kWaitMs = 20000;
  auto poller = sidecar.DataClient(milliseconds(kWaitMs + 10000));
  auto pending =
      std::async(std::launch::async, [&] { return Consume(*poller, group, 10, kWaitMs); });
  ASSERT_EQ(pending.wait_for(milliseconds(300)), std::future_status::timeout)
      << "the GET returned with nothing to hand out";
  HttpResponse r = client->Post(kEvents, ProduceBody({{"wake", 1}}, "poll-producer"));
  ASSERT_EQ(r.status, 200) << r.Describe();
  const auto acked = SteadyClock::now();
  ASSERT_EQ(pending.wait_for(milliseconds(kWaitMs / 2)), std::future_status::ready)
      << "the parked GET did not return within half its wait_ms after an event arrived";
  const auto woke_after = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - acked);
  auto got = pending.get();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, "wake");
  EXPECT_LT(woke_after.count(), 2000) << "the long-poll answered late";
  std::printf("long-poll woke %lld ms after the produce was acknowledged\n",
              static_cast<long long>(woke_after.count()));
  CommitAll(*client, group, got);

  // Nothing arrives: an empty list once wait_ms has passed, not before and not much later.
  constexpr int kShortWaitMs = 700;
  const auto t0 = SteadyClock::now();
  auto empty = Consume(*client, group, 10, kShortWaitMs);
  const auto took = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - t0);
  EXPECT_TRUE(empty.empty());
  EXPECT_GE(took.count(), kShortWaitMs - 50);
  EXPECT_LT(took.count(), kShortWaitMs + 3000);

  // A clean stop answers a parked GET (an empty list) instead of holding the exit for wait_ms.
  auto parked = std::async(std::launch::async, [&] {
    return poller->Get(kEvents + "?group=" + group + "&max=10&wait_ms=" + std::to_string(kWaitMs));
  });
  ASSERT_EQ(parked.wait_for(milliseconds(300)), std::future_status::timeout);
  const auto stop_at = SteadyClock::now();
  auto code = sidecar.Terminate(milliseconds(kWaitMs / 2));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0) << sidecar.Describe();
  ASSERT_EQ(parked.wait_for(milliseconds(kWaitMs / 2)), std::future_status::ready);
  const auto stopped_after = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - stop_at);
  HttpResponse last = parked.get();
  EXPECT_EQ(last.status, 200) << last.Describe();
  EXPECT_EQ(last.body, "{\"events\":[]}");
  EXPECT_LT(stopped_after.count(), 5000) << "SIGTERM waited for the parked GET";
  if (HasFailure()) ADD_FAILURE() << sidecar.Describe();
}

// A consumer takes a batch and dies without committing; its successor runs the plainest loop
// (take, commit what it took, again). Commits are cumulative, so if the sidecar handed the
// successor what follows the lost batch, its commit would commit that batch unseen. The sidecar
// keeps one batch out per group and partition: the successor gets the dead consumer's batch
// (after --redelivery-ms) before anything after it, and the group sees every event, in order.
TEST(ConsumerRestartTest, AConsumerThatDiesMidBatchLosesNothingForItsGroup) {
  constexpr int kRedeliveryMs = 800;
  SidecarOptions o = Options("always");
  o.partitions = 1;
  o.extra_args = {"--redelivery-ms", std::to_string(kRedeliveryMs)};
  SidecarProcess sidecar(o);
  ASSERT_TRUE(sidecar.Start().ok()) << sidecar.Describe();
  auto client = sidecar.DataClient();
  constexpr uint64_t kEventsSent = 300;
  for (uint64_t first = 1; first <= kEventsSent; first += 100) {
    std::vector<Sent> batch;
    for (uint64_t seq = first; seq < first + 100; ++seq) {
      batch.push_back({"k" + std::to_string(seq % 10), seq});
    }
    HttpResponse r = client->Post(kEvents, ProduceBody(batch, "p"));
    ASSERT_EQ(r.status, 200) << r.Describe();
  }
  const std::string group = "billing";
  const auto dead = Consume(*client, group, 50, 0);
  ASSERT_EQ(dead.size(), 50u);
  const auto died_at = SteadyClock::now();

  std::vector<wire::ConsumedEvent> seen;
  std::optional<milliseconds> first_after;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  while (seen.size() < kEventsSent && SteadyClock::now() < deadline) {
    const auto got = Consume(*client, group, 50, 500);
    if (!got.empty() && !first_after) {
      first_after = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - died_at);
    }
    seen.insert(seen.end(), got.begin(), got.end());
    CommitAll(*client, group, got);
  }
  ASSERT_TRUE(first_after.has_value()) << sidecar.Describe();
  // The successor got nothing while the batch was out, then that batch first.
  EXPECT_GE(first_after->count(), kRedeliveryMs - 100);
  ASSERT_GE(seen.size(), 50u);
  EXPECT_EQ(seen.front().offset, 0u);
  EXPECT_EQ(seen[49].offset, 49u);
  // Every event once, each key in order.
  std::set<uint64_t> seqs;
  std::map<std::string, uint64_t> last;
  uint64_t reordered = 0;
  for (const auto& e : seen) {
    ASSERT_TRUE(e.seq.has_value());
    seqs.insert(*e.seq);
    if (*e.seq <= last[e.key]) ++reordered;
    last[e.key] = *e.seq;
  }
  EXPECT_EQ(seqs.size(), kEventsSent) << "lost " << kEventsSent - seqs.size();
  EXPECT_EQ(seen.size(), kEventsSent) << "duplicates";
  EXPECT_EQ(reordered, 0u);
  EXPECT_EQ(TopicView(*client, group)[0].committed, static_cast<int64_t>(kEventsSent));
  std::printf("successor's first batch %lld ms after the death (redelivery %d ms); %zu of %llu "
              "seen, %llu reordered\n",
              static_cast<long long>(first_after->count()), kRedeliveryMs, seqs.size(),
              static_cast<unsigned long long>(kEventsSent),
              static_cast<unsigned long long>(reordered));
  if (HasFailure()) ADD_FAILURE() << sidecar.Describe();
}

}  // namespace
}  // namespace shoal::testing
