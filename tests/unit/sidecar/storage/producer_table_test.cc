// Tests of ProducerTable (sidecar/src/storage/producer_table.{h,cc}): the idempotent-producer
// windows and their snapshot.
#include "storage/producer_table.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace shoal::storage {

// Readable failure messages (found by ADL, so outside the unnamed namespace).
void PrintTo(const ProducerTable::Location& at, std::ostream* os) {
  *os << "{partition " << at.partition << ", offset " << at.offset << "}";
}

namespace {

using Location = ProducerTable::Location;
constexpr size_t kWindow = ProducerTable::kWindow;
// The partition the table belongs to; parents in the Inherit tests use other ids.
constexpr uint32_t kSelf = 7;

Location At(uint64_t offset, uint32_t partition = kSelf) { return {partition, offset}; }

TEST(ProducerTableTest, UnknownProducerOrSeqIsNew) {
  ProducerTable t;
  EXPECT_FALSE(t.Find("p1", 0));
  t.Record("p1", 5, At(100), 1);
  EXPECT_FALSE(t.Find("p2", 5)) << "producers are independent";
  EXPECT_FALSE(t.Find("p1", 6));
  EXPECT_FALSE(t.Find("p1", 1000));
  EXPECT_EQ(t.producer_count(), 1u);
}

TEST(ProducerTableTest, DuplicateAnswersOriginalOffset) {
  ProducerTable t;
  t.Record("p1", 5, At(100), 1);
  t.Record("p1", 6, At(101), 1);
  t.Record("p1", 9, At(130), 1);  // sparse: 7 and 8 went to other partitions
  EXPECT_EQ(t.Find("p1", 5), At(100));
  EXPECT_EQ(t.Find("p1", 6), At(101));
  EXPECT_EQ(t.Find("p1", 9), At(130));
  // Recording a seq again keeps the original offset.
  t.Record("p1", 6, At(999), 2);
  EXPECT_EQ(t.Find("p1", 6), At(101));
}

TEST(ProducerTableTest, OutOfOrderInsideWindowIsNewThenDuplicate) {
  ProducerTable t;
  t.Record("p", 10, At(0), 1);
  t.Record("p", 12, At(1), 1);
  // 11 arrives late (pipelining client): inside the window, not seen, so new.
  EXPECT_FALSE(t.Find("p", 11));
  // Below the oldest seq of a window that is not full: nothing was forgotten, so new as well.
  EXPECT_FALSE(t.Find("p", 3));
  t.Record("p", 11, At(2), 1);
  EXPECT_EQ(t.Find("p", 11), At(2));
  EXPECT_EQ(t.Find("p", 10), At(0));
  EXPECT_EQ(t.Find("p", 12), At(1));
  EXPECT_FALSE(t.Find("p", 13));
}

TEST(ProducerTableTest, OlderThanFullWindowIsDuplicate) {
  ProducerTable t;
  // seqs 0, 2, 4, ...: a full window plus 10 more, so 0..18 fell out of it.
  for (uint64_t i = 0; i < kWindow + 10; ++i) t.Record("p", 2 * i, At(1000 + i), 1);
  const uint64_t oldest_seq = 2 * 10;
  const uint64_t oldest_offset = 1000 + 10;
  // Still inside the window: exact answers, and gaps inside it are new.
  EXPECT_EQ(t.Find("p", oldest_seq), At(oldest_offset));
  EXPECT_EQ(t.Find("p", 2 * (kWindow + 9)), At(1000 + kWindow + 9));
  EXPECT_FALSE(t.Find("p", oldest_seq + 1));
  // Older than the whole window: treated as an acknowledged retry (its offset is not known any
  // more; the table answers with an offset at or below the window's oldest).
  for (uint64_t s : {oldest_seq - 1, oldest_seq - 2, uint64_t{0}}) {
    auto at = t.Find("p", s);
    ASSERT_TRUE(at.has_value()) << s;
    EXPECT_EQ(at->partition, kSelf);
    EXPECT_LE(at->offset, oldest_offset);
  }
  // Newer than the window: new.
  EXPECT_FALSE(t.Find("p", 2 * (kWindow + 10)));
}

TEST(ProducerTableTest, WindowKeepsTheNewestSeqsWhenOutOfOrder) {
  ProducerTable t;
  for (uint64_t i = 1; i <= kWindow; ++i) t.Record("p", i * 10, At(i), 1);
  // A late seq inside the full window enters it and pushes the oldest out.
  t.Record("p", 15, At(777), 1);
  EXPECT_EQ(t.Find("p", 15), At(777));
  EXPECT_EQ(t.Find("p", 20), At(2));
  // 10 is no longer in the window, but older than it, so still a duplicate.
  EXPECT_TRUE(t.Find("p", 10).has_value());
}

TEST(ProducerTableTest, SerializeDeserializeRoundTrip) {
  ProducerTable t;
  for (int p = 0; p < 20; ++p) {
    const std::string name = "producer-" + std::to_string(p);
    for (uint64_t s = 0; s < static_cast<uint64_t>(p) * 20; ++s) {
      t.Record(name, s * 3, At(static_cast<uint64_t>(p) * 100000 + s), 1000 + p);
    }
  }
  t.Record("", 7, At(5), 3);  // an empty producer id is a valid key for the table
  auto back = ProducerTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->producer_count(), t.producer_count());
  EXPECT_EQ(back->Serialize().size(), t.Serialize().size());
  for (int p = 0; p < 20; ++p) {
    const std::string name = "producer-" + std::to_string(p);
    for (uint64_t s = 0; s < static_cast<uint64_t>(p) * 20 * 3 + 5; ++s) {
      EXPECT_EQ(back->Find(name, s), t.Find(name, s)) << name << " seq " << s;
    }
  }
  EXPECT_EQ(back->Find("", 7), At(5));
  // last_ms survives too: expiry sees the same ages.
  EXPECT_EQ(back->Expire(1010, 0), t.Expire(1010, 0));
  EXPECT_EQ(back->producer_count(), t.producer_count());
}

