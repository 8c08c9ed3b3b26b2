// Replication against real sidecar processes on loopback (docs/guarantees.md, invariant 9):
//
//  - with factor 3 every acknowledged event is on all three copies, at the same offsets and byte
//    for byte as the leader stored it (the followers' segment files equal the leader's);
//  - with acks quorum, a produce is acknowledged once two of the three copies hold it: with one
//    follower paused (SIGSTOP) produce goes on; with both paused nothing is acknowledged (a
//    retryable 503) and consumers see none of it, and once one follower runs again the retry is
//    acknowledged from the producer state and consumers see every event once.
//
// The test plays the coordinator (support/sidecar_cluster.h). Every wait is on a condition with
// a deadline.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/replication.h"
#include "shoal/control/failover.h"
#include "support/http_test_client.h"
#include "support/sidecar_cluster.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

template <typename Pred>
bool WaitFor(Pred&& pred, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!pred()) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);  // polling period of a condition with a deadline
  }
  return true;
}

// GET of the admin plane of pod i, with the cluster's token.
HttpResponse AdminGet(SidecarCluster& c, size_t i, const std::string& path) {
  HttpRequestOptions o;
  o.headers["Authorization"] = "Bearer " + c.options().token;
  return c.pod(i).AdminClient()->Get(path, o);
}

SidecarClusterOptions Options(std::vector<std::string> extra = {}) {
  SidecarClusterOptions o;
  o.binary = SidecarBinaryUnderTest(SHOAL_SIDECAR_BIN);
  o.pods = 3;
  o.partitions_per_pod = 1;
  o.replication = 3;
  o.fsync = "always";
  o.extra_args = std::move(extra);
  return o;
}

// What pod i says of the copies it follows: partition -> its state.
std::map<uint32_t, replication::ReplicaState> Followed(SidecarCluster& c, size_t i) {
  std::map<uint32_t, replication::ReplicaState> out;
  auto r = AdminGet(c, i, "/v1/admin/replica");
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(r.body).get(doc)) return out;
  for (auto f : doc["followed"].get_array()) {
    out[static_cast<uint32_t>(f["id"].get_uint64().value())] = {
        SidecarCluster::Pod(i), Epoch(f["last_epoch"].get_uint64().value()),
        f["end"].get_uint64().value()};
  }
  return out;
}

// What pod i says of the copies it follows: partition -> end.
std::map<uint32_t, uint64_t> FollowedEnds(SidecarCluster& c, size_t i) {
  std::map<uint32_t, uint64_t> out;
  for (const auto& [id, state] : Followed(c, i)) out[id] = state.end;
  return out;
}

// The bytes of a partition's log segments in pod i's data directory, in file order.
std::string SegmentBytes(SidecarCluster& c, size_t i, uint32_t partition) {
  const std::filesystem::path dir = std::filesystem::path(c.pod(i).data_dir()) / "orders" /
                                    "partitions" / std::to_string(partition);
  std::set<std::filesystem::path> logs;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    // Segments are named by their first offset (20 digits); commits.log is not one.
    if (e.path().extension() == ".log" && e.path().filename().string().size() == 24) {
      logs.insert(e.path());
    }
  }
  std::string out;
  for (const auto& p : logs) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out += ss.str();
  }
  return out;
}

// Keys that partition `id` of `map` owns.
std::vector<std::string> KeysOf(const PartitionMap& map, uint32_t id, size_t n) {
  std::vector<std::string> keys;
  for (int k = 0; keys.size() < n; ++k) {
    std::string key = "key-" + std::to_string(k);
    if (map.Route(KeyHash(key)).id.value() == id) keys.push_back(key);
  }
  return keys;
}

std::vector<client::OutgoingEvent> Batch(const std::vector<std::string>& keys,
                                         const std::string& producer, uint64_t first_seq,
                                         size_t n) {
  std::vector<client::OutgoingEvent> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back({keys[i % keys.size()], "{\"n\":" + std::to_string(first_seq + i) + "}",
                   producer, first_seq + i});
  }
  return out;
}

TEST(ReplicationTest, EveryAcknowledgedEventIsOnEveryCopyAsTheLeaderStoredIt) {
  SidecarCluster c(Options());
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  for (const auto& p : c.current().partitions()) ASSERT_EQ(p.replicas.size(), 2u);
  // Produce through every pod (keys of other owners are forwarded).
  std::vector<std::string> keys;
  for (int k = 0; k < 300; ++k) keys.push_back("k" + std::to_string(k));
  uint64_t acked = 0;
  for (size_t round = 0; round < 6; ++round) {
    client::ShoalClient sidecar(c.pod(round % 3).data_url(), "orders");
    auto r = sidecar.Produce(Batch(keys, "p" + std::to_string(round), 1, 500));
    ASSERT_TRUE(r.ok()) << r.status().ToString() << c.Describe();
    acked += r->size();
  }
  EXPECT_EQ(acked, 3000u);
  // Each pod leads one partition and follows the other two; every copy reaches the leader's end
  // and holds the same bytes.
  for (const auto& p : c.current().partitions()) {
    const size_t leader = std::stoul(p.owner.value().substr(4));
    const std::string leader_bytes = SegmentBytes(c, leader, p.id.value());
    ASSERT_FALSE(leader_bytes.empty());
    for (const auto& f : p.replicas) {
      const size_t follower = std::stoul(f.value().substr(4));
      EXPECT_TRUE(WaitFor(
          [&] { return SegmentBytes(c, follower, p.id.value()) == leader_bytes; }, 10s))
          << "partition " << p.id << " at " << f << ": " << FollowedEnds(c, follower)[p.id.value()]
          << "\n" << c.Describe();
    }
  }
}

TEST(ReplicationTest, AQuorumAcknowledgesAndWithoutOneNothingIsAcknowledgedOrRead) {
  SidecarCluster c(Options({"--replication-timeout-ms", "1500"}));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const PartitionInfo& p0 = *c.current().Find(PartitionId(0));
  ASSERT_EQ(p0.owner, SidecarCluster::Pod(0));
  const auto keys = KeysOf(c.current(), 0, 20);
  client::ShoalClient leader(c.pod(0).data_url(), "orders", 10s);
  // One follower paused: two of three copies still make the quorum.
  ASSERT_EQ(kill(c.pod(2).pid(), SIGSTOP), 0);
  auto one = leader.Produce(Batch(keys, "app", 1, 100));
  ASSERT_TRUE(one.ok()) << one.status().ToString() << c.Describe();
  // Both paused: the events are written on the leader but never acknowledged, and no consumer
  // sees them.
  ASSERT_EQ(kill(c.pod(1).pid(), SIGSTOP), 0);
  auto none = leader.Produce(Batch(keys, "app", 101, 100));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("quorum"), std::string::npos) << none.status().ToString();
  std::set<uint64_t> seen;
  auto got = leader.Consume("billing", 10000, 300);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const auto& e : *got) EXPECT_LT(e.offset, 100u) << "an unacknowledged event was read";
  for (const auto& e : *got) seen.insert(e.offset);
  // The commit, too, waits for a quorum: refused, retryable, though it stands on the leader.
  EXPECT_EQ(leader.Commit("billing", {{PartitionId(0), Offset(100)}}).code(),
            Status::Code::kUnavailable);
  // One follower back: the retry is acknowledged from the producer state (the first attempt's
  // offsets) and every event is read once.
  ASSERT_EQ(kill(c.pod(1).pid(), SIGCONT), 0);
  auto retry = leader.Produce(Batch(keys, "app", 101, 100));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString() << c.Describe();
  for (size_t i = 0; i < retry->size(); ++i) {
    EXPECT_TRUE((*retry)[i].duplicate);
    EXPECT_EQ((*retry)[i].offset, 100 + i);
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        auto more = leader.Consume("billing", 10000, 200);
        if (!more.ok()) return false;
        uint64_t next = 0;
        for (const auto& e : *more) {
          EXPECT_TRUE(seen.insert(e.offset).second) << "read twice: " << e.offset;
          next = std::max(next, e.offset + 1);
        }
        if (next) {
          EXPECT_TRUE(leader.Commit("billing", {{PartitionId(0), Offset(next)}}).ok());
        }
        return seen.size() == 200;
      },
      10s))
      << seen.size() << " of 200 read\n" << c.Describe();
  ASSERT_EQ(kill(c.pod(2).pid(), SIGCONT), 0);
}

