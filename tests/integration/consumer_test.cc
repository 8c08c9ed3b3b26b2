// client::Consumer against a real sidecar: with and without prefetch, JSON and binary, every
// event handed over once and each key in order, each batch committed (carried by a later fetch
// or POSTed while a fetch is out); the prefetch goes out while the handler runs; a handler's
// error stops the loop and its batch is handed out again; a sidecar killed with SIGKILL and
// restarted under the loop loses nothing.
#include "shoal/client/consumer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/producer.h"
#include "shoal/client/shoal_client.h"
#include "support/sidecar_process.h"
#include "support/wait_for.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;

SidecarOptions Options(std::vector<std::string> extra = {}) {
  SidecarOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.topic = "orders";
  o.partitions = 4;
  o.fsync = "always";
  o.log_level = "warn";
  o.extra_args = std::move(extra);
  return o;
}

// `keys` keys x `per_key` events, each value its key's counter.
void ProduceCounters(const SidecarProcess& s, int keys, int per_key) {
  client::Producer producer(s.data_url(), "orders");
  std::vector<std::shared_future<Result<wire::ProduceResult>>> sent;
  for (int n = 0; n < per_key; ++n) {
    for (int k = 0; k < keys; ++k) {
      sent.push_back(producer.Send("key-" + std::to_string(k), std::to_string(n)));
    }
  }
  producer.Flush();
  for (auto& f : sent) ASSERT_TRUE(f.get().ok()) << f.get().status().ToString();
}

// Each key's counters in the order handed over: 0, 1, 2, ... (`once`: and each exactly once;
// otherwise a key may see a run again from an earlier counter, a redelivery, but every counter
// first appears in order).
void ExpectKeysInOrder(const std::vector<wire::ConsumedEvent>& events, int keys, int per_key,
                       bool once) {
  std::map<std::string, int> next;
  for (const auto& e : events) {
    const int n = std::stoi(e.value);
    int& want = next[e.key];
    if (once || n >= want) {
      EXPECT_EQ(n, want) << e.key << " at partition " << e.partition << " offset " << e.offset;
      want = n + 1;
    }
  }
  EXPECT_EQ(next.size(), static_cast<size_t>(keys));
  for (const auto& [k, n] : next) EXPECT_EQ(n, per_key) << k;
}

// Whether `group` has anything left to read (a fresh fetch without waiting).
bool NothingLeft(const SidecarProcess& s, const std::string& group) {
  client::ShoalClient c(s.data_url(), "orders");
  auto left = c.Consume(group, 100, 0);
  EXPECT_TRUE(left.ok()) << left.status().ToString();
  return left.ok() && left->empty();
}

struct Shape {
  bool prefetch;
  wire::Format format;
};

class ConsumerShapeTest : public ::testing::TestWithParam<Shape> {};

INSTANTIATE_TEST_SUITE_P(PrefetchAndFormat, ConsumerShapeTest,
                         ::testing::Values(Shape{true, wire::Format::kJson},
                                           Shape{false, wire::Format::kJson},
                                           Shape{true, wire::Format::kBinary}),
                         [](const auto& info) {
                           return std::string(info.param.prefetch ? "Prefetch" : "NoPrefetch") +
                                  (info.param.format == wire::Format::kBinary ? "Binary" : "Json");
                         });

TEST_P(ConsumerShapeTest, EveryEventOnceInOrderAndEveryBatchCommitted) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  constexpr int kKeys = 40, kPerKey = 50;
  ProduceCounters(s, kKeys, kPerKey);
  client::ConsumerOptions co;
  co.max_events = 100;
  co.wait_ms = 200;
  co.prefetch = GetParam().prefetch;
  co.format = GetParam().format;
  client::Consumer consumer(s.data_url(), "orders", "billing", co);
  std::vector<wire::ConsumedEvent> seen;
  size_t batches = 0;
  const Status done = consumer.Run([&](const std::vector<wire::ConsumedEvent>& events) {
    seen.insert(seen.end(), events.begin(), events.end());
    ++batches;
    if (seen.size() >= kKeys * kPerKey) consumer.Stop();
    return Status::Ok();
  });
  ASSERT_TRUE(done.ok()) << done.ToString();
  EXPECT_EQ(seen.size(), static_cast<size_t>(kKeys * kPerKey));
  ExpectKeysInOrder(seen, kKeys, kPerKey, /*once=*/true);
  // Every batch was committed, by a later fetch or a POST of its own (the last one at the stop).
  EXPECT_TRUE(NothingLeft(s, "billing"));
  EXPECT_GE(consumer.carried() + consumer.commit_posts(), 1u);
  if (!GetParam().prefetch) {
    // One fetch per batch, each carrying the batch before; the last batch's commit is a POST.
    EXPECT_EQ(consumer.commit_posts(), 1u);
    EXPECT_EQ(consumer.carried(), batches - 1);
  }
  std::printf("%zu batches, %llu fetches, %llu carried, %llu posted\n", batches,
              static_cast<unsigned long long>(consumer.fetches()),
              static_cast<unsigned long long>(consumer.carried()),
              static_cast<unsigned long long>(consumer.commit_posts()));
}

