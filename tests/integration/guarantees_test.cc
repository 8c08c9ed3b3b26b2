// The ways the core promise broke when a reviewer tried it with real processes (issue 13), each a
// regression test against real sidecar processes over real HTTP, driven through the documented
// admin plane with the test as the operator:
//
//  1. parents first through an empty parent: a group must not get a grandchild's event while it
//     is still inside the grandparent, whatever lies empty in between (invariant 3);
//  2. retirement waits for every group the topic knows, also one that never reached the
//     partition, and a sidecar refuses a retirement that would forget one (invariant 4);
//  3. a retry after a merge is never answered "duplicate" for an event stored nowhere
//     (invariant 6);
//  4. two coordinators that mint one epoch cannot make two writers for one hash point
//     (invariants 2 and 5);
//  5. a map with partition ids near 2^32 is refused or served without memory following the id;
//  6. body limits hold below the HTTP library: a large Content-Length is refused before its body
//     is read, a chunked body is stopped at a bound, a stalled body is given up;
// and from the same review: a forwarded produce whose owner moved on is a retryable 503, a paused
// owner costs a forwarded produce the forward timeout (not the pause), and a pod that returns
// with an old map takes the current one.
//
// SHOAL_SIDECAR_BIN_UNDER_TEST runs them against another sidecar build (to show that they fail
// on the code before the fixes). Every wait is on a condition with a deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/admin_client.h"
#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "shoal/common/partition_map.h"
#include "shoal/control/admin_partitions.h"
#include "shoal/control/retirement.h"
#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"
#include "support/http_test_client.h"
#include "support/raw_connection.h"
#include "support/sidecar_cluster.h"
#include "support/test_events.h"
#include "support/topic_view.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr char kTopic[] = "orders";
constexpr char kToken[] = "guarantees-admin-token";
const std::string kEvents = std::string("/v1/topics/") + kTopic + "/events";

template <typename Pred>
bool WaitFor(Pred&& pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = 20ms) {
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);  // polling period of a condition with a deadline
  }
}

SidecarClusterOptions Options(size_t pods, uint32_t per_pod,
                              std::vector<std::string> extra = {}) {
  SidecarClusterOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.pods = pods;
  o.partitions_per_pod = per_pod;
  o.topic = kTopic;
  o.token = kToken;
  o.fsync = "always";
  o.extra_args = std::move(extra);
  return o;
}

HttpRequestOptions Bearer() {
  HttpRequestOptions o;
  o.headers["Authorization"] = std::string("Bearer ") + kToken;
  return o;
}

std::vector<std::string> KeysOf(const PartitionMap& map, PartitionId p, size_t n,
                                const std::string& prefix = "key") {
  auto keys = testing::KeysOf(map, p, n, prefix);
  EXPECT_EQ(keys.size(), n) << "no keys found for partition " << p.value();
  return keys;
}
using Producer = TestProducer;

// Produces `batch` through `client` until acknowledged (a change may answer 503 for a while).
void ProduceAcked(client::ShoalClient& client, Producer& producer,
                  const std::vector<client::OutgoingEvent>& batch) {
  Status last;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = client.Produce(batch);
        last = r.status();
        return r.ok();
      },
      20s))
      << last.ToString();
  producer.Acked(batch);
}

// A consumer of one group on one sidecar: reads at most `max` events per request and commits
// each batch before the next read, recording what it saw in order.
class Reader {
 public:
  Reader(const std::string& url, std::string group)
      : client_(url, kTopic, 10s), group_(std::move(group)) {}
  // One read and its commit; returns what it got.
  std::vector<wire::ConsumedEvent> Step(size_t max, int64_t wait_ms = 0) {
    auto got = client_.Consume(group_, max, wait_ms);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || got->empty()) return {};
    std::map<uint32_t, uint64_t> next;
    for (const auto& e : *got) next[e.partition] = std::max(next[e.partition], e.offset + 1);
    std::vector<wire::CommitOffset> offsets;
    for (auto [p, o] : next) offsets.push_back({PartitionId(p), Offset(o)});
    Status st = client_.Commit(group_, offsets);
    EXPECT_TRUE(st.ok()) << st.ToString();
    seen_.insert(seen_.end(), got->begin(), got->end());
    return *got;
  }
  // Reads until `want` events were seen in all or `timeout` passed.
  void ReadUntil(size_t want, size_t max, std::chrono::milliseconds timeout) {
    WaitFor(
        [&] {
          Step(max, 50);
          return seen_.size() >= want;
        },
        timeout, 1ms);
  }
  const std::vector<wire::ConsumedEvent>& seen() const { return seen_; }

 private:
  client::ShoalClient client_;
  const std::string group_;
  std::vector<wire::ConsumedEvent> seen_;
};

