// Tests of ProducerTable (sidecar/src/storage/producer_table.{h,cc}): the idempotent-producer
// windows, the per-partition marks that decide what the windows forgot, and the snapshot.
#include "storage/producer_table.h"

#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>

namespace shoal::storage {

// Readable failure messages (found by ADL, so outside the unnamed namespace).
void PrintTo(const ProducerTable::Location& at, std::ostream* os) {
  *os << "{partition " << at.partition << ", offset " << at.offset << "}";
}

namespace {

using Location = ProducerTable::Location;
using Verdict = ProducerTable::Verdict;
constexpr size_t kWindow = ProducerTable::kWindow;
// The partition the table belongs to (the whole hash space); parents in the Inherit tests are
// 3 (the lower half) and 4 (the upper half).
constexpr uint32_t kSelf = 7;
constexpr uint64_t kHalf = uint64_t{1} << 31;
constexpr uint32_t kLow = 5;                          // a hash point in partition 3's range
constexpr uint32_t kHigh = static_cast<uint32_t>(kHalf) + 5;  // one in partition 4's

Location At(uint64_t offset, uint32_t partition = kSelf) { return {partition, offset}; }
ProducerTable Own() { return ProducerTable(kSelf, HashRange{}); }
ProducerTable Lower() { return ProducerTable(3, HashRange{0, kHalf}); }
ProducerTable Upper() { return ProducerTable(4, HashRange{kHalf, kHashSpace}); }

// The location of a duplicate, nullopt for anything else.
std::optional<Location> Dup(const ProducerTable& t, const std::string& p, uint64_t seq,
                            uint32_t hash = kLow) {
  auto r = t.Find(p, seq, hash);
  if (r.verdict != Verdict::kDuplicate) return std::nullopt;
  return r.at;
}
Verdict V(const ProducerTable& t, const std::string& p, uint64_t seq, uint32_t hash = kLow) {
  return t.Find(p, seq, hash).verdict;
}

TEST(ProducerTableTest, UnknownProducerOrSeqIsNew) {
  ProducerTable t = Own();
  EXPECT_EQ(V(t, "p1", 0), Verdict::kNew);
  t.Record("p1", 5, At(100), 1);
  EXPECT_EQ(V(t, "p2", 5), Verdict::kNew) << "producers are independent";
  EXPECT_EQ(V(t, "p1", 6), Verdict::kNew);
  EXPECT_EQ(V(t, "p1", 1000), Verdict::kNew);
  EXPECT_EQ(t.producer_count(), 1u);
}

TEST(ProducerTableTest, DuplicateAnswersOriginalOffset) {
  ProducerTable t = Own();
  t.Record("p1", 5, At(100), 1);
  t.Record("p1", 6, At(101), 1);
  t.Record("p1", 9, At(130), 1);  // sparse: 7 and 8 went to other partitions
  EXPECT_EQ(Dup(t, "p1", 5), At(100));
  EXPECT_EQ(Dup(t, "p1", 6), At(101));
  EXPECT_EQ(Dup(t, "p1", 9), At(130));
  // Recording a seq again keeps the original offset.
  t.Record("p1", 6, At(999), 2);
  EXPECT_EQ(Dup(t, "p1", 6), At(101));
}

TEST(ProducerTableTest, OutOfOrderInsideWindowIsNewThenDuplicate) {
  ProducerTable t = Own();
  t.Record("p", 10, At(0), 1);
  t.Record("p", 12, At(1), 1);
  // 11 arrives late (pipelining client): inside the window, not seen, so new.
  EXPECT_EQ(V(t, "p", 11), Verdict::kNew);
  // Below the oldest seq of a window that never lost anything: new as well.
  EXPECT_EQ(V(t, "p", 3), Verdict::kNew);
  t.Record("p", 11, At(2), 1);
  EXPECT_EQ(Dup(t, "p", 11), At(2));
  EXPECT_EQ(Dup(t, "p", 10), At(0));
  EXPECT_EQ(Dup(t, "p", 12), At(1));
  EXPECT_EQ(V(t, "p", 13), Verdict::kNew);
}

TEST(ProducerTableTest, AFullWindowThatLostNothingCallsOlderSeqsNew) {
  // Exactly kWindow seqs, none pushed out: a seq below all of them was never stored here. (The
  // table used to call it a duplicate, "acknowledged long ago", without it being stored.)
  ProducerTable t = Own();
  for (uint64_t i = 0; i < kWindow; ++i) t.Record("p", 1000 + i, At(i), 1);
  EXPECT_EQ(V(t, "p", 999), Verdict::kNew);
  EXPECT_EQ(V(t, "p", 0), Verdict::kNew);
  EXPECT_EQ(Dup(t, "p", 1000), At(0));
}

TEST(ProducerTableTest, OlderThanWhatTheWindowLostIsUnknownNeverDuplicate) {
  ProducerTable t = Own();
  // seqs 0, 2, 4, ...: a full window plus 10 more, so 0..18 fell out of it (mark 18).
  for (uint64_t i = 0; i < kWindow + 10; ++i) t.Record("p", 2 * i, At(1000 + i), 1);
  // Still inside the window: exact answers, and gaps inside it are new.
  EXPECT_EQ(Dup(t, "p", 20), At(1010));
  EXPECT_EQ(Dup(t, "p", 2 * (kWindow + 9)), At(1000 + kWindow + 9));
  EXPECT_EQ(V(t, "p", 21), Verdict::kNew);
  EXPECT_EQ(V(t, "p", 19), Verdict::kNew) << "above the mark: never stored";
  // At or below the mark: it may have been stored, and where is not known: unknown, so that it
  // is neither appended twice nor claimed stored.
  for (uint64_t s : {uint64_t{18}, uint64_t{17}, uint64_t{0}}) {
    EXPECT_EQ(V(t, "p", s), Verdict::kUnknown) << s;
  }
  EXPECT_EQ(V(t, "p", 2 * (kWindow + 10)), Verdict::kNew);
}

TEST(ProducerTableTest, WindowKeepsTheNewestSeqsWhenOutOfOrder) {
  ProducerTable t = Own();
  for (uint64_t i = 1; i <= kWindow; ++i) t.Record("p", i * 10, At(i), 1);
  // A late seq inside the full window enters it and pushes the oldest out.
  t.Record("p", 15, At(777), 1);
  EXPECT_EQ(Dup(t, "p", 15), At(777));
  EXPECT_EQ(Dup(t, "p", 20), At(2));
  EXPECT_EQ(V(t, "p", 10), Verdict::kUnknown) << "pushed out: no longer decidable";
  EXPECT_EQ(V(t, "p", 11), Verdict::kNew) << "above the mark (10)";
}

TEST(ProducerTableTest, AMergedWindowJudgesEachRangeByItsOwnMarks) {
  // Issue 13, scenario 3 in miniature. Parent 3 (the lower half) took producer p's even seqs
  // 0..598 and pushed out 0..86; parent 4 (the upper half) was sealed before any of the odd
  // seqs 1..599 reached it. The merged successor inherits both.
  ProducerTable lower = Lower();
  for (uint64_t s = 0; s < 600; s += 2) lower.Record("p", s, At(s / 2, 3), 10);
  ProducerTable upper = Upper();
  ProducerTable merged(9, HashRange{});
  merged.Inherit(lower);
  merged.Inherit(upper);
  for (uint64_t s = 1; s < 600; s += 2) {
    EXPECT_EQ(V(merged, "p", s, kHigh), Verdict::kNew)
        << "odd seq " << s << " went to the upper half, which never had it";
  }
  for (uint64_t s = 88; s < 600; s += 2) {
    EXPECT_EQ(Dup(merged, "p", s, kLow), At(s / 2, 3)) << "even seq " << s;
  }
  for (uint64_t s = 0; s <= 86; s += 2) {
    EXPECT_EQ(V(merged, "p", s, kLow), Verdict::kUnknown) << "even seq " << s;
  }
}

TEST(ProducerTableTest, SerializeDeserializeRoundTrip) {
  ProducerTable t = Own();
  for (int p = 0; p < 20; ++p) {
    const std::string name = "producer-" + std::to_string(p);
    for (uint64_t s = 0; s < static_cast<uint64_t>(p) * 20; ++s) {
      t.Record(name, s * 3, At(static_cast<uint64_t>(p) * 100000 + s), 1000 + p);
    }
  }
  ProducerTable parent = Lower();
  for (uint64_t s = 0; s < kWindow + 40; ++s) parent.Record("inherited", s, At(s, 3), 900);
  t.Inherit(parent);
  t.Record("", 7, At(5), 3);  // an empty producer id is a valid key for the table
  auto back = ProducerTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->producer_count(), t.producer_count());
  EXPECT_EQ(back->Serialize(), t.Serialize());
  for (int p = 0; p < 20; ++p) {
    const std::string name = "producer-" + std::to_string(p);
    for (uint64_t s = 0; s < static_cast<uint64_t>(p) * 20 * 3 + 5; ++s) {
      EXPECT_EQ(back->Find(name, s, kLow).verdict, t.Find(name, s, kLow).verdict);
      EXPECT_EQ(Dup(*back, name, s), Dup(t, name, s)) << name << " seq " << s;
    }
  }
  // The ranges survive: an inherited mark still judges only its own half.
  EXPECT_EQ(V(*back, "inherited", 10, kLow), Verdict::kUnknown);
  EXPECT_EQ(V(*back, "inherited", 10, kHigh), Verdict::kNew);
  EXPECT_EQ(Dup(*back, "", 7), At(5));
  // last_ms survives too: expiry sees the same ages.
  EXPECT_EQ(back->Expire(1010, 0), t.Expire(1010, 0));
  EXPECT_EQ(back->producer_count(), t.producer_count());
}

TEST(ProducerTableTest, EmptyTableRoundTrips) {
  ProducerTable t = Own();
  auto back = ProducerTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->producer_count(), 0u);
}