// Seconds since `follower` last fetched partition 0 from pod `leader` caught up
// (shoal_replica_lag_seconds on the leader); -1 when not reported.
double LagSeconds(SidecarCluster& c, size_t leader, const std::string& follower) {
  HttpTestClient metrics(c.pod(leader).metrics_url());
  auto r = metrics.Get("/metrics");
  std::istringstream in(r.body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("shoal_replica_lag_seconds{", 0) == 0 &&
        line.find("follower=\"" + follower + "\"") != std::string::npos &&
        line.find("partition=\"0\"") != std::string::npos) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

// Pauses pods 1 and 2 (SIGSTOP), the followers of partition 0, and waits until neither has
// fetched for a second, so that no fetch of theirs is held at the leader any more.
bool PauseFollowers(SidecarCluster& c) {
  if (kill(c.pod(1).pid(), SIGSTOP) != 0 || kill(c.pod(2).pid(), SIGSTOP) != 0) return false;
  return WaitFor([&] { return LagSeconds(c, 0, "pod-1") > 1 && LagSeconds(c, 0, "pod-2") > 1; },
                 10s);
}

// Installs the cluster's current map on pod i, retrying while it comes up (a connection kept
// from before a restart fails once).
Status InstallCurrent(SidecarCluster& c, size_t i) {
  Status last = Status::Unavailable("not tried");
  WaitFor(
      [&] {
        auto r = c.admin().InstallMap(c.admin_address(i), c.current());
        last = r.status();
        return r.ok();
      },
      10s);
  return last;
}

// Fences the copies of partition `id` on the pods `survivors` for the failover at the next epoch
// (POST /v1/admin/replica/fence): what each holds.
std::vector<replication::ReplicaState> Fence(SidecarCluster& c, uint32_t id,
                                             const std::set<size_t>& survivors) {
  std::vector<replication::ReplicaState> answered;
  const Epoch next(c.current().epoch().value() + 1);
  for (size_t i : survivors) {
    auto fenced = c.admin().FenceCopies(c.admin_address(i), {PartitionId(id)}, next);
    EXPECT_TRUE(fenced.ok()) << fenced.status().ToString();
    if (!fenced.ok()) continue;
    for (auto [p, state] : *fenced) {
      if (p.value() != id) continue;
      state.pod = SidecarCluster::Pod(i);
      answered.push_back(state);
    }
  }
  return answered;
}

// The coordinator's part of a failover of partition `id`, whose leader's pod is gone: every
// surviving copy is fenced and says what it holds, the most complete of a quorum leads
// (ChooseLeader), and the new map goes to `install` (the survivors by default). Returns the new
// leader's index.
size_t FailOver(SidecarCluster& c, uint32_t id, const std::set<size_t>& survivors,
                std::set<size_t> install = {}) {
  const std::vector<replication::ReplicaState> answered = Fence(c, id, survivors);
  const PartitionInfo& p = *c.current().Find(PartitionId(id));
  auto leader = replication::ChooseLeader(answered, 1 + p.replicas.size());
  EXPECT_TRUE(leader.ok()) << leader.status().ToString();
  if (!leader.ok()) return 0;
  auto next = c.current().FailOver(PartitionId(id), *leader);
  EXPECT_TRUE(next.ok()) << next.status().ToString();
  if (!next.ok()) return 0;
  if (install.empty()) install = survivors;
  for (size_t i : install) {
    auto installed = c.admin().InstallMap(c.admin_address(i), *next);
    EXPECT_TRUE(installed.ok()) << installed.status().ToString() << c.Describe();
  }
  c.set_current(*next);
  return std::stoul(leader->value().substr(4));
}

// Pod 0, the leader of partition 0, dies (kill -9) and its paused followers run again; the
// partition fails over to them. Returns the new leader's index (0: the failover failed).
size_t KillLeaderAndFailOver(SidecarCluster& c) {
  c.pod(0).Kill9();
  EXPECT_EQ(kill(c.pod(1).pid(), SIGCONT), 0);
  EXPECT_EQ(kill(c.pod(2).pid(), SIGCONT), 0);
  return FailOver(c, 0, {1, 2});
}

// Every event of `producer` the group reads from the leader of partition 0, in order, once.
std::vector<uint64_t> ReadAllSeqs(client::ShoalClient& leader, const std::string& group,
                                  size_t want) {
  std::vector<uint64_t> seqs;
  WaitFor(
      [&] {
        auto got = leader.Consume(group, 10000, 200);
        if (!got.ok()) return false;
        uint64_t next = 0;
        for (const auto& e : *got) {
          simdjson::dom::parser parser;
          auto n = parser.parse(e.value)["n"].get_uint64();
          if (!n.error()) seqs.push_back(n.value());
          next = std::max(next, e.offset + 1);
        }
        if (next) (void)leader.Commit(group, {{PartitionId(0), Offset(next)}});
        return seqs.size() >= want;
      },
      15s);
  return seqs;
}

TEST(ReplicationTest, AFollowerTakesOverWithEveryAcknowledgedEventAndTheOldLeaderCutsItsTail) {
  SidecarCluster c(Options({"--replication-timeout-ms", "1000"}));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const auto keys = KeysOf(c.current(), 0, 20);
  {
    client::ShoalClient leader(c.pod(0).data_url(), "orders", 10s);
    auto acked = leader.Produce(Batch(keys, "app", 1, 300));
    ASSERT_TRUE(acked.ok()) << acked.status().ToString();
    // Both followers paused: 50 more events are written on the leader, never acknowledged. (Once
    // neither has fetched for a second, no fetch of theirs is held at the leader any more, so
    // none of the 50 reaches them.)
    ASSERT_TRUE(PauseFollowers(c));
    auto unacked = leader.Produce(Batch(keys, "app", 301, 50));
    ASSERT_FALSE(unacked.ok());
  }
  // The leader's pod dies with its unacknowledged tail; the followers run again.
  const size_t now_leads = KillLeaderAndFailOver(c);
  ASSERT_NE(now_leads, 0u);
  client::ShoalClient leader(c.pod(now_leads).data_url(), "orders", 10s);
  // A retry of acknowledged events is answered from the producer state the copy kept.
  auto retry = leader.Produce(Batch(keys, "app", 291, 10));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString() << c.Describe();
  for (size_t i = 0; i < retry->size(); ++i) {
    EXPECT_TRUE((*retry)[i].duplicate) << i;
    EXPECT_EQ((*retry)[i].offset, 290 + i);
  }
  // New events at the offsets the old leader's tail had; the retries of the unacknowledged ones
  // are new here.
  auto more = leader.Produce(Batch(keys, "app", 301, 100));
  ASSERT_TRUE(more.ok()) << more.status().ToString() << c.Describe();
  EXPECT_EQ(more->front().offset, 300u);
  EXPECT_FALSE(more->front().duplicate);
  const auto seqs = ReadAllSeqs(leader, "billing", 400);
  ASSERT_EQ(seqs.size(), 400u) << c.Describe();
  for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], i + 1) << "at " << i;
  // The old leader comes back with its map of the epoch before, takes the new one, cuts its
  // unacknowledged tail and follows: its copy ends up the new leader's, byte for byte.
  ASSERT_TRUE(c.pod(0).Restart().ok()) << c.Describe();
  Status installed = InstallCurrent(c, 0);
  ASSERT_TRUE(installed.ok()) << installed.ToString() << c.Describe();
  const std::string leader_bytes = SegmentBytes(c, now_leads, 0);
  EXPECT_TRUE(WaitFor([&] { return SegmentBytes(c, 0, 0) == leader_bytes; }, 10s))
      << FollowedEnds(c, 0)[0] << "\n" << c.Describe();
  EXPECT_EQ(Followed(c, 0)[0].last_epoch, c.current().epoch());
}

// A replicated partition's seal is answered only once a quorum of its copies holds the sealed
// end, so the end the map records is held by a quorum; a leader that restarts after the change
// (its count of what the followers hold starts over) serves the sealed partition whole.
TEST(ReplicationTest, ASealIsAnsweredOnceAQuorumHoldsItsEndAndARestartedLeaderServesItWhole) {
  SidecarCluster c(Options({"--replication-timeout-ms", "1000"}));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const auto keys = KeysOf(c.current(), 0, 20);
  {
    client::ShoalClient leader(c.pod(0).data_url(), "orders", 10s);
    ASSERT_TRUE(leader.Produce(Batch(keys, "app", 1, 100)).ok());
    // Both followers paused: 50 more events are written on the leader, never acknowledged.
    ASSERT_TRUE(PauseFollowers(c));
    ASSERT_FALSE(leader.Produce(Batch(keys, "app", 101, 50)).ok());
  }
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  auto split = c.current().Split(PartitionId(0), p0.range.lo + p0.range.Width() / 2);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  // Sealed at the leader's end, 150, which only the leader holds: not answered.
  auto early = c.admin().Seal(c.admin_address(0), *split, PartitionId(0));
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), Status::Code::kUnavailable) << early.status().ToString();
  EXPECT_NE(early.status().message().find("quorum"), std::string::npos)
      << early.status().ToString();
  // One follower runs again: with the leader, a quorum holds 150, and the seal answers it.
  ASSERT_EQ(kill(c.pod(1).pid(), SIGCONT), 0);
  // The follower asked to seal (a coordinator whose failover map has not reached it yet): 503,
  // retried, never "not on this sidecar".
  auto at_copy = c.admin().Seal(c.admin_address(1), *split, PartitionId(0));
  EXPECT_EQ(at_copy.status().code(), Status::Code::kUnavailable) << at_copy.status().ToString();
  Result<uint64_t> end = Status::Unavailable("not asked");
  ASSERT_TRUE(WaitFor(
      [&] {
        end = c.admin().Seal(c.admin_address(0), *split, PartitionId(0));
        return end.ok();
      },
      10s))
      << end.status().ToString() << c.Describe();
  EXPECT_EQ(*end, 150u);
  ASSERT_EQ(kill(c.pod(2).pid(), SIGCONT), 0);
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  // The leader restarts: its followers say nothing more of partition 0 (they hold its end), and
  // its successors' consumers read it whole.
  c.pod(0).Kill9();
  ASSERT_TRUE(c.pod(0).Restart().ok()) << c.Describe();
  ASSERT_TRUE(InstallCurrent(c, 0).ok()) << c.Describe();
  client::ShoalClient owner(c.pod(0).data_url(), "orders", 10s);
  std::set<uint64_t> read;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto got = owner.Consume("billing", 10000, 200);
        if (!got.ok()) return false;
        std::map<uint32_t, uint64_t> next;
        for (const auto& e : *got) {
          if (e.partition == 0) read.insert(e.offset);
          next[e.partition] = std::max(next[e.partition], e.offset + 1);
        }
        std::vector<wire::CommitOffset> commits;
        for (const auto& [p, o] : next) commits.push_back({PartitionId(p), Offset(o)});
        if (!commits.empty()) (void)owner.Commit("billing", commits);
        return read.size() == 150;
      },
      15s))
      << read.size() << " of 150 read\n"
      << c.Describe();
}