TEST(ProducerTableTest, EmptyTableRoundTrips) {
  ProducerTable t;
  auto back = ProducerTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->producer_count(), 0u);
}

TEST(ProducerTableTest, DeserializeRejectsAnyCorruptedByte) {
  ProducerTable t;
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
  ProducerTable t;
  t.Record("p1", 1, At(10), 5);
  const std::string good = t.Serialize();
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(ProducerTable::Deserialize(good.substr(0, len)).ok()) << "len " << len;
  }
  EXPECT_FALSE(ProducerTable::Deserialize(std::string(64, '\0')).ok());
}

TEST(ProducerTableTest, TruncateFromDropsEntriesAtOrPastEnd) {
  ProducerTable t;
  t.Record("a", 1, At(10), 1);
  t.Record("a", 2, At(20), 1);
  t.Record("a", 3, At(30), 1);
  t.Record("b", 1, At(25), 1);
  t.TruncateFrom(kSelf, 20);
  EXPECT_EQ(t.Find("a", 1), At(10));
  EXPECT_FALSE(t.Find("a", 2)) << "its record was cut off the log: a retry must append again";
  EXPECT_FALSE(t.Find("a", 3));
  EXPECT_FALSE(t.Find("b", 1));
  EXPECT_EQ(t.producer_count(), 1u) << "a producer with nothing left is forgotten";
  t.TruncateFrom(kSelf, 0);
  EXPECT_EQ(t.producer_count(), 0u);
}

TEST(ProducerTableTest, TruncateFromTouchesOnlyTheNamedPartition) {
  // A successor's table holds inherited entries of its parents (3 and 4) beside its own: a
  // truncation of its own log must not drop what the parents' logs still hold.
  ProducerTable t;
  t.Record("a", 1, At(10, 3), 1);
  t.Record("a", 2, At(50, 4), 1);
  t.Record("a", 3, At(5), 1);
  t.Record("a", 4, At(6), 1);
  t.Record("b", 1, At(90, 3), 1);
  t.TruncateFrom(kSelf, 6);
  EXPECT_EQ(t.Find("a", 1), At(10, 3)) << "offsets of other partitions are not compared to end";
  EXPECT_EQ(t.Find("a", 2), At(50, 4));
  EXPECT_EQ(t.Find("a", 3), At(5));
  EXPECT_FALSE(t.Find("a", 4));
  EXPECT_EQ(t.Find("b", 1), At(90, 3));
  t.TruncateFrom(kSelf, 0);
  EXPECT_EQ(t.Find("a", 1), At(10, 3));
  EXPECT_FALSE(t.Find("a", 3));
  EXPECT_EQ(t.producer_count(), 2u);
  t.TruncateFrom(3, 0);  // a partition the table only knows through inheritance
  EXPECT_FALSE(t.Find("a", 1));
  EXPECT_EQ(t.Find("a", 2), At(50, 4));
  EXPECT_FALSE(t.Find("b", 1));
  EXPECT_EQ(t.producer_count(), 1u);
}

