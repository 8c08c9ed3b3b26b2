// The storage layer's failure paths, under support/sim/mem_file_system.h (a file system that
// knows what is durable and fails syncs on demand):
//  - a failed fdatasync is final for a log and a commit store: a retried sync that succeeds must
//    not count what the failed one did not make durable;
//  - a power cut takes back what was not synced, and recovery opens what was;
//  - a commit ahead of the log's end after a power cut (the commit file written back by the
//    kernel, the log's tail not) is brought back to the end, so the group reads what comes next;
//  - a read error of one partition does not throw away what other partitions handed out in the
//    same consume, and does not move the failing partition's cursor.
#include <gtest/gtest.h>

#include "broker/partition.h"
#include "broker/topic.h"
#include "shoal/common/hash.h"
#include "storage/log.h"
#include "storage/commit_store.h"
#include "support/manual_clock.h"
#include "support/sim/mem_file_system.h"

namespace shoal {
namespace {

using testing::ManualClock;
using testing::MemFileSystem;

std::vector<storage::AppendEntry> Entries(int n) {
  std::vector<storage::AppendEntry> out;
  for (int i = 0; i < n; ++i) out.push_back({"k", "\"v\"", "", std::nullopt, 0});
  return out;
}

TEST(StorageFailuresTest, AFailedFdatasyncIsFinalForTheLog) {
  MemFileSystem fs;
  ASSERT_TRUE(fs.CreateDirs("/d").ok());
  storage::LogOptions o;
  o.dir = "/d/p";
  o.fs = &fs;
  auto log = storage::OpenDiskLog(o);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_TRUE((*log)->Append(Entries(3)).ok());
  ASSERT_TRUE((*log)->Sync().ok());
  ASSERT_TRUE((*log)->Append(Entries(2)).ok());
  fs.FailSyncs(".log", 1);
  EXPECT_FALSE((*log)->Sync().ok()) << "the injected EIO";
  // The disk works again, but the pages the failed sync held may be gone: the log says so.
  auto again = (*log)->Sync();
  EXPECT_FALSE(again.ok()) << "a retried fdatasync counted the lost writes as durable";
  EXPECT_EQ((*log)->durable_offset(), 3u);
  EXPECT_FALSE((*log)->Append(Entries(1)).ok()) << "appends after the failure";
  // A reopen (the sidecar's restart) reads what is really there.
  log->reset();
  fs.Crash("/d");
  auto reopened = storage::OpenDiskLog(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->end_offset(), 3u);
  EXPECT_TRUE((*reopened)->Append(Entries(1)).ok());
}

TEST(StorageFailuresTest, AFailedFdatasyncIsFinalForTheCommitStore) {
  MemFileSystem fs;
  ASSERT_TRUE(fs.CreateDirs("/d").ok());
  auto store = storage::CommitStore::Open("/d", &fs);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Commit("g", Offset(5), true).ok());
  fs.FailSyncs("commits.log", 1);
  EXPECT_FALSE((*store)->Commit("g", Offset(9), true).ok());
  EXPECT_FALSE((*store)->Commit("g", Offset(10), true).ok()) << "a commit after the failed sync";
  EXPECT_FALSE((*store)->Sync().ok());
  store->reset();
  fs.Crash("/d");
  auto reopened = storage::CommitStore::Open("/d", &fs);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->Get("g"), Offset(5));
}

TEST(StorageFailuresTest, APowerCutTakesBackOnlyWhatWasNotSyncedAndTornTailsAreCut) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    MemFileSystem fs;
    ASSERT_TRUE(fs.CreateDirs("/d").ok());
    storage::LogOptions o;
    o.dir = "/d/p";
    o.fs = &fs;
    o.segment_bytes = 200;  // several segments
    {
      auto log = storage::OpenDiskLog(o);
      ASSERT_TRUE(log.ok());
      for (int i = 0; i < 10; ++i) ASSERT_TRUE((*log)->Append(Entries(3)).ok());
      ASSERT_TRUE((*log)->Sync().ok());
      for (int i = 0; i < 4; ++i) ASSERT_TRUE((*log)->Append(Entries(2)).ok());
    }
    std::mt19937_64 rng(seed);
    fs.Crash("/d", &rng);  // a random part of the unsynced tail survives, possibly mid-record
    auto log = storage::OpenDiskLog(o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_GE((*log)->end_offset(), 30u) << "a synced record was lost";
    EXPECT_LE((*log)->end_offset(), 38u);
    storage::ReadBatch batch;
    ASSERT_TRUE((*log)->Read(0, (*log)->end_offset(), 100, 1 << 20, &batch).ok());
    EXPECT_EQ(batch.records.size(), (*log)->end_offset());
  }
}