// The groups' commits go with the log: a commit is answered once a quorum of the copies holds it
// (with both followers paused it is refused, retryable), and after a failover the group goes on
// from where it committed, reading nothing again (invariant 4).
TEST(ReplicationTest, ACommitIsHeldByAQuorumAndAGroupGoesOnFromItAfterAFailover) {
  SidecarCluster c(Options({"--replication-timeout-ms", "1000"}));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const auto keys = KeysOf(c.current(), 0, 20);
  {
    client::ShoalClient leader(c.pod(0).data_url(), "orders", 10s);
    ASSERT_TRUE(leader.Produce(Batch(keys, "app", 1, 300)).ok());
    auto got = leader.Consume("billing", 200, 0);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 200u);
    Status committed = leader.Commit("billing", {{PartitionId(0), Offset(200)}});
    ASSERT_TRUE(committed.ok()) << committed.ToString() << c.Describe();
    // Both followers paused: a commit is recorded on the leader but not answered.
    ASSERT_TRUE(PauseFollowers(c));
    ASSERT_TRUE(leader.Consume("audit", 50, 0).ok());
    Status refused = leader.Commit("audit", {{PartitionId(0), Offset(50)}});
    EXPECT_EQ(refused.code(), Status::Code::kUnavailable) << refused.ToString();
    EXPECT_NE(refused.message().find("quorum"), std::string::npos) << refused.ToString();
  }
  const size_t now_leads = KillLeaderAndFailOver(c);
  ASSERT_NE(now_leads, 0u);
  client::ShoalClient leader(c.pod(now_leads).data_url(), "orders", 10s);
  const auto seqs = ReadAllSeqs(leader, "billing", 100);
  ASSERT_EQ(seqs.size(), 100u) << c.Describe();
  EXPECT_EQ(seqs.front(), 201u) << "the group read again what it had committed";
  EXPECT_EQ(seqs.back(), 300u);
}

// A commit made on the leader but not held by a quorum (both followers paused) and made again
// after the leader restarted changes nothing there: it is still answered only once a quorum
// holds it, never at once (the followers would not have it if the partition failed over).
TEST(ReplicationTest, ACommitMadeAgainAfterTheLeaderRestartedWaitsForAQuorumAsTheFirstDid) {
  SidecarCluster c(Options({"--replication-timeout-ms", "1000"}));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  {
    client::ShoalClient leader(c.pod(0).data_url(), "orders", 10s);
    ASSERT_TRUE(leader.Produce(Batch(KeysOf(c.current(), 0, 20), "app", 1, 100)).ok());
    auto got = leader.Consume("billing", 40, 0);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(PauseFollowers(c));
    Status refused = leader.Commit("billing", {{PartitionId(0), Offset(40)}});
    EXPECT_EQ(refused.code(), Status::Code::kUnavailable) << refused.ToString();
  }
  c.pod(0).Kill9();
  ASSERT_TRUE(c.pod(0).Restart().ok()) << c.Describe();
  client::ShoalClient leader(c.pod(0).data_url(), "orders", 10s);
  Status again = leader.Commit("billing", {{PartitionId(0), Offset(40)}});
  EXPECT_EQ(again.code(), Status::Code::kUnavailable)
      << "answered without a quorum: " << again.ToString();
  ASSERT_EQ(kill(c.pod(1).pid(), SIGCONT), 0);
  ASSERT_EQ(kill(c.pod(2).pid(), SIGCONT), 0);
  // Once a follower mirrors the restarted leader's store, the same commit is answered.
  Status answered = Status::Unavailable("not tried");
  ASSERT_TRUE(WaitFor(
      [&] {
        answered = leader.Commit("billing", {{PartitionId(0), Offset(40)}});
        return answered.ok();
      },
      10s))
      << answered.ToString() << c.Describe();
}

// Group billing takes a batch of 40 of the 100 events produced to pod 0, the leader of
// partition 0, without committing it.
void TakeABatchFromTheLeader(SidecarCluster& c) {
  client::ShoalClient leader(c.pod(0).data_url(), "orders", 10s);
  ASSERT_TRUE(leader.Produce(Batch(KeysOf(c.current(), 0, 20), "app", 1, 100)).ok());
  auto got = leader.Consume("billing", 40, 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 40u);
}

// The batch is committed to pod 0, no longer the leader: the group reads on at the new leader
// from where it committed, nothing again.
void CommitAtTheOldLeaderAndReadOn(SidecarCluster& c, size_t now_leads) {
  client::ShoalClient old_leader(c.pod(0).data_url(), "orders", 10s);
  Status committed = old_leader.Commit("billing", {{PartitionId(0), Offset(40)}});
  ASSERT_TRUE(committed.ok()) << committed.ToString() << c.Describe();
  client::ShoalClient leader(c.pod(now_leads).data_url(), "orders", 10s);
  const auto seqs = ReadAllSeqs(leader, "billing", 60);
  ASSERT_EQ(seqs.size(), 60u) << c.Describe();
  EXPECT_EQ(seqs.front(), 41u) << "the group read again what it had committed";
}

// A consumer that took a batch from the leader commits it to the same sidecar after a failover
// made that sidecar a follower: the commit goes on to the new leader, and the group does not
// read the batch again.
TEST(ReplicationTest, ACommitMadeToTheOldLeaderAfterAFailoverGoesToTheNewLeader) {
  SidecarCluster c(Options());
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  ASSERT_NO_FATAL_FAILURE(TakeABatchFromTheLeader(c));
  c.pod(0).Kill9();
  const size_t now_leads = FailOver(c, 0, {1, 2});
  ASSERT_NE(now_leads, 0u);
  ASSERT_TRUE(c.pod(0).Restart().ok()) << c.Describe();
  ASSERT_TRUE(InstallCurrent(c, 0).ok()) << c.Describe();
  CommitAtTheOldLeaderAndReadOn(c, now_leads);
}

// The same when the partition was sealed since (a change at the new leader): the old leader's
// consumers took a whole-partition batch, not one through ranges, and the new leader takes its
// commit as such.
TEST(ReplicationTest, ACommitMadeToTheOldLeaderOfAPartitionSealedSinceGoesToTheNewLeader) {
  SidecarCluster c(Options());
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  ASSERT_NO_FATAL_FAILURE(TakeABatchFromTheLeader(c));
  // Pod 0 pauses long enough to be failed over, and runs again with the failover map.
  ASSERT_EQ(kill(c.pod(0).pid(), SIGSTOP), 0);
  const size_t now_leads = FailOver(c, 0, {1, 2});
  ASSERT_NE(now_leads, 0u);
  ASSERT_EQ(kill(c.pod(0).pid(), SIGCONT), 0);
  ASSERT_TRUE(InstallCurrent(c, 0).ok()) << c.Describe();
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  auto split = c.current().Split(PartitionId(0), p0.range.lo + p0.range.Width() / 2);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  CommitAtTheOldLeaderAndReadOn(c, now_leads);
}

// TakeABatchFromTheLeader, then pod 0 is killed once both copies hold the events (neither
// refetches what a first start marked) and partition 0 fails over; its new leader's index.
void TakeABatchAndFailOver(SidecarCluster& c, size_t* now_leads) {
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  ASSERT_NO_FATAL_FAILURE(TakeABatchFromTheLeader(c));
  ASSERT_TRUE(
      WaitFor([&] { return FollowedEnds(c, 1)[0] == 100 && FollowedEnds(c, 2)[0] == 100; }, 10s))
      << c.Describe();
  c.pod(0).Kill9();
  *now_leads = FailOver(c, 0, {1, 2});
  ASSERT_NE(*now_leads, 0u);
}

// A whole-partition batch is recorded as a lease that the copies hold before it goes out: after
// a failover the new leader hands it to no other consumer of the group while its reader may
// still commit it (the test's first consumer, at the new leader, gets nothing of it), and the
// reader's commit, made to its own pod, releases what comes after it.
TEST(ReplicationTest, ABatchHandedOutBeforeAFailoverGoesToNoOtherConsumerBeforeItsReaderCommits) {
  SidecarCluster c(Options());
  size_t now_leads = 0;
  ASSERT_NO_FATAL_FAILURE(TakeABatchAndFailOver(c, &now_leads));
  client::ShoalClient leader(c.pod(now_leads).data_url(), "orders", 10s);
  // The new leader hands out events of partition 0 (to another group) ...
  ASSERT_EQ(ReadAllSeqs(leader, "audit", 100).size(), 100u) << c.Describe();
  // ... but not billing's batch, nor anything after it.
  auto got = leader.Consume("billing", 10000, 300);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->empty()) << got->size() << " events handed out again, from offset "
                            << got->front().offset;
  ASSERT_TRUE(c.pod(0).Restart().ok()) << c.Describe();
  ASSERT_TRUE(InstallCurrent(c, 0).ok()) << c.Describe();
  CommitAtTheOldLeaderAndReadOn(c, now_leads);
}

// A batch whose reader never commits it comes back after redelivery_ms at the new leader, whole
// (at-least-once).
TEST(ReplicationTest, ABatchHandedOutBeforeAFailoverAndNeverCommittedComesBackWhole) {
  SidecarCluster c(Options({"--redelivery-ms", "1500"}));
  size_t now_leads = 0;
  ASSERT_NO_FATAL_FAILURE(TakeABatchAndFailOver(c, &now_leads));
  client::ShoalClient leader(c.pod(now_leads).data_url(), "orders", 10s);
  const auto seqs = ReadAllSeqs(leader, "billing", 100);
  ASSERT_EQ(seqs.size(), 100u) << c.Describe();
  EXPECT_EQ(seqs.front(), 1u);
  EXPECT_EQ(seqs.back(), 100u);
}

// A group registers with the sidecars it reads from; the pods of the copies of what it read
// learn it with the leader's commit store, before its batch goes out: if the leader's pod then
// loses its volume, the group still holds back the retirement of what it has not consumed.
TEST(ReplicationTest, AGroupThatReadsAtTheLeaderOnlyIsKnownToItsCopiesPodsWhenItsBatchGoesOut) {
  SidecarCluster c(Options());
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  ASSERT_NO_FATAL_FAILURE(TakeABatchFromTheLeader(c));  // billing, at pod 0 only
  size_t knew = 0;
  for (size_t i : {1, 2}) {
    auto r = AdminGet(c, i, "/v1/admin/groups");
    ASSERT_EQ(r.status, 200) << r.body;
    knew += r.body.find("\"billing\"") != std::string::npos ? 1 : 0;
  }
  // A quorum of the three pods (pod 0 and at least one other) before the batch was answered.
  EXPECT_GE(knew, 1u) << c.Describe();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = AdminGet(c, 1, "/v1/admin/groups");
        auto r2 = AdminGet(c, 2, "/v1/admin/groups");
        return r.body.find("\"billing\"") != std::string::npos &&
               r2.body.find("\"billing\"") != std::string::npos;
      },
      10s))
      << c.Describe();
}