TEST(ProducerTableTest, DeserializeRejectsAnyCorruptedByte) {
  ProducerTable t = Own();
  t.Record("p1", 1, At(10), 5);
  t.Record("p1", 2, At(11), 5);
  t.Record("p2", 9, At(12), 6);
  const std::string good = t.Serialize();
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    auto r = ProducerTable::Deserialize(bad);
    EXPECT_FALSE(r.ok()) << "byte " << i;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
    }
  }
}

TEST(ProducerTableTest, DeserializeRejectsTruncationAndJunk) {
  ProducerTable t = Own();
  t.Record("p1", 1, At(10), 5);
  const std::string good = t.Serialize();
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(ProducerTable::Deserialize(good.substr(0, len)).ok()) << "len " << len;
  }
  EXPECT_FALSE(ProducerTable::Deserialize(std::string(64, '\0')).ok());
}

TEST(ProducerTableTest, TruncateFromDropsEntriesAtOrPastEnd) {
  ProducerTable t = Own();
  t.Record("a", 1, At(10), 1);
  t.Record("a", 2, At(20), 1);
  t.Record("a", 3, At(30), 1);
  t.Record("b", 1, At(25), 1);
  t.TruncateFrom(kSelf, 20);
  EXPECT_EQ(Dup(t, "a", 1), At(10));
  EXPECT_EQ(V(t, "a", 2), Verdict::kNew) << "its record was cut off the log: a retry appends";
  EXPECT_EQ(V(t, "a", 3), Verdict::kNew);
  EXPECT_EQ(V(t, "b", 1), Verdict::kNew);
  EXPECT_EQ(t.producer_count(), 1u) << "a producer with nothing left is forgotten";
  t.TruncateFrom(kSelf, 0);
  EXPECT_EQ(t.producer_count(), 0u);
}

