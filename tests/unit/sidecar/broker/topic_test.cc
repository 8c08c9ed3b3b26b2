// Tests of Topic (sidecar/src/broker/topic.{h,cc}) on one sidecar, without HTTP: the report of
// GET /v1/admin/partitions (offsets, appends, load sketch, commits, producers_durable) and the
// retirement of sealed partitions by InstallMap (files removed, gating state dropped, not reopened
// after a restart, leftovers of a crash removed at start, an active partition never dropped,
// consumers and commits racing with a retirement).
#include "broker/topic.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shoal/common/hash.h"
#include "shoal/common/metrics.h"
#include "shoal/common/version.h"
#include "storage/producer_table.h"
#include "support/manual_clock.h"
#include "support/temp_dir.h"

namespace shoal::broker {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using shoal::testing::ManualClock;
using shoal::testing::TempDir;

// The parts of one partition of GET /v1/admin/partitions that the tests compare.
struct PartitionReport {
  std::string state;
  uint64_t lo = 0, hi = 0, start_offset = 0, end_offset = 0, appended = 0;
  bool producers_durable = false;
  std::vector<uint64_t> load_buckets;
  std::vector<std::pair<uint64_t, uint64_t>> top_hashes;  // (hash, count)
  std::map<std::string, uint64_t> commits;
};
struct Report {
  std::string topic, pod;
  uint64_t epoch = 0;
  std::map<uint32_t, PartitionReport> partitions;
};

Report Parse(const std::string& body) {
  Report r;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  EXPECT_EQ(parser.parse(simdjson::padded_string(body)).get(doc), simdjson::SUCCESS) << body;
  std::string_view topic, pod;
  EXPECT_EQ(doc["topic"].get(topic), simdjson::SUCCESS) << body;
  EXPECT_EQ(doc["pod"].get(pod), simdjson::SUCCESS) << body;
  EXPECT_EQ(doc["epoch"].get(r.epoch), simdjson::SUCCESS) << body;
  r.topic = topic;
  r.pod = pod;
  simdjson::dom::array parts;
  EXPECT_EQ(doc["partitions"].get(parts), simdjson::SUCCESS) << body;
  for (simdjson::dom::element p : parts) {
    PartitionReport pr;
    uint64_t id = 0;
    std::string_view state;
    bool ok = !p["id"].get(id) && !p["state"].get(state) && !p["lo"].get(pr.lo) &&
              !p["hi"].get(pr.hi) && !p["start_offset"].get(pr.start_offset) &&
              !p["end_offset"].get(pr.end_offset) && !p["appended"].get(pr.appended) &&
              !p["producers_durable"].get(pr.producers_durable);
    EXPECT_TRUE(ok) << body;
    pr.state = state;
    simdjson::dom::array buckets, top;
    simdjson::dom::object commits;
    EXPECT_EQ(p["load_buckets"].get(buckets), simdjson::SUCCESS) << body;
    EXPECT_EQ(p["top_hashes"].get(top), simdjson::SUCCESS) << body;
    EXPECT_EQ(p["commits"].get(commits), simdjson::SUCCESS) << body;
    for (simdjson::dom::element b : buckets) pr.load_buckets.push_back(b.get_uint64().value());
    for (simdjson::dom::element t : top) {
      pr.top_hashes.emplace_back(t["hash"].get_uint64().value(), t["count"].get_uint64().value());
    }
    for (auto [g, o] : commits) pr.commits[std::string(g)] = o.get_uint64().value();
    r.partitions[static_cast<uint32_t>(id)] = pr;
  }
  return r;
}

// `n` keys that `map` routes to partition `p`.
std::vector<std::string> KeysOf(const PartitionMap& map, PartitionId p, size_t n,
                                const std::string& prefix = "key") {
  std::vector<std::string> keys;
  for (uint64_t i = 0; keys.size() < n && i < 10'000'000; ++i) {
    std::string k = prefix + "-" + std::to_string(i);
    if (map.Route(KeyHash(k)).id == p) keys.push_back(std::move(k));
  }
  EXPECT_EQ(keys.size(), n);
  return keys;
}

template <typename Pred>
bool WaitFor(Pred&& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);  // polling period of a condition with a deadline
  }
  return true;
}

class TopicTest : public ::testing::Test {
 protected:
  TopicOptions Options() const {
    TopicOptions o;
    o.topic = "orders";
    o.partitions = 2;
    o.data_dir = dir_.path();
    o.partition.fsync = FsyncPolicy::kInterval;
    o.tick_ms = 5;
    return o;
  }
  std::unique_ptr<Topic> MustOpen() {
    auto t = Topic::Open(Options(), clock_, probe_);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(t).value() : nullptr;
  }
  std::string PartitionDir(uint32_t id) const {
    return dir_.path() + "/orders/partitions/" + std::to_string(id);
  }

