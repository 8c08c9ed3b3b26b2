// Tests of Partition (sidecar/src/broker/partition.{h,cc}): the log plus idempotent-producer
// dedup, group cursors, commits, redelivery and retention, driven by a ManualClock.
#include "broker/partition.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "shoal/common/hash.h"
#include "storage/record.h"
#include "support/manual_clock.h"
#include "support/temp_dir.h"

namespace shoal::broker {
namespace {

namespace fs = std::filesystem;
using shoal::testing::ManualClock;

using ::shoal::testing::TempDir;

struct Ev {
  std::string key;
  std::string value;  // JSON text
  std::string producer;
  std::optional<uint64_t> seq;
};

Ev Keyed(uint64_t i) { return {"user_" + std::to_string(i), std::to_string(i), "", std::nullopt}; }
Ev Seq(const std::string& producer, uint64_t seq) {
  return {"user_" + std::to_string(seq % 7), "\"v" + std::to_string(seq) + "\"", producer, seq};
}

class PartitionTest : public ::testing::TestWithParam<FsyncPolicy> {
 protected:
  PartitionOptions Options() const {
    PartitionOptions o;
    o.dir = dir_.path() + "/p0";
    o.fsync = GetParam();
    o.redelivery_ms = 1000;
    return o;
  }

  std::unique_ptr<Partition> MustOpen(const PartitionOptions& o) {
    auto r = Partition::Open(PartitionId(0), o, clock_, probe_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  std::unique_ptr<Partition> MustOpen() { return MustOpen(Options()); }
  // Keyed(0..199) in segments of a handful of events, with retention down to a byte: only the
  // groups' commits hold segments back.
  std::unique_ptr<Partition> OpenWithSmallSegments() {
    PartitionOptions o = Options();
    o.segment_bytes = 300;
    o.retention_bytes = 1;
    auto p = MustOpen(o);
    if (p == nullptr) return nullptr;
    for (uint64_t i = 0; i < 200; i += 2) Produce(*p, {Keyed(i), Keyed(i + 1)});
    return p;
  }

  // Appends like the data frontend does: Append, then SyncForAck before answering.
  std::vector<wire::ProduceResult> Produce(Partition& p, const std::vector<Ev>& evs) {
    std::vector<wire::ProduceEvent> events;
    for (const auto& e : evs) events.push_back({e.key, e.value, e.producer, e.seq});
    std::vector<const wire::ProduceEvent*> ev_ptrs;
    for (const auto& e : events) ev_ptrs.push_back(&e);
    std::vector<wire::ProduceResult> results(evs.size());
    std::vector<wire::ProduceResult*> res_ptrs;
    for (auto& r : results) res_ptrs.push_back(&r);
    Status st = p.Append(ev_ptrs, res_ptrs);
    EXPECT_TRUE(st.ok()) << st.ToString();
    st = p.SyncForAck();
    EXPECT_TRUE(st.ok()) << st.ToString();
    return results;
  }

  // Keyed(0) .. Keyed(n-1), appended in one batch.
  void ProduceKeyed(Partition& p, uint64_t n) {
    std::vector<Ev> evs;
    for (uint64_t i = 0; i < n; ++i) evs.push_back(Keyed(i));
    Produce(p, evs);
  }

  // The events ReadForGroup hands out, decoded the way a client decodes the consume answer.
  std::vector<wire::ConsumedEvent> Consume(Partition& p, const std::string& group, size_t max,
                                           size_t max_bytes = 1 << 20) {
    std::string out;
    auto n = p.ReadForGroup(group, max, max_bytes, false, &out);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    auto events = wire::ParseConsumeResponse("{\"events\":[" + out + "]}");
    EXPECT_TRUE(events.ok()) << events.status().ToString() << " in " << out;
    if (!n.ok() || !events.ok()) return {};
    EXPECT_EQ(events->size(), *n);
    return std::move(events).value();
  }

  static std::vector<uint64_t> Offsets(const std::vector<wire::ConsumedEvent>& evs) {
    std::vector<uint64_t> out;
    for (const auto& e : evs) out.push_back(e.offset);
    return out;
  }
  static std::vector<uint64_t> Range(uint64_t from, uint64_t to) {
    std::vector<uint64_t> out;
    for (uint64_t i = from; i < to; ++i) out.push_back(i);
    return out;
  }

  double Duplicates() { return probe_.ForPartition(0).duplicates->Value(); }

  TempDir dir_;
  ManualClock clock_;
  SidecarProbe probe_{"orders"};
};

void ExpectResult(const wire::ProduceResult& r, uint64_t offset, bool duplicate) {
  EXPECT_EQ(r.partition, 0u);
  EXPECT_EQ(r.offset, offset);
  EXPECT_EQ(r.duplicate, duplicate);
}

TEST_P(PartitionTest, AppendAssignsDenseOffsets) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  auto r = Produce(*p, {Keyed(0), Keyed(1), Keyed(2)});
  ASSERT_EQ(r.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) ExpectResult(r[i], i, false);
  r = Produce(*p, {Keyed(3)});
  ExpectResult(r[0], 3, false);
  EXPECT_EQ(p->end_offset(), 4u);
  EXPECT_EQ(p->visible_end(), 4u);
  // Events without (producer, seq) are never deduplicated, even when identical.
  r = Produce(*p, {Keyed(3), Keyed(3)});
  ExpectResult(r[0], 4, false);
  ExpectResult(r[1], 5, false);
  const auto got = Consume(*p, "g", 100);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[5].key, "user_3");
  EXPECT_EQ(got[5].value, "3");
  EXPECT_EQ(got[5].partition, 0u);
}

TEST_P(PartitionTest, RetryOfSameProducerSeqIsDuplicateWithOriginalOffset) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  auto r = Produce(*p, {Seq("p1", 1), Seq("p1", 2), Seq("p1", 3), Seq("p2", 1)});
  for (uint64_t i = 0; i < 4; ++i) ExpectResult(r[i], i, false);
  // A whole retry.
  r = Produce(*p, {Seq("p1", 1), Seq("p1", 2), Seq("p1", 3), Seq("p2", 1)});
  for (uint64_t i = 0; i < 4; ++i) ExpectResult(r[i], i, true);
  EXPECT_EQ(p->end_offset(), 4u);
  // Mixed: new, retried, no seq, new, and a repeat inside the call.
  r = Produce(*p, {Seq("p1", 4), Seq("p1", 2), Keyed(9), Seq("p2", 2), Seq("p1", 4), Seq("p3", 4)});
  ExpectResult(r[0], 4, false);
  ExpectResult(r[1], 1, true);
  ExpectResult(r[2], 5, false);
  ExpectResult(r[3], 6, false);
  ExpectResult(r[4], 4, true);  // the duplicate of r[0], in the same call
  ExpectResult(r[5], 7, false);
  EXPECT_EQ(p->end_offset(), 8u);
  EXPECT_EQ(Duplicates(), 6.0);
  // Only the new events are in the log, once each.
  const auto got = Consume(*p, "g", 100);
  ASSERT_EQ(Offsets(got), Range(0, 8));
  EXPECT_EQ(got[4].producer, "p1");
  EXPECT_EQ(got[4].seq, std::optional<uint64_t>(4));
  EXPECT_EQ(got[5].seq, std::nullopt);
}

TEST_P(PartitionTest, DuplicateInsideOneCallOnly) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  auto r = Produce(*p, {Seq("p", 7), Keyed(1), Seq("p", 7), Seq("p", 7), Seq("p", 8)});
  ExpectResult(r[0], 0, false);
  ExpectResult(r[1], 1, false);
  ExpectResult(r[2], 0, true);
  ExpectResult(r[3], 0, true);
  ExpectResult(r[4], 2, false);
  EXPECT_EQ(p->end_offset(), 3u);
}