// Whether pod i, leading every partition in `ids`, says each one's inherited producer state is
// durable (GET /v1/admin/partitions: on the leader and, with copies, on every follower).
bool ProducersDurable(SidecarCluster& c, size_t i, const std::vector<uint32_t>& ids) {
  auto r = AdminGet(c, i, "/v1/admin/partitions");
  if (r.status != 200) return false;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(r.body).get(doc)) return false;
  std::set<uint32_t> durable;
  for (auto p : doc["partitions"].get_array()) {
    bool d = false;
    if (!p["producers_durable"].get(d) && d) {
      durable.insert(static_cast<uint32_t>(p["id"].get_uint64().value()));
    }
  }
  return std::all_of(ids.begin(), ids.end(), [&](uint32_t id) { return durable.count(id); });
}

// The first non-empty batch `group` is handed through `sidecar` (at most `max` events), within
// 10 s (empty if none came).
std::vector<wire::ConsumedEvent> FirstBatch(client::ShoalClient& sidecar, const std::string& group,
                                            size_t max) {
  std::vector<wire::ConsumedEvent> batch;
  WaitFor(
      [&] {
        auto got = sidecar.Consume(group, max, 200);
        if (got.ok()) batch = *got;
        return !batch.empty();
      },
      10s);
  return batch;
}

// Starts `c` with 100 events of producer "app" in partition 0 (of `keys`, its keys).
void StartWith100Events(SidecarCluster& c, std::vector<std::string>* keys) {
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  *keys = KeysOf(c.current(), 0, 20);
  client::ShoalClient first(c.pod(0).data_url(), "orders", 10s);
  ASSERT_TRUE(first.Produce(Batch(*keys, "app", 1, 100)).ok());
}

// The current map with partition 0 split in half, its successors (on its owner) copied where
// its own copies are (the coordinator's placement); their ids in `successors`.
Result<PartitionMap> SplitPartition0(const SidecarCluster& c, std::vector<uint32_t>* successors) {
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  auto split = c.current().Split(PartitionId(0), p0.range.lo + p0.range.Width() / 2);
  if (!split.ok()) return split.status();
  for (const auto& info : split->partitions()) {
    if (info.parents.empty()) continue;
    successors->push_back(info.id.value());
    split = split->WithReplicas(info.id, p0.replicas);
    if (!split.ok()) return split.status();
  }
  return split;
}

// As the coordinator does it (control/failover.h) with pod 0 out of reach: fences the copies of
// `ids`, chooses their leaders, installs the failover map on the pods that answer and makes it
// the cluster's current map. Returns the leaders chosen (`why` says why others were not).
Result<std::vector<std::pair<PartitionId, PodName>>> FailOverWithoutPod0(
    SidecarCluster& c, const std::vector<PartitionId>& ids, std::string* why) {
  const auto reachable = [&](const PodName& pod) -> const PeerAddress* {
    return pod == SidecarCluster::Pod(0) ? nullptr : c.current().Peer(pod);
  };
  const Epoch floor(c.current().epoch().value() + 1);
  auto leaders = control::FenceAndChooseLeaders(c.admin(), c.current(), ids, reachable, floor,
                                                c.first_volumes(), why);
  if (!leaders.ok()) return leaders.status();
  auto next = control::FailOverMap(c.current(), *leaders, floor);
  if (!next.ok()) return next.status();
  std::string failed;
  if (control::InstallFailOverMap(c.admin(), *next, *leaders, reachable, &failed).size() != 2) {
    return Status::Unavailable("the failover map did not reach pods 1 and 2: " + failed);
  }
  c.set_current(*next);
  return leaders;
}

// A successor's inherited producer state goes to its followers with the log: once its parent is
// retired and its leader dies, the copy made the leader still answers a retry of an event stored
// in the parent "duplicate" instead of storing it again (invariant 6 across a failover).
TEST(ReplicationTest, ACopyMadeTheLeaderOfASuccessorKnowsTheProducersOfItsRetiredParent) {
  SidecarCluster c(Options());
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const auto keys = KeysOf(c.current(), 0, 20);
  client::ShoalClient first(c.pod(0).data_url(), "orders", 10s);
  ASSERT_TRUE(first.Produce(Batch(keys, "app", 1, 100)).ok());
  // The successors' copies where the parent's are (the coordinator's placement).
  std::vector<uint32_t> successors;
  auto split = SplitPartition0(c, &successors);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ(successors.size(), 2u);
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  ASSERT_TRUE(WaitFor([&] { return ProducersDurable(c, 0, successors); }, 10s)) << c.Describe();
  // The group reads the parent to its end; then the parent is retired on every pod.
  ASSERT_EQ(ReadAllSeqs(first, "billing", 100).size(), 100u) << c.Describe();
  auto without = c.current().WithoutRetired(PartitionId(0));
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  c.set_current(without->WithEpoch(Epoch(c.current().epoch().value() + 1)));
  ASSERT_TRUE(c.executor().InstallEverywhere(c.current()).ok()) << c.Describe();
  // The successors' leader dies; each fails over to a copy.
  c.pod(0).Kill9();
  size_t now_leads = 0;
  for (uint32_t id : successors) now_leads = FailOver(c, id, {1, 2});
  ASSERT_NE(now_leads, 0u);
  client::ShoalClient leader(c.pod(now_leads).data_url(), "orders", 10s);
  auto retry = leader.Produce(Batch(keys, "app", 1, 100));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString() << c.Describe();
  size_t duplicates = 0;
  for (const auto& r : *retry) duplicates += r.duplicate ? 1 : 0;
  EXPECT_EQ(duplicates, 100u) << "retries of events stored in the retired parent were stored again";
}

// A leader that only the coordinator lost sight of (its followers still reach it): once a quorum
// of its copies is fenced for the failover, it acknowledges nothing more, so the copy chosen from
// them holds every acknowledged event (invariant 10).
TEST(ReplicationTest, AFencedQuorumLeavesTheOldLeaderNoQuorumAndTheNewLeaderHasEveryAck) {
  SidecarCluster c(Options({"--replication-timeout-ms", "1000"}));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const auto keys = KeysOf(c.current(), 0, 20);
  client::ShoalClient old_leader(c.pod(0).data_url(), "orders", 10s);
  auto acked = old_leader.Produce(Batch(keys, "app", 1, 200));
  ASSERT_TRUE(acked.ok()) << acked.status().ToString();
  const auto fenced = Fence(c, 0, {1, 2});
  ASSERT_EQ(fenced.size(), 2u) << c.Describe();
  for (const auto& f : fenced) EXPECT_GE(f.end, 200u) << f.pod.value();
  // The old leader still runs and its followers reach it, but they take nothing more from it.
  auto refused = old_leader.Produce(Batch(keys, "app", 201, 50));
  ASSERT_FALSE(refused.ok()) << "acknowledged by a leader whose copies were fenced";
  EXPECT_NE(refused.status().message().find("quorum"), std::string::npos)
      << refused.status().ToString();
  for (size_t i : {1, 2}) {
    EXPECT_EQ(Followed(c, i)[0].end, fenced[i - 1].end) << "pod-" << i << " copied after its fence";
  }
  // The failover completes on every pod, the old leader included: it follows and cuts the tail
  // it could not get acknowledged.
  const size_t now_leads = FailOver(c, 0, {1, 2}, {0, 1, 2});
  ASSERT_NE(now_leads, 0u);
  client::ShoalClient leader(c.pod(now_leads).data_url(), "orders", 10s);
  auto more = leader.Produce(Batch(keys, "app", 201, 100));
  ASSERT_TRUE(more.ok()) << more.status().ToString() << c.Describe();
  const auto seqs = ReadAllSeqs(leader, "billing", 300);
  ASSERT_EQ(seqs.size(), 300u) << c.Describe();
  for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], i + 1) << "at " << i;
  const std::string leader_bytes = SegmentBytes(c, now_leads, 0);
  EXPECT_TRUE(WaitFor([&] { return SegmentBytes(c, 0, 0) == leader_bytes; }, 10s))
      << FollowedEnds(c, 0)[0] << "\n" << c.Describe();
}

// A sealed partition whose leader dies with its volume is failed over like an active one: a copy
// takes the seal the map records and leads it, and the groups that had not read it yet drain it
// through its successor, every event once and in order (invariants 3 and 9).
// Every event the group reads through `sidecar` (any partition, committing as it goes), by its
// "n", in the order read, until `want` of them or 15 s.
std::vector<uint64_t> ReadAllPartitions(client::ShoalClient& sidecar, const std::string& group,
                                        size_t want) {
  std::vector<uint64_t> seqs;
  WaitFor(
      [&] {
        auto got = sidecar.Consume(group, 10000, 200);
        if (!got.ok()) return false;
        std::map<uint32_t, uint64_t> next;
        for (const auto& e : *got) {
          simdjson::dom::parser parser;
          auto n = parser.parse(e.value)["n"].get_uint64();
          if (!n.error()) seqs.push_back(n.value());
          next[e.partition] = std::max(next[e.partition], e.offset + 1);
        }
        std::vector<wire::CommitOffset> commits;
        for (const auto& [p, o] : next) commits.push_back({PartitionId(p), Offset(o)});
        if (!commits.empty()) (void)sidecar.Commit(group, commits);
        return seqs.size() >= want;
      },
      15s);
  return seqs;
}

// The current map with partition 0 moved to pod 1, its successor copied on `copies`.
Result<PartitionMap> MovePartition0ToPod1(const SidecarCluster& c, std::vector<PodName> copies) {
  auto moved = c.current().Move(PartitionId(0), SidecarCluster::Pod(1));
  if (!moved.ok()) return moved.status();
  return moved->WithReplicas(PartitionId(moved->NextId().value() - 1), std::move(copies));
}

// Starts `c` with 100 events of producer "app" in partition 0 (of `keys`, its keys), then
// moves partition 0 to pod 1: sealed at 100 on pod 0, its successor led by pod 1 and copied on
// pods 2 and 0, partition 0 read through ranges by pod 1.
void StartAndMovePartition0ToPod1(SidecarCluster& c, std::vector<std::string>* keys) {
  StartWith100Events(c, keys);
  if (::testing::Test::HasFatalFailure()) return;
  auto moved = MovePartition0ToPod1(c, {SidecarCluster::Pod(2), SidecarCluster::Pod(0)});
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  ASSERT_TRUE(c.Apply(*moved).ok()) << c.Describe();
}