// The prefetch goes out while the handler still holds the first batch (the fetch count reaches
// two before the handler returns). (That it holds other partitions' events is the sidecar's one
// batch per group and partition; the shape test checks what it keeps: each event once, in order.)
TEST(ConsumerTest, ThePrefetchGoesOutWhileTheHandlerRuns) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  ProduceCounters(s, 40, 10);
  client::ConsumerOptions co;
  co.max_events = 20;  // less than a partition's events: a batch is one partition's or a few
  co.wait_ms = 100;
  client::Consumer consumer(s.data_url(), "orders", "billing", co);
  size_t batches = 0;
  bool overlapped = false;
  const Status done = consumer.Run([&](const std::vector<wire::ConsumedEvent>&) {
    if (batches++ == 0) {
      overlapped = WaitFor([&] { return consumer.fetches() >= 2; }, 10s);
    }
    if (batches == 2) consumer.Stop();
    return Status::Ok();
  });
  ASSERT_TRUE(done.ok()) << done.ToString();
  EXPECT_TRUE(overlapped) << "no fetch went out while the handler ran";
  EXPECT_GE(batches, 2u);  // and a third when one was fetched at the stop: handled too
}

// A handler's error ends Run with it, its batch uncommitted: the group gets the same events
// again (after the sidecar's redelivery time), from the start.
TEST(ConsumerTest, AHandlersErrorStopsTheLoopAndItsBatchIsHandedOutAgain) {
  SidecarProcess s(Options({"--redelivery-ms", "300"}));
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  ProduceCounters(s, 4, 5);
  client::ConsumerOptions co;
  co.wait_ms = 100;
  client::Consumer consumer(s.data_url(), "orders", "billing", co);
  std::vector<wire::ConsumedEvent> failed;
  const Status done = consumer.Run([&](const std::vector<wire::ConsumedEvent>& events) {
    failed = events;
    return Status::Internal("the handler's database is down");
  });
  EXPECT_EQ(done.code(), Status::Code::kInternal) << done.ToString();
  ASSERT_FALSE(failed.empty());
  client::Consumer again(s.data_url(), "orders", "billing", co);
  std::vector<wire::ConsumedEvent> seen;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  const Status second = again.Run([&](const std::vector<wire::ConsumedEvent>& events) {
    seen.insert(seen.end(), events.begin(), events.end());
    if (seen.size() >= 20 || std::chrono::steady_clock::now() > deadline) again.Stop();
    return Status::Ok();
  });
  ASSERT_TRUE(second.ok()) << second.ToString();
  std::set<std::pair<uint32_t, uint64_t>> places;
  for (const auto& e : seen) places.insert({e.partition, e.offset});
  for (const auto& e : failed) {
    EXPECT_EQ(places.count({e.partition, e.offset}), 1u)
        << "partition " << e.partition << " offset " << e.offset << " was not handed out again";
  }
  ExpectKeysInOrder(seen, 4, 5, /*once=*/false);
}

// A Stop() before Run is kept (Run returns at once, nothing handled); a handler that throws ends
// Run with kInternal naming the exception, its batch uncommitted.
TEST(ConsumerTest, AStopBeforeRunIsKeptAndAThrowingHandlerEndsRunWithAnError) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  ProduceCounters(s, 4, 5);
  client::ConsumerOptions co;
  co.wait_ms = 100;
  client::Consumer stopped(s.data_url(), "orders", "billing", co);
  stopped.Stop();
  bool called = false;
  EXPECT_TRUE(stopped
                  .Run([&](const std::vector<wire::ConsumedEvent>&) {
                    called = true;
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_FALSE(called);
  client::Consumer throwing(s.data_url(), "orders", "billing", co);
  const Status threw = throwing.Run([](const std::vector<wire::ConsumedEvent>&) -> Status {
    throw std::runtime_error("parse error in event");
  });
  EXPECT_EQ(threw.code(), Status::Code::kInternal);
  EXPECT_NE(threw.message().find("parse error in event"), std::string::npos) << threw.ToString();
  EXPECT_EQ(throwing.commit_posts() + throwing.carried(), 0u);
}

// The sidecar is killed with SIGKILL and restarted while the loop runs: the loop retries, and
// every event reaches the handler (a batch not committed before the kill comes again), each key
// in order.
TEST(ConsumerTest, ASidecarKilledAndRestartedUnderTheLoopLosesNothing) {
  SidecarProcess s(Options({"--redelivery-ms", "500"}));
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  constexpr int kKeys = 20, kPerKey = 30;
  ProduceCounters(s, kKeys, kPerKey);
  client::ConsumerOptions co;
  co.max_events = 50;
  co.wait_ms = 100;
  co.retry_for = 30s;
  co.timeout = 5s;
  client::Consumer consumer(s.data_url(), "orders", "billing", co);
  std::vector<wire::ConsumedEvent> seen;
  std::set<std::pair<uint32_t, uint64_t>> distinct;
  bool killed = false;
  const Status done = consumer.Run([&](const std::vector<wire::ConsumedEvent>& events) {
    seen.insert(seen.end(), events.begin(), events.end());
    for (const auto& e : events) distinct.insert({e.partition, e.offset});
    if (!killed && distinct.size() >= kKeys * kPerKey / 3) {
      killed = true;
      s.Kill9();
      EXPECT_TRUE(s.Restart().ok()) << s.Describe();
    }
    if (distinct.size() >= kKeys * kPerKey) consumer.Stop();
    return Status::Ok();
  });
  ASSERT_TRUE(done.ok()) << done.ToString();
  EXPECT_TRUE(killed);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kKeys * kPerKey));
  ExpectKeysInOrder(seen, kKeys, kPerKey, /*once=*/false);
  EXPECT_TRUE(NothingLeft(s, "billing"));
}

}  // namespace
}  // namespace shoal::testing
