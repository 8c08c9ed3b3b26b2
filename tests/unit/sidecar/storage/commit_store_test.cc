// Tests of CommitStore (sidecar/src/storage/commit_store.{h,cc}): monotonic group commits in an
// append-only file, replayed on open, compacted when it grows.
#include "storage/commit_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "support/temp_dir.h"

namespace shoal::storage {
namespace {

namespace fs = std::filesystem;

using ::shoal::testing::TempDir;

class CommitStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<CommitStore> MustOpen() {
    auto r = CommitStore::Open(dir_.path());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  std::string FilePath() const { return dir_.path() + "/commits.log"; }
  void AppendToFile(const std::string& bytes) {
    const int fd = ::open(FilePath().c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(::close(fd), 0);
  }
  TempDir dir_;
};

std::map<std::string, Offset> Commits(const std::map<std::string, uint64_t>& m) {
  std::map<std::string, Offset> out;
  for (const auto& [g, o] : m) out.emplace(g, Offset(o));
  return out;
}

bool MustCommit(CommitStore& s, const std::string& g, uint64_t offset, bool sync = false) {
  auto r = s.Commit(g, Offset(offset), sync);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() && *r;
}

TEST_F(CommitStoreTest, CommitsAreMonotonic) {
  auto s = MustOpen();
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->Get("g"));
  EXPECT_TRUE(MustCommit(*s, "g", 10));
  EXPECT_EQ(s->Get("g"), std::optional<Offset>(10));
  EXPECT_FALSE(MustCommit(*s, "g", 5)) << "a commit below the current one is a no-op";
  EXPECT_FALSE(MustCommit(*s, "g", 10));
  EXPECT_EQ(s->Get("g"), std::optional<Offset>(10));
  EXPECT_TRUE(MustCommit(*s, "g", 11, /*sync=*/true));
  EXPECT_EQ(s->Get("g"), std::optional<Offset>(11));
  // A first commit at 0 counts as moving the group (it now has a commit).
  EXPECT_TRUE(MustCommit(*s, "h", 0));
  EXPECT_EQ(s->Get("h"), std::optional<Offset>(0));
  EXPECT_EQ(s->All(), (Commits({{"g", 11}, {"h", 0}})));
  EXPECT_TRUE(s->Sync().ok());
  EXPECT_TRUE(s->Sync().ok());
}

TEST_F(CommitStoreTest, SurvivesReopen) {
  std::map<std::string, uint64_t> want;
  {
    auto s = MustOpen();
    ASSERT_NE(s, nullptr);
    for (int g = 0; g < 10; ++g) {
      const std::string group = "group-" + std::to_string(g);
      for (uint64_t o = 1; o <= 50; ++o) MustCommit(*s, group, o * (g + 1), g % 2 == 0);
      want[group] = 50 * (g + 1);
    }
    MustCommit(*s, "group-3", 1);  // ignored: below
    MustCommit(*s, std::string(300, 'x'), 1ull << 50);
    want[std::string(300, 'x')] = 1ull << 50;
    ASSERT_TRUE(s->Sync().ok());
  }
  auto s = MustOpen();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->All(), Commits(want));
  // Still monotonic across the reopen, and still writable.
  EXPECT_FALSE(MustCommit(*s, "group-0", 49));
  EXPECT_TRUE(MustCommit(*s, "group-0", 51));
  s.reset();
  s = MustOpen();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->Get("group-0"), std::optional<Offset>(51));
}

TEST_F(CommitStoreTest, TornTailIsIgnored) {
  {
    auto s = MustOpen();
    ASSERT_NE(s, nullptr);
    MustCommit(*s, "a", 5, true);
    MustCommit(*s, "b", 7, true);
    MustCommit(*s, "a", 9, true);
  }
  const auto good_size = fs::file_size(FilePath());
  // Half of a record committing a=100, then garbage: neither may count.
  std::string rec;
  {
    TempDir other;
    auto r = CommitStore::Open(other.path());
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE((*r)->Commit("a", Offset(100), true).ok());
    rec = std::string(fs::file_size(other.path() + "/commits.log"), '\0');
    const int fd = ::open((other.path() + "/commits.log").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pread(fd, rec.data(), rec.size(), 0), static_cast<ssize_t>(rec.size()));
    ::close(fd);
  }
  for (size_t cut = 1; cut < rec.size(); cut += 3) {
    ASSERT_NO_FATAL_FAILURE(AppendToFile(rec.substr(0, cut)));
    auto s = MustOpen();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->All(), (Commits({{"a", 9}, {"b", 7}}))) << "cut " << cut;
  }
  // A whole record with a bad CRC is not a commit either.
  std::string bad = rec;
  bad.back() = static_cast<char>(bad.back() ^ 1);
  ASSERT_NO_FATAL_FAILURE(AppendToFile(bad));
  ASSERT_NO_FATAL_FAILURE(AppendToFile("\xff\xff\xff\x7fjunk"));
  {
    auto s = MustOpen();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->All(), (Commits({{"a", 9}, {"b", 7}})));
    // The open rewrote the file without the tail, so new commits after it are found again.
    EXPECT_LE(fs::file_size(FilePath()), good_size);
    EXPECT_TRUE(MustCommit(*s, "b", 8, true));
  }
  auto s = MustOpen();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->All(), (Commits({{"a", 9}, {"b", 8}})));
}