TEST_P(PartitionTest, DedupSurvivesCleanReopen) {
  {
    auto p = MustOpen();
    ASSERT_NE(p, nullptr);
    for (uint64_t s = 1; s <= 30; ++s) Produce(*p, {Seq("p1", s), Seq("p2", s * 2)});
    ASSERT_TRUE(p->Close().ok());
  }
  EXPECT_TRUE(fs::exists(Options().dir + "/producers.snapshot"));
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->end_offset(), 60u);
  for (uint64_t s = 1; s <= 30; ++s) {
    auto r = Produce(*p, {Seq("p2", s * 2), Seq("p1", s)});
    ExpectResult(r[0], (s - 1) * 2 + 1, true);
    ExpectResult(r[1], (s - 1) * 2, true);
  }
  auto r = Produce(*p, {Seq("p1", 31)});
  ExpectResult(r[0], 60, false);
}

TEST_P(PartitionTest, DedupSurvivesReopenWithoutCleanCloseByReplay) {
  {
    auto p = MustOpen();
    ASSERT_NE(p, nullptr);
    for (uint64_t s = 1; s <= 40; ++s) Produce(*p, {Seq("p1", s), Keyed(s)});
    // No Close: the partition just goes away, as in a crash after the writes.
  }
  std::error_code ec;
  fs::remove(Options().dir + "/producers.snapshot", ec);  // force a replay of the whole log
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->end_offset(), 80u);
  for (uint64_t s = 1; s <= 40; ++s) {
    auto r = Produce(*p, {Seq("p1", s)});
    ExpectResult(r[0], (s - 1) * 2, true);
  }
  EXPECT_EQ(p->end_offset(), 80u);
}

TEST_P(PartitionTest, DedupFromSnapshotPlusReplayOfTheTail) {
  {
    auto p = MustOpen();
    ASSERT_NE(p, nullptr);
    for (uint64_t s = 1; s <= 25; ++s) Produce(*p, {Seq("p1", s)});
    p->Tick(true);  // the first tick writes a producer snapshot covering offsets below 25
    ASSERT_TRUE(fs::exists(Options().dir + "/producers.snapshot"));
    for (uint64_t s = 26; s <= 50; ++s) Produce(*p, {Seq("p1", s)});
    // No Close: the snapshot is stale, the tail past it must be replayed.
  }
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  for (uint64_t s = 1; s <= 50; ++s) {
    auto r = Produce(*p, {Seq("p1", s)});
    ExpectResult(r[0], s - 1, true);
  }
  EXPECT_EQ(p->end_offset(), 50u);
}

TEST_P(PartitionTest, SnapshotAheadOfTheLogForgetsLostRecords) {
  // Under fsync=interval a snapshot can cover records a crash then takes back from the log:
  // retries of those must be appended again, not answered with offsets that no longer exist.
  uint64_t record_size = 0;
  {
    auto p = MustOpen();
    ASSERT_NE(p, nullptr);
    for (uint64_t s = 10; s < 30; ++s) Produce(*p, {Seq("p1", s)});
    ASSERT_TRUE(p->Close().ok());
    const Ev e = Seq("p1", 10);
    record_size = storage::record::EncodedSize({e.key, e.value, e.producer, e.seq, 0});
  }
  const std::string seg = Options().dir + "/00000000000000000000.log";
  ASSERT_EQ(fs::file_size(seg), 20 * record_size);
  fs::resize_file(seg, 15 * record_size);
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->end_offset(), 15u);
  for (uint64_t s = 10; s < 25; ++s) ExpectResult(Produce(*p, {Seq("p1", s)})[0], s - 10, true);
  for (uint64_t s = 25; s < 30; ++s) ExpectResult(Produce(*p, {Seq("p1", s)})[0], s - 10, false);
  EXPECT_EQ(p->end_offset(), 20u);
}

TEST_P(PartitionTest, ReadForGroupHandsEachEventOnce) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 10);
  EXPECT_TRUE(p->HasDataFor("g1"));
  EXPECT_EQ(Offsets(Consume(*p, "g1", 4)), Range(0, 4));
  ASSERT_TRUE(p->Commit("g1", Offset(4)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "g1", 4)), Range(4, 8));
  ASSERT_TRUE(p->Commit("g1", Offset(8)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "g1", 4)), Range(8, 10));
  ASSERT_TRUE(p->Commit("g1", Offset(10)).ok());
  EXPECT_FALSE(p->HasDataFor("g1"));
  EXPECT_TRUE(Consume(*p, "g1", 4).empty());
  // max = 0 hands out nothing and moves nothing.
  EXPECT_TRUE(Consume(*p, "g2", 0).empty());
  // A second group is independent and starts at the oldest event.
  EXPECT_TRUE(p->HasDataFor("g2"));
  const auto g2 = Consume(*p, "g2", 100);
  EXPECT_EQ(Offsets(g2), Range(0, 10));
  EXPECT_EQ(g2[7].key, "user_7");
  EXPECT_EQ(g2[7].value, "7");
  ASSERT_TRUE(p->Commit("g2", Offset(10)).ok());
  // New events go to both groups, once.
  Produce(*p, {Keyed(10), Keyed(11)});
  EXPECT_EQ(Offsets(Consume(*p, "g1", 100)), Range(10, 12));
  EXPECT_EQ(Offsets(Consume(*p, "g2", 1)), Range(10, 11));
  ASSERT_TRUE(p->Commit("g2", Offset(11)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "g2", 100)), Range(11, 12));
  EXPECT_TRUE(Consume(*p, "g1", 100).empty());
  EXPECT_TRUE(Consume(*p, "g2", 100).empty());
}

TEST_P(PartitionTest, ReadForGroupWritesCommaSeparatedObjects) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  Produce(*p, {Keyed(0), Keyed(1)});
  std::string out = "{\"key\":\"x\",\"value\":1,\"partition\":9,\"offset\":0}";
  auto n = p->ReadForGroup("g", 10, 1 << 20, /*comma_first=*/true, &out);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  auto parsed = wire::ParseConsumeResponse("{\"events\":[" + out + "]}");
  ASSERT_TRUE(parsed.ok()) << out;
  ASSERT_EQ(parsed->size(), 3u);
  EXPECT_EQ((*parsed)[2].offset, 1u);
}

TEST_P(PartitionTest, ReadForGroupRespectsMaxBytesButReturnsOne) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 20);
  EXPECT_EQ(Offsets(Consume(*p, "g", 100, 1)), Range(0, 1));
  ASSERT_TRUE(p->Commit("g", Offset(1)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "g", 100, 1)), Range(1, 2));
}