// The n of each event's value, in the order seen.
std::vector<uint64_t> Ns(const std::vector<wire::ConsumedEvent>& events) {
  std::vector<uint64_t> out;
  for (const auto& s : ToSeen(events)) out.push_back(s.n);
  return out;
}

// ---------------------------------------------------------------------------------------------
// 1. Parents first through an empty parent.

TEST(GuaranteesTest, AnEmptyParentIsNoShortcutThroughTheLineage) {
  SidecarCluster c(Options(1, 2));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  const uint64_t mid = p0.range.lo + p0.range.Width() / 2;
  // A key of p0 that the split puts into the lower half.
  std::string k;
  for (uint64_t i = 0; k.empty(); ++i) {
    const std::string cand = "k-" + std::to_string(i);
    const uint32_t h = KeyHash(cand);
    if (p0.range.Contains(h) && h < mid) k = cand;
  }
  client::ShoalClient sidecar(c.pod(0).data_url(), kTopic);
  Producer producer("p");
  ProduceAcked(sidecar, producer, producer.Next({k}, 20));  // k#1..k#20 in p0
  // Split p0 -> 2, 3: k's range lands in 2, which gets no event and is sealed at end 0 by the
  // next split, 2 -> 4, 5.
  auto split = c.current().Split(PartitionId(0), mid);
  ASSERT_TRUE(split.ok());
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  const PartitionInfo p2 = *c.current().Find(PartitionId(2));
  auto split2 = c.current().Split(p2.id, p2.range.lo + p2.range.Width() / 2);
  ASSERT_TRUE(split2.ok());
  ASSERT_TRUE(c.Apply(*split2).ok()) << c.Describe();
  ASSERT_EQ(c.current().Find(PartitionId(2))->end_offset, 0u) << "partition 2 must be empty";
  ProduceAcked(sidecar, producer, producer.Next({k}, 1));  // k#21, in 4 or 5

  // A group reading in batches of 5 sees k#1..k#21 in order: k#21 only after p0 is consumed.
  Reader g(c.pod(0).data_url(), "g");
  g.ReadUntil(21, 5, 20s);
  std::vector<uint64_t> want;
  for (uint64_t n = 1; n <= 21; ++n) want.push_back(n);
  EXPECT_EQ(Ns(g.seen()), want) << "a grandchild's event went out before its grandparent's";
}

// ---------------------------------------------------------------------------------------------
// 2. Retirement waits for every group the topic knows.