TEST(ReplicationTest, ASealedPartitionWhoseLeaderLostItsVolumeIsDrainedFromTheCopyMadeItsLeader) {
  SidecarCluster c(Options());
  std::vector<std::string> keys;
  StartAndMovePartition0ToPod1(c, &keys);
  if (HasFatalFailure()) return;
  client::ShoalClient owner(c.pod(1).data_url(), "orders", 10s);
  ASSERT_TRUE(owner.Produce(Batch(keys, "app", 101, 50)).ok()) << c.Describe();
  // Pod 0 dies and its volume is gone; its sealed partition fails over to a copy.
  c.pod(0).Kill9();
  std::filesystem::remove_all(c.pod(0).data_dir());
  std::string why;
  auto leaders = FailOverWithoutPod0(c, {PartitionId(0)}, &why);
  ASSERT_TRUE(leaders.ok()) << leaders.status().ToString();
  ASSERT_EQ(leaders->size(), 1u) << why;
  const PartitionInfo* p0 = c.current().Find(PartitionId(0));
  ASSERT_FALSE(p0->active());
  EXPECT_EQ(p0->end_offset, 100u);
  const std::vector<uint64_t> seqs = ReadAllPartitions(owner, "billing", 150);
  ASSERT_EQ(seqs.size(), 150u) << c.Describe();
  for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], i + 1) << "at " << i;
}

// A leader that comes back after its partition failed over opens with the map on its disk, in
// which it still leads: before it takes the newer map, it must not hand a group what the group
// committed at the new leader. A restarted leader of a partition with copies gathers its groups'
// commits from the copies first (as a copy made the leader does), here newer than its own.
TEST(ReplicationTest, ALeaderRestartedAfterItsPartitionFailedOverDoesNotHandOutWhatWasCommitted) {
  SidecarCluster c(Options());
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  // Partition 0 split in place: sealed at 100, its successors led by pod 0 too, whose consumers
  // read partition 0's ranges from the copy held there.
  std::vector<uint32_t> successors;
  auto split = SplitPartition0(c, &successors);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  client::ShoalClient at0(c.pod(0).data_url(), "orders", 10s);
  const std::vector<wire::ConsumedEvent> first = FirstBatch(at0, "billing", 50);
  ASSERT_FALSE(first.empty()) << c.Describe();
  ASSERT_EQ(first.size(), 50u);
  ASSERT_TRUE(at0.Commit("billing", {{PartitionId(0), Offset(first.back().offset + 1)}}).ok());
  // Pod 0 dies: partition 0 and its successors fail over to copies, where billing reads and
  // commits the rest.
  c.pod(0).Kill9();
  std::vector<PartitionId> led;
  for (const auto& info : c.current().partitions()) {
    if (info.owner == SidecarCluster::Pod(0)) led.push_back(info.id);
  }
  const PartitionMap before = c.current();
  std::string why;
  auto leaders = FailOverWithoutPod0(c, led, &why);
  ASSERT_TRUE(leaders.ok()) << leaders.status().ToString();
  ASSERT_EQ(leaders->size(), led.size()) << why;
  client::ShoalClient at1(c.pod(1).data_url(), "orders", 10s);
  client::ShoalClient at2(c.pod(2).data_url(), "orders", 10s);
  size_t rest = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto* sidecar : {&at1, &at2}) {
          auto got = sidecar->Consume("billing", 1000, 100);
          if (!got.ok() || got->empty()) continue;
          rest += got->size();
          std::map<uint32_t, uint64_t> ends;
          for (const auto& e : *got) ends[e.partition] = std::max(ends[e.partition], e.offset + 1);
          std::vector<wire::CommitOffset> commits;
          for (const auto& [p, o] : ends) commits.push_back({PartitionId(p), Offset(o)});
          EXPECT_TRUE(sidecar->Commit("billing", commits).ok());
        }
        return rest >= 50;
      },
      15s))
      << rest << " of the last 50 read\n"
      << c.Describe();
  // Pod 0 starts again with its own map (the newer one has not reached it) and still leads.
  ASSERT_TRUE(c.pod(0).Restart().ok()) << c.Describe();
  auto held = c.admin().GetMap(c.admin_address(0));
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->epoch(), before.epoch());
  // What billing committed at the new leaders is not handed out again at pod 0.
  for (int i = 0; i < 5; ++i) {
    auto got = at0.Consume("billing", 1000, 200);
    if (!got.ok()) continue;
    for (const auto& e : *got) {
      ASSERT_NE(e.partition, 0u) << "offset " << e.offset << " of partition 0 handed out again";
    }
  }
}

// The same leader restarted before the group commits at the new leaders: the copies it gathers
// its groups' commits from are fenced for the newer leader and refuse it (they would answer
// with commits older than those the new leaders take next), so it hands out nothing of the
// partitions it led until the newer map makes it a follower. (Found by `shoal torture` seed 4:
// a group's commit accepted at the new leader, the events handed out again by the old one.)
TEST(ReplicationTest, ALeaderRestartedOnItsOldMapGathersNothingFromCopiesFencedForANewerLeader) {
  SidecarCluster c(Options());
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  client::ShoalClient at0(c.pod(0).data_url(), "orders", 10s);
  const std::vector<wire::ConsumedEvent> first = FirstBatch(at0, "billing", 50);
  ASSERT_EQ(first.size(), 50u) << c.Describe();
  ASSERT_TRUE(at0.Commit("billing", {{PartitionId(0), Offset(first.back().offset + 1)}}).ok());
  c.pod(0).Kill9();
  const PartitionMap before = c.current();
  std::string why;
  auto leaders = FailOverWithoutPod0(c, {PartitionId(0)}, &why);
  ASSERT_TRUE(leaders.ok()) << leaders.status().ToString() << ": " << why;
  // Pod 0 starts again with its own map, in which it still leads partition 0.
  ASSERT_TRUE(c.pod(0).Restart().ok()) << c.Describe();
  auto held = c.admin().GetMap(c.admin_address(0));
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->epoch(), before.epoch());
  // Its copies refuse it their commits (their answer to what it asks on its peer tick).
  const size_t copy = std::stoul(before.Find(PartitionId(0))->replicas[0].value().substr(4));
  auto refused = AdminGet(c, copy,
                          "/v1/admin/partitions/0/commits?copy=true&leader_epoch=" +
                              std::to_string(before.Find(PartitionId(0))->LeaderEpoch().value()));
  EXPECT_EQ(refused.status, 409) << refused.body;
  // billing reads and commits the rest at the new leader; pod 0 hands none of it out.
  const size_t leader = std::stoul(leaders->front().second.value().substr(4));
  client::ShoalClient at_new(c.pod(leader).data_url(), "orders", 10s);
  size_t rest = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto got = at_new.Consume("billing", 1000, 100);
        if (!got.ok() || got->empty()) return rest >= 50;
        rest += got->size();
        uint64_t end = 0;
        for (const auto& e : *got) end = std::max(end, e.offset + 1);
        EXPECT_TRUE(at_new.Commit("billing", {{PartitionId(0), Offset(end)}}).ok());
        return rest >= 50;
      },
      15s))
      << rest << " of the last 50 read\n"
      << c.Describe();
  for (int i = 0; i < 5; ++i) {
    auto got = at0.Consume("billing", 1000, 200);
    if (!got.ok()) continue;
    for (const auto& e : *got) {
      ASSERT_NE(e.partition, 0u) << "offset " << e.offset << " of partition 0 handed out again";
    }
  }
}

// A copy made the leader gathers its copies' commits before it hands out events, asking them one
// after another on its peer tick: a hung copy (the old leader, paused) answers nothing, and must
// cost the others' answers no more than one prompt timeout per tick, not a long one per ask.
TEST(ReplicationTest, ACopyMadeTheLeaderWhileTheOldLeaderHangsHandsOutEventsSoon) {
  SidecarCluster c(Options());
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(
      WaitFor([&] { return FollowedEnds(c, 1)[0] == 100 && FollowedEnds(c, 2)[0] == 100; }, 10s))
      << c.Describe();
  ASSERT_EQ(kill(c.pod(0).pid(), SIGSTOP), 0);
  std::string why;
  auto leaders = FailOverWithoutPod0(c, {PartitionId(0)}, &why);
  ASSERT_TRUE(leaders.ok()) << leaders.status().ToString();
  ASSERT_EQ(leaders->size(), 1u) << why;
  const size_t leader = leaders->front().second == SidecarCluster::Pod(1) ? 1 : 2;
  client::ShoalClient at(c.pod(leader).data_url(), "orders", 10s);
  size_t read = 0;
  // Its copies: the other follower, and pod 0 (hung) that a forward timeout (2 s) gives up on.
  const bool all = WaitFor(
      [&] {
        auto got = at.Consume("billing", 1000, 100);
        if (got.ok()) read += got->size();
        return read >= 100;
      },
      6s);
  EXPECT_EQ(kill(c.pod(0).pid(), SIGCONT), 0);
  EXPECT_TRUE(all) << read << " of 100 read within 6 s\n" << c.Describe();
}