TEST(ProducerTableTest, TruncateFromTouchesOnlyTheNamedPartition) {
  // A successor's table holds inherited entries of its parents (3 and 4) beside its own: a
  // truncation of its own log must not drop what the parents' logs still hold.
  ProducerTable t = Own();
  t.Record("a", 1, At(10, 3), 1);
  t.Record("a", 2, At(50, 4), 1);
  t.Record("a", 3, At(5), 1);
  t.Record("a", 4, At(6), 1);
  t.Record("b", 1, At(90, 3), 1);
  t.TruncateFrom(kSelf, 6);
  EXPECT_EQ(Dup(t, "a", 1), At(10, 3)) << "offsets of other partitions are not compared to end";
  EXPECT_EQ(Dup(t, "a", 2), At(50, 4));
  EXPECT_EQ(Dup(t, "a", 3), At(5));
  EXPECT_EQ(V(t, "a", 4), Verdict::kNew);
  EXPECT_EQ(Dup(t, "b", 1), At(90, 3));
  t.TruncateFrom(kSelf, 0);
  EXPECT_EQ(Dup(t, "a", 1), At(10, 3));
  EXPECT_EQ(V(t, "a", 3), Verdict::kNew);
  EXPECT_EQ(t.producer_count(), 2u);
  t.TruncateFrom(3, 0);  // a partition the table only knows through inheritance
  EXPECT_EQ(V(t, "a", 1), Verdict::kNew);
  EXPECT_EQ(Dup(t, "a", 2), At(50, 4));
  EXPECT_EQ(V(t, "b", 1), Verdict::kNew);
  EXPECT_EQ(t.producer_count(), 1u);
}