TEST(GuaranteesTest, RetirementWaitsForEveryGroupTheTopicKnowsAndASidecarRefusesOtherwise) {
  SidecarCluster c(Options(2, 1));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const auto keys = KeysOf(c.current(), PartitionId(0), 4);
  client::ShoalClient pod0(c.pod(0).data_url(), kTopic);
  Producer producer("p");
  ProduceAcked(pod0, producer, producer.Next(keys, 5));  // 20 events in p0 (pod-0)
  // G2 is slow: it reads one batch of p0 on pod-0 and stops there. It never contacts pod-1.
  Reader g1(c.pod(0).data_url(), "g1");
  Reader g2(c.pod(0).data_url(), "g2");
  ASSERT_EQ(g2.Step(5).size(), 5u);

  // Split p0 -> 2, 3 on pod-0, then move both to pod-1 (4, 5), then merge them (6): the
  // lineage 0 <- 2, 3 <- 4, 5 <- 6, with events at every step, G1 reading along.
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  auto split = c.current().Split(p0.id, p0.range.lo + p0.range.Width() / 2);
  ASSERT_TRUE(split.ok());
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  ProduceAcked(pod0, producer, producer.Next(keys, 3));
  {
    MapChange moves(c.current());
    ASSERT_TRUE(moves.Move(PartitionId(2), SidecarCluster::Pod(1)).ok());
    ASSERT_TRUE(moves.Move(PartitionId(3), SidecarCluster::Pod(1)).ok());
    auto target = moves.Build();
    ASSERT_TRUE(target.ok()) << target.status().ToString();
    ASSERT_TRUE(c.Apply(*target).ok()) << c.Describe();
  }
  ProduceAcked(pod0, producer, producer.Next(keys, 3));
  auto merge = c.current().Merge(PartitionId(4), PartitionId(5));
  ASSERT_TRUE(merge.ok()) << merge.status().ToString();
  ASSERT_TRUE(c.Apply(*merge).ok()) << c.Describe();
  ProduceAcked(pod0, producer, producer.Next(keys, 2));
  const size_t total = producer.acked().size();
  // G1 reads everything, from both pods.
  {
    Reader g1_pod1(c.pod(1).data_url(), "g1");
    ASSERT_TRUE(WaitFor(
        [&] {
          g1.Step(100, 20);
          g1_pod1.Step(100, 20);
          return g1.seen().size() + g1_pod1.seen().size() >= total;
        },
        30s))
        << g1.seen().size() + g1_pod1.seen().size() << " of " << total;
  }

  // The coordinator's rule, over the real sidecars' reports: nothing G2 has not consumed.
  client::AdminClient admin(kToken);
  auto reports = [&] {
    std::map<std::string, control::AdminPartitionsReport> out;
    for (size_t i = 0; i < c.size(); ++i) {
      auto body = admin.Get(c.admin_address(i), "/v1/admin/partitions", true);
      EXPECT_TRUE(body.ok()) << body.status().ToString();
      if (!body.ok()) continue;
      auto r = control::ParseAdminPartitions(*body);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) out.emplace(SidecarCluster::Pod(i).value(), std::move(r).value());
    }
    return out;
  };
  EXPECT_TRUE(control::RetirablePartitions(c.current(), reports()).empty())
      << "G2, known on pod-0 only, has consumed none of the sealed partitions to its end";

  // The sidecars' own check, whatever a coordinator asks: retiring 4 and 5 before their
  // parents is refused; retiring the whole consumed lineage (0, 2, 3, 4, 5) is refused on
  // pod-1 too, which knows G2 only from pod-0's registry.
  auto retire = [&](const std::vector<uint32_t>& ids) {
    std::vector<PartitionInfo> parts;
    for (const auto& p : c.current().partitions()) {
      if (std::find(ids.begin(), ids.end(), p.id.value()) == ids.end()) parts.push_back(p);
    }
    PartitionMap m(kTopic, Epoch(c.current().epoch().value() + 1), parts);
    for (const auto& [pod, addr] : c.current().peers()) m = m.WithPeer(PodName(pod), addr);
    return m;
  };
  for (size_t i : {size_t{1}, size_t{0}}) {
    for (const auto& ids : {std::vector<uint32_t>{4, 5}, std::vector<uint32_t>{0, 2, 3},
                            std::vector<uint32_t>{0, 2, 3, 4, 5}}) {
      HttpResponse r = c.pod(i).AdminClient()->Post("/v1/admin/map", retire(ids).ToJson(), Bearer());
      EXPECT_EQ(r.status, 409) << "pod-" << i << " retiring " << ids.size() << ": " << r.Describe();
    }
  }
  for (size_t i = 0; i < c.size(); ++i) {
    auto held = admin.GetMap(c.admin_address(i));
    ASSERT_TRUE(held.ok());
    EXPECT_EQ(held->epoch(), c.current().epoch()) << "pod-" << i << " took a refused map";
  }

  // G2 then reads everything (both pods), in per-key order, nothing lost.
  Reader g2_pod1(c.pod(1).data_url(), "g2");
  ASSERT_TRUE(WaitFor(
      [&] {
        g2.Step(100, 20);
        g2_pod1.Step(100, 20);
        return g2.seen().size() + g2_pod1.seen().size() >= total;
      },
      30s))
      << g2.seen().size() + g2_pod1.seen().size() << " of " << total << "\n"
      << c.Describe();
  std::vector<harness::SeenEvent> seen = ToSeen(g2.seen());
  for (const auto& s : ToSeen(g2_pod1.seen())) seen.push_back(s);
  auto report = harness::Verify(producer.acked(), seen);
  EXPECT_TRUE(report.ok()) << report.ToText();
  EXPECT_EQ(report.lost, 0u);

  // Now every group consumed the sealed lineage: the rule and the sidecars retire it, one pod's
  // partitions at a time (parents first).
  std::vector<PartitionId> retirable;
  ASSERT_TRUE(WaitFor(
      [&] {
        retirable = control::RetirablePartitions(c.current(), reports());
        return retirable.size() == 5;
      },
      20s))
      << retirable.size();
  for (int round = 0; round < 5 && !retirable.empty(); ++round) {
    MapChange change(c.current());
    for (PartitionId id : control::OneHoldersRetirement(c.current(), retirable)) {
      ASSERT_TRUE(change.Retire(id).ok());
    }
    auto target = change.Build();
    ASSERT_TRUE(target.ok());
    ASSERT_TRUE(c.Apply(*target).ok()) << c.Describe();
    ASSERT_TRUE(WaitFor(
        [&] {
          retirable = control::RetirablePartitions(c.current(), reports());
          return true;
        },
        1s));
  }
  EXPECT_TRUE(retirable.empty());
  size_t sealed = 0;
  for (const auto& p : c.current().partitions()) sealed += p.active() ? 0 : 1;
  EXPECT_EQ(sealed, 0u) << "the consumed lineage was not retired";
}