  // Produces one event per key, with (producer, seq) when a producer is given.
  static std::vector<wire::ProduceResult> Produce(Topic& t, const std::vector<std::string>& keys,
                                                  const std::string& producer = "",
                                                  uint64_t first_seq = 0) {
    std::vector<wire::ProduceEvent> events;
    for (size_t i = 0; i < keys.size(); ++i) {
      events.push_back({keys[i], "1", producer,
                        producer.empty() ? std::nullopt : std::optional<uint64_t>(first_seq + i)});
    }
    std::vector<wire::ProduceResult> results;
    Status st = t.Produce(events, &results);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return results;
  }
  // Reads everything `group` may read now and commits it; returns the events.
  // At most `max_rounds` reads of up to 1000 events (a producer may keep adding).
  static std::vector<wire::ConsumedEvent> Drain(Topic& t, const std::string& group,
                                                int max_rounds = 1000) {
    std::vector<wire::ConsumedEvent> all;
    for (int round = 0; round < max_rounds; ++round) {
      std::string out;
      auto n = t.Consume(group, 1000, &out);
      EXPECT_TRUE(n.ok()) << n.status().ToString();
      auto events = wire::ParseConsumeResponse(out);
      EXPECT_TRUE(events.ok()) << out;
      if (!n.ok() || !events.ok() || events->empty()) return all;
      std::map<uint32_t, uint64_t> next;
      for (const auto& e : *events) next[e.partition] = std::max(next[e.partition], e.offset + 1);
      wire::CommitRequest c{group, {}};
      for (auto [p, o] : next) c.offsets.push_back({PartitionId(p), Offset(o)});
      Status st = t.Commit(c);
      EXPECT_TRUE(st.ok()) << st.ToString();
      all.insert(all.end(), events->begin(), events->end());
    }
    return all;
  }

  // Splits p0 at the middle of its range the way the change executor does: seal at the owner,
  // record the end offset, install. Returns the installed map (epoch 2: p0 sealed, p2 and p3).
  static PartitionMap SplitP0(Topic& t) {
    const PartitionMap m1 = t.map();
    const PartitionInfo p0 = *m1.Find(PartitionId(0));
    auto split = m1.Split(p0.id, p0.range.lo + p0.range.Width() / 2);
    EXPECT_TRUE(split.ok()) << split.status().ToString();
    auto end = t.Seal(*split, p0.id);
    EXPECT_TRUE(end.ok()) << end.status().ToString();
    auto with_end = split->WithEndOffset(p0.id, *end);
    EXPECT_TRUE(with_end.ok());
    auto st = t.InstallMap(*with_end);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return *with_end;
  }

  TempDir dir_;
  ManualClock clock_;
  SidecarProbe probe_{"orders"};
};

TEST_F(TopicTest, PartitionsReportOffsetsAppendsLoadAndCommits) {
  auto t = MustOpen();
  ASSERT_NE(t, nullptr);
  const PartitionMap m = t->map();
  const auto cold = KeysOf(m, PartitionId(0), 20, "cold");
  const std::string hot = KeysOf(m, PartitionId(0), 1, "hot")[0];
  const auto other = KeysOf(m, PartitionId(1), 5, "other");
  std::vector<std::string> keys;
  for (size_t i = 0; i < 100; ++i) keys.push_back(i % 5 == 4 ? cold[i / 5] : hot);
  keys.insert(keys.end(), other.begin(), other.end());
  Produce(*t, keys, "prod", 0);
  Produce(*t, keys, "prod", 0);  // a retry: duplicates, not appends
  ASSERT_TRUE(t->Commit({"groupA", {{PartitionId(0), Offset(60)}, {PartitionId(1), Offset(5)}}}).ok());
  ASSERT_TRUE(t->Commit({"groupB", {{PartitionId(0), Offset(100)}}}).ok());

  const Report r = Parse(t->PartitionsJson());
  EXPECT_EQ(r.topic, "orders");
  EXPECT_EQ(r.pod, "local");
  EXPECT_EQ(r.epoch, 1u);
  ASSERT_EQ(r.partitions.size(), 2u);
  const PartitionReport& p0 = r.partitions.at(0);
  EXPECT_EQ(p0.state, "active");
  EXPECT_EQ(p0.lo, 0u);
  EXPECT_EQ(p0.hi, kHashSpace / 2);
  EXPECT_EQ(p0.start_offset, 0u);
  EXPECT_EQ(p0.end_offset, 100u);
  EXPECT_EQ(p0.appended, 100u);
  EXPECT_TRUE(p0.producers_durable) << "a partition without parents inherited nothing";
  ASSERT_EQ(p0.load_buckets.size(), 16u);
  std::vector<uint64_t> want(16, 0);
  for (size_t i = 0; i < 100; ++i) ++want[uint64_t{KeyHash(keys[i])} * 16 / (kHashSpace / 2)];
  EXPECT_EQ(p0.load_buckets, want);
  ASSERT_EQ(p0.top_hashes.size(), 4u);
  EXPECT_EQ(p0.top_hashes[0].first, KeyHash(hot));
  EXPECT_GE(p0.top_hashes[0].second, 80u);
  EXPECT_LE(p0.top_hashes[0].second, 100u);
  EXPECT_EQ(p0.commits, (std::map<std::string, uint64_t>{{"groupA", 60}, {"groupB", 100}}));
  const PartitionReport& p1 = r.partitions.at(1);
  EXPECT_EQ(p1.lo, kHashSpace / 2);
  EXPECT_EQ(p1.hi, kHashSpace);
  EXPECT_EQ(p1.appended, 5u);
  EXPECT_EQ(p1.commits, (std::map<std::string, uint64_t>{{"groupA", 5}}));
}