TEST_P(PartitionTest, CommitsMoveCursors) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 20);
  EXPECT_EQ(Offsets(Consume(*p, "g", 4)), Range(0, 4));
  // A commit ahead of the cursor moves it there.
  ASSERT_TRUE(p->Commit("g", Offset(10)).ok());
  EXPECT_EQ(p->Committed("g"), std::optional<Offset>(10));
  EXPECT_EQ(Offsets(Consume(*p, "g", 3)), Range(10, 13));
  // A commit behind the cursor does not rewind it, and a lower commit is a no-op; while part of
  // the batch is uncommitted nothing more goes out.
  ASSERT_TRUE(p->Commit("g", Offset(11)).ok());
  ASSERT_TRUE(p->Commit("g", Offset(5)).ok());
  EXPECT_EQ(p->Committed("g"), std::optional<Offset>(11));
  EXPECT_TRUE(Consume(*p, "g", 3).empty());
  ASSERT_TRUE(p->Commit("g", Offset(13)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "g", 3)), Range(13, 16));
  ASSERT_TRUE(p->Commit("g", Offset(16)).ok());
  // A group that committed before its first read starts at its commit.
  ASSERT_TRUE(p->Commit("h", Offset(17)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "h", 100)), Range(17, 20));
  // Past the end is refused and changes nothing; at the end is fine.
  EXPECT_EQ(p->Commit("g", Offset(21)).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(p->Committed("g"), std::optional<Offset>(16));
  ASSERT_TRUE(p->Commit("g", Offset(20)).ok());
  EXPECT_TRUE(Consume(*p, "g", 100).empty());
  EXPECT_EQ(p->Commits(), (std::map<std::string, Offset>{{"g", Offset(20)}, {"h", Offset(17)}}));
}

TEST_P(PartitionTest, GroupResumesFromCommitsAfterReopen) {
  {
    auto p = MustOpen();
    ASSERT_NE(p, nullptr);
    ProduceKeyed(*p, 10);
    EXPECT_EQ(Offsets(Consume(*p, "g", 8)), Range(0, 8));
    ASSERT_TRUE(p->Commit("g", Offset(6)).ok());
    ASSERT_TRUE(p->Close().ok());
  }
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->Committed("g"), std::optional<Offset>(6));
  // Events handed out but not committed before the restart come again (at-least-once).
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(6, 10));
}

// Commits are cumulative, so a batch handed out and not committed holds back the group's next
// one: otherwise a restarted (or second) consumer would take what follows, commit it, and so
// commit the first batch unseen.
TEST_P(PartitionTest, OneBatchIsOutPerGroupUntilItIsCommitted) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 30);
  // A consumer takes 10 and dies without committing.
  EXPECT_EQ(Offsets(Consume(*p, "g", 10)), Range(0, 10));
  // Its successor asks: nothing of this partition while the batch is out, and no wakeup for it.
  EXPECT_TRUE(Consume(*p, "g", 10).empty());
  EXPECT_FALSE(p->HasDataFor("g"));
  // Another group is not held back.
  EXPECT_EQ(Offsets(Consume(*p, "h", 5)), Range(0, 5));
  // After redelivery_ms the same batch goes out again, first, in order; then the rest.
  clock_.AdvanceMs(Options().redelivery_ms + 1);
  EXPECT_TRUE(p->Tick(false));  // a redelivery wakes parked requests
  EXPECT_TRUE(p->HasDataFor("g"));
  EXPECT_EQ(Offsets(Consume(*p, "g", 10)), Range(0, 10));
  ASSERT_TRUE(p->Commit("g", Offset(10)).ok());
  EXPECT_TRUE(p->HasDataFor("g"));
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(10, 30));
  ASSERT_TRUE(p->Commit("g", Offset(30)).ok());
  EXPECT_EQ(p->Committed("g"), std::optional<Offset>(30));
  EXPECT_FALSE(p->HasDataFor("g"));
}

// A consumer that commits after its batch was handed out again (it was slow, not dead): its
// commit is accepted (it did process the batch), the holder of the redelivered copy then commits
// a position already reached, and the group goes on from there: nothing skipped, nothing handed
// out a third time.
TEST_P(PartitionTest, ACommitAfterTheBatchWasHandedOutAgainLosesNothing) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 30);
  EXPECT_EQ(Offsets(Consume(*p, "g", 10)), Range(0, 10));  // consumer A, then it stalls
  clock_.AdvanceMs(Options().redelivery_ms + 1);
  p->Tick(false);
  EXPECT_EQ(Offsets(Consume(*p, "g", 10)), Range(0, 10));  // consumer B gets A's batch again
  ASSERT_TRUE(p->Commit("g", Offset(10)).ok());                     // A wakes and commits it
  EXPECT_EQ(p->Committed("g"), std::optional<Offset>(10));
  EXPECT_EQ(Offsets(Consume(*p, "g", 10)), Range(10, 20));  // the group goes on
  ASSERT_TRUE(p->Commit("g", Offset(10)).ok());                     // B's commit: reached already
  EXPECT_EQ(p->Committed("g"), std::optional<Offset>(10));
  EXPECT_TRUE(Consume(*p, "g", 10).empty()) << "[10, 20) is out and not committed";
  ASSERT_TRUE(p->Commit("g", Offset(20)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(20, 30));
  // A slow consumer's commit below the group's position changes nothing either.
  ASSERT_TRUE(p->Commit("g", Offset(5)).ok());
  EXPECT_EQ(p->Committed("g"), std::optional<Offset>(20));
}

TEST_P(PartitionTest, UncommittedEventsAreRedeliveredAfterRedeliveryMs) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 10);
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(0, 10));
  ASSERT_TRUE(p->Commit("g", Offset(4)).ok());
  // Not before redelivery_ms without progress.
  clock_.AdvanceMs(Options().redelivery_ms - 1);
  p->Tick(false);
  EXPECT_TRUE(Consume(*p, "g", 100).empty());
  EXPECT_FALSE(p->HasDataFor("g"));
  // After it, the group gets everything from its commit again, once.
  clock_.AdvanceMs(2);
  p->Tick(false);
  EXPECT_TRUE(p->HasDataFor("g"));
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(4, 10));
  EXPECT_TRUE(Consume(*p, "g", 100).empty());
}

TEST_P(PartitionTest, GroupThatKeepsCommittingIsNotRedelivered) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 10);
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(0, 10));
  const int64_t step = Options().redelivery_ms * 6 / 10;
  for (uint64_t c : {2, 4, 6, 8}) {
    clock_.AdvanceMs(step);
    p->Tick(false);
    ASSERT_TRUE(p->Commit("g", Offset(c)).ok());
    p->Tick(false);
    EXPECT_TRUE(Consume(*p, "g", 100).empty()) << "commit " << c;
  }
  // It stops committing at 8: redelivery after redelivery_ms counted from its last commit.
  clock_.AdvanceMs(Options().redelivery_ms - 1);
  p->Tick(false);
  EXPECT_TRUE(Consume(*p, "g", 100).empty());
  clock_.AdvanceMs(2);
  p->Tick(false);
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(8, 10));
}