TEST(ProducerTableTest, MarksOutliveTruncationAndAnEmptiedWindow) {
  ProducerTable t = Own();
  for (uint64_t s = 0; s < kWindow + 10; ++s) t.Record("p", s, At(1000 + s), 1);
  t.TruncateFrom(kSelf, 1000 + 10);  // the whole window is gone, the mark (9) is not
  EXPECT_EQ(t.producer_count(), 1u) << "a producer with a mark is not forgotten";
  EXPECT_EQ(V(t, "p", 9), Verdict::kUnknown);
  EXPECT_EQ(V(t, "p", 0), Verdict::kUnknown);
  EXPECT_EQ(V(t, "p", 10), Verdict::kNew) << "lost with the log's tail: new again";
  EXPECT_EQ(V(t, "p", kWindow + 9), Verdict::kNew);
  // The mark survives a snapshot.
  auto back = ProducerTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(V(*back, "p", 9), Verdict::kUnknown);
  EXPECT_EQ(V(*back, "p", 10), Verdict::kNew);
  // Expiry still forgets it.
  EXPECT_EQ(t.Expire(10, 1), 1u);
  EXPECT_EQ(V(t, "p", 0), Verdict::kNew);
}

TEST(ProducerTableTest, InheritMergesTwoParentsAndMarksWhatFellOutByItsPartition) {
  // A merge: parents 3 and 4 each hold part of producer p's seqs; q wrote to parent 4 only.
  ProducerTable left = Lower(), right = Upper();
  for (uint64_t s = 0; s < 200; ++s) left.Record("p", s, At(100 + s, 3), 10);
  for (uint64_t s = 200; s < 400; ++s) right.Record("p", s, At(s - 200, 4), 20);
  right.Record("q", 1, At(500, 4), 30);
  ProducerTable t = Own();
  t.Inherit(left);
  t.Inherit(right);
  EXPECT_EQ(t.producer_count(), 2u);
  // Duplicates are answered with the parent's partition and offset.
  EXPECT_EQ(Dup(t, "p", 150, kLow), At(250, 3));
  EXPECT_EQ(Dup(t, "p", 399, kHigh), At(199, 4));
  EXPECT_EQ(Dup(t, "q", 1, kHigh), At(500, 4));
  EXPECT_EQ(V(t, "p", 400), Verdict::kNew) << "the successor's first own seq is new";
  EXPECT_EQ(V(t, "q", 2), Verdict::kNew);
  // 400 seqs do not fit: the newest kWindow (144..399) stay; 0..143, all of parent 3, fell out
  // and raise parent 3's mark only.
  const uint64_t oldest = 400 - kWindow;
  EXPECT_EQ(Dup(t, "p", oldest, kLow), At(100 + oldest, 3));
  for (uint64_t s : {oldest - 1, uint64_t{10}, uint64_t{0}}) {
    EXPECT_EQ(V(t, "p", s, kLow), Verdict::kUnknown) << "seq " << s;
    EXPECT_EQ(V(t, "p", s, kHigh), Verdict::kNew) << "seq " << s << " of the other half";
  }
  // The order of the parents does not matter.
  ProducerTable u = Own();
  u.Inherit(right);
  u.Inherit(left);
  for (uint64_t s = 0; s <= 400; ++s) {
    for (uint32_t h : {kLow, kHigh}) {
      EXPECT_EQ(u.Find("p", s, h).verdict, t.Find("p", s, h).verdict) << "seq " << s;
      EXPECT_EQ(Dup(u, "p", s, h), Dup(t, "p", s, h)) << "seq " << s;
    }
  }
  // The inherited state is the successor's own from here on: appends continue the window.
  t.Record("p", 400, At(0), 40);
  EXPECT_EQ(Dup(t, "p", 400), At(0));
  EXPECT_EQ(V(t, "p", oldest, kLow), Verdict::kUnknown) << "pushed out by the new record";
}