TEST_F(TopicTest, RetiresASealedPartitionAndARestartDoesNotBringItBack) {
  auto t = MustOpen();
  ASSERT_NE(t, nullptr);
  const auto p0_keys = KeysOf(t->map(), PartitionId(0), 6, "a");
  Produce(*t, p0_keys, "prod", 0);
  const PartitionMap split = SplitP0(*t);
  ASSERT_EQ(split.Find(PartitionId(0))->end_offset, 6u);
  // The successors are seeded, but their inherited producer state is not on disk before the
  // ticker wrote their snapshots.
  Report r = Parse(t->PartitionsJson());
  ASSERT_EQ(r.partitions.size(), 4u);
  EXPECT_EQ(r.partitions.at(0).state, "sealed");
  EXPECT_EQ(r.partitions.at(2).state, "active");
  EXPECT_FALSE(r.partitions.at(2).producers_durable);
  EXPECT_FALSE(r.partitions.at(3).producers_durable);
  t->Start();
  ASSERT_TRUE(WaitFor(
      [&] {
        Report now = Parse(t->PartitionsJson());
        return now.partitions.at(2).producers_durable && now.partitions.at(3).producers_durable;
      },
      10s));
  // Successor events, then the group consumes everything: the parent to its end first.
  Produce(*t, p0_keys, "prod", 100);
  const auto got = Drain(*t, "g");
  ASSERT_EQ(got.size(), 12u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got[i].partition, 0u);
  ASSERT_TRUE(fs::exists(PartitionDir(0)));

  auto retire = split.WithoutRetired(PartitionId(0));
  ASSERT_TRUE(retire.ok()) << retire.status().ToString();
  const PartitionMap m3 = retire->WithEpoch(Epoch(3));
  ASSERT_TRUE(t->InstallMap(m3).ok());
  EXPECT_EQ(t->map().epoch().value(), 3u);
  EXPECT_FALSE(fs::exists(PartitionDir(0))) << "the retired partition's files are still there";
  r = Parse(t->PartitionsJson());
  EXPECT_EQ(r.epoch, 3u);
  EXPECT_EQ(r.partitions.count(0), 0u);
  EXPECT_EQ(r.partitions.size(), 3u);
  EXPECT_NE(t->ViewJson().find("\"epoch\":3"), std::string::npos);
  EXPECT_EQ(t->CommitsJson(PartitionId(0)).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(t->ExportProducers(PartitionId(0)).status().code(), Status::Code::kNotFound);
  // A late commit of the retired partition is skipped, the rest of the request applies; a
  // partition the topic never had is still refused.
  const uint32_t p2 = t->map().Route(KeyHash(p0_keys[0])).id.value();
  ASSERT_TRUE(t->Commit({"late", {{PartitionId(0), Offset(6)}, {PartitionId(p2), Offset(1)}}}).ok());
  EXPECT_EQ(Parse(t->PartitionsJson()).partitions.at(p2).commits.at("late"), 1u);
  EXPECT_EQ(t->Commit({"late", {{PartitionId(42), Offset(1)}}}).code(), Status::Code::kNotFound);
  // Production and consumption go on; retried duplicates still name their original offsets.
  auto again = Produce(*t, p0_keys, "prod", 100);
  for (const auto& res : again) EXPECT_TRUE(res.duplicate);
  Produce(*t, p0_keys, "prod", 200);
  EXPECT_EQ(Drain(*t, "g").size(), 6u);
  // A group that never read the parent is not held back by it any more.
  EXPECT_EQ(Drain(*t, "fresh").size(), 12u);
  ASSERT_TRUE(t->Close().ok());
  t.reset();

  // Restart: the map on disk no longer lists p0, nothing reopens it.
  t = MustOpen();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->map().epoch().value(), 3u);
  EXPECT_FALSE(fs::exists(PartitionDir(0)));
  r = Parse(t->PartitionsJson());
  EXPECT_EQ(r.partitions.count(0), 0u);
  EXPECT_EQ(r.partitions.size(), 3u);
  Produce(*t, p0_keys, "prod", 300);
  EXPECT_EQ(Drain(*t, "g").size(), 6u);
  ASSERT_TRUE(t->Close().ok());
  t.reset();

  // A crash between persisting the map and removing the directory leaves it behind: the next
  // start removes it. A directory of an id the map never had (a prepare for a coming map) stays.
  fs::create_directories(PartitionDir(0));
  { std::ofstream(PartitionDir(0) + "/00000000000000000000.log") << "leftover"; }
  fs::create_directories(PartitionDir(99));
  t = MustOpen();
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(fs::exists(PartitionDir(0)));
  EXPECT_TRUE(fs::exists(PartitionDir(99)));
  EXPECT_EQ(Parse(t->PartitionsJson()).partitions.count(0), 0u);
}