TEST_P(PartitionTest, CaughtUpGroupIsNeverRedelivered) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  Produce(*p, {Keyed(0), Keyed(1), Keyed(2)});
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(0, 3));
  ASSERT_TRUE(p->Commit("g", Offset(3)).ok());
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceMs(Options().redelivery_ms * 3);
    p->Tick(i % 2 == 0);
    EXPECT_TRUE(Consume(*p, "g", 100).empty());
  }
  // An idle caught-up group that then reads new events gets a fresh redelivery timer.
  Produce(*p, {Keyed(3)});
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(3, 4));
  clock_.AdvanceMs(Options().redelivery_ms - 1);
  p->Tick(false);
  EXPECT_TRUE(Consume(*p, "g", 100).empty());
  clock_.AdvanceMs(2);
  p->Tick(false);
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(3, 4));
}

TEST_P(PartitionTest, GroupWithoutCommitsIsRedeliveredFromTheStart) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  Produce(*p, {Keyed(0), Keyed(1), Keyed(2)});
  EXPECT_EQ(Offsets(Consume(*p, "g", 2)), Range(0, 2));
  clock_.AdvanceMs(Options().redelivery_ms + 1);
  p->Tick(false);
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(0, 3));
}

// Retention holds whatever the groups have committed (as Kafka's does): a group that fell behind
// it goes on from the oldest event kept, so that no group, a made-up one included, pins the disk.
TEST_P(PartitionTest, RetentionHoldsWhateverGroupsCommittedAndAGroupBehindGoesOnFromTheOldest) {
  auto p = OpenWithSmallSegments();
  ASSERT_NE(p, nullptr);
  ASSERT_GT(p->segment_count(), 20u);
  ASSERT_TRUE(p->Commit("slow", Offset(40)).ok());
  ASSERT_TRUE(p->Commit("stranger", Offset(1)).ok());
  ASSERT_TRUE(p->Commit("fast", Offset(150)).ok());
  p->Tick(true);
  const uint64_t start = p->start_offset();
  EXPECT_GT(start, 150u) << "segments below every commit go";
  EXPECT_EQ(p->segment_count(), 1u) << "the active segment always stays";
  EXPECT_EQ(p->end_offset(), 200u);
  EXPECT_EQ(Offsets(Consume(*p, "slow", 1000)), Range(start, 200));
  EXPECT_EQ(Offsets(Consume(*p, "new", 1000)), Range(start, 200))
      << "a group with no commits starts at the oldest retained event";
  // The commits stay as they were; reads stand at the oldest event.
  EXPECT_EQ(p->Committed("stranger"), Offset(1));
  ASSERT_TRUE(p->Commit("slow", Offset(200)).ok());
  EXPECT_FALSE(p->HasDataFor("slow"));
}

// A group gone for good is deleted (group expiry): it leaves the partition's commits.
TEST_P(PartitionTest, ADeletedGroupLeavesThePartitionsCommits) {
  auto p = OpenWithSmallSegments();
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->Commit("gone", Offset(40)).ok());
  ASSERT_TRUE(p->Commit("live", Offset(200)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "gone", 5)), Range(40, 45));  // a cursor too
  // Alive: a batch out, then a commit moments ago.
  EXPECT_EQ(p->CheckGroupIdle("gone").code(), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(p->Commit("gone", Offset(45)).ok());
  clock_.AdvanceMs(Options().redelivery_ms - 1);
  EXPECT_EQ(p->CheckGroupIdle("gone").code(), Status::Code::kFailedPrecondition);
  clock_.AdvanceMs(2);
  EXPECT_TRUE(p->CheckGroupIdle("gone").ok());
  EXPECT_TRUE(p->CheckGroupIdle("never-here").ok());
  auto deleted = p->DeleteGroup("gone");
  ASSERT_TRUE(deleted.ok());
  EXPECT_TRUE(*deleted);
  EXPECT_FALSE(p->Committed("gone").has_value());
  EXPECT_EQ(p->Commits(), (std::map<std::string, Offset>{{"live", Offset(200)}}));
  clock_.AdvanceMs(60'000);
  p->Tick(true);
  EXPECT_GT(p->start_offset(), 150u);
  // Back later: a new group, from the oldest retained event.
  const auto again = Offsets(Consume(*p, "gone", 1000));
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(again.front(), p->start_offset());
  auto unknown = p->DeleteGroup("never-here");
  ASSERT_TRUE(unknown.ok());
  EXPECT_FALSE(*unknown);
}

// A commit below the oldest retained event (a group's first commit after retention passed it,
// or just a low one): the group stands at the oldest event and is handed what follows, one
// batch at a time; it is not held back forever by a "batch out" below what is left.
TEST_P(PartitionTest, ACommitBelowTheOldestEventDoesNotStopTheGroup) {
  auto p = OpenWithSmallSegments();
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->Commit("fast", Offset(150)).ok());
  p->Tick(true);
  const uint64_t start = p->start_offset();
  ASSERT_GT(start, 10u);
  ASSERT_TRUE(p->Commit("late", Offset(5)).ok());
  EXPECT_TRUE(p->HasDataFor("late"));
  const auto first = Offsets(Consume(*p, "late", 20));
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.front(), start);
  EXPECT_FALSE(p->HasDataFor("late")) << "its batch is out";
  // Redelivery returns the batch from where the group stands, not from its low commit.
  clock_.AdvanceMs(Options().redelivery_ms + 1);
  p->Tick(false);
  EXPECT_EQ(Offsets(Consume(*p, "late", 20)), first);
  ASSERT_TRUE(p->Commit("late", Offset(first.back() + 1)).ok());
  EXPECT_EQ(Offsets(Consume(*p, "late", 1000)), Range(first.back() + 1, 200));
  ASSERT_TRUE(p->Commit("late", Offset(200)).ok());
  EXPECT_FALSE(p->HasDataFor("late"));
}

TEST_P(PartitionTest, VisibleEndFollowsTheFsyncPolicy) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  std::vector<wire::ProduceEvent> events = {{"k", "1", "", std::nullopt}, {"k", "2", "", 5}};
  events[1].producer = "p";
  const wire::ProduceEvent* ev_ptrs[] = {&events[0], &events[1]};
  wire::ProduceResult results[2];
  wire::ProduceResult* res_ptrs[] = {&results[0], &results[1]};
  ASSERT_TRUE(p->Append(ev_ptrs, res_ptrs).ok());
  EXPECT_EQ(p->end_offset(), 2u);
  if (GetParam() == FsyncPolicy::kAlways) {
    // Not visible before it could be acknowledged.
    EXPECT_EQ(p->visible_end(), 0u);
    EXPECT_FALSE(p->HasDataFor("g"));
    EXPECT_TRUE(Consume(*p, "g", 100).empty());
    ASSERT_TRUE(p->SyncForAck().ok());
    EXPECT_EQ(p->visible_end(), 2u);
  } else {
    EXPECT_EQ(p->visible_end(), 2u);
    ASSERT_TRUE(p->SyncForAck().ok());
    EXPECT_EQ(p->visible_end(), 2u);
    // The interval tick makes it durable and reports no change of the visible end.
    EXPECT_FALSE(p->Tick(true));
  }
  EXPECT_TRUE(p->HasDataFor("g"));
  EXPECT_EQ(Offsets(Consume(*p, "g", 100)), Range(0, 2));
}