// A change's parent whose leader dies before the change seals it: the coordinator fails the
// parent over inside the change (control/failover.h, PartitionMap::CarryingChange), and the
// change's seal goes to the copy made its leader, which is sealed at its end over the admin
// plane before the map that makes it the leader reaches it; the change completes and the
// successor's groups read the parent whole.
TEST(ReplicationTest, AParentWhoseLeaderDiesBeforeItsChangeSealsItIsSealedAtTheCopyMadeItsLeader) {
  SidecarClusterOptions o = Options();
  // The dead pod only follows in the change's map: the change waits this long for it, then goes
  // on without it (ChangeExecutor::Apply).
  o.step_timeout = 3s;
  SidecarCluster c(o);
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const auto keys = KeysOf(c.current(), 0, 20);
  {
    client::ShoalClient first(c.pod(0).data_url(), "orders", 10s);
    ASSERT_TRUE(first.Produce(Batch(keys, "app", 1, 100)).ok());
  }
  // The change: partition 0 moves to pod 1 (its successor copied on pod 2).
  auto moved = MovePartition0ToPod1(c, {SidecarCluster::Pod(2)});
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  // Pod 0, the parent's leader, dies before the seal; the failover goes into the change's map.
  c.pod(0).Kill9();
  const auto reachable = [&](const PodName& pod) -> const PeerAddress* {
    return pod == SidecarCluster::Pod(0) ? nullptr : c.current().Peer(pod);
  };
  const Epoch floor(moved->epoch().value() + 1);
  std::string why;
  auto leaders = control::FenceAndChooseLeaders(c.admin(), *moved, {PartitionId(0)}, reachable,
                                                floor, c.first_volumes(), &why);
  ASSERT_TRUE(leaders.ok()) << leaders.status().ToString();
  ASSERT_EQ(leaders->size(), 1u) << why;
  auto target = control::FailOverMap(*moved, *leaders, floor);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  target = target->CarryingChange(moved->epoch());
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  // The change goes on: the seal is asked of the copy made the parent's leader.
  const Status applied = c.Apply(*target);
  ASSERT_TRUE(applied.ok()) << applied.ToString() << c.Describe();
  const PartitionInfo* p0 = c.current().Find(PartitionId(0));
  ASSERT_FALSE(p0->active());
  EXPECT_EQ(p0->end_offset, 100u);
  EXPECT_NE(p0->owner, SidecarCluster::Pod(0));
  client::ShoalClient owner(c.pod(1).data_url(), "orders", 10s);
  // The successor takes writes once it holds the parent's producer state, which the copy made
  // the parent's leader hands on only once a quorum of its copies holds the end it was sealed
  // at (its followers copy it from it once they hold the map): until then, 503 and retry.
  ASSERT_TRUE(WaitFor([&] { return owner.Produce(Batch(keys, "app", 101, 50)).ok(); }, 10s))
      << c.Describe();
  const std::vector<uint64_t> seqs = ReadAllPartitions(owner, "billing", 150);
  ASSERT_EQ(seqs.size(), 150u) << c.Describe();
  for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], i + 1) << "at " << i;
}

// A batch read through ranges goes out once a quorum of the partition's copies holds its lease,
// and a copy made the leader gathers the leases of the others: the reader commits the batch at
// the new leader even when that copy was not among the quorum (here down while the batch went
// out), instead of having it handed out again.
TEST(ReplicationTest, ABatchReadThroughRangesBeforeAFailoverIsCommittedAtTheNewLeader) {
  SidecarCluster c(Options());
  std::vector<std::string> keys;
  StartAndMovePartition0ToPod1(c, &keys);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(WaitFor([&] { return FollowedEnds(c, 2)[0] == 100; }, 10s)) << c.Describe();
  // Pod 2 down: the batch's lease reaches pod 0 and pod 1's copy only.
  c.pod(2).Kill9();
  client::ShoalClient owner(c.pod(1).data_url(), "orders", 10s);
  const std::vector<wire::ConsumedEvent> batch = FirstBatch(owner, "billing", 50);
  ASSERT_FALSE(batch.empty()) << c.Describe();
  uint64_t next = 0;
  for (const auto& e : batch) {
    ASSERT_EQ(e.partition, 0u);
    next = std::max(next, e.offset + 1);
  }
  // Pod 0 dies; pod 2 comes back with its copy and is made the leader of partition 0.
  c.pod(0).Kill9();
  ASSERT_TRUE(c.pod(2).Restart().ok()) << c.Describe();
  // Ready, and the coordinator's client past its connection to the killed process.
  ASSERT_TRUE(WaitFor([&] { return c.admin().GetMap(c.admin_address(2)).ok(); }, 10s));
  const auto reachable = [&](const PodName& pod) -> const PeerAddress* {
    return pod == SidecarCluster::Pod(0) ? nullptr : c.current().Peer(pod);
  };
  const Epoch floor(c.current().epoch().value() + 1);
  Fence(c, 0, {1, 2});
  const std::vector<std::pair<PartitionId, PodName>> leaders{
      {PartitionId(0), SidecarCluster::Pod(2)}};
  auto target = control::FailOverMap(c.current(), leaders, floor);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  std::string failed;
  EXPECT_EQ(control::InstallFailOverMap(c.admin(), *target, leaders, reachable, &failed).size(), 2u)
      << failed;
  c.set_current(*target);
  // The reader commits its batch at the new leader (retried while it gathers).
  Status committed = Status::Unavailable("not tried");
  ASSERT_TRUE(WaitFor(
      [&] {
        committed = owner.Commit("billing", {{PartitionId(0), Offset(next)}});
        return committed.code() != Status::Code::kUnavailable;
      },
      10s))
      << committed.ToString() << c.Describe();
  ASSERT_TRUE(committed.ok()) << committed.ToString() << c.Describe();
  // The rest of the partition comes next, never the batch again.
  const std::vector<uint64_t> rest = ReadAllPartitions(owner, "billing", 100 - batch.size());
  ASSERT_EQ(rest.size(), 100 - batch.size()) << c.Describe();
  EXPECT_EQ(rest.front(), batch.size() + 1);
}

// A copy on a volume that was emptied may have acknowledged events it no longer holds: until it
// has caught up with its leader, its fence answer says it is refetching, and a failover neither
// counts it towards the quorum nor makes it the leader (replication::ChooseLeader).
TEST(ReplicationTest, ACopyRefetchingAfterItsVolumeWasEmptiedCountsForAFailoverOnceCaughtUp) {
  SidecarCluster c(Options());
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  const auto lose_volume = [&](size_t i) {
    c.pod(i).Kill9();
    for (const auto& entry : std::filesystem::directory_iterator(c.pod(i).data_dir())) {
      if (entry.path().filename() != "sidecar.log") std::filesystem::remove_all(entry.path());
    }
    ASSERT_TRUE(c.pod(i).Restart().ok()) << c.Describe();
    ASSERT_TRUE(InstallCurrent(c, i).ok()) << c.Describe();
  };
  // Pod 2 loses its volume and refetches partition 0 from its leader: caught up, it counts.
  lose_volume(2);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(WaitFor([&] { return FollowedEnds(c, 2)[0] == 100; }, 10s)) << c.Describe();
  // Pod 1 loses its volume while the leader is paused: it cannot have caught up.
  ASSERT_EQ(kill(c.pod(0).pid(), SIGSTOP), 0);
  lose_volume(1);
  if (HasFatalFailure()) return;
  const auto reachable = [&](const PodName& pod) -> const PeerAddress* {
    return pod == SidecarCluster::Pod(0) ? nullptr : c.current().Peer(pod);
  };
  std::string why;
  const Epoch floor(c.current().epoch().value() + 1);
  auto leaders = control::FenceAndChooseLeaders(c.admin(), c.current(), {PartitionId(0)}, reachable,
                                                floor, c.first_volumes(), &why);
  EXPECT_EQ(kill(c.pod(0).pid(), SIGCONT), 0);
  for (auto [i, refetching] : {std::pair<size_t, bool>{1, true}, {2, false}}) {
    auto state = c.admin().FenceCopies(c.admin_address(i), {PartitionId(0)}, floor);
    ASSERT_TRUE(state.ok() && state->size() == 1) << state.status().ToString();
    EXPECT_EQ(state->front().second.refetching, refetching) << "pod " << i;
  }
  // Two copies answered, one of them refetching: not a quorum of what was acknowledged.
  ASSERT_FALSE(leaders.ok()) << "led by " << leaders->front().second.value();
  EXPECT_NE(why.find("refetching"), std::string::npos) << why;
}

using Leaders = Result<std::vector<std::pair<PartitionId, PodName>>>;

// Pauses pod 0, the leader of partition 0, once pod `catching_up` copied more than 300 of its
// `end` events (not all: `held`), resumes pod `behind`, and asks for partition 0's failover with
// pod 0 out of reach, as the coordinator does (control/failover.h); pod 0 runs again after.
void FailOverWhileCatchingUp(SidecarCluster& c, size_t catching_up, size_t behind, uint64_t end,
                             Leaders* leaders, uint64_t* held, std::string* why) {
  ASSERT_TRUE(WaitFor([&] { return FollowedEnds(c, catching_up)[0] > 300; }, 20s))
      << c.Describe();
  ASSERT_EQ(kill(c.pod(0).pid(), SIGSTOP), 0);
  ASSERT_EQ(kill(c.pod(behind).pid(), SIGCONT), 0);
  *held = FollowedEnds(c, catching_up)[0];
  const auto reachable = [&](const PodName& pod) -> const PeerAddress* {
    return pod == SidecarCluster::Pod(0) ? nullptr : c.current().Peer(pod);
  };
  if (*held < end) {
    *leaders = control::FenceAndChooseLeaders(c.admin(), c.current(), {PartitionId(0)}, reachable,
                                              Epoch(c.current().epoch().value() + 1),
                                              c.first_volumes(), why);
  }
  ASSERT_EQ(kill(c.pod(0).pid(), SIGCONT), 0);
  ASSERT_LT(*held, end) << "pod " << catching_up << " copied everything before its leader was "
                        << "paused; the fetches are too large for this test";
}