TEST_F(TopicTest, AMapThatDropsAnActivePartitionIsRefusedAndChangesNothing) {
  auto t = MustOpen();
  ASSERT_NE(t, nullptr);
  const auto p0_keys = KeysOf(t->map(), PartitionId(0), 3, "a");
  Produce(*t, p0_keys);
  // Epoch 2 where a new p2 without parents replaces the active p0 (the cover still holds).
  const PartitionMap m1 = t->map();
  std::vector<PartitionInfo> parts = {*m1.Find(PartitionId(1))};
  PartitionInfo p2 = *m1.Find(PartitionId(0));
  p2.id = PartitionId(2);
  parts.push_back(p2);
  PartitionMap drops_active("orders", Epoch(2), parts);
  ASSERT_TRUE(drops_active.Validate().ok());
  Status st = t->InstallMap(drops_active).status();
  EXPECT_EQ(st.code(), Status::Code::kConflict) << st.ToString();
  EXPECT_NE(st.message().find("partition 0"), std::string::npos) << st.ToString();
  EXPECT_EQ(t->map(), m1);
  EXPECT_TRUE(fs::exists(PartitionDir(0)));
  EXPECT_FALSE(fs::exists(PartitionDir(2)));
  auto res = Produce(*t, p0_keys);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].partition, 0u);
  EXPECT_EQ(res[0].offset, 3u);

  // After a split, a map that retires the sealed p0 together with its active successor p2 (a
  // new p4 taking p2's range) is refused as a whole: p0 stays too.
  const PartitionMap split = SplitP0(*t);
  std::vector<PartitionInfo> parts3;
  for (const auto& info : split.partitions()) {
    if (info.id.value() == 0) continue;
    if (info.id.value() == 2) {
      PartitionInfo p4 = info;
      p4.id = PartitionId(4);
      p4.parents.clear();
      parts3.push_back(p4);
      continue;
    }
    parts3.push_back(info);
  }
  PartitionMap drops_both("orders", Epoch(3), parts3);
  ASSERT_TRUE(drops_both.Validate().ok());
  st = t->InstallMap(drops_both).status();
  EXPECT_EQ(st.code(), Status::Code::kConflict) << st.ToString();
  EXPECT_EQ(t->map(), split);
  EXPECT_TRUE(fs::exists(PartitionDir(0)));
  EXPECT_EQ(Parse(t->PartitionsJson()).partitions.size(), 4u);
}

// Two coordinators can mint two maps of one epoch that give one id two meanings. A partition
// opened ahead of the first (Prepare) must not serve the second: its range (which a seal checks)
// and what it may have inherited are the first map's. Found by the protocol simulation, seed
// 68382 of 100,000: a prepared p4 of another range passed the seal's range check, and its
// successor took writes beside the real p4's sibling.
TEST_F(TopicTest, APartitionPreparedForAnotherMapOfItsIdDoesNotServeThisOne) {
  auto t = MustOpen();
  ASSERT_NE(t, nullptr);
  const PartitionMap m1 = t->map();
  const uint64_t half = kHashSpace / 2;
  auto a = m1.Split(PartitionId(0), half / 4);  // p2 [0, H/8), p3 [H/8, H/2)
  auto b = m1.Split(PartitionId(0), half / 2);  // p2 [0, H/4), p3 [H/4, H/2)
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->epoch(), b->epoch());
  ASSERT_TRUE(t->Prepare(*a).ok());
  auto end = t->Seal(*b, PartitionId(0));
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  auto with_end = b->WithEndOffset(PartitionId(0), *end);
  ASSERT_TRUE(with_end.ok());
  auto installed = t->InstallMap(*with_end);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  // p2 is B's: a change that splits B's p2 seals it (the seal names B's range).
  auto c = with_end->Split(PartitionId(2), half / 4);
  ASSERT_TRUE(c.ok());
  auto sealed = t->Seal(*c, PartitionId(2));
  EXPECT_TRUE(sealed.ok()) << sealed.status().ToString();
  // And the map's keys land where B puts them.
  const auto keys = KeysOf(*with_end, PartitionId(3), 3, "b3");
  auto res = Produce(*t, keys);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].partition, 3u);
}