TEST(ProducerTableTest, OlderThanWindowStaysDuplicateAfterTruncateFrom) {
  ProducerTable t;
  for (uint64_t s = 0; s < kWindow + 100; ++s) t.Record("p", s, At(s), 1);
  ASSERT_TRUE(t.Find("p", 50).has_value());
  t.TruncateFrom(kSelf, kWindow + 50);  // the last 50 records were lost
  EXPECT_TRUE(t.Find("p", 50).has_value()) << "seq 50 was appended; a retry must not append it";
  EXPECT_FALSE(t.Find("p", kWindow + 60).has_value()) << "lost records are new again";
  // Answered with the oldest location the table still knows, as before the truncation.
  EXPECT_EQ(t.Find("p", 50), At(100));
  EXPECT_EQ(t.Find("p", 99), At(100));
  EXPECT_EQ(t.Find("p", 100), At(100));
  // A lost seq appended again is a duplicate of its new record, not of the old one.
  t.Record("p", kWindow + 60, At(kWindow + 50), 2);
  EXPECT_EQ(t.Find("p", kWindow + 60), At(kWindow + 50));
  EXPECT_FALSE(t.Find("p", kWindow + 55));
}

TEST(ProducerTableTest, EvictedMarkOutlivesAnEmptiedWindow) {
  ProducerTable t;
  for (uint64_t s = 0; s < kWindow + 10; ++s) t.Record("p", s, At(1000 + s), 1);
  t.TruncateFrom(kSelf, 1000 + 10);  // the whole window is gone, the evicted seqs 0..9 are not
  EXPECT_EQ(t.producer_count(), 1u) << "a producer with an evicted mark is not forgotten";
  EXPECT_EQ(t.Find("p", 9), At(1009)) << "answered with the evicted entry's location";
  EXPECT_EQ(t.Find("p", 0), At(1009));
  EXPECT_FALSE(t.Find("p", 10));
  EXPECT_FALSE(t.Find("p", kWindow + 9));
  // The mark survives a snapshot.
  auto back = ProducerTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Find("p", 9), At(1009));
  EXPECT_FALSE(back->Find("p", 10));
  // Expiry still forgets it.
  EXPECT_EQ(t.Expire(10, 1), 1u);
  EXPECT_FALSE(t.Find("p", 0));
}

TEST(ProducerTableTest, OutOfOrderSeqBelowAPartialWindowIsNewOnlyAboveTheEvictedMark) {
  ProducerTable t;
  // Evens 0..2*(kWindow+4): seqs 0, 2, .., 8 were evicted, so the mark is 8.
  for (uint64_t i = 0; i < kWindow + 5; ++i) t.Record("p", 2 * i, At(i), 1);
  t.TruncateFrom(kSelf, kWindow);  // drops the 5 newest: the window is not full any more
  EXPECT_TRUE(t.Find("p", 7).has_value()) << "at or below the mark";
  EXPECT_TRUE(t.Find("p", 8).has_value());
  EXPECT_FALSE(t.Find("p", 9)) << "a gap above the mark, inside the window: new";
  EXPECT_EQ(t.Find("p", 10), At(5));
}

TEST(ProducerTableTest, InheritMergesTwoParentsAndKeepsTheWindowCapped) {
  // A merge: parents 3 and 4 each hold part of producer p's seqs; q wrote to parent 4 only.
  ProducerTable left, right;
  for (uint64_t s = 0; s < 200; ++s) left.Record("p", s, At(100 + s, 3), 10);
  for (uint64_t s = 200; s < 400; ++s) right.Record("p", s, At(s - 200, 4), 20);
  right.Record("q", 1, At(500, 4), 30);
  ProducerTable t;
  t.Inherit(left);
  t.Inherit(right);
  EXPECT_EQ(t.producer_count(), 2u);
  // Duplicates are answered with the parent's partition and offset.
  EXPECT_EQ(t.Find("p", 150), At(250, 3));
  EXPECT_EQ(t.Find("p", 399), At(199, 4));
  EXPECT_EQ(t.Find("q", 1), At(500, 4));
  EXPECT_FALSE(t.Find("p", 400)) << "the successor's first own seq is new";
  EXPECT_FALSE(t.Find("q", 2));
  // 400 seqs do not fit: the newest kWindow (144..399) stay, 0..143 were pushed out but remain
  // duplicates, answered with the oldest location the window holds.
  const uint64_t oldest = 400 - kWindow;
  EXPECT_EQ(t.Find("p", oldest), At(100 + oldest, 3));
  for (uint64_t s : {oldest - 1, uint64_t{10}, uint64_t{0}}) {
    EXPECT_EQ(t.Find("p", s), At(100 + oldest, 3)) << "seq " << s;
  }
  // The order of the parents does not matter.
  ProducerTable u;
  u.Inherit(right);
  u.Inherit(left);
  for (uint64_t s = 0; s <= 400; ++s) EXPECT_EQ(u.Find("p", s), t.Find("p", s)) << "seq " << s;
  // The inherited state is the successor's own from here on: appends continue the window.
  t.Record("p", 400, At(0), 40);
  EXPECT_EQ(t.Find("p", 400), At(0));
  EXPECT_EQ(t.Find("p", oldest), At(100 + oldest + 1, 3)) << "pushed out by the new record";
}

