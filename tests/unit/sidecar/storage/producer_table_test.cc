// Tests of ProducerTable (sidecar/src/storage/producer_table.{h,cc}): the idempotent-producer
// windows and their snapshot.
#include "storage/producer_table.h"

#include <gtest/gtest.h>

#include <string>

namespace shoal::storage {
namespace {

constexpr size_t kWindow = ProducerTable::kWindow;

TEST(ProducerTableTest, UnknownProducerOrSeqIsNew) {
  ProducerTable t;
  EXPECT_FALSE(t.Find("p1", 0));
  t.Record("p1", 5, 100, 1);
  EXPECT_FALSE(t.Find("p2", 5)) << "producers are independent";
  EXPECT_FALSE(t.Find("p1", 6));
  EXPECT_FALSE(t.Find("p1", 1000));
  EXPECT_EQ(t.producer_count(), 1u);
}

TEST(ProducerTableTest, DuplicateAnswersOriginalOffset) {
  ProducerTable t;
  t.Record("p1", 5, 100, 1);
  t.Record("p1", 6, 101, 1);
  t.Record("p1", 9, 130, 1);  // sparse: 7 and 8 went to other partitions
  EXPECT_EQ(t.Find("p1", 5), std::optional<uint64_t>(100));
  EXPECT_EQ(t.Find("p1", 6), std::optional<uint64_t>(101));
  EXPECT_EQ(t.Find("p1", 9), std::optional<uint64_t>(130));
  // Recording a seq again keeps the original offset.
  t.Record("p1", 6, 999, 2);
  EXPECT_EQ(t.Find("p1", 6), std::optional<uint64_t>(101));
}

TEST(ProducerTableTest, OutOfOrderInsideWindowIsNewThenDuplicate) {
  ProducerTable t;
  t.Record("p", 10, 0, 1);
  t.Record("p", 12, 1, 1);
  // 11 arrives late (pipelining client): inside the window, not seen, so new.
  EXPECT_FALSE(t.Find("p", 11));
  // Below the oldest seq of a window that is not full: nothing was forgotten, so new as well.
  EXPECT_FALSE(t.Find("p", 3));
  t.Record("p", 11, 2, 1);
  EXPECT_EQ(t.Find("p", 11), std::optional<uint64_t>(2));
  EXPECT_EQ(t.Find("p", 10), std::optional<uint64_t>(0));
  EXPECT_EQ(t.Find("p", 12), std::optional<uint64_t>(1));
  EXPECT_FALSE(t.Find("p", 13));
}

TEST(ProducerTableTest, OlderThanFullWindowIsDuplicate) {
  ProducerTable t;
  // seqs 0, 2, 4, ...: a full window plus 10 more, so 0..18 fell out of it.
  for (uint64_t i = 0; i < kWindow + 10; ++i) t.Record("p", 2 * i, 1000 + i, 1);
  const uint64_t oldest_seq = 2 * 10;
  const uint64_t oldest_offset = 1000 + 10;
  // Still inside the window: exact answers, and gaps inside it are new.
  EXPECT_EQ(t.Find("p", oldest_seq), std::optional<uint64_t>(oldest_offset));
  EXPECT_EQ(t.Find("p", 2 * (kWindow + 9)), std::optional<uint64_t>(1000 + kWindow + 9));
  EXPECT_FALSE(t.Find("p", oldest_seq + 1));
  // Older than the whole window: treated as an acknowledged retry (its offset is not known any
  // more; the table answers with an offset at or below the window's oldest).
  for (uint64_t s : {oldest_seq - 1, oldest_seq - 2, uint64_t{0}}) {
    auto off = t.Find("p", s);
    ASSERT_TRUE(off.has_value()) << s;
    EXPECT_LE(*off, oldest_offset);
  }
  // Newer than the window: new.
  EXPECT_FALSE(t.Find("p", 2 * (kWindow + 10)));
}

TEST(ProducerTableTest, WindowKeepsTheNewestSeqsWhenOutOfOrder) {
  ProducerTable t;
  for (uint64_t i = 1; i <= kWindow; ++i) t.Record("p", i * 10, i, 1);
  // A late seq inside the full window enters it and pushes the oldest out.
  t.Record("p", 15, 777, 1);
  EXPECT_EQ(t.Find("p", 15), std::optional<uint64_t>(777));
  EXPECT_EQ(t.Find("p", 20), std::optional<uint64_t>(2));
  // 10 is no longer in the window, but older than it, so still a duplicate.
  EXPECT_TRUE(t.Find("p", 10).has_value());
}

TEST(ProducerTableTest, SerializeDeserializeRoundTrip) {
  ProducerTable t;
  for (int p = 0; p < 20; ++p) {
    const std::string name = "producer-" + std::to_string(p);
    for (uint64_t s = 0; s < static_cast<uint64_t>(p) * 20; ++s) {
      t.Record(name, s * 3, static_cast<uint64_t>(p) * 100000 + s, 1000 + p);
    }
  }
  t.Record("", 7, 5, 3);  // an empty producer id is a valid key for the table
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
  EXPECT_EQ(back->Find("", 7), std::optional<uint64_t>(5));
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
  t.Record("p1", 1, 10, 5);
  t.Record("p1", 2, 11, 5);
  t.Record("p2", 9, 12, 6);
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
  t.Record("p1", 1, 10, 5);
  const std::string good = t.Serialize();
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(ProducerTable::Deserialize(good.substr(0, len)).ok()) << "len " << len;
  }
  EXPECT_FALSE(ProducerTable::Deserialize(std::string(64, '\0')).ok());
}

TEST(ProducerTableTest, TruncateFromDropsEntriesAtOrPastEnd) {
  ProducerTable t;
  t.Record("a", 1, 10, 1);
  t.Record("a", 2, 20, 1);
  t.Record("a", 3, 30, 1);
  t.Record("b", 1, 25, 1);
  t.TruncateFrom(20);
  EXPECT_EQ(t.Find("a", 1), std::optional<uint64_t>(10));
  EXPECT_FALSE(t.Find("a", 2)) << "its record was cut off the log: a retry must append again";
  EXPECT_FALSE(t.Find("a", 3));
  EXPECT_FALSE(t.Find("b", 1));
  EXPECT_EQ(t.producer_count(), 1u) << "a producer with nothing left is forgotten";
  t.TruncateFrom(0);
  EXPECT_EQ(t.producer_count(), 0u);
}

// KNOWN BUG, not fixed here (it needs a snapshot format change; see the report): TruncateFrom
// can turn a full window into a partial one, and then a seq older than the window, which was
// appended long ago, counts as new again. Happens when a producer snapshot covers records a crash
// took back from the log (fsync=interval) and a client then retries a very old seq.
TEST(ProducerTableTest, DISABLED_OlderThanWindowStaysDuplicateAfterTruncateFrom) {
  ProducerTable t;
  for (uint64_t s = 0; s < kWindow + 100; ++s) t.Record("p", s, s, 1);
  ASSERT_TRUE(t.Find("p", 50).has_value());
  t.TruncateFrom(kWindow + 50);  // the last 50 records were lost
  EXPECT_TRUE(t.Find("p", 50).has_value()) << "seq 50 was appended; a retry must not append it";
  EXPECT_FALSE(t.Find("p", kWindow + 60).has_value()) << "lost records are new again";
}

TEST(ProducerTableTest, ExpireForgetsIdleProducers) {
  ProducerTable t;
  t.Record("old", 1, 1, 1000);
  t.Record("mid", 1, 2, 5000);
  t.Record("new", 1, 3, 9000);
  EXPECT_EQ(t.Expire(10000, 5000), 1u);  // idle 9000 > 5000; "mid" idle exactly 5000 stays
  EXPECT_FALSE(t.Find("old", 1));
  EXPECT_TRUE(t.Find("mid", 1));
  EXPECT_TRUE(t.Find("new", 1));
  // A new record refreshes the producer.
  t.Record("mid", 2, 4, 9500);
  EXPECT_EQ(t.Expire(11000, 2000), 0u);  // "new" idle exactly 2000 stays
  EXPECT_EQ(t.Expire(20000, 1000), 2u);
  EXPECT_EQ(t.producer_count(), 0u);
}

TEST(ProducerTableTest, ProducerCountIsBounded) {
  ProducerTable t;
  const size_t n = ProducerTable::kMaxProducers;
  for (size_t i = 0; i < n; ++i) t.Record("p" + std::to_string(i), 1, i, 1000 + int64_t(i));
  EXPECT_EQ(t.producer_count(), n);
  t.Record("p0", 2, 5, 9'000'000);  // refreshes p0, so p1 is now the idlest
  t.Record("extra", 1, 7, 9'000'001);
  EXPECT_EQ(t.producer_count(), n);
  EXPECT_TRUE(t.Find("extra", 1));
  EXPECT_TRUE(t.Find("p0", 1));
  EXPECT_FALSE(t.Find("p1", 1)) << "the producer idle the longest is evicted";
}

}  // namespace
}  // namespace shoal::storage