TEST_F(TopicTest, ConsumersAndCommitsRacingWithRetirementsAreSafe) {
  auto t = MustOpen();
  ASSERT_NE(t, nullptr);
  t->Start();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> threads;
  // Readers and committers that name every partition id the rounds below create and retire.
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      const std::string group = "race" + std::to_string(i);
      while (!stop.load()) {
        std::string out;
        (void)t->Consume(group, 100, &out);
        (void)t->HasDataFor(group);
        // Commits naming every id (retired ones among them), and what was read: the racers are
        // groups of the topic, and retirement waits for them too.
        wire::CommitRequest c{group, {}};
        for (uint32_t p = 0; p < 16; ++p) c.offsets.push_back({PartitionId(p), Offset(0)});
        (void)t->Commit(c);
        if (auto events = wire::ParseConsumeResponse(out); events.ok()) {
          std::map<uint32_t, uint64_t> next;
          for (const auto& e : *events) next[e.partition] = std::max(next[e.partition], e.offset + 1);
          wire::CommitRequest read{group, {}};
          for (auto [p, o] : next) read.offsets.push_back({PartitionId(p), Offset(o)});
          (void)t->Commit(read);
        }
        (void)t->PartitionsJson();
        (void)t->ViewJson();
        reads.fetch_add(1);
      }
    });
  }
  threads.emplace_back([&] {
    uint64_t seq = 0;
    std::vector<std::string> keys;
    for (int k = 0; k < 32; ++k) keys.push_back("k" + std::to_string(k));
    while (!stop.load()) {
      std::vector<wire::ProduceEvent> events;
      for (const auto& k : keys) events.push_back({k, "1", "racer", seq++});
      std::vector<wire::ProduceResult> results;
      (void)t->Produce(events, &results);  // Unavailable while a successor is being created
      std::this_thread::sleep_for(2ms);    // a little load, not a flood the group cannot drain
    }
  });
  // Rounds of: split the partition owning hash 0, let group "g" drain it, retire the parent.
  for (int round = 0; round < 5; ++round) {
    const PartitionMap m = t->map();
    const PartitionInfo first = m.Route(0);
    auto split = m.Split(first.id, first.range.lo + first.range.Width() / 2);
    ASSERT_TRUE(split.ok());
    auto end = t->Seal(*split, first.id);
    ASSERT_TRUE(end.ok());
    auto installed = split->WithEndOffset(first.id, *end);
    ASSERT_TRUE(installed.ok());
    ASSERT_TRUE(t->InstallMap(*installed).ok());
    // Drain until every group consumed the parent to its end: until then the sidecar refuses
    // the retirement (a group it knows has not consumed it), and nothing changes.
    auto retire = installed->WithoutRetired(first.id);
    ASSERT_TRUE(retire.ok());
    const PartitionMap retired = retire->WithEpoch(Epoch(installed->epoch().value() + 1));
    Status last;
    ASSERT_TRUE(WaitFor(
        [&] {
          Drain(*t, "g", 5);
          last = t->InstallMap(retired).status();
          EXPECT_TRUE(last.ok() || last.code() == Status::Code::kConflict) << last.ToString();
          return last.ok();
        },
        30s))
        << last.ToString();
    EXPECT_FALSE(fs::exists(PartitionDir(first.id.value())));
  }
  const uint64_t before = reads.load();
  ASSERT_TRUE(WaitFor([&] { return reads.load() > before + 10; }, 10s));
  stop.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(t->map().epoch().value(), 11u);
  EXPECT_EQ(Parse(t->PartitionsJson()).partitions.size(), 7u);  // p1 and 6 successors
  ASSERT_TRUE(t->Close().ok());
}