TEST_P(PartitionTest, AFencedLeaderTakesNoAppendUntilItLeadsFromTheFencedEpoch) {
  // A leader that came back while its failover found no quorum of copies is fenced with them:
  // it answers what it holds and takes nothing more at its old leader epoch; chosen again (the
  // most complete), it leads from the new one.
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->StartLeading(Epoch(3)).ok());
  Produce(*p, {Seq("a", 1), Seq("a", 2)});
  auto fenced = p->Fence(5);
  ASSERT_TRUE(fenced.ok()) << fenced.status().ToString();
  EXPECT_EQ(fenced->end, 2u);
  EXPECT_EQ(fenced->last_epoch, Epoch(3));
  wire::ProduceEvent e{"k", "{}", "a", 3};
  const wire::ProduceEvent* ev = &e;
  wire::ProduceResult r;
  wire::ProduceResult* res = &r;
  Status refused = p->Append(std::span<const wire::ProduceEvent* const>(&ev, 1),
                             std::span<wire::ProduceResult* const>(&res, 1));
  EXPECT_EQ(refused.code(), Status::Code::kUnavailable) << refused.ToString();
  EXPECT_NE(refused.message().find("fenced"), std::string::npos) << refused.ToString();
  EXPECT_EQ(p->end_offset(), 2u);
  ASSERT_TRUE(p->StartLeading(Epoch(5)).ok());
  Produce(*p, {Seq("a", 3)});
  EXPECT_EQ(p->end_offset(), 3u);
}

TEST_P(PartitionTest, AFencedCopyTakesNothingMoreFromAnOlderLeaderEvenAfterARestart) {
  // The leader: three records at leader epoch 3.
  PartitionOptions lo = Options();
  lo.dir = dir_.path() + "/leader";
  auto leader = MustOpen(lo);
  ASSERT_NE(leader, nullptr);
  ASSERT_TRUE(leader->StartLeading(Epoch(3)).ok());
  Produce(*leader, {Seq("a", 1), Seq("a", 2), Seq("a", 3)});
  std::string rest;
  // The copy holds the first record; then the coordinator fences it for leader epoch 4.
  auto copy = MustOpen();
  ASSERT_NE(copy, nullptr);
  copy->SetFollower(true);
  std::string one;
  ASSERT_TRUE(leader->ReadCopy(0, 1, &one).ok());  // at least one record, as stored
  auto held = copy->AppendCopied(0, one, 0, 3);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_TRUE(copy->TakeLeaderEpochs(leader->epochs()).ok());
  const uint64_t end = copy->end_offset();
  ASSERT_GE(end, 1u);
  auto fenced = copy->Fence(4);
  ASSERT_TRUE(fenced.ok()) << fenced.status().ToString();
  EXPECT_EQ(fenced->end, end);
  EXPECT_EQ(fenced->last_epoch, Epoch(3));
  EXPECT_EQ(copy->fenced(), 4u);
  // The old leader's next records are refused, and the end the copy answered stays its end.
  ASSERT_TRUE(leader->ReadCopy(end, 1 << 20, &rest).ok());
  auto late = copy->AppendCopied(end, rest, 0, 3);
  EXPECT_EQ(late.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(copy->end_offset(), end);
  // A lower fence changes nothing; the fence survives a restart.
  ASSERT_TRUE(copy->Fence(2).ok());
  EXPECT_EQ(copy->fenced(), 4u);
  ASSERT_TRUE(copy->Close().ok());
  copy.reset();
  copy = MustOpen();
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->fenced(), 4u);
  EXPECT_EQ(copy->AppendCopied(end, rest, 0, 3).status().code(),
            Status::Code::kFailedPrecondition);
  // The leader of epoch 4 (the old one's log continued) is followed again.
  held = copy->AppendCopied(end, rest, 0, 4);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(copy->end_offset(), 3u);
}

TEST_P(PartitionTest, AFenceAnsweredForAPartitionNotHeldYetBindsTheCopyMadeLater) {
  // The coordinator fenced this pod for a partition of a change whose map never reached it: the
  // fence is written where the partition's directory will be, and the copy made there later
  // takes nothing from a leader of an older leader epoch.
  storage::FileSystem& fs = storage::PosixFileSystem();
  const std::string dir = Options().dir;
  EXPECT_EQ(Partition::FenceIn(fs, dir), 0u);
  ASSERT_TRUE(Partition::FenceAbsent(fs, dir, 5).ok());
  ASSERT_TRUE(Partition::FenceAbsent(fs, dir, 3).ok());  // never lowered
  EXPECT_EQ(Partition::FenceIn(fs, dir), 5u);
  PartitionOptions lo = Options();
  lo.dir = dir_.path() + "/leader";
  auto leader = MustOpen(lo);
  ASSERT_NE(leader, nullptr);
  ASSERT_TRUE(leader->StartLeading(Epoch(4)).ok());
  Produce(*leader, {Seq("a", 1)});
  std::string one;
  ASSERT_TRUE(leader->ReadCopy(0, 1, &one).ok());
  auto copy = MustOpen();
  ASSERT_NE(copy, nullptr);
  copy->SetFollower(true);
  EXPECT_EQ(copy->fenced(), 5u);
  EXPECT_EQ(copy->AppendCopied(0, one, 0, 4).status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(copy->end_offset(), 0u);
  EXPECT_TRUE(copy->AppendCopied(0, one, 0, 5).ok());
}

TEST_P(PartitionTest, ASealIsCarriedOnForTheSameSuccessorsWhateverTheirLeaders) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  const SuccessorRef s2{PartitionId(2), PodName("a"), HashRange{0, 100}};
  const SuccessorRef s3{PartitionId(3), PodName("b"), HashRange{100, 200}};
  ASSERT_TRUE(p->Seal(SealIntent{Epoch(2), "d2", {s2, s3}, std::nullopt}, Epoch(1)).ok());
  ASSERT_TRUE(p->ConfirmSuccessor(s2).ok());
  // A failover into the change gave p3 to its copy on c, at epoch 4: the same change.
  SuccessorRef moved = s3;
  moved.owner = PodName("c");
  EXPECT_TRUE(p->Seal(SealIntent{Epoch(4), "d4", {s2, moved}, std::nullopt}, Epoch(1)).ok());
  EXPECT_TRUE(p->ConfirmSuccessor(moved).ok());
  // Other successor partitions are another change: refused, a successor took over.
  const SuccessorRef other{PartitionId(4), PodName("a"), HashRange{0, 200}};
  EXPECT_EQ(p->Seal(SealIntent{Epoch(5), "d5", {other}, std::nullopt}, Epoch(1)).status().code(),
            Status::Code::kConflict);
}