TEST(ProducerTableTest, InheritTakesTheHigherMarkOfEachPartition) {
  // Parent 3's window was partly emptied by a truncation: its mark (49) outlives the records.
  ProducerTable parent = Lower();
  for (uint64_t s = 0; s < kWindow + 50; ++s) parent.Record("p", s, At(s, 3), 10);
  parent.TruncateFrom(3, 100);  // keeps seqs 50..99
  ProducerTable other = Upper();  // parent 4: a few high seqs, nothing lost
  for (uint64_t s = 500; s < 510; ++s) other.Record("p", s, At(s, 4), 20);
  for (bool parent_first : {true, false}) {
    SCOPED_TRACE(parent_first ? "parent first" : "other first");
    ProducerTable t = Own();
    t.Inherit(parent_first ? parent : other);
    t.Inherit(parent_first ? other : parent);
    EXPECT_EQ(V(t, "p", 49, kLow), Verdict::kUnknown) << "at the inherited mark";
    EXPECT_EQ(V(t, "p", 0, kLow), Verdict::kUnknown);
    EXPECT_EQ(Dup(t, "p", 75, kLow), At(75, 3));
    EXPECT_EQ(V(t, "p", 100, kLow), Verdict::kNew) << "lost by the truncation, above the mark";
    EXPECT_EQ(V(t, "p", 499, kHigh), Verdict::kNew);
    EXPECT_EQ(Dup(t, "p", 505, kHigh), At(505, 4));
  }
}

TEST(ProducerTableTest, ManyMarksCollapseIntoOneOverTheWholeSpace) {
  // A producer whose entries fell out of windows of more than kMaxMarks partitions: the marks
  // collapse into one, as high as the highest, that judges every hash (conservative).
  ProducerTable t = Own();
  const size_t n = ProducerTable::kMaxMarks + 1;
  for (uint32_t part = 0; part < n; ++part) {
    ProducerTable parent(100 + part, HashRange{uint64_t{part} << 20, (uint64_t{part} + 1) << 20});
    parent.Record("p", part, At(0, 100 + part), 1);
    t.Inherit(parent);
  }
  for (uint64_t s = 10000; s < 10000 + kWindow; ++s) t.Record("p", s, At(s), 2);
  EXPECT_EQ(V(t, "p", n - 1, 0), Verdict::kUnknown);
  EXPECT_EQ(V(t, "p", n - 1, kHigh), Verdict::kUnknown) << "collapsed: every hash is judged";
  EXPECT_EQ(V(t, "p", n, kHigh), Verdict::kNew) << "above the collapsed mark";
  auto back = ProducerTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(V(*back, "p", 0, kHigh), Verdict::kUnknown);
}

