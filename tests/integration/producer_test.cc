// client::Producer against a real sidecar: batches by size and linger, every event acknowledged
// and stored once in send order per key, through a SIGKILL and restart of the sidecar (retries
// numbered for idempotence), and a refusal that is not retryable fails the batch's events.
#include "shoal/client/producer.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "support/sidecar_process.h"

namespace shoal::testing {
namespace {

SidecarOptions Options() {
  SidecarOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.topic = "orders";
  o.partitions = 2;
  o.fsync = "always";
  o.log_level = "warn";
  return o;
}

// Every event of the topic, read as a group until `want` came (or nothing more does).
std::vector<wire::ConsumedEvent> ReadAll(const SidecarProcess& s, size_t want) {
  client::ShoalClient reader(s.data_url(), "orders");
  std::vector<wire::ConsumedEvent> all;
  for (int empty = 0; all.size() < want && empty < 20;) {
    auto events = reader.Consume("check", 1000, 100);
    if (!events.ok() || events->empty()) {
      ++empty;
      continue;
    }
    std::map<uint32_t, uint64_t> next;
    for (const auto& e : *events) {
      next[e.partition] = std::max(next[e.partition], e.offset + 1);
      all.push_back(e);
    }
    std::vector<wire::CommitOffset> offsets;
    for (auto [p, o] : next) offsets.push_back({PartitionId(p), Offset(o)});
    EXPECT_TRUE(reader.Commit("check", offsets).ok());
  }
  return all;
}

// Per key, the values in the order consumed: each key's counter must run 0, 1, 2, ... once.
void ExpectEachKeyOnceInOrder(const std::vector<wire::ConsumedEvent>& events, int keys,
                              int per_key) {
  std::map<std::string, int> next;
  for (const auto& e : events) {
    const int n = std::stoi(std::string(e.value));
    EXPECT_EQ(n, next[e.key]) << e.key << " at partition " << e.partition << " offset " << e.offset;
    next[e.key] = n + 1;
  }
  EXPECT_EQ(next.size(), static_cast<size_t>(keys));
  for (const auto& [k, n] : next) EXPECT_EQ(n, per_key) << k;
}

TEST(ProducerTest, BatchesByLingerAndStoresEachEventOnceInOrderThroughASidecarRestart) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  client::ProducerOptions po;
  po.batch_events = 200;
  po.linger = std::chrono::milliseconds(5);
  po.retry_for = std::chrono::seconds(30);
  client::Producer producer(s.data_url(), "orders", po);
  constexpr int kKeys = 20, kPerKey = 300;
  std::vector<std::shared_future<Result<wire::ProduceResult>>> sent;
  for (int n = 0; n < kPerKey; ++n) {
    for (int k = 0; k < kKeys; ++k) {
      sent.push_back(producer.Send("k" + std::to_string(k), std::to_string(n)));
    }
    if (n == kPerKey / 2) {
      // Half way: the sidecar dies and comes back while batches are queued and in flight.
      s.Kill9();
      ASSERT_TRUE(s.Restart().ok()) << s.Describe();
    }
  }
  producer.Flush();
  for (auto& f : sent) {
    ASSERT_TRUE(f.get().ok()) << f.get().status().ToString();
  }
  // Batched: far fewer requests than events.
  EXPECT_LT(producer.requests(), sent.size() / 10) << producer.requests() << " requests";
  EXPECT_GT(producer.retries(), 0u) << "the restart was not seen";
  const auto events = ReadAll(s, sent.size());
  EXPECT_EQ(events.size(), sent.size());
  ExpectEachKeyOnceInOrder(events, kKeys, kPerKey);
}

TEST(ProducerTest, ASingleEventGoesAfterTheLingerAndARefusalFailsItsEvents) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  client::ProducerOptions po;
  po.linger = std::chrono::milliseconds(20);
  client::Producer producer(s.data_url(), "orders", po);
  auto one = producer.Send("alone", "1");
  EXPECT_EQ(one.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_TRUE(one.get().ok()) << one.get().status().ToString();
  // A value that is not JSON: 400, not retried, the event fails with the sidecar's reason.
  auto bad = producer.Send("bad", "{not json");
  ASSERT_EQ(bad.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(bad.get().status().code(), Status::Code::kInvalidArgument)
      << bad.get().status().ToString();
  EXPECT_EQ(producer.retries(), 0u);
}

}  // namespace
}  // namespace shoal::testing