TEST(StorageFailuresTest, ACommitAheadOfTheLogAfterAPowerCutIsBroughtBackToTheEnd) {
  MemFileSystem fs;
  ManualClock clock;
  broker::SidecarProbe probe("orders");
  ASSERT_TRUE(fs.CreateDirs("/d").ok());
  broker::PartitionOptions o;
  o.dir = "/d/p0";
  o.fs = &fs;
  o.fsync = broker::FsyncPolicy::kNever;
  auto produce = [](broker::Partition& p, int n) {
    std::vector<wire::ProduceEvent> events(n, wire::ProduceEvent{"k", "1", "", std::nullopt});
    std::vector<const wire::ProduceEvent*> ev;
    for (auto& e : events) ev.push_back(&e);
    std::vector<wire::ProduceResult> results(n);
    std::vector<wire::ProduceResult*> res;
    for (auto& r : results) res.push_back(&r);
    EXPECT_TRUE(p.Append(ev, res).ok());
  };
  {
    auto p = broker::Partition::Open(PartitionId(0), o, clock, probe);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    produce(**p, 10);
    ASSERT_TRUE((*p)->Commit("g", Offset(10)).ok());
  }
  // The kernel wrote the commit file back on its own; the log's tail it did not.
  fs.Writeback("/d/p0/commits.log");
  fs.Crash("/d");
  auto p = broker::Partition::Open(PartitionId(0), o, clock, probe);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->end_offset(), 0u);
  EXPECT_EQ((*p)->Committed("g"), Offset(0)) << "the commit stays ahead of the log";
  produce(**p, 3);
  std::string out;
  auto n = (*p)->ReadForGroup("g", 100, 1 << 20, false, &out);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3u) << "the events appended after the power cut were skipped for the group";
}

TEST(StorageFailuresTest, AReadErrorOfOnePartitionKeepsWhatTheOthersHandedOut) {
  MemFileSystem fs;
  ManualClock clock;
  broker::SidecarProbe probe("orders");
  broker::TopicOptions o;
  o.topic = "orders";
  o.partitions = 2;
  o.data_dir = "/d";
  o.fs = &fs;
  o.partition.fsync = broker::FsyncPolicy::kAlways;
  auto t = broker::Topic::Open(o, clock, probe);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::vector<wire::ProduceEvent> events;
  for (int i = 0; events.size() < 20; ++i) {
    std::string key = "k" + std::to_string(i);
    events.push_back({key, "1", "", std::nullopt});
  }
  std::vector<wire::ProduceResult> results;
  ASSERT_TRUE((*t)->Produce(events, &results).ok());
  std::map<uint32_t, uint64_t> stored;
  for (const auto& r : results) ++stored[r.partition];
  ASSERT_EQ(stored.size(), 2u) << "both partitions hold events";

  // Partition 1's segment cannot be read: a consume gets partition 0's events, partition 1's
  // cursor stays where it was.
  fs.FailReads("/partitions/1/");
  std::string out;
  auto n = (*t)->Consume("g", 1000, &out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  auto got = wire::ParseConsumeResponse(out);
  ASSERT_TRUE(got.ok()) << out;
  std::map<uint32_t, uint64_t> seen;
  for (const auto& e : *got) ++seen[e.partition];
  EXPECT_EQ(seen, (std::map<uint32_t, uint64_t>{{0, stored[0]}}));
  wire::CommitRequest c{"g", {{PartitionId(0), Offset(stored[0])}}};
  ASSERT_TRUE((*t)->Commit(c).ok());

  // The disk answers again: partition 1's events come, all of them, once.
  fs.FailReads("");
  out.clear();
  n = (*t)->Consume("g", 1000, &out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  got = wire::ParseConsumeResponse(out);
  ASSERT_TRUE(got.ok()) << out;
  seen.clear();
  for (const auto& e : *got) ++seen[e.partition];
  EXPECT_EQ(seen, (std::map<uint32_t, uint64_t>{{1, stored[1]}}));
  EXPECT_EQ(got->front().offset, 0u);
}

}  // namespace
}  // namespace shoal