// A peer that answers GET .../groups only once the test releases it (a slow or paused pod).
class HeldPeers final : public PeerClient {
 public:
  Result<std::string> FetchProducers(const PeerAddress&, PartitionId, const SuccessorRef*,
                                     uint64_t) override {
    return Status::Unavailable("no producers here");
  }
  Result<RemoteCommits> FetchCommits(const PeerAddress&, PartitionId) override {
    return Status::NotFound("no such partition");
  }
  Result<std::map<std::string, GroupRegistry::Group>> FetchGroups(const PeerAddress&) override {
    std::unique_lock<std::mutex> lock(mu_);
    asked_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    return std::map<std::string, GroupRegistry::Group>{};
  }
  Result<RemoteBatch> ReadRange(const PeerAddress&, PartitionId, const std::string&,
                                const PodName&, const std::vector<HashRange>&, size_t,
                                size_t) override {
    return Status::Unavailable("no reads here");
  }
  Result<RemoteCommits> CommitFor(const PeerAddress&, PartitionId, const std::string&,
                                  const PodName&, Offset) override {
    return Status::Unavailable("no commits here");
  }
  bool WaitAsked(std::chrono::milliseconds deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, deadline, [&] { return asked_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool asked_ = false;
  bool released_ = false;
};

// A map that retires partitions asks every peer for its groups first (invariant 4). The peers
// are asked before the install lock: while one does not answer, another change's prepare on
// this sidecar goes ahead, and the retirement installs once it answers.
TEST_F(TopicTest, ARetirementWaitingForAPeerHoldsUpNoOtherChange) {
  HeldPeers peers;
  auto opened = Topic::Open(Options(), clock_, probe_, &peers);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto t = std::move(opened).value();
  Produce(*t, KeysOf(t->map(), PartitionId(0), 4, "a"));
  const PartitionMap split = SplitP0(*t);
  ASSERT_EQ(Drain(*t, "g").size(), 4u);
  const PartitionMap m3 = split.WithoutRetired(PartitionId(0))
                              .value()
                              .WithEpoch(Epoch(3))
                              .WithPeer(PodName("other"), {"127.0.0.1:1", "127.0.0.1:2"});
  std::promise<Result<InstallOutcome>> installed;
  std::thread installer([&] { installed.set_value(t->InstallMap(m3)); });
  ASSERT_TRUE(peers.WaitAsked(10s)) << "the retirement did not ask the peer";

  // The next change prepares its successors here (epoch 4, a split of p1) while the peer is
  // still being asked: a prepare takes the install lock, as the ticker's seeding does.
  const PartitionInfo p1 = *m3.Find(PartitionId(1));
  const PartitionMap m4 =
      m3.Split(p1.id, p1.range.lo + p1.range.Width() / 2).value().WithEpoch(Epoch(4));
  auto prepared = std::async(std::launch::async, [&] { return t->Prepare(m4); });
  const bool prepared_meanwhile = prepared.wait_for(10s) == std::future_status::ready;
  peers.Release();
  installer.join();
  EXPECT_TRUE(prepared_meanwhile) << "a prepare waited for the peer that a retirement asked";
  const Status prepare = prepared.get();
  EXPECT_TRUE(prepare.ok()) << prepare.ToString();
  auto result = installed.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(t->map().epoch(), Epoch(3));
  EXPECT_EQ(t->map().Find(PartitionId(0)), nullptr);
  EXPECT_FALSE(fs::exists(PartitionDir(0)));
}

// A peer whose partitions' producer state is not whole yet (a copy a failover made their
// leader, that never got what its first leader inherited): it confirms a successor's seal and
// answers FailedPrecondition until the test says it is whole. With `confirms` false it answers
// Unavailable instead, as a pod that is down does (nothing confirmed).
class NotWholePeers final : public PeerClient {
 public:
  explicit NotWholePeers(bool confirms) : confirms_(confirms) {}
  Result<std::string> FetchProducers(const PeerAddress&, PartitionId partition, const SuccessorRef*,
                                     uint64_t) override {
    ++asked_;
    if (whole_) return storage::ProducerTable().Serialize();
    if (absent_) {
      return Status::NotFound("partition " + std::to_string(partition.value()) +
                              " is not on this sidecar");
    }
    if (!confirms_) return Status::Unavailable("the parent's pod does not answer");
    return Status::FailedPrecondition("partition " + std::to_string(partition.value()) +
                                      " has not inherited its parents' producer state yet");
  }
  Result<RemoteCommits> FetchCommits(const PeerAddress&, PartitionId) override {
    return Status::Unavailable("no commits here");
  }
  Result<std::map<std::string, GroupRegistry::Group>> FetchGroups(const PeerAddress&) override {
    return std::map<std::string, GroupRegistry::Group>{};
  }
  Result<RemoteBatch> ReadRange(const PeerAddress&, PartitionId, const std::string&, const PodName&,
                                const std::vector<HashRange>&, size_t, size_t) override {
    return Status::Unavailable("no reads here");
  }
  Result<RemoteCommits> CommitFor(const PeerAddress&, PartitionId, const std::string&,
                                  const PodName&, Offset) override {
    return Status::Unavailable("no commits here");
  }
  void MakeWhole() { whole_ = true; }
  // From now on the parent's pod answers 404, as a copy that a failover made the parent's
  // leader does until it holds the map that says so.
  void MakeAbsent() { absent_ = true; }
  int asked() const { return asked_; }

 private:
  const bool confirms_;
  bool whole_ = false;
  bool absent_ = false;
  int asked_ = 0;
};

// Moves p0 of `t` (pod "local") to pod "other" (epoch 2), then p0's successor p2 back (epoch 3):
// p3, owned here, takes over from p2, whose owner is the peer. Returns the epoch-3 map.
PartitionMap SuccessorOfAPeersPartition(Topic& t) {
  const PeerAddress other{"127.0.0.1:1", "127.0.0.1:2"};
  const PartitionMap m1 = t.map().WithPeer(PodName("other"), other);
  auto moved = m1.Move(PartitionId(0), PodName("other"));
  EXPECT_TRUE(moved.ok()) << moved.status().ToString();
  auto end = t.Seal(*moved, PartitionId(0));
  EXPECT_TRUE(end.ok()) << end.status().ToString();
  auto m2 = moved->WithEndOffset(PartitionId(0), *end);
  EXPECT_TRUE(m2.ok());
  auto installed = t.InstallMap(*m2);
  EXPECT_TRUE(installed.ok()) << installed.status().ToString();
  auto back = m2->Move(PartitionId(2), t.options().pod);
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  return *back;
}

// The owner of a successor confirms its parents' seals when it installs the map (invariant 2);
// the parents' producer state may come later. A parent that confirmed but is not whole yet
// does not hold the map back (its copy may take its own parents' state over only from a pod
// that leads them once it holds this very map): the successor takes no append until the peer
// ticker has seeded it. A parent that confirmed nothing (its pod is down) still does.
TEST_F(TopicTest, ASuccessorWhoseParentConfirmedButIsNotWholeYetIsSeededAfterTheInstall) {
  NotWholePeers peers(/*confirms=*/true);
  auto opened = Topic::Open(Options(), clock_, probe_, &peers);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto t = std::move(opened).value();
  const PartitionMap m3 = SuccessorOfAPeersPartition(*t);
  auto installed = t->InstallMap(m3);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(t->map().epoch(), m3.epoch());

  const auto keys = KeysOf(m3, PartitionId(3), 2, "late");
  std::vector<wire::ProduceEvent> events{{keys[0], "1", "p", 0}};
  std::vector<wire::ProduceResult> results;
  Status refused = t->Produce(events, &results);
  EXPECT_EQ(refused.code(), Status::Code::kUnavailable) << refused.ToString();
  EXPECT_FALSE(Parse(t->PartitionsJson()).partitions[3].producers_durable);

  peers.MakeWhole();
  t->PeerTickOnce();
  results.clear();
  Status st = t->Produce(events, &results);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(results.at(0).partition, 3u);
  ASSERT_TRUE(t->Close().ok());
}

TEST_F(TopicTest, ASuccessorWhoseParentConfirmedNothingHoldsTheMapBack) {
  NotWholePeers peers(/*confirms=*/false);
  auto opened = Topic::Open(Options(), clock_, probe_, &peers);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto t = std::move(opened).value();
  const PartitionMap m3 = SuccessorOfAPeersPartition(*t);
  auto refused = t->InstallMap(m3);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kUnavailable) << refused.status().ToString();
  EXPECT_EQ(t->map().epoch(), Epoch(2));
  peers.MakeWhole();
  auto installed = t->InstallMap(m3);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  ASSERT_TRUE(t->Close().ok());
}

// A successor installed here already (its parents confirmed it then) whose seeding is still to
// come does not hold a newer map back when a parent's pod cannot answer for the parent: the
// parent's new leader, made so by a failover in the newer map, holds that map only after this
// pod (seed 17417 of the protocol simulation: the change's install stopped here for ever). The
// successor still takes no append until the peer ticker seeded it.
TEST_F(TopicTest, AnInstalledSuccessorNotSeededYetDoesNotHoldANewerMapBack) {
  NotWholePeers peers(/*confirms=*/true);
  auto opened = Topic::Open(Options(), clock_, probe_, &peers);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto t = std::move(opened).value();
  const PartitionMap m3 = SuccessorOfAPeersPartition(*t);
  auto installed = t->InstallMap(m3);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();

  peers.MakeAbsent();
  const PartitionMap m4 = m3.Reissued(Epoch(4));
  installed = t->InstallMap(m4);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(t->map().epoch(), Epoch(4));

  const auto keys = KeysOf(m4, PartitionId(3), 2, "late");
  std::vector<wire::ProduceEvent> events{{keys[0], "1", "p", 0}};
  std::vector<wire::ProduceResult> results;
  Status refused = t->Produce(events, &results);
  EXPECT_EQ(refused.code(), Status::Code::kUnavailable) << refused.ToString();

  peers.MakeWhole();
  t->PeerTickOnce();
  results.clear();
  Status st = t->Produce(events, &results);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(results.at(0).partition, 3u);
  ASSERT_TRUE(t->Close().ok());
}

// A successor the map makes is still confirmed at the install: a parent's pod that answers 404
// holds the map back.
TEST_F(TopicTest, ANewSuccessorWhoseParentIsNotOnItsPodHoldsTheMapBack) {
  NotWholePeers peers(/*confirms=*/true);
  peers.MakeAbsent();
  auto opened = Topic::Open(Options(), clock_, probe_, &peers);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto t = std::move(opened).value();
  const PartitionMap m3 = SuccessorOfAPeersPartition(*t);
  auto refused = t->InstallMap(m3);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kNotFound) << refused.status().ToString();
  EXPECT_EQ(t->map().epoch(), Epoch(2));
  ASSERT_TRUE(t->Close().ok());
}