// The leader's high watermark falls when a copy loses its volume: it counts what the copy holds
// now. Events acknowledged before, by the leader and that copy, are then above it; the copy
// refetching them must hold its leader's end, not that mark, before it counts for a failover,
// or a failover could make it (or a copy that never had them) the leader without them
// (invariant 10; `shoal torture` seed 1 lost 8 acknowledged events so).
TEST(ReplicationTest, ACopyRefetchingPastTheFallenHighWatermarkStillDoesNotCountForAFailover) {
  // Small fetches (a few records each), so that refetching takes hundreds of them.
  SidecarCluster c(Options({"--fetch-max-bytes", "1000", "--replication-timeout-ms", "30000"}));
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  // Pod 2 stops at 100; the next 2,000 are acknowledged by the leader and pod 1.
  ASSERT_EQ(kill(c.pod(2).pid(), SIGSTOP), 0);
  ASSERT_TRUE(WaitFor([&] { return LagSeconds(c, 0, "pod-2") > 1; }, 10s)) << c.Describe();
  client::ShoalClient leader(c.pod(0).data_url(), "orders", 60s);
  constexpr uint64_t kEnd = 2100;
  for (uint64_t seq = 101; seq < kEnd; seq += 500) {
    auto acked = leader.Produce(Batch(keys, "app", seq, 500));
    ASSERT_TRUE(acked.ok()) << acked.status().ToString() << c.Describe();
  }
  ASSERT_EQ(FollowedEnds(c, 1)[0], kEnd);
  // Pod 1 loses its volume and refetches: once it holds more than pod 2 it holds at least the
  // leader's high watermark, but not every event acknowledged.
  c.pod(1).Kill9();
  for (const auto& entry : std::filesystem::directory_iterator(c.pod(1).data_dir())) {
    if (entry.path().filename() != "sidecar.log") std::filesystem::remove_all(entry.path());
  }
  ASSERT_TRUE(c.pod(1).Restart().ok()) << c.Describe();
  ASSERT_TRUE(InstallCurrent(c, 1).ok()) << c.Describe();
  // The leader paused half way through the refetch: pod 1 gets nothing more.
  uint64_t held = 0;
  std::string why;
  Leaders leaders = Status::Unavailable("not tried");
  FailOverWhileCatchingUp(c, 1, 2, kEnd, &leaders, &held, &why);
  if (HasFatalFailure()) return;
  // Pod 1 (at `held`) and pod 2 (at 100) answered; neither holds the 2,100 acknowledged events,
  // and pod 1 still says it is refetching: no leader yet.
  ASSERT_FALSE(leaders.ok()) << "led by " << leaders->front().second.value() << " holding " << held
                             << " of " << kEnd << " acknowledged events";
  EXPECT_NE(why.find("refetching"), std::string::npos) << why;
}

// The map of the epoch after `map`'s with nothing else changed (no partition is made by it).
PartitionMap NextEpochOf(const PartitionMap& map) {
  std::string json = map.ToJson();
  const std::string epoch = "\"epoch\":" + std::to_string(map.epoch().value()) + ",";
  json.replace(json.find(epoch), epoch.size(),
               "\"epoch\":" + std::to_string(map.epoch().value() + 1) + ",");
  return PartitionMap::FromJson(json).value();
}

// A copy a map adds to a partition made before it (one replacing a copy on a pod that leaves)
// was in none of the quorums that acknowledged what the partition holds. Until it holds its
// leader's end it does not count for a failover: with it and a copy that lagged, the most
// complete of a quorum could lack acknowledged events (invariant 10). Kafka adds a reassigned
// replica to the ISR once it caught up, and drops the old one only then.
TEST(ReplicationTest, ACopyAddedToAPartitionDoesNotCountForAFailoverBeforeItCaughtUp) {
  // Small fetches (a few records each), so that catching up takes hundreds of them.
  SidecarClusterOptions o =
      Options({"--fetch-max-bytes", "1000", "--replication-timeout-ms", "30000"});
  o.pods = 4;
  SidecarCluster c(o);
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  ASSERT_EQ(p0.owner, SidecarCluster::Pod(0));
  ASSERT_EQ(p0.replicas.size(), 2u) << c.current().ToJson();
  const auto index = [](const PodName& pod) { return std::stoul(pod.value().substr(4)); };
  // Pod `keeps` keeps up with the leader, `lags` stops at 100, `joins` replaces `keeps`.
  const size_t keeps = index(p0.replicas[0]), lags = index(p0.replicas[1]);
  const size_t joins = 6 - keeps - lags;
  ASSERT_TRUE(WaitFor([&] { return FollowedEnds(c, lags)[0] == 100; }, 10s)) << c.Describe();
  ASSERT_EQ(kill(c.pod(lags).pid(), SIGSTOP), 0);
  ASSERT_TRUE(WaitFor([&] { return LagSeconds(c, 0, SidecarCluster::Pod(lags).value()) > 1; }, 10s))
      << c.Describe();
  client::ShoalClient leader(c.pod(0).data_url(), "orders", 60s);
  constexpr uint64_t kEnd = 2100;
  for (uint64_t seq = 101; seq < kEnd; seq += 500) {
    auto acked = leader.Produce(Batch(keys, "app", seq, 500));
    ASSERT_TRUE(acked.ok()) << acked.status().ToString() << c.Describe();
  }
  ASSERT_EQ(FollowedEnds(c, keeps)[0], kEnd);
  // The next map copies partition 0 on `lags` and `joins`; the leader pauses while `joins`
  // catches up.
  auto next =
      NextEpochOf(c.current())
          .WithReplicas(PartitionId(0), {SidecarCluster::Pod(lags), SidecarCluster::Pod(joins)});
  if (next.ok())
    next = next->WithJoined(PartitionId(0), {{SidecarCluster::Pod(joins), next->epoch()}});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  for (size_t i : {size_t{0}, keeps, joins}) {
    auto installed = c.admin().InstallMap(c.admin_address(i), *next);
    ASSERT_TRUE(installed.ok()) << installed.status().ToString() << c.Describe();
  }
  c.set_current(*next);
  uint64_t held = 0;
  std::string why;
  Leaders leaders = Status::Unavailable("not tried");
  FailOverWhileCatchingUp(c, joins, lags, kEnd, &leaders, &held, &why);
  if (HasFatalFailure()) return;
  // `lags` (at 100) and `joins` (at `held`) answered; neither holds the 2,100 acknowledged
  // events, and `joins` says it is joining: no leader yet.
  ASSERT_FALSE(leaders.ok()) << "led by " << leaders->front().second.value() << " holding at most "
                             << held << " of " << kEnd << " acknowledged events";
  EXPECT_NE(why.find("new to the partition"), std::string::npos) << why;
  // Once the leader runs again it answers too and is chosen (the most complete of a quorum);
  // the joining copy catches up from it and counts.
  const auto everyone = [&](const PodName& pod) { return c.current().Peer(pod); };
  const Epoch floor(c.current().epoch().value() + 1);
  leaders = control::FenceAndChooseLeaders(c.admin(), c.current(), {PartitionId(0)}, everyone,
                                           floor, c.first_volumes(), &why);
  ASSERT_TRUE(leaders.ok()) << leaders.status().ToString() << ": " << why;
  ASSERT_EQ(leaders->front().second, SidecarCluster::Pod(0));
  auto failed_over = control::FailOverMap(c.current(), *leaders, floor);
  ASSERT_TRUE(failed_over.ok()) << failed_over.status().ToString();
  std::string failed;
  EXPECT_EQ(
      control::InstallFailOverMap(c.admin(), *failed_over, *leaders, everyone, &failed).size(), 4u)
      << failed;
  c.set_current(*failed_over);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto f = Followed(c, joins);
        return f.count(0) && f[0].end == kEnd;
      },
      20s))
      << c.Describe();
  auto r = AdminGet(c, joins, "/v1/admin/replica");
  EXPECT_NE(r.body.find("\"joining\":false"), std::string::npos) << r.body;
}

// A copy added to a partition whose leader's retention removed its oldest records starts at the
// leader's oldest record, catches up from there and counts. Refused `behind_start` for ever, it
// would never count for a failover, and a scale-down that waits for it would wait for ever.
TEST(ReplicationTest, ACopyAddedBehindItsLeadersRetentionStartsAtTheLeadersStartAndCatchesUp) {
  SidecarClusterOptions o = Options({"--segment-bytes", "4096", "--retention-bytes", "8192"});
  o.pods = 4;
  SidecarCluster c(o);
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  const PartitionInfo p0 = *c.current().Find(PartitionId(0));
  ASSERT_EQ(p0.owner, SidecarCluster::Pod(0));
  ASSERT_EQ(p0.replicas.size(), 2u) << c.current().ToJson();
  size_t joins = 1;
  while (p0.FollowedBy(SidecarCluster::Pod(joins))) ++joins;
  client::ShoalClient leader(c.pod(0).data_url(), "orders", 30s);
  constexpr uint64_t kEnd = 2100;
  for (uint64_t seq = 101; seq < kEnd; seq += 500) {
    auto acked = leader.Produce(Batch(keys, "app", seq, 500));
    ASSERT_TRUE(acked.ok()) << acked.status().ToString() << c.Describe();
  }
  // The leader's retention removed its first segments.
  const std::filesystem::path first_segment = std::filesystem::path(c.pod(0).data_dir()) /
                                              "orders" / "partitions" / "0" /
                                              "00000000000000000000.log";
  ASSERT_TRUE(WaitFor([&] { return !std::filesystem::exists(first_segment); }, 20s))
      << c.Describe();

  auto next = NextEpochOf(c.current())
                  .WithReplicas(PartitionId(0),
                                {p0.replicas[0], p0.replicas[1], SidecarCluster::Pod(joins)});
  if (next.ok()) {
    next = next->WithJoined(PartitionId(0), {{SidecarCluster::Pod(joins), next->epoch()}});
  }
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  for (size_t i = 0; i < c.size(); ++i) {
    auto installed = c.admin().InstallMap(c.admin_address(i), *next);
    ASSERT_TRUE(installed.ok()) << installed.status().ToString() << c.Describe();
  }
  c.set_current(*next);
  std::string body;
  ASSERT_TRUE(WaitFor(
      [&] {
        body = AdminGet(c, joins, "/v1/admin/replica").body;
        return Followed(c, joins)[0].end == kEnd &&
               body.find("\"joining\":false") != std::string::npos;
      },
      20s))
      << body << "\n"
      << c.Describe();
  // It holds the leader's records from the leader's oldest on, as stored there.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(body).get(doc)) << body;
  uint64_t start = 0;
  for (auto f : doc["followed"].get_array()) {
    if (f["id"].get_uint64().value() == 0) start = f["start"].get_uint64().value();
  }
  EXPECT_GT(start, 0u) << body;
  const std::string theirs = SegmentBytes(c, 0, 0);
  const std::string mine = SegmentBytes(c, joins, 0);
  ASSERT_FALSE(mine.empty());
  EXPECT_EQ(theirs.substr(theirs.size() - std::min(theirs.size(), mine.size())),
            mine.substr(mine.size() - std::min(theirs.size(), mine.size())));
}