TEST_F(CommitStoreTest, CompactionKeepsLatestValues) {
  auto s = MustOpen();
  ASSERT_NE(s, nullptr);
  constexpr int kGroups = 7;
  constexpr uint64_t kCommits = 12000;  // per group; ~35 bytes each: about 3 MiB in all
  uint64_t written = 0;
  for (uint64_t o = 1; o <= kCommits; ++o) {
    for (int g = 0; g < kGroups; ++g) {
      const std::string group = "consumer-group-" + std::to_string(g);
      ASSERT_TRUE(MustCommit(*s, group, o * 3 + g));
      written += 8 + 2 + group.size() + 8;
    }
    if (o % 1000 == 0) {
      // Compaction bounds the file near its threshold, whatever was written.
      EXPECT_LE(fs::file_size(FilePath()), (1u << 20) + 64);
    }
  }
  ASSERT_GT(written, 2u << 20);
  std::map<std::string, uint64_t> want;
  for (int g = 0; g < kGroups; ++g) want["consumer-group-" + std::to_string(g)] = kCommits * 3 + g;
  EXPECT_EQ(s->All(), Commits(want));
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = MustOpen();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->All(), Commits(want));
  EXPECT_LT(fs::file_size(FilePath()), 1000u) << "open compacts to one record per group";
}

TEST_F(CommitStoreTest, ADeletedGroupStaysDeletedAcrossReopenAndMayComeBack) {
  {
    auto s = MustOpen();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(MustCommit(*s, "gone", 40));
    ASSERT_TRUE(MustCommit(*s, "kept", 7));
    auto deleted = s->Delete("gone", true);
    ASSERT_TRUE(deleted.ok());
    EXPECT_TRUE(*deleted);
    auto again = s->Delete("gone", true);
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(*again) << "nothing left to delete";
    EXPECT_FALSE(s->Get("gone").has_value());
    // The tombstone is not an offset a client can commit.
    EXPECT_FALSE(s->Commit("x", Offset(UINT64_MAX), true).ok());
  }
  {
    // Replayed from the file (tombstone after the commit), then compacted on open.
    auto s = MustOpen();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->All(), (Commits({{"kept", 7}})));
    // Back: a new group, from its first commit on (lower than before is fine).
    ASSERT_TRUE(MustCommit(*s, "gone", 3));
  }
  auto s = MustOpen();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->All(), (Commits({{"gone", 3}, {"kept", 7}})));
}

TEST_F(CommitStoreTest, RangeCommitsAndLeasesSurviveReopenAndADeletionForgetsThem) {
  const HashRange domain{0, 1000};
  const ReadLease lease{"pod-b", {{500, 1000}}, 30, 42, false};
  {
    auto r = CommitStore::Open(dir_.path(), nullptr, domain);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto& s = *r.value();
    ASSERT_TRUE(MustCommit(s, "g", 10));
    auto moved = s.CommitRanges("g", {{0, 500}}, Offset(40), false);
    ASSERT_TRUE(moved.ok() && *moved);
    moved = s.CommitRanges("g", {{0, 500}}, Offset(20), false);
    ASSERT_TRUE(moved.ok());
    EXPECT_FALSE(*moved) << "a lower range commit changes nothing";
    EXPECT_EQ(s.Get("g"), std::optional<Offset>(10)) << "the lowest standing over the range";
    ASSERT_TRUE(s.PutLease("g", lease, true).ok());
    ASSERT_TRUE(s.CommitRanges("h", {{0, 1000}}, Offset(5), true).ok());
    ASSERT_TRUE(s.PutLease("gone", lease, true).ok());
    ASSERT_TRUE(s.Delete("gone", true).ok());
  }
  // Appended records, then a torn tail: replayed, and the tail ignored.
  AppendToFile(std::string("\x30\x00\x00\x00garbage", 11));
  auto r = CommitStore::Open(dir_.path(), nullptr, domain);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto& s = *r.value();
  auto g = s.Standing("g");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->At(100), 40u);
  EXPECT_EQ(g->At(700), 10u);
  EXPECT_EQ(s.Lease("g", "pod-b"), std::optional<ReadLease>(lease));
  EXPECT_EQ(s.Get("h"), std::optional<Offset>(5)) << "a range commit over the whole domain";
  EXPECT_FALSE(s.Get("gone").has_value());
  EXPECT_TRUE(s.LeasesOf("gone").empty()) << "the tombstone forgets the group's leases too";
  // A crash under fsync interval took back the tail below a range commit: brought down.
  ASSERT_TRUE(s.ClampTo(Offset(25)).ok());
  EXPECT_EQ(s.Standing("g")->At(100), 25u);
  EXPECT_EQ(s.Lease("g", "pod-b")->scanned_to, 25u);
}