TEST(PartitionAlwaysTest, TickDoesNotExposeUnsyncedEvents) {
  TempDir dir;
  ManualClock clock;
  SidecarProbe probe("orders");
  PartitionOptions o;
  o.dir = dir.path() + "/p0";
  o.fsync = FsyncPolicy::kAlways;
  auto p = Partition::Open(PartitionId(3), o, clock, probe);
  ASSERT_TRUE(p.ok());
  wire::ProduceEvent ev{"k", "1", "", std::nullopt};
  const wire::ProduceEvent* ev_ptrs[] = {&ev};
  wire::ProduceResult result;
  wire::ProduceResult* res_ptrs[] = {&result};
  ASSERT_TRUE((*p)->Append(ev_ptrs, res_ptrs).ok());
  EXPECT_EQ(result.partition, 3u);
  EXPECT_FALSE((*p)->Tick(true));  // under always the interval sync is not the acknowledgement
  EXPECT_EQ((*p)->visible_end(), 0u);
  ASSERT_TRUE((*p)->SyncForAck().ok());
  EXPECT_EQ((*p)->visible_end(), 1u);
}

// ---------------------------------------------------------------------------------------------
// The load sketch: buckets per sixteenth of the range and the heaviest hash points.

class LoadSketchTest : public ::testing::Test {
 protected:
  std::unique_ptr<Partition> Open(HashRange range) {
    PartitionOptions o;
    o.dir = dir_.path() + "/p" + std::to_string(opened_++);
    o.fsync = FsyncPolicy::kNever;
    o.range = range;
    auto r = Partition::Open(PartitionId(opened_), o, clock_, probe_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  // Appends `keys` (with their hashes as the router gives them), one event each.
  static Status Append(Partition& p, const std::vector<std::string>& keys,
                       const std::vector<uint32_t>& hashes, const std::string& producer = "",
                       uint64_t first_seq = 0) {
    std::vector<wire::ProduceEvent> events;
    for (size_t i = 0; i < keys.size(); ++i) {
      events.push_back({keys[i], "1", producer,
                        producer.empty() ? std::nullopt : std::optional<uint64_t>(first_seq + i)});
    }
    std::vector<const wire::ProduceEvent*> ev_ptrs;
    for (const auto& e : events) ev_ptrs.push_back(&e);
    std::vector<wire::ProduceResult> results(events.size());
    std::vector<wire::ProduceResult*> res_ptrs;
    for (auto& r : results) res_ptrs.push_back(&r);
    return p.Append(ev_ptrs, hashes, res_ptrs);
  }

  TempDir dir_;
  ManualClock clock_;
  SidecarProbe probe_{"orders"};
  int opened_ = 0;
};

TEST_F(LoadSketchTest, BucketsAndTopHashesOfAHotKeyMix) {
  // A range whose width is not a power of two, so the bucket bounds are not bit boundaries.
  const HashRange range{1'000'000'000, 4'000'000'000};
  auto p = Open(range);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->Load().buckets, (std::array<uint64_t, 16>{}));
  EXPECT_TRUE(p->Load().top.empty());
  // Keys the router sends to this range: one hot key with 80% of the events, 200 cold ones.
  std::vector<std::string> cold;
  std::string hot;
  for (uint64_t i = 0; cold.size() < 200; ++i) {
    std::string k = "user_" + std::to_string(i);
    if (!range.Contains(KeyHash(k))) continue;
    if (hot.empty()) {
      hot = k;
    } else {
      cold.push_back(k);
    }
  }
  std::vector<std::string> keys;
  for (size_t i = 0; i < 1000; ++i) keys.push_back(i % 5 == 4 ? cold[i / 5] : hot);
  std::vector<uint32_t> hashes;
  std::array<uint64_t, 16> want{};
  for (const auto& k : keys) {
    hashes.push_back(KeyHash(k));
    ++want[(uint64_t{hashes.back()} - range.lo) * 16 / (range.hi - range.lo)];
  }
  // In batches of 100; every tenth batch through the overload that hashes the keys itself.
  for (size_t b = 0; b < 10; ++b) {
    std::vector<std::string> bk(keys.begin() + b * 100, keys.begin() + (b + 1) * 100);
    std::vector<uint32_t> bh(hashes.begin() + b * 100, hashes.begin() + (b + 1) * 100);
    if (b == 9) {
      std::vector<wire::ProduceEvent> events;
      for (const auto& k : bk) events.push_back({k, "1", "", std::nullopt});
      std::vector<const wire::ProduceEvent*> ev_ptrs;
      for (const auto& e : events) ev_ptrs.push_back(&e);
      std::vector<wire::ProduceResult> results(events.size());
      std::vector<wire::ProduceResult*> res_ptrs;
      for (auto& r : results) res_ptrs.push_back(&r);
      ASSERT_TRUE(p->Append(ev_ptrs, res_ptrs).ok());
    } else {
      ASSERT_TRUE(Append(*p, bk, bh).ok());
    }
  }
  EXPECT_EQ(p->appended(), 1000u);
  LoadSketch load = p->Load();
  EXPECT_EQ(load.buckets, want) << "the buckets are exact counts";
  ASSERT_EQ(load.top.size(), LoadSketch::kTopHashes);
  EXPECT_EQ(load.top[0].hash, KeyHash(hot));
  EXPECT_GE(load.top[0].count, 800u) << "a space-saving count is an upper bound";
  EXPECT_LE(load.top[0].count, 1000u);
  for (size_t k = 1; k < load.top.size(); ++k) {
    EXPECT_LE(load.top[k].count, load.top[k - 1].count) << "heaviest first";
    EXPECT_NE(load.top[k].hash, load.top[0].hash);
  }
  // Duplicates (a retried batch) and appends refused by a seal count nothing.
  std::vector<std::string> seq_keys(cold.begin(), cold.begin() + 10);
  std::vector<uint32_t> seq_hashes;
  for (const auto& k : seq_keys) seq_hashes.push_back(KeyHash(k));
  ASSERT_TRUE(Append(*p, seq_keys, seq_hashes, "prod", 1).ok());
  for (const auto h : seq_hashes) ++want[(uint64_t{h} - range.lo) * 16 / (range.hi - range.lo)];
  const LoadSketch before_retry = p->Load();
  EXPECT_EQ(before_retry.buckets, want);
  ASSERT_TRUE(Append(*p, seq_keys, seq_hashes, "prod", 1).ok());
  EXPECT_EQ(p->Load().buckets, want) << "a duplicate is not an append";
  EXPECT_EQ(p->Load().top, before_retry.top);
  EXPECT_EQ(p->appended(), 1010u);
  ASSERT_TRUE(p->Seal().ok());
  EXPECT_FALSE(Append(*p, {hot}, {KeyHash(hot)}).ok());
  EXPECT_EQ(p->Load().buckets, want);
  EXPECT_EQ(p->appended(), 1010u);
}

TEST_F(LoadSketchTest, TheLastRangeEndsAtTwoToThe32) {
  const HashRange range{uint64_t{3} << 30, kHashSpace};
  auto p = Open(range);
  ASSERT_NE(p, nullptr);
  // Hash points as the router hands them in: the range's first point, 2^32 - 1 twice, and the
  // first point of each sixteenth.
  const uint64_t step = range.Width() / 16;
  std::vector<uint32_t> hashes = {static_cast<uint32_t>(range.lo), UINT32_MAX, UINT32_MAX};
  for (uint64_t b = 0; b < 16; ++b) hashes.push_back(static_cast<uint32_t>(range.lo + b * step));
  std::vector<std::string> keys(hashes.size(), "k");
  ASSERT_TRUE(Append(*p, keys, hashes).ok());
  std::array<uint64_t, 16> want{};
  want.fill(1);
  want[0] = 2;
  want[15] = 3;
  const LoadSketch load = p->Load();
  EXPECT_EQ(load.buckets, want);
  EXPECT_EQ(load.top.size(), LoadSketch::kTopHashes);
}

TEST(PartitionSeedTest, ProducersDurableOnceTheSnapshotAfterTheSeedingIsWritten) {
  TempDir dir;
  ManualClock clock;
  SidecarProbe probe("orders");
  PartitionOptions o;
  o.dir = dir.path() + "/parent";
  o.fsync = FsyncPolicy::kInterval;
  auto parent = Partition::Open(PartitionId(0), o, clock, probe);
  ASSERT_TRUE(parent.ok());
  wire::ProduceEvent ev{"k", "1", "prod", 7};
  const wire::ProduceEvent* ev_ptrs[] = {&ev};
  wire::ProduceResult result;
  wire::ProduceResult* res_ptrs[] = {&result};
  ASSERT_TRUE((*parent)->Append(ev_ptrs, res_ptrs).ok());
  ASSERT_TRUE((*parent)->Seal().ok());

  o.dir = dir.path() + "/child";
  {
    auto child = Partition::Open(PartitionId(1), o, clock, probe);
    ASSERT_TRUE(child.ok());
    EXPECT_FALSE((*child)->producers_durable());
    ASSERT_TRUE((*child)->InheritProducers((*parent)->ExportProducers()).ok());
    ASSERT_TRUE((*child)->MarkSeeded().ok());
    EXPECT_TRUE((*child)->seeded());
    EXPECT_FALSE((*child)->producers_durable()) << "seeded, but the snapshot is not written yet";
    EXPECT_FALSE(fs::exists(o.dir + "/producers.snapshot"));
    (*child)->Tick(false);  // the seeding asked for a snapshot at the next tick
    EXPECT_TRUE(fs::exists(o.dir + "/producers.snapshot"));
    EXPECT_TRUE((*child)->producers_durable());
  }
  // After a restart the loaded snapshot holds the inherited state: durable, and dedup works.
  auto child = Partition::Open(PartitionId(1), o, clock, probe);
  ASSERT_TRUE(child.ok());
  EXPECT_TRUE((*child)->seeded());
  EXPECT_TRUE((*child)->producers_durable());
  ASSERT_TRUE((*child)->Append(ev_ptrs, res_ptrs).ok());
  EXPECT_TRUE(result.duplicate);
  EXPECT_EQ(result.partition, 0u);
}

// --- reads through hash ranges (invariant 3 per hash point) ---------------------------------

// The two halves of the hash space, and which of Keyed(0..n-1) fall in each.
constexpr HashRange kLow{0, uint64_t{1} << 31};
constexpr HashRange kHigh{uint64_t{1} << 31, kHashSpace};
std::vector<uint64_t> KeyedOffsetsIn(const HashRange& r, uint64_t n) {
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < n; ++i) {
    if (r.Contains(KeyHash(Keyed(i).key))) out.push_back(i);
  }
  return out;
}

