// client::Producer against a real sidecar: batches by size and linger, every event acknowledged
// and stored once in send order per key, through a SIGKILL and restart of the sidecar (retries
// numbered for idempotence), and a refusal that is not retryable fails the batch's events.
#include "shoal/client/producer.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "support/sidecar_cluster.h"
#include "support/sidecar_process.h"
#include "support/wait_for.h"

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

// Waits (up to 20 s) until `producer` had `n` batches in flight at once.
bool WaitForPeak(const client::Producer& producer, size_t n) {
  return WaitFor([&] { return producer.peak_in_flight() >= n; }, std::chrono::seconds(20));
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

struct Shape {
  size_t max_in_flight;
  wire::Format format;
};

class ProducerShapeTest : public ::testing::TestWithParam<Shape> {};

INSTANTIATE_TEST_SUITE_P(InFlightAndFormat, ProducerShapeTest,
                         ::testing::Values(Shape{1, wire::Format::kJson},
                                           Shape{4, wire::Format::kJson},
                                           Shape{4, wire::Format::kBinary}),
                         [](const auto& info) {
                           return std::to_string(info.param.max_in_flight) + "InFlight" +
                                  (info.param.format == wire::Format::kBinary ? "Binary" : "Json");
                         });

TEST_P(ProducerShapeTest, BatchesByLingerAndStoresEachEventOnceInOrderThroughASidecarRestart) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  client::ProducerOptions po;
  po.batch_events = 200;
  po.linger = std::chrono::milliseconds(5);
  po.retry_for = std::chrono::seconds(30);
  po.max_in_flight = GetParam().max_in_flight;
  po.format = GetParam().format;
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

// Four slots: while the sidecar is paused (SIGSTOP) four batches are in flight at once, each of
// other keys, and later events wait; resumed, everything is stored once and each key in the
// order sent. Each slot numbers its events under its own producer id.
TEST(ProducerTest, FourSlotsHaveFourBatchesInFlightAtOnceAndKeepEachKeysOrder) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  client::ProducerOptions po;
  po.batch_events = 10;
  po.linger = std::chrono::milliseconds(1);
  po.max_in_flight = 4;
  client::Producer producer(s.data_url(), "orders", po);
  ASSERT_EQ(::kill(s.pid(), SIGSTOP), 0);
  constexpr int kKeys = 64, kPerKey = 40;
  std::vector<std::shared_future<Result<wire::ProduceResult>>> sent;
  for (int n = 0; n < kPerKey; ++n) {
    for (int k = 0; k < kKeys; ++k) {
      sent.push_back(producer.Send("key-" + std::to_string(k), std::to_string(n)));
    }
  }
  const bool four = WaitForPeak(producer, 4);
  ASSERT_EQ(::kill(s.pid(), SIGCONT), 0);
  EXPECT_TRUE(four) << "the slots did not send at once: peak " << producer.peak_in_flight();
  producer.Flush();
  for (auto& f : sent) ASSERT_TRUE(f.get().ok()) << f.get().status().ToString();
  const auto events = ReadAll(s, sent.size());
  EXPECT_EQ(events.size(), sent.size());
  ExpectEachKeyOnceInOrder(events, kKeys, kPerKey);
  std::set<std::string> ids;
  for (const auto& e : events) ids.insert(e.producer);
  EXPECT_EQ(ids, (std::set<std::string>{producer.SlotId(0), producer.SlotId(1), producer.SlotId(2),
                                        producer.SlotId(3)}));
  EXPECT_EQ(producer.SlotId(2), producer.producer_id() + ".2");
}

// One hot key has one batch in flight at a time: with the sidecar paused, its first batch is out
// and its other events wait (passed over), while another key's event takes a second slot.
TEST(ProducerTest, AHotKeyHasOneBatchInFlightWhileOtherKeysTakeTheOtherSlots) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  client::ProducerOptions po;
  po.batch_events = 20;
  po.linger = std::chrono::milliseconds(1);
  po.max_in_flight = 4;
  client::Producer producer(s.data_url(), "orders", po);
  ASSERT_EQ(::kill(s.pid(), SIGSTOP), 0);
  std::vector<std::shared_future<Result<wire::ProduceResult>>> sent;
  for (int n = 0; n < 30; ++n) sent.push_back(producer.Send("hot", std::to_string(n)));
  const bool first = WaitForPeak(producer, 1);
  sent.push_back(producer.Send("cold", "0"));
  const bool second = WaitForPeak(producer, 2);
  const uint64_t passed = producer.passed_over();
  const size_t peak = producer.peak_in_flight();
  ASSERT_EQ(::kill(s.pid(), SIGCONT), 0);
  ASSERT_TRUE(first);
  EXPECT_TRUE(second) << "the cold key waited behind the hot one";
  // The hot key's 10 events after its first batch were passed over (they would have been a
  // second batch of it in flight), and nothing but the cold event went out beside it.
  EXPECT_GE(passed, 10u);
  EXPECT_EQ(peak, 2u);
  producer.Flush();
  for (auto& f : sent) ASSERT_TRUE(f.get().ok()) << f.get().status().ToString();
  const auto events = ReadAll(s, sent.size());
  EXPECT_EQ(events.size(), sent.size());
  std::map<std::string, int> next;
  for (const auto& e : events) EXPECT_EQ(std::stoi(std::string(e.value)), next[e.key]++) << e.key;
  EXPECT_EQ(next["hot"], 30);
  EXPECT_EQ(next["cold"], 1);
}