// ---------------------------------------------------------------------------------------------
// 3. A retry after a merge.

TEST(GuaranteesTest, ARetryAfterAMergeIsNeverAnsweredDuplicateForAnEventStoredNowhere) {
  SidecarCluster c(Options(2, 1));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  // X = pod-0 owns A = p0, Y = pod-1 owns B = p1; the merge A + B -> C on X.
  const auto a_keys = KeysOf(c.current(), PartitionId(0), 8, "a");
  const auto b_keys = KeysOf(c.current(), PartitionId(1), 8, "b");
  auto merge = c.current().Merge(PartitionId(0), PartitionId(1));
  ASSERT_TRUE(merge.ok());
  // B is sealed for the merge (its first step), before the batch arrives.
  ASSERT_TRUE(c.admin().Seal(c.admin_address(1), *merge, PartitionId(1)).ok());
  // One batch of 600: even seqs to A's keys, odd seqs to B's.
  std::vector<client::OutgoingEvent> batch;
  std::map<std::string, uint64_t> counter;
  for (uint64_t seq = 0; seq < 600; ++seq) {
    const std::string& k = seq % 2 == 0 ? a_keys[seq / 2 % a_keys.size()]
                                        : b_keys[seq / 2 % b_keys.size()];
    batch.push_back({k, "{\"p\":\"p\",\"k\":\"" + k + "\",\"n\":" + std::to_string(++counter[k]) +
                            "}",
                     "p", seq});
  }
  client::ShoalClient x(c.pod(0).data_url(), kTopic);
  auto first = x.Produce(batch);
  ASSERT_FALSE(first.ok()) << "B is sealed: its part cannot be taken";
  EXPECT_EQ(first.status().code(), Status::Code::kUnavailable) << first.status().ToString();
  // A is sealed and A + B merge into C; the identical batch is retried.
  ASSERT_TRUE(c.Apply(*merge).ok()) << c.Describe();
  std::vector<size_t> unknown;
  auto retry = x.Produce(batch, &unknown);
  std::vector<bool> refused(batch.size(), false);
  if (!retry.ok()) {
    // What the producer state cannot decide is refused by name, never taken as stored.
    ASSERT_EQ(retry.status().code(), Status::Code::kSequenceUnknown) << retry.status().ToString();
    ASSERT_FALSE(unknown.empty());
    std::vector<client::OutgoingEvent> rest;
    for (size_t i : unknown) {
      ASSERT_LT(i, batch.size());
      EXPECT_EQ(*batch[i].seq % 2, 0u) << "seq " << *batch[i].seq << " went to B, which has no "
                                       << "state of it: it is decidable";
      refused[i] = true;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!refused[i]) rest.push_back(batch[i]);
    }
    auto again = x.Produce(rest);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    size_t j = 0;
    std::vector<wire::ProduceResult> results(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!refused[i]) results[i] = (*again)[j++];
    }
    retry = results;
  }
  size_t odd_dups = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (refused[i]) continue;
    const auto& r = (*retry)[i];
    if (*batch[i].seq % 2 == 1) {
      odd_dups += r.duplicate ? 1 : 0;
      EXPECT_FALSE(r.duplicate) << "odd seq " << *batch[i].seq << " answered duplicate, but B "
                                << "was sealed before any of it arrived";
    } else {
      EXPECT_TRUE(r.duplicate) << "even seq " << *batch[i].seq << " is stored in A";
    }
  }
  EXPECT_EQ(odd_dups, 0u);
  // Every odd seq is stored exactly once: a group sees all 300.
  Reader g(c.pod(0).data_url(), "g");
  g.ReadUntil(600, 1000, 20s);  // A's 300 (all stored there, refused or not) and C's 300
  std::set<uint64_t> odd_seen;
  std::map<uint64_t, int> times;
  for (const auto& e : g.seen()) {
    if (e.seq) {
      ++times[*e.seq];
      if (*e.seq % 2 == 1) odd_seen.insert(*e.seq);
    }
  }
  EXPECT_EQ(odd_seen.size(), 300u) << "odd seqs answered duplicate were stored nowhere";
  for (const auto& [seq, n] : times) EXPECT_EQ(n, 1) << "seq " << seq << " stored twice";
}