// A copy sealed for a change that carried a failover of its partition (the copy was chosen to
// lead it, Topic::Seal) keeps no seal once that change lost: a map of the change's epoch that
// makes the copy the leader of the partition, active, has it take appends; a seal left over
// would have it refuse every produce for ever.
TEST_F(TopicTest, ACopySealedForAChangeThatLostTakesAppendsWhenItLeads) {
  TopicOptions o = Options();
  o.acks_quorum = false;
  auto opened = Topic::Open(o, clock_, probe_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto t = std::move(opened).value();
  const PodName local = o.pod, other("other");
  // p0 led by the peer (a failover at epoch 2), followed here; p1 led here.
  const PartitionMap m = t->map().WithPeer(other, {"127.0.0.1:1", "127.0.0.1:2"});
  auto with_copy = m.WithReplicas(PartitionId(0), {other});
  ASSERT_TRUE(with_copy.ok()) << with_copy.status().ToString();
  auto e2 = with_copy->FailOver(PartitionId(0), other);
  ASSERT_TRUE(e2.ok()) << e2.status().ToString();
  auto installed = t->InstallMap(*e2);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();

  // The coordinator fails p0 over to this copy inside a change that splits it (epoch 4), fences
  // the copy, and seals it for that change here.
  auto failed_over = e2->FailOver(PartitionId(0), local);  // epoch 3, leader epoch 3
  ASSERT_TRUE(failed_over.ok()) << failed_over.status().ToString();
  const PartitionInfo p0 = *failed_over->Find(PartitionId(0));
  auto change = failed_over->Split(p0.id, p0.range.lo + p0.range.Width() / 2);
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  const auto fenced = t->FenceCopies({PartitionId(0)}, p0.leader_epoch);
  ASSERT_EQ(fenced.size(), 1u);
  auto sealed = t->Seal(*change, PartitionId(0));
  ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();

  // The change loses: the failover alone is installed at the change's epoch.
  const PartitionMap lost_to = failed_over->WithEpoch(change->epoch());
  installed = t->InstallMap(lost_to);
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  std::vector<wire::ProduceEvent> events{{KeysOf(lost_to, PartitionId(0), 1)[0], "1", "", {}}};
  std::vector<wire::ProduceResult> results;
  Status st = t->Produce(events, &results);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(results.at(0).partition, 0u);
  ASSERT_TRUE(t->Close().ok());
}

// A successor answers a retry of an event stored in its parent "duplicate" from the state it
// inherited, and waits for no quorum of the parent's copies: the parent hands that state on
// only once a quorum holds its sealed end (invariant 9). Its seal may stand before (a seal
// answered Unavailable, or the seal of a copy that a failover made the parent's leader); the
// confirmation is made all the same.
TEST_F(TopicTest, AParentHandsOnItsProducerStateOnlyOnceAQuorumHoldsItsSealedEnd) {
  auto t = MustOpen();
  const PodName other("other");
  auto with_copy = t->map()
                       .WithPeer(other, {"127.0.0.1:1", "127.0.0.1:2"})
                       .WithReplicas(PartitionId(0), {other});
  ASSERT_TRUE(with_copy.ok()) << with_copy.status().ToString();
  auto installed = t->InstallMap(with_copy->WithEpoch(Epoch(2)));
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  std::vector<wire::ProduceEvent> events;
  for (const auto& k : KeysOf(t->map(), PartitionId(0), 3)) events.push_back({k, "1", "p", {}});
  for (size_t i = 0; i < events.size(); ++i) events[i].seq = i;
  std::vector<wire::ProduceResult> results;
  std::vector<QuorumWait> waits;
  Status produced = t->Produce(events, &results, false, nullptr, nullptr, &waits);
  ASSERT_TRUE(produced.ok()) << produced.ToString();
  ASSERT_FALSE(waits.empty()) << "no copy holds them yet";

  const PartitionInfo p0 = *t->map().Find(PartitionId(0));
  auto split = t->map().Split(p0.id, p0.range.lo + p0.range.Width() / 2);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  auto sealed = t->Seal(*split, p0.id);
  EXPECT_EQ(sealed.status().code(), Status::Code::kUnavailable) << "the seal stands, unheld";
  const auto successors = SuccessorRefs(*split, p0.id);
  ASSERT_FALSE(successors.empty());
  auto exported = t->ExportProducers(p0.id, &successors[0], 3);
  EXPECT_EQ(exported.status().code(), Status::Code::kFailedPrecondition)
      << exported.status().ToString();

  // The follower says it holds the sealed end.
  FetchRequest fetch;
  fetch.follower = other.value();
  fetch.partitions.push_back({p0.id, p0.LeaderEpoch(), 3, p0.LeaderEpoch().value(), 0, 0, false});
  std::string body;
  (void)t->ServeFetch(fetch, &body);
  exported = t->ExportProducers(p0.id, &successors[0], 3);
  EXPECT_TRUE(exported.ok()) << exported.status().ToString();
  ASSERT_TRUE(t->Close().ok());
}

TEST(SidecarProbeTest, ExportsTheBuildItComesFrom) {
  SidecarProbe probe("orders");
  const std::string text = metrics::Serialize({probe.registry()});
  EXPECT_NE(text.find("shoal_build_info{component=\"sidecar\",version=\"" + Version() + "\"} 1"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace shoal::broker