// A stable producer id (a process that resends what it sent before a restart) numbers events in
// Send order, 1, 2, 3, ..., under that id alone: one batch in flight whatever max_in_flight says.
TEST(ProducerTest, AStableProducerIdNumbersEventsInSendOrder) {
  SidecarProcess s(Options());
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  client::ProducerOptions po;
  po.producer_id = "orders-svc";
  po.max_in_flight = 4;
  po.batch_events = 10;
  po.linger = std::chrono::milliseconds(1);
  client::Producer producer(s.data_url(), "orders", po);
  EXPECT_EQ(producer.SlotId(0), "orders-svc");
  for (int i = 0; i < 100; ++i) producer.Send("key-" + std::to_string(i), std::to_string(i));
  producer.Flush();
  EXPECT_EQ(producer.peak_in_flight(), 1u);
  const auto events = ReadAll(s, 100);
  ASSERT_EQ(events.size(), 100u);
  for (const auto& e : events) {
    EXPECT_EQ(e.producer, "orders-svc");
    EXPECT_EQ(e.seq, static_cast<uint64_t>(std::stoi(e.value) + 1)) << e.key;
  }
}

// Routed by the map (a producer outside the pods): with the pod it was given as base_url paused
// (SIGSTOP), the events of keys the other pod owns are stored there, sent straight to it (they
// would wait for the paused pod to forward them otherwise), each key in order.
TEST(ProducerTest, RoutedByTheMapEventsGoStraightToTheirOwnersAndAPodThatStopsAnsweringIsLeftOut) {
  SidecarClusterOptions co;
  co.binary = SHOAL_SIDECAR_BIN;
  co.pods = 2;
  co.partitions_per_pod = 2;
  SidecarCluster cluster(co);
  ASSERT_TRUE(cluster.Start().ok());
  client::ProducerOptions po;
  po.route_by_map = true;
  po.route_refresh = std::chrono::hours(1);  // read once, then only when a pod fails
  po.linger = std::chrono::milliseconds(1);
  client::Producer producer(cluster.pod(0).data_url(), "orders", po);
  // Keys by owner, from the map the cluster installed.
  auto owner_of = [&](const std::string& key) {
    return cluster.current().Route(KeyHash(key)).owner.value();
  };
  std::vector<std::string> on_pod1;
  for (int i = 0; on_pod1.size() < 20; ++i) {
    std::string k = "key-" + std::to_string(i);
    if (owner_of(k) == "pod-1") on_pod1.push_back(k);
  }
  ASSERT_TRUE(WaitFor([&] { return producer.routed_ranges() == 4; }, std::chrono::seconds(20)))
      << "the map was not read: " << producer.routed_ranges() << " ranges";
  ASSERT_EQ(::kill(cluster.pod(0).pid(), SIGSTOP), 0);
  std::vector<std::shared_future<Result<wire::ProduceResult>>> sent;
  for (int n = 0; n < 10; ++n) {
    for (const auto& k : on_pod1) sent.push_back(producer.Send(k, std::to_string(n)));
  }
  bool all = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (auto& f : sent) {
    all = all && f.wait_until(deadline) == std::future_status::ready && f.get().ok();
  }
  ASSERT_EQ(::kill(cluster.pod(0).pid(), SIGCONT), 0);
  EXPECT_TRUE(all) << "events of pod-1's keys waited for the paused pod-0";
  EXPECT_EQ(producer.routed(), sent.size());
  // pod-1 holds them, each key in order.
  const auto events = ReadAll(cluster.pod(1), sent.size());
  std::map<std::string, int> next;
  for (const auto& e : events) EXPECT_EQ(std::stoi(e.value), next[e.key]++) << e.key;
  EXPECT_EQ(events.size(), sent.size());

  // pod-1 stops answering (SIGSTOP): a batch sent to it waits the direct timeout, goes through
  // pod-0 instead (which forwards it: it waits for pod-1 too) and pod-1's ranges leave the routes;
  // when pod-1 answers again the events are stored, each key in order after the ones before.
  ASSERT_EQ(::kill(cluster.pod(1).pid(), SIGSTOP), 0);
  std::vector<std::shared_future<Result<wire::ProduceResult>>> more;
  for (const auto& k : on_pod1) more.push_back(producer.Send(k, "10"));
  const bool shunned =
      WaitFor([&] { return producer.routed_ranges() == 2; }, std::chrono::seconds(20));
  ASSERT_EQ(::kill(cluster.pod(1).pid(), SIGCONT), 0);
  EXPECT_TRUE(shunned) << producer.routed_ranges() << " ranges";
  for (auto& f : more) EXPECT_TRUE(f.get().ok()) << f.get().status().ToString();
  const auto after = ReadAll(cluster.pod(1), more.size());
  ASSERT_EQ(after.size(), more.size());
  for (const auto& e : after) EXPECT_EQ(e.value, "10") << e.key;
}