class RangeReadTest : public PartitionTest {
 protected:
  // Reads `ranges` for `reader`, decoded as a client would decode them.
  std::vector<wire::ConsumedEvent> Read(Partition& p, const std::string& group,
                                        const std::string& reader,
                                        const std::vector<HashRange>& ranges, size_t max,
                                        RangeBatch* batch = nullptr) {
    std::string out;
    auto b = p.ReadRanges(group, reader, ranges, max, 1 << 20, false, &out);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return {};
    if (batch) *batch = *b;
    auto events = wire::ParseConsumeResponse("{\"events\":[" + out + "]}");
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    EXPECT_EQ(events->size(), b->count);
    return events.ok() ? std::move(events).value() : std::vector<wire::ConsumedEvent>{};
  }
  // A sealed partition of Keyed(0..39).
  std::unique_ptr<Partition> Sealed40(PartitionOptions o) {
    auto p = MustOpen(o);
    if (!p) return nullptr;
    ProduceKeyed(*p, 40);
    auto end = p->Seal();
    EXPECT_TRUE(end.ok());
    return p;
  }
};

TEST_P(RangeReadTest, EachReaderGetsItsRangeInOffsetOrderAndCommitsOnlyIt) {
  auto p = Sealed40(Options());
  ASSERT_NE(p, nullptr);
  const auto low = KeyedOffsetsIn(kLow, 40), high = KeyedOffsetsIn(kHigh, 40);
  ASSERT_GT(low.size(), 5u);
  ASSERT_GT(high.size(), 5u);
  // Two readers at once, each its half: disjoint events, in offset order.
  RangeBatch a, b;
  auto got_a = Read(*p, "g", "pod-a", {kLow}, 1000, &a);
  auto got_b = Read(*p, "g", "pod-b", {kHigh}, 1000, &b);
  EXPECT_EQ(Offsets(got_a), low);
  EXPECT_EQ(Offsets(got_b), high);
  EXPECT_EQ(a.last, low.back() + 1);
  EXPECT_EQ(a.scanned_to, 40u);
  // One batch out per reader: nothing more for pod-a until it commits.
  EXPECT_TRUE(Read(*p, "g", "pod-a", {kLow}, 1000).empty());
  // pod-a's commit of its whole batch consumes its half through the scan's end, not pod-b's.
  ASSERT_TRUE(p->CommitBy("g", "pod-a", Offset(a.last)).ok());
  EXPECT_EQ(p->StandingOver("g", kLow), 40u);
  EXPECT_EQ(p->StandingOver("g", kHigh), 0u);
  EXPECT_EQ(p->StandingOf("g"), 0u) << "the partition is consumed only where every range is";
  EXPECT_EQ(p->LagOf("g"), 20u) << "half the range unconsumed weighs half the events";
  ASSERT_TRUE(p->CommitBy("g", "pod-b", Offset(b.last)).ok());
  EXPECT_EQ(p->StandingOf("g"), 40u);
  EXPECT_EQ(p->LagOf("g"), 0u);
  RangeBatch again;
  EXPECT_TRUE(Read(*p, "g", "pod-a", {kLow}, 1000, &again).empty());
  EXPECT_TRUE(again.consumed);
}

TEST_P(RangeReadTest, APartialCommitKeepsTheBatchOutAndRaisesOnlyToItsOffset) {
  auto p = Sealed40(Options());
  ASSERT_NE(p, nullptr);
  const auto low = KeyedOffsetsIn(kLow, 40);
  auto got = Read(*p, "g", "pod-a", {kLow}, 3);
  ASSERT_EQ(Offsets(got), std::vector<uint64_t>(low.begin(), low.begin() + 3));
  ASSERT_TRUE(p->CommitBy("g", "pod-a", Offset(low[1] + 1)).ok());
  EXPECT_EQ(p->StandingOver("g", kLow), low[1] + 1);
  EXPECT_TRUE(Read(*p, "g", "pod-a", {kLow}, 3).empty()) << "the batch is still out";
  ASSERT_TRUE(p->CommitBy("g", "pod-a", Offset(low[2] + 1)).ok());
  auto next = Read(*p, "g", "pod-a", {kLow}, 3);
  EXPECT_EQ(Offsets(next), std::vector<uint64_t>(low.begin() + 3, low.begin() + 6));
}