TEST_F(CommitStoreTest, AMirrorTakesTheLeadersStateWholeAndDurably) {
  // A follower's copy mirrors its leader's store (replication): every position, range and lease,
  // its own replaced, lower ones included; the state is named by (incarnation, version).
  const HashRange domain{0, 1000};
  const ReadLease lease{"pod-b", {{500, 1000}}, 30, 42, false};
  TempDir leader_dir;
  auto leader = CommitStore::Open(leader_dir.path(), nullptr, domain);
  ASSERT_TRUE(leader.ok()) << leader.status().ToString();
  CommitStore& l = **leader;
  const uint64_t v0 = l.version();
  ASSERT_TRUE(MustCommit(l, "g", 10));
  ASSERT_TRUE(l.CommitRanges("g", {{0, 500}}, Offset(40), false).ok());
  ASSERT_TRUE(l.PutLease("g", lease, false).ok());
  EXPECT_EQ(l.version(), v0 + 3) << "each change moves the version";
  EXPECT_FALSE(MustCommit(l, "g", 5));
  EXPECT_EQ(l.version(), v0 + 3) << "a commit that moves nothing does not";
  const CommitStore::State state = l.Snapshot();
  EXPECT_EQ(state.incarnation, l.incarnation());
  EXPECT_NE(state.incarnation, 0u);
  EXPECT_EQ(state.version, l.version());
  {
    auto follower = CommitStore::Open(dir_.path(), nullptr, domain);
    ASSERT_TRUE(follower.ok());
    CommitStore& f = **follower;
    EXPECT_NE(f.incarnation(), l.incarnation()) << "two opens are told apart";
    ASSERT_TRUE(MustCommit(f, "old", 99));  // what an old leader kept: replaced
    ASSERT_TRUE(f.Mirror(state.records).ok());
    EXPECT_EQ(f.AllStandings(), l.AllStandings());
    EXPECT_EQ(f.AllLeases(), l.AllLeases());
    EXPECT_FALSE(f.Get("old").has_value());
    // A snapshot cut short changes nothing.
    EXPECT_EQ(f.Mirror(state.records.substr(0, state.records.size() - 3)).code(),
              Status::Code::kCorruption);
    EXPECT_EQ(f.AllStandings(), l.AllStandings());
  }
  auto reopened = CommitStore::Open(dir_.path(), nullptr, domain);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->AllStandings(), l.AllStandings()) << "the mirror is durable";
  EXPECT_EQ((*reopened)->Lease("g", "pod-b"), std::optional<ReadLease>(lease));
}

TEST_F(CommitStoreTest, CompactionKeepsRangesAndLeases) {
  const HashRange domain{0, 1 << 20};
  auto r = CommitStore::Open(dir_.path(), nullptr, domain);
  ASSERT_TRUE(r.ok());
  auto& s = *r.value();
  // Enough records to pass the compaction threshold several times.
  for (uint64_t i = 1; i <= 40000; ++i) {
    ASSERT_TRUE(s.CommitRanges("g", {{0, 1000}}, Offset(i), false).ok());
    if (i % 100 == 0) {
      ASSERT_TRUE(s.PutLease("g", ReadLease{"pod-b", {{1000, 2000}}, i, i, false}, false).ok());
    }
  }
  EXPECT_LT(fs::file_size(FilePath()), 2u << 20);
  auto again = CommitStore::Open(dir_.path(), nullptr, domain);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Standing("g")->At(500), 40000u);
  EXPECT_EQ((*again)->Standing("g")->At(5000), 0u);
  EXPECT_EQ((*again)->Lease("g", "pod-b")->last, 40000u);
}

}  // namespace
}  // namespace shoal::storage