// Routes that went stale through a split and a move (route_refresh long: the producer does not
// read the map again by itself): a batch sent to the pod that no longer owns the range is
// forwarded by it, or sent again through base_url; every event is stored once, each key in the
// order sent, read as a group through both pods.
TEST(ProducerTest, StaleRoutesThroughASplitAndAMoveLoseAndReorderNothing) {
  SidecarClusterOptions co;
  co.binary = SHOAL_SIDECAR_BIN;
  SidecarCluster cluster(co);
  ASSERT_TRUE(cluster.Start().ok());
  client::ProducerOptions po;
  po.route_by_map = true;
  po.route_refresh = std::chrono::hours(1);
  po.linger = std::chrono::milliseconds(1);
  po.batch_events = 20;
  client::Producer producer(cluster.pod(0).data_url(), "orders", po);
  ASSERT_TRUE(WaitFor([&] { return producer.routed_ranges() == 4; }, std::chrono::seconds(20)));
  constexpr int kKeys = 40;
  int next_n = 0;
  auto round = [&](int per_key) {
    std::vector<std::shared_future<Result<wire::ProduceResult>>> sent;
    for (int n = 0; n < per_key; ++n, ++next_n) {
      for (int k = 0; k < kKeys; ++k) {
        sent.push_back(producer.Send("key-" + std::to_string(k), std::to_string(next_n)));
      }
    }
    producer.Flush();
    for (auto& f : sent) ASSERT_TRUE(f.get().ok()) << f.get().status().ToString();
  };
  round(5);
  const PartitionInfo p1 = *cluster.current().Find(PartitionId(1));
  auto split = cluster.current().Split(p1.id, p1.range.lo + p1.range.Width() / 2);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_TRUE(cluster.Apply(*split).ok());
  round(5);
  std::optional<PartitionId> successor;
  for (const auto& p : cluster.current().partitions()) {
    if (p.active() && p.parents.size() == 1 && p.parents[0] == p1.id) successor = p.id;
  }
  ASSERT_TRUE(successor.has_value());
  auto moved = cluster.current().Move(*successor, SidecarCluster::Pod(0));
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  ASSERT_TRUE(cluster.Apply(*moved).ok());
  round(5);
  EXPECT_GT(producer.routed(), 0u);

  // Read as one group through both pods (each serves its partitions and their ancestors'
  // ranges); commit what each answer handed over.
  std::map<std::string, std::vector<int>> by_key;
  size_t n = 0;
  const size_t want = static_cast<size_t>(kKeys) * next_n;
  std::vector<std::unique_ptr<client::ShoalClient>> readers;
  for (size_t i = 0; i < cluster.size(); ++i) {
    readers.push_back(std::make_unique<client::ShoalClient>(cluster.pod(i).data_url(), "orders"));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (n < want && std::chrono::steady_clock::now() < deadline) {
    for (auto& r : readers) {
      auto events = r->Consume("check", 200, 50);
      ASSERT_TRUE(events.ok()) << events.status().ToString();
      std::map<uint32_t, uint64_t> next;
      for (const auto& e : *events) {
        by_key[e.key].push_back(std::stoi(e.value));
        next[e.partition] = std::max(next[e.partition], e.offset + 1);
        ++n;
      }
      std::vector<wire::CommitOffset> offsets;
      for (auto [p, o] : next) offsets.push_back({PartitionId(p), Offset(o)});
      if (!offsets.empty()) {
        ASSERT_TRUE(r->Commit("check", offsets).ok());
      }
    }
  }
  EXPECT_EQ(n, want);
  for (int k = 0; k < kKeys; ++k) {
    std::vector<int> expected(next_n);
    for (int i = 0; i < next_n; ++i) expected[i] = i;
    EXPECT_EQ(by_key["key-" + std::to_string(k)], expected) << "key-" << k;
  }
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
  // With a callback instead of a future: called once, with the event's place or the refusal.
  std::promise<Result<wire::ProduceResult>> stored, refused;
  producer.Send("cb", "2", [&](const Result<wire::ProduceResult>& r) { stored.set_value(r); });
  auto stored_result = stored.get_future().get();
  ASSERT_TRUE(stored_result.ok()) << stored_result.status().ToString();
  EXPECT_FALSE(stored_result->duplicate);
  producer.Send("cb", "[", [&](const Result<wire::ProduceResult>& r) { refused.set_value(r); });
  EXPECT_EQ(refused.get_future().get().status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace shoal::testing