// A pod that missed the map that placed its copy off a partition, and takes the one that adds it
// again, holds its old copy open: that copy was in none of the quorums of the maps between, so
// it joins as a new one would (replication::JoiningCopies).
TEST(ReplicationTest, AnOpenCopyPlacedOffAndAddedAgainWhileItsPodMissedTheMapsJoins) {
  SidecarCluster c(Options());
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(c.current().Find(PartitionId(0))->FollowedBy(SidecarCluster::Pod(2)));
  // Epoch 2 places pod 2's copy off partition 0; pod 2 does not get it.
  auto away = NextEpochOf(c.current()).WithReplicas(PartitionId(0), {SidecarCluster::Pod(1)});
  ASSERT_TRUE(away.ok()) << away.status().ToString();
  for (size_t i : {size_t{0}, size_t{1}}) {
    ASSERT_TRUE(c.admin().InstallMap(c.admin_address(i), *away).ok()) << c.Describe();
  }
  // Epoch 3 adds it again; the leader is paused, so that it cannot catch up meanwhile.
  auto back = NextEpochOf(*away).WithReplicas(PartitionId(0),
                                              {SidecarCluster::Pod(1), SidecarCluster::Pod(2)});
  if (back.ok()) back = back->WithJoined(PartitionId(0), {{SidecarCluster::Pod(2), back->epoch()}});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(kill(c.pod(0).pid(), SIGSTOP), 0);
  auto installed = c.admin().InstallMap(c.admin_address(2), *back);
  EXPECT_TRUE(installed.ok()) << installed.status().ToString() << c.Describe();
  auto fenced =
      c.admin().FenceCopies(c.admin_address(2), {PartitionId(0)}, Epoch(back->epoch().value() + 1));
  ASSERT_EQ(kill(c.pod(0).pid(), SIGCONT), 0);
  ASSERT_TRUE(fenced.ok() && fenced->size() == 1) << fenced.status().ToString();
  EXPECT_EQ(fenced->front().second.end, 100u) << "its old copy";
  EXPECT_TRUE(fenced->front().second.joining) << "a copy that missed the maps between counted";
}

// A pod that led a partition and missed the maps that failed it over and sealed it holds a tail
// that was never acknowledged. A failover gives the partition back to it once the pod that
// sealed it died (its log is the longest of the copies that answer): it cuts that tail at the
// end the seal was answered with, which the map knows as such (end_known), and takes the seal;
// the successor's writes come after exactly that end. Before, it refused every later map ("seal
// it first").
TEST(ReplicationTest, AnOldLeaderGivenBackAPartitionSealedElsewhereCutsItsTailAtTheSealedEnd) {
  SidecarClusterOptions o = Options({"--replication-timeout-ms", "1000"});
  o.step_timeout = 3s;
  SidecarCluster c(o);
  std::vector<std::string> keys;
  StartWith100Events(c, &keys);
  if (HasFatalFailure()) return;
  // 50 more stored on pod 0 only: its followers are down (killed, so that no fetch of theirs
  // is parked at the leader to carry them), so never acknowledged.
  c.pod(1).Kill9();
  c.pod(2).Kill9();
  {
    client::ShoalClient old_leader(c.pod(0).data_url(), "orders", 10s);
    ASSERT_FALSE(old_leader.Produce(Batch(keys, "app", 101, 50)).ok());
  }
  // Pod 0 goes down too (it misses every map from here on), its followers come back.
  c.pod(0).Kill9();
  ASSERT_TRUE(c.pod(1).Restart().ok()) << c.Describe();
  ASSERT_TRUE(c.pod(2).Restart().ok()) << c.Describe();
  // Pod 0 out of reach: partition 0 fails over to a copy, where a split seals it at 100.
  std::string why;
  Result<std::vector<std::pair<PartitionId, PodName>>> first = Status::Unavailable("not tried");
  ASSERT_TRUE(WaitFor(  // the restarted pods answer the admin client's new connections
      [&] { return (first = FailOverWithoutPod0(c, {PartitionId(0)}, &why)).ok(); }, 10s))
      << first.status().ToString() << " " << why;
  const size_t sealer = first->front().second == SidecarCluster::Pod(1) ? 1 : 2;
  std::vector<uint32_t> successors;
  auto split = SplitPartition0(c, &successors);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  ASSERT_EQ(c.current().Find(PartitionId(0))->end_offset, 100u);
  ASSERT_TRUE(c.current().Find(PartitionId(0))->end_known);
  {
    client::ShoalClient owner(c.pod(sealer).data_url(), "orders", 10s);
    ASSERT_TRUE(WaitFor([&] { return owner.Produce(Batch(keys, "app", 151, 20)).ok(); }, 10s))
        << c.Describe();
  }
  // The sealer dies and pod 0 comes back with the map it had: everything the sealer led fails
  // over.
  c.pod(sealer).Kill9();
  ASSERT_TRUE(c.pod(0).Restart().ok()) << c.Describe();
  const auto reachable = [&](const PodName& pod) -> const PeerAddress* {
    return pod == SidecarCluster::Pod(sealer) ? nullptr : c.current().Peer(pod);
  };
  std::vector<PartitionId> ids;
  for (const auto& p : c.current().partitions()) {
    if (p.owner == SidecarCluster::Pod(sealer)) ids.push_back(p.id);
  }
  const Epoch floor(c.current().epoch().value() + 1);
  Result<std::vector<std::pair<PartitionId, PodName>>> leaders = Status::Unavailable("not tried");
  ASSERT_TRUE(WaitFor(  // pod 0 answers the admin client's new connections
      [&] {
        leaders = control::FenceAndChooseLeaders(c.admin(), c.current(), ids, reachable, floor,
                                                 c.first_volumes(), &why);
        return leaders.ok() && leaders->size() == ids.size();
      },
      10s))
      << leaders.status().ToString() << " " << why;
  for (const auto& [id, leader] : *leaders) {
    if (id == PartitionId(0)) {
      auto f0 = c.admin().FenceCopies(c.admin_address(0), {PartitionId(0)}, floor);
      std::string said = f0.ok() ? "" : f0.status().ToString();
      if (f0.ok()) {
        for (const auto& [pid, st] : *f0) {
          said += std::to_string(pid.value()) + ":" + std::to_string(st.end) + "/le" +
                  std::to_string(st.last_epoch.value()) + (st.refetching ? "/r" : "") + " ";
        }
      }
      EXPECT_EQ(leader, SidecarCluster::Pod(0)) << "its log is longest; pod 0 says " << said;
    }
  }
  auto next = control::FailOverMap(c.current(), *leaders, floor);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  std::string failed;
  const auto took = control::InstallFailOverMap(c.admin(), *next, *leaders, reachable, &failed);
  ASSERT_EQ(took.size(), 2u) << failed << c.Describe();
  c.set_current(*next);
  // Pod 0 leads partition 0 sealed at 100: the 50 never acknowledged are cut.
  auto r = AdminGet(c, 0, "/v1/admin/partitions");
  ASSERT_EQ(r.status, 200) << r.body;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(r.body).get(doc)) << r.body;
  bool found = false;
  for (auto p : doc["partitions"].get_array()) {
    if (p["id"].get_uint64().value() != 0) continue;
    found = true;
    EXPECT_EQ(p["end_offset"].get_uint64().value(), 100u) << r.body;
    EXPECT_EQ(std::string_view(p["state"].get_string().value()), "sealed") << r.body;
  }
  EXPECT_TRUE(found) << r.body;
}

// A commit is answered once a quorum holds it, which need not include the copy a failover makes
// the leader: that copy gathers its groups' commits from the other copies before it hands out
// an event, so the group does not read again what it committed (invariant 4).
TEST(ReplicationTest, ACopyMadeTheLeaderGathersTheCommitsAQuorumHeldWithoutIt) {
  SidecarCluster c(Options({"--replication-timeout-ms", "1000"}));
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  const auto keys = KeysOf(c.current(), 0, 20);
  {
    client::ShoalClient leader(c.pod(0).data_url(), "orders", 10s);
    ASSERT_TRUE(leader.Produce(Batch(keys, "app", 1, 100)).ok());
    ASSERT_TRUE(WaitFor([&] { return FollowedEnds(c, 2)[0] == 100; }, 10s)) << c.Describe();
    // Pod 2 paused (once it has not fetched for a second, no fetch of its is held at the leader
    // to carry the commit to it): the commit is held by pod 0 and pod 1, a quorum without it.
    ASSERT_EQ(kill(c.pod(2).pid(), SIGSTOP), 0);
    ASSERT_TRUE(WaitFor([&] { return LagSeconds(c, 0, "pod-2") > 1; }, 10s)) << c.Describe();
    auto got = leader.Consume("billing", 100, 0);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 100u);
    Status committed = leader.Commit("billing", {{PartitionId(0), Offset(100)}});
    ASSERT_TRUE(committed.ok()) << committed.ToString() << c.Describe();
  }
  // Pod 0 dies; pod 2 runs again and, its log as long as pod 1's, is made the leader.
  c.pod(0).Kill9();
  ASSERT_EQ(kill(c.pod(2).pid(), SIGCONT), 0);
  const auto fenced = Fence(c, 0, {1, 2});
  ASSERT_EQ(fenced.size(), 2u) << c.Describe();
  for (const auto& f : fenced) ASSERT_EQ(f.end, 100u) << f.pod.value();
  auto next = c.current().FailOver(PartitionId(0), SidecarCluster::Pod(2));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  for (size_t i : {2, 1}) {
    auto installed = c.admin().InstallMap(c.admin_address(i), *next);
    ASSERT_TRUE(installed.ok()) << installed.status().ToString() << c.Describe();
  }
  c.set_current(*next);
  client::ShoalClient leader(c.pod(2).data_url(), "orders", 10s);
  ASSERT_TRUE(leader.Produce(Batch(keys, "app", 101, 10)).ok()) << c.Describe();
  const auto seqs = ReadAllSeqs(leader, "billing", 10);
  ASSERT_FALSE(seqs.empty()) << c.Describe();
  EXPECT_EQ(seqs.front(), 101u) << "the group read again what it had committed";
  EXPECT_EQ(seqs.size(), 10u);
}

}  // namespace
}  // namespace shoal::testing