// ---------------------------------------------------------------------------------------------
// 4. Two coordinators, one epoch.

// Whether `sidecar` takes a produce of `key` itself (marked forwarded, so it does not pass it on).
bool TakesDirectly(SidecarProcess& sidecar, const std::string& key) {
  HttpRequestOptions forwarded;
  forwarded.headers["X-Shoal-Forwarded"] = "1";
  std::vector<client::OutgoingEvent> one = {{key, "1", "", std::nullopt}};
  return sidecar.DataClient()->Post(kEvents, client::EncodeProduceBody(one), forwarded).status ==
         200;
}

// Every accepting partition of every pod, by range: none may overlap (invariant 2).
void ExpectOneWriterPerHashPoint(SidecarCluster& c, const std::string& what) {
  std::vector<std::pair<HashRange, std::string>> accepting;
  for (size_t i = 0; i < c.size(); ++i) {
    auto body = c.admin().Get(c.data_address(i), std::string("/v1/topics/") + kTopic, false);
    ASSERT_TRUE(body.ok()) << body.status().ToString();
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array parts;
    ASSERT_FALSE(parser.parse(*body).get(doc) || doc["partitions"].get(parts));
    for (auto p : parts) {
      bool acc = false;
      uint64_t lo = 0, hi = 0, id = 0;
      if (p["accepting"].get(acc) || !acc || p["lo"].get(lo) ||
          p["hi"].get(hi) || p["id"].get(id)) {
        continue;
      }
      accepting.push_back({HashRange{lo, hi}, "pod-" + std::to_string(i) + "/p" +
                                                  std::to_string(id)});
    }
  }
  std::sort(accepting.begin(), accepting.end(),
            [](const auto& a, const auto& b) { return a.first.lo < b.first.lo; });
  for (size_t i = 1; i < accepting.size(); ++i) {
    EXPECT_GE(accepting[i].first.lo, accepting[i - 1].first.hi)
        << what << ": two writers for one hash point: " << accepting[i - 1].second << " and "
        << accepting[i].second;
  }
}