TEST(ProducerTableTest, InheritKeepsTheNewerIdleClock) {
  ProducerTable parent = Lower();
  parent.Record("old", 1, At(1, 3), 1000);
  parent.Record("busy", 1, At(2, 3), 1000);
  ProducerTable t = Own();
  t.Record("busy", 2, At(0), 9000);
  t.Inherit(parent);
  EXPECT_EQ(t.Expire(9500, 5000), 1u) << "only the producer idle since 1000 expires";
  EXPECT_EQ(V(t, "old", 1), Verdict::kNew);
  EXPECT_EQ(Dup(t, "busy", 1), At(2, 3));
}

TEST(ProducerTableTest, ExpireForgetsIdleProducers) {
  ProducerTable t = Own();
  t.Record("old", 1, At(1), 1000);
  t.Record("mid", 1, At(2), 5000);
  t.Record("new", 1, At(3), 9000);
  EXPECT_EQ(t.Expire(10000, 5000), 1u);  // idle 9000 > 5000; "mid" idle exactly 5000 stays
  EXPECT_EQ(V(t, "old", 1), Verdict::kNew);
  EXPECT_TRUE(Dup(t, "mid", 1));
  EXPECT_TRUE(Dup(t, "new", 1));
  // A new record refreshes the producer.
  t.Record("mid", 2, At(4), 9500);
  EXPECT_EQ(t.Expire(11000, 2000), 0u);  // "new" idle exactly 2000 stays
  EXPECT_EQ(t.Expire(20000, 1000), 2u);
  EXPECT_EQ(t.producer_count(), 0u);
}

TEST(ProducerTableTest, ProducerCountIsBoundedAndForgettingIsCounted) {
  ProducerTable t = Own();
  const size_t n = ProducerTable::kMaxProducers;
  for (size_t i = 0; i < n; ++i) t.Record("p" + std::to_string(i), 1, At(i), 1000 + int64_t(i));
  EXPECT_EQ(t.producer_count(), n);
  EXPECT_EQ(t.evicted_producers(), 0u);
  t.Record("p0", 2, At(5), 9'000'000);  // refreshes p0, so p1 is now the idlest
  t.Record("extra", 1, At(7), 9'000'001);
  EXPECT_LE(t.producer_count(), n);
  EXPECT_GE(t.evicted_producers(), 1u);
  EXPECT_EQ(t.producer_count() + t.evicted_producers(), n + 1);
  EXPECT_TRUE(Dup(t, "extra", 1));
  EXPECT_TRUE(Dup(t, "p0", 1));
  EXPECT_FALSE(Dup(t, "p1", 1)) << "the producers idle the longest are forgotten first";
  EXPECT_TRUE(Dup(t, "p" + std::to_string(n - 1), 1)) << "the most recent stay";
}

TEST(ProducerTableTest, InheritingTwoFullTablesStaysWithinTheCap) {
  // Two parents full of distinct producers, inherited by one successor (a merge inside a
  // change's write pause): the cap holds, and forgetting happens in bulk, not once per producer
  // with a scan of all (which made this quadratic: about 10^10 steps).
  ProducerTable left = Lower(), right = Upper();
  const size_t n = ProducerTable::kMaxProducers;
  for (size_t i = 0; i < n; ++i) {
    left.Record("l" + std::to_string(i), 1, At(i, 3), int64_t(i));
    right.Record("r" + std::to_string(i), 1, At(i, 4), int64_t(n + i));
  }
  ProducerTable t = Own();
  t.Inherit(left);
  t.Inherit(right);
  EXPECT_LE(t.producer_count(), n);
  EXPECT_EQ(t.producer_count() + t.evicted_producers(), 2 * n);
  EXPECT_TRUE(Dup(t, "r" + std::to_string(n - 1), 1, kHigh)) << "the most recent stay";
}

}  // namespace
}  // namespace shoal::storage