TEST_P(RangeReadTest, ARangeHeldByAnotherReadersBatchIsLeftOutUntilItIsCommittedOrExpires) {
  auto p = Sealed40(Options());
  ASSERT_NE(p, nullptr);
  RangeBatch a;
  auto got_a = Read(*p, "g", "pod-a", {kLow}, 2, &a);
  ASSERT_EQ(got_a.size(), 2u);
  // pod-b asks for the whole range (its successor now covers both halves): only the high half.
  RangeBatch b;
  auto got_b = Read(*p, "g", "pod-b", {{0, kHashSpace}}, 1000, &b);
  EXPECT_EQ(Offsets(got_b), KeyedOffsetsIn(kHigh, 40));
  EXPECT_EQ(b.ranges, std::vector<HashRange>{kHigh});
  ASSERT_TRUE(p->CommitBy("g", "pod-b", Offset(b.last)).ok());
  // pod-a's batch is never committed: after redelivery_ms its range is free again.
  EXPECT_TRUE(Read(*p, "g", "pod-b", {{0, kHashSpace}}, 1000).empty());
  clock_.AdvanceMs(1001);
  p->Tick(false);
  auto redelivered = Read(*p, "g", "pod-b", {{0, kHashSpace}}, 1000);
  ASSERT_FALSE(redelivered.empty());
  EXPECT_EQ(redelivered.front().offset, got_a.front().offset)
      << "pod-a's uncommitted batch comes again, first";
}

TEST_P(RangeReadTest, AScanThatFindsNothingConsumesTheRange) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 40);
  ASSERT_TRUE(p->Seal().ok());
  // A range no key of the partition falls in.
  HashRange empty{0, 1};
  for (uint64_t i = 0; i < 40; ++i) ASSERT_FALSE(empty.Contains(KeyHash(Keyed(i).key)));
  RangeBatch b;
  EXPECT_TRUE(Read(*p, "g", "pod-a", {empty}, 10, &b).empty());
  EXPECT_EQ(b.scanned_to, 40u);
  EXPECT_TRUE(b.consumed);
  EXPECT_EQ(p->StandingOver("g", empty), 40u);
}

TEST_P(RangeReadTest, ALeaseSurvivesARestartSoALateCommitStillMeansItsRanges) {
  PartitionOptions o = Options();
  o.pod = "pod-a";
  RangeBatch a;
  {
    auto p = Sealed40(o);
    ASSERT_NE(p, nullptr);
    ASSERT_FALSE(Read(*p, "g", "pod-b", {kLow}, 1000, &a).empty());
    ASSERT_TRUE(p->Close().ok());
  }
  auto p = MustOpen(o);
  ASSERT_NE(p, nullptr);
  // Another reader still waits for pod-b's batch (restored with the restart)...
  EXPECT_TRUE(Read(*p, "g", "pod-c", {kLow}, 1000).empty());
  // ...and pod-b's consumers' commit after the restart consumes exactly that range.
  ASSERT_TRUE(p->CommitBy("g", "pod-b", Offset(a.last), /*require_lease=*/true).ok());
  EXPECT_EQ(p->StandingOver("g", kLow), 40u);
  EXPECT_EQ(p->StandingOver("g", kHigh), 0u);
}

TEST_P(RangeReadTest, APeersCommitWithoutABatchIsRefusedAndALocalOneIsTheWholePartition) {
  auto p = Sealed40(Options());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->CommitBy("g", "pod-z", Offset(10), /*require_lease=*/true).code(),
            Status::Code::kNotFound);
  EXPECT_EQ(p->StandingOf("g"), 0u);
  ASSERT_TRUE(p->CommitBy("g", "pod-z", Offset(10)).ok());
  EXPECT_EQ(p->StandingOf("g"), 10u);
}

TEST_P(RangeReadTest, AWholeBatchOutHoldsBackRangeReadsAndIsRecordedAtTheSeal) {
  PartitionOptions o = Options();
  o.pod = "pod-a";
  auto p = MustOpen(o);
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 40);
  ASSERT_EQ(Consume(*p, "g", 10).size(), 10u);  // a whole batch, read while active
  ASSERT_TRUE(p->Seal(SealIntent{Epoch(2), "d", {}, std::nullopt}, Epoch(1)).ok());
  ASSERT_TRUE(p->RecordWholeBatches().ok());
  EXPECT_TRUE(Read(*p, "g", "pod-b", {kHigh}, 1000).empty()) << "the whole batch covers it";
  ASSERT_TRUE(p->CommitBy("g", "pod-a", Offset(10)).ok());
  EXPECT_EQ(p->StandingOf("g"), 10u);
  auto b = Read(*p, "g", "pod-b", {kHigh}, 1000);
  ASSERT_FALSE(b.empty());
  EXPECT_GE(b.front().offset, 10u);
}

TEST_P(RangeReadTest, WholeReadsSkipWhatRangesConsumedFurther) {
  auto p = MustOpen();
  ASSERT_NE(p, nullptr);
  ProduceKeyed(*p, 40);
  RangeBatch a;
  ASSERT_FALSE(Read(*p, "g", "pod-a", {kLow}, 1000, &a).empty());
  ASSERT_TRUE(p->CommitBy("g", "pod-a", Offset(a.last)).ok());
  auto whole = Consume(*p, "g", 1000);
  EXPECT_EQ(Offsets(whole), KeyedOffsetsIn(kHigh, 40));
}

INSTANTIATE_TEST_SUITE_P(Policies, RangeReadTest,
                         ::testing::Values(FsyncPolicy::kAlways, FsyncPolicy::kInterval),
                         [](const ::testing::TestParamInfo<FsyncPolicy>& info) {
                           return info.param == FsyncPolicy::kAlways ? std::string("Always")
                                                                     : std::string("Interval");
                         });

TEST(ParseFsyncPolicyTest, NamesAndErrors) {
  EXPECT_EQ(*ParseFsyncPolicy("always"), FsyncPolicy::kAlways);
  EXPECT_EQ(*ParseFsyncPolicy("interval"), FsyncPolicy::kInterval);
  EXPECT_EQ(*ParseFsyncPolicy("never"), FsyncPolicy::kNever);
  EXPECT_EQ(ParseFsyncPolicy("sometimes").status().code(), Status::Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Policies, PartitionTest,
                         ::testing::Values(FsyncPolicy::kAlways, FsyncPolicy::kInterval),
                         [](const ::testing::TestParamInfo<FsyncPolicy>& info) {
                           return info.param == FsyncPolicy::kAlways ? std::string("Always")
                                                                     : std::string("Interval");
                         });

}  // namespace
}  // namespace shoal::broker