TEST(ProducerTableTest, InheritTakesTheHigherEvictedMark) {
  // Parent 3's window was partly emptied by a truncation: its mark (49) outlives the records.
  ProducerTable parent;
  for (uint64_t s = 0; s < kWindow + 50; ++s) parent.Record("p", s, At(s, 3), 10);
  parent.TruncateFrom(3, 100);  // keeps seqs 50..99
  ProducerTable other;          // parent 4: a few high seqs, nothing evicted
  for (uint64_t s = 500; s < 510; ++s) other.Record("p", s, At(s, 4), 20);

  for (bool parent_first : {true, false}) {
    SCOPED_TRACE(parent_first ? "parent first" : "other first");
    ProducerTable t;
    t.Inherit(parent_first ? parent : other);
    t.Inherit(parent_first ? other : parent);
    EXPECT_EQ(t.Find("p", 49), At(50, 3)) << "below the inherited mark: duplicate";
    EXPECT_EQ(t.Find("p", 0), At(50, 3));
    EXPECT_EQ(t.Find("p", 75), At(75, 3));
    EXPECT_FALSE(t.Find("p", 100)) << "lost by the parent's truncation, above the mark: new";
    EXPECT_FALSE(t.Find("p", 499));
    EXPECT_EQ(t.Find("p", 505), At(505, 4));
  }

  // A successor whose own mark is higher keeps it.
  ProducerTable t;
  for (uint64_t s = 1000; s < 1000 + kWindow + 300; ++s) t.Record("p", s, At(s), 30);
  t.TruncateFrom(kSelf, 1000 + kWindow + 290);  // own mark 1299, window 1300..1545
  t.Inherit(parent);
  EXPECT_TRUE(t.Find("p", 1299).has_value());
  EXPECT_TRUE(t.Find("p", 700).has_value());
  EXPECT_EQ(t.Find("p", 1300), At(1300));
  EXPECT_FALSE(t.Find("p", 1000 + kWindow + 295));
}

TEST(ProducerTableTest, InheritKeepsTheNewerIdleClock) {
  ProducerTable parent;
  parent.Record("old", 1, At(1, 3), 1000);
  parent.Record("busy", 1, At(2, 3), 1000);
  ProducerTable t;
  t.Record("busy", 2, At(0), 9000);
  t.Inherit(parent);
  EXPECT_EQ(t.Expire(9500, 5000), 1u) << "only the producer idle since 1000 expires";
  EXPECT_FALSE(t.Find("old", 1));
  EXPECT_EQ(t.Find("busy", 1), At(2, 3));
}

TEST(ProducerTableTest, ExpireForgetsIdleProducers) {
  ProducerTable t;
  t.Record("old", 1, At(1), 1000);
  t.Record("mid", 1, At(2), 5000);
  t.Record("new", 1, At(3), 9000);
  EXPECT_EQ(t.Expire(10000, 5000), 1u);  // idle 9000 > 5000; "mid" idle exactly 5000 stays
  EXPECT_FALSE(t.Find("old", 1));
  EXPECT_TRUE(t.Find("mid", 1));
  EXPECT_TRUE(t.Find("new", 1));
  // A new record refreshes the producer.
  t.Record("mid", 2, At(4), 9500);
  EXPECT_EQ(t.Expire(11000, 2000), 0u);  // "new" idle exactly 2000 stays
  EXPECT_EQ(t.Expire(20000, 1000), 2u);
  EXPECT_EQ(t.producer_count(), 0u);
}

TEST(ProducerTableTest, ProducerCountIsBounded) {
  ProducerTable t;
  const size_t n = ProducerTable::kMaxProducers;
  for (size_t i = 0; i < n; ++i) t.Record("p" + std::to_string(i), 1, At(i), 1000 + int64_t(i));
  EXPECT_EQ(t.producer_count(), n);
  t.Record("p0", 2, At(5), 9'000'000);  // refreshes p0, so p1 is now the idlest
  t.Record("extra", 1, At(7), 9'000'001);
  EXPECT_EQ(t.producer_count(), n);
  EXPECT_TRUE(t.Find("extra", 1));
  EXPECT_TRUE(t.Find("p0", 1));
  EXPECT_FALSE(t.Find("p1", 1)) << "the producer idle the longest is evicted";
}

}  // namespace
}  // namespace shoal::storage