TEST(GuaranteesTest, TwoCoordinatorsMintingOneEpochCannotMakeTwoWriters) {
  for (int order = 0; order < 3; ++order) {
    SCOPED_TRACE("order " + std::to_string(order));
    SidecarCluster c(Options(2, 1));
    ASSERT_TRUE(c.Start().ok()) << c.Describe();
    const PartitionMap base = c.current();
    const std::string user = KeysOf(base, PartitionId(0), 1, "user")[0];
    // Coordinator 1: split p0 on X (pod-0). Coordinator 2: move p0 to Y (pod-1). Epoch 2 both.
    const PartitionInfo p0 = *base.Find(PartitionId(0));
    auto split = base.Split(p0.id, p0.range.lo + p0.range.Width() / 2);
    auto move = base.Move(p0.id, SidecarCluster::Pod(1));
    ASSERT_TRUE(split.ok() && move.ok());
    ASSERT_EQ(split->epoch(), move->epoch());
    client::AdminClient admin2(kToken);
    control::ChangeExecutor::Options eo;
    eo.step_timeout = 5s;
    control::ChangeExecutor second(admin2, eo);
    if (order == 0) {
      // The run: coordinator 1 completes; coordinator 2 then runs its change.
      ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
      auto other = second.Apply(base, *move, nullptr);
      ASSERT_FALSE(other.ok()) << "a second map of epoch 2 was counted as installed";
      EXPECT_TRUE(other.status().code() == Status::Code::kConflict ||
                  other.status().code() == Status::Code::kStaleEpoch)
          << other.status().ToString();
      // By hand: the move map straight onto Y, seal or no seal.
      auto direct = admin2.InstallMap(c.admin_address(1), *move);
      EXPECT_EQ(direct.status().code(), Status::Code::kConflict) << direct.status().ToString();
    } else if (order == 1) {
      // Coordinator 2 skips the seal and installs on Y first: Y cannot take over from an
      // unsealed p0, so it refuses; coordinator 1 then completes.
      auto direct = admin2.InstallMap(c.admin_address(1), *move);
      EXPECT_FALSE(direct.ok()) << "Y took writes for p0's range while X still did";
      ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
      auto late = second.Apply(base, *move, nullptr);
      EXPECT_FALSE(late.ok());
    } else {
      // Coordinator 2's seal arrives first: coordinator 1's change is refused, 2's completes.
      ASSERT_TRUE(admin2.Seal(c.admin_address(0), *move, p0.id).ok());
      auto mine = c.executor().Apply(base, *split, nullptr);
      ASSERT_FALSE(mine.ok()) << "p0 is sealed for the other change";
      EXPECT_EQ(mine.status().code(), Status::Code::kConflict) << mine.status().ToString();
      auto theirs = second.Apply(base, *move, nullptr);
      ASSERT_TRUE(theirs.ok()) << theirs.status().ToString() << "\n" << c.Describe();
    }
    ExpectOneWriterPerHashPoint(c, "order " + std::to_string(order));
    const bool x = TakesDirectly(c.pod(0), user), y = TakesDirectly(c.pod(1), user);
    EXPECT_FALSE(x && y) << "X and Y both accept a produce of " << user;
    EXPECT_TRUE(x || y) << "nobody accepts " << user << "\n" << c.Describe();
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Hostile partition ids.

TEST(GuaranteesTest, PartitionIdsNearTwoToThe32AreRefusedOrServedWithoutMemoryFollowingThem) {
  SidecarOptions o;
  o.binary = SidecarBinaryUnderTest(SHOAL_SIDECAR_BIN);
  o.topic = kTopic;
  o.admin_token = kToken;
  o.extra_args = {"--pod-name", "pod-0", "--wait-for-map"};
  SidecarProcess s(o);
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  auto map_with = [](uint32_t id, uint64_t epoch) {
    return "{\"topic\":\"orders\",\"epoch\":" + std::to_string(epoch) +
           ",\"partitions\":[{\"id\":" + std::to_string(id) +
           ",\"lo\":0,\"hi\":4294967296,\"state\":\"active\",\"owner\":\"pod-0\",\"parents\":[]," +
           "\"end_offset\":0}],\"peers\":{}}";
  };
  // 2^32 - 1: NextId would wrap. Refused, nothing installed.
  HttpResponse r = s.AdminClient()->Post("/v1/admin/map", map_with(UINT32_MAX, 1), Bearer());
  EXPECT_EQ(r.status, 400) << r.Describe();
  EXPECT_NE(r.body.find("out of range"), std::string::npos) << r.body;
  // 2^32 - 2 is a valid id: served, and a produce allocates nothing by it.
  r = s.AdminClient()->Post("/v1/admin/map", map_with(kMaxPartitionId, 1), Bearer());
  ASSERT_EQ(r.status, 200) << r.Describe();
  client::ShoalClient sidecar(s.data_url(), kTopic);
  for (int i = 0; i < 20; ++i) {
    auto p = sidecar.Produce({{"k" + std::to_string(i), "1", "", std::nullopt}});
    ASSERT_TRUE(p.ok()) << p.status().ToString() << "\n" << s.Describe();
    EXPECT_EQ((*p)[0].partition, kMaxPartitionId);
  }
  EXPECT_TRUE(s.Running()) << s.Describe();
  EXPECT_LT(RssBytes(s.pid()), uint64_t{512} << 20) << "memory followed the partition id";
  // The map is on disk: a restart serves it again.
  s.Kill9();
  ASSERT_TRUE(s.Restart().ok()) << s.Describe();
  auto p = client::ShoalClient(s.data_url(), kTopic).Produce({{"again", "1", "", std::nullopt}});
  ASSERT_TRUE(p.ok()) << p.status().ToString() << "\n" << s.Describe();
  // A parent id past the bound is refused as well.
  const std::string bad_parent =
      "{\"topic\":\"orders\",\"epoch\":2,\"partitions\":[{\"id\":5,\"lo\":0,\"hi\":4294967296,"
      "\"state\":\"active\",\"owner\":\"pod-0\",\"parents\":[4294967295],\"end_offset\":0}]}";
  r = s.AdminClient()->Post("/v1/admin/map", bad_parent, Bearer());
  EXPECT_EQ(r.status, 400) << r.Describe();
  EXPECT_TRUE(s.Running()) << s.Describe();
}

// ---------------------------------------------------------------------------------------------
// 6. Body limits below the HTTP library, with a raw socket.

std::string PostHead(uint16_t port, const std::string& framing) {
  return "POST " + kEvents + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
         "\r\nContent-Type: application/json\r\n" + framing + "\r\n";
}

TEST(GuaranteesTest, BodyLimitsHoldBelowTheHttpLibrary) {
  SidecarOptions o;
  o.binary = SidecarBinaryUnderTest(SHOAL_SIDECAR_BIN);
  o.topic = kTopic;
  // Flags a sidecar from before these limits also has, so that the test runs against it too
  // (SHOAL_SIDECAR_BIN_UNDER_TEST) and fails there; the body timeout is the default (10 s).
  o.extra_args = {"--max-body-bytes", "1048576"};
  SidecarProcess s(o);
  ASSERT_TRUE(s.Start().ok()) << s.Describe();
  const uint64_t rss_before = RssBytes(s.pid());

  // A 300 MiB Content-Length: 413 before a byte of the body is sent.
  {
    RawConnection conn(s.port());
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(conn.Send(PostHead(s.port(), "Content-Length: 314572800\r\n")));
    const std::string answer = conn.ReadAll(10s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << "no 413 before the body: " << answer;
    EXPECT_NE(answer.find("too_large"), std::string::npos) << answer;
    EXPECT_TRUE(conn.closed()) << "the connection must close: the body is never read";
  }
  // A chunked body of up to 300 MiB: stopped at a bound, memory bounded.
  {
    RawConnection conn(s.port());
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(conn.Send(PostHead(s.port(), "Transfer-Encoding: chunked\r\n")));
    const std::string chunk_data(1 << 20, 'x');
    char size_line[32];
    std::snprintf(size_line, sizeof size_line, "%x\r\n", static_cast<unsigned>(chunk_data.size()));
    const std::string chunk = size_line + chunk_data + "\r\n";
    size_t sent_mib = 0;
    while (sent_mib < 300 && conn.Send(chunk) && !conn.Readable()) ++sent_mib;
    const std::string answer = conn.ReadAll(10s);
    EXPECT_LT(sent_mib, 300u) << "the sidecar read a 300 MiB chunked body to its end";
    EXPECT_LE(sent_mib, 64u) << "read far past its discard limit (16 MiB)";
    if (!answer.empty()) {
      EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
    }
    EXPECT_LT(RssBytes(s.pid()), rss_before + (uint64_t{96} << 20))
        << "memory grew with the body";
    // An empty answer is a connection reset while sending, or a sidecar that died: tell them apart.
    EXPECT_TRUE(s.Running()) << s.Describe();
  }
  // A body that stalls: declared 1000 bytes, 10 sent. Given up after the body timeout.
  {
    RawConnection conn(s.port());
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(conn.Send(PostHead(s.port(), "Content-Length: 1000\r\n") + "{\"events\":"));
    const std::string answer = conn.ReadAll(20s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << "a stalled body was not given up: " << answer;
    EXPECT_TRUE(conn.closed());
  }
  // And the sidecar still serves.
  auto p = client::ShoalClient(s.data_url(), kTopic).Produce({{"k", "1", "", std::nullopt}});
  EXPECT_TRUE(p.ok()) << p.status().ToString() << "\n" << s.Describe();
}

// ---------------------------------------------------------------------------------------------
// Forwarding during changes, and a pod that returns with an old map.

TEST(GuaranteesTest, AForwardedProduceWhoseOwnerMovedOnIsARetryable503) {
  SidecarCluster c(Options(2, 1));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const std::string key = KeysOf(c.current(), PartitionId(1), 1, "y")[0];  // p1 on pod-1
  // A move of p1 to pod-0 that only pod-1 has installed so far (a change in flight: pod-0 still
  // routes p1's keys to pod-1 and forwards them).
  auto move = c.current().Move(PartitionId(1), SidecarCluster::Pod(0));
  ASSERT_TRUE(move.ok());
  ASSERT_TRUE(c.admin().Seal(c.admin_address(1), *move, PartitionId(1)).ok());
  auto installed = move->WithEndOffset(PartitionId(1), 0);
  ASSERT_TRUE(installed.ok());
  ASSERT_TRUE(c.admin().InstallMap(c.admin_address(1), *installed).ok());
  HttpResponse r =
      c.pod(0).DataClient()->Post(kEvents, client::EncodeProduceBody({{key, "1", "", std::nullopt}}));
  EXPECT_EQ(r.status, 503) << "a producer that retries 503, as documented, must get 503: "
                           << r.Describe();
}

TEST(GuaranteesTest, APausedOwnerCostsAForwardedProduceTheForwardTimeoutNotThePause) {
  // The default forward timeout (2 s) against a 5 s pause; no flag, so that the same test runs
  // against a sidecar from before the timeout existed and shows it waiting out the pause.
  SidecarCluster c(Options(2, 1));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const std::string key = KeysOf(c.current(), PartitionId(1), 1, "y")[0];  // p1 on pod-1
  // pod-1 is paused for 5 s (the fault); a produce of its key reaches pod-0 meanwhile.
  ASSERT_EQ(::kill(c.pod(1).pid(), SIGSTOP), 0);
  std::atomic<bool> continued{false};
  std::thread pause([&] {
    std::this_thread::sleep_for(5s);  // the length of the pause, part of the scenario
    continued = true;
    ::kill(c.pod(1).pid(), SIGCONT);
  });
  auto client = c.pod(0).DataClient(30s);
  HttpResponse r = client->Post(kEvents, client::EncodeProduceBody({{key, "1", "", std::nullopt}}));
  const bool answered_while_paused = !continued.load();
  pause.join();
  // Answered while pod-1 was still paused: the forward gave up after its timeout, retryably.
  EXPECT_TRUE(answered_while_paused) << "the producer waited for the whole pause: " << r.Describe();
  EXPECT_EQ(r.status, 503) << r.Describe();
  // A key pod-0 owns was never held up, and pod-1's key goes through once it runs again.
  const std::string own = KeysOf(c.current(), PartitionId(0), 1, "x")[0];
  EXPECT_EQ(client->Post(kEvents, client::EncodeProduceBody({{own, "1", "", std::nullopt}})).status,
            200);
  EXPECT_TRUE(WaitFor(
      [&] {
        return client->Post(kEvents, client::EncodeProduceBody({{key, "1", "", std::nullopt}}))
                   .status == 200;
      },
      10s));
}

TEST(GuaranteesTest, APodReturningWithAnOldMapTakesTheCurrentOne) {
  SidecarCluster c(Options(3, 1));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  // pod-2 goes down; meanwhile p0 (pod-0, active in pod-2's old map) is split and consumed.
  c.pod(2).Kill9();
  const auto keys = KeysOf(c.current(), PartitionId(0), 2);
  client::ShoalClient pod0(c.pod(0).data_url(), kTopic);
  Producer producer("p");
  ProduceAcked(pod0, producer, producer.Next(keys, 3));
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  auto split = c.current().Split(p0.id, p0.range.lo + p0.range.Width() / 2);
  ASSERT_TRUE(split.ok());
  // The executor would wait for pod-2; the test installs on the live pods by hand, as a
  // coordinator that gave up on pod-2 for now does.
  auto end = c.admin().Seal(c.admin_address(0), *split, p0.id);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  auto with_end = split->WithEndOffset(p0.id, *end);
  ASSERT_TRUE(with_end.ok());
  for (size_t i : {size_t{0}, size_t{1}}) {
    auto r = c.admin().InstallMap(c.admin_address(i), *with_end);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  Reader g(c.pod(0).data_url(), "g");
  g.ReadUntil(6, 100, 10s);
  // pod-2 returns with its epoch-1 map, where p0 is active. The retirement of p0 goes ahead on
  // the pods that hold the current map (they ask every peer, pod-2 too, for its groups).
  ASSERT_TRUE(c.pod(2).Restart().ok()) << c.Describe();
  MapChange retire(*with_end);
  ASSERT_TRUE(retire.Retire(p0.id).ok());
  auto retired = retire.Build();
  ASSERT_TRUE(retired.ok());
  for (size_t i : {size_t{0}, size_t{1}}) {
    Status last;
    ASSERT_TRUE(WaitFor(
        [&] {
          last = c.admin().InstallMap(c.admin_address(i), *retired).status();
          return last.ok();
        },
        10s))
        << last.ToString();
  }
  // The current map, which no longer lists p0, is accepted by the returning pod: p0 was never
  // its partition, so its old map's view of p0 does not wedge every later change.
  Status got;
  WaitFor(
      [&] {  // the first request may meet the connection kept from before the restart
        got = c.admin().InstallMap(c.admin_address(2), *retired).status();
        return got.code() != Status::Code::kUnavailable;
      },
      10s);
  EXPECT_TRUE(got.ok()) << "a returning pod wedged: " << got.ToString();
}

}  // namespace
}  // namespace shoal::testing
