// Tests of DiskReserve and WithReserve (sidecar/src/storage/disk_reserve.{h,cc}): produce is
// admitted only beside the reserve, the ballast is released for a write that finds the volume
// full and taken back once there is room. The volume's free space is injected; the ballast is a
// real file. A full tmpfs under a real sidecar: tests/integration/disk_full_test.cc.
#include "storage/disk_reserve.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <string>

#include "support/temp_dir.h"

namespace shoal::storage {
namespace {

using ::shoal::testing::TempDir;

constexpr uint64_t kReserve = 1 << 20;

uint64_t AllocatedBytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

class DiskReserveTest : public ::testing::Test {
 protected:
  DiskReserve::FreeBytesFn Free() {
    return [this](const std::string&) -> Result<uint64_t> { return free_.load(); };
  }
  TempDir dir_;
  std::atomic<uint64_t> free_{100 * kReserve};
};

TEST_F(DiskReserveTest, HoldsTheReserveAndAdmitsProduceBesideIt) {
  DiskReserve r(dir_.path(), kReserve, Free());
  ASSERT_TRUE(r.Start().ok());
  EXPECT_EQ(r.ballast_bytes(), kReserve);
  EXPECT_GE(AllocatedBytes(r.ballast_path()), kReserve);
  EXPECT_TRUE(r.AdmitProduce(1000).ok());

  free_ = kReserve / 16;  // under the slack beside the ballast
  Status st = r.AdmitProduce(1000);
  EXPECT_EQ(st.code(), Status::Code::kNoSpace) << st.ToString();
  EXPECT_NE(st.message().find("65536 bytes free"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("reserve of 1048576 bytes"), std::string::npos) << st.message();
}

TEST_F(DiskReserveTest, ReleasedForAFullVolumeAndTakenBackWithRoomToSpare) {
  DiskReserve r(dir_.path(), kReserve, Free());
  ASSERT_TRUE(r.Start().ok());
  free_ = 0;
  EXPECT_TRUE(r.Release());
  EXPECT_EQ(r.ballast_bytes(), 0u);
  EXPECT_EQ(AllocatedBytes(r.ballast_path()), 0u);
  EXPECT_EQ(r.releases(), 1u);
  EXPECT_FALSE(r.Release()) << "nothing more to free";

  // Produce stays refused while the reserve is in use, even once some space is back.
  free_ = kReserve + kReserve / 2;
  r.Tick();
  EXPECT_EQ(r.ballast_bytes(), 0u);
  EXPECT_EQ(r.AdmitProduce(10).code(), Status::Code::kNoSpace);

  free_ = 2 * kReserve;
  r.Tick();
  EXPECT_EQ(r.ballast_bytes(), kReserve);
  EXPECT_TRUE(r.AdmitProduce(10).ok());
}

TEST_F(DiskReserveTest, ARestartKeepsAHeldBallastAndWaitsForRoomOtherwise) {
  {
    DiskReserve r(dir_.path(), kReserve, Free());
    ASSERT_TRUE(r.Start().ok());
  }
  free_ = 0;  // full, but the ballast is there: held again
  {
    DiskReserve r(dir_.path(), kReserve, Free());
    ASSERT_TRUE(r.Start().ok());
    EXPECT_EQ(r.ballast_bytes(), kReserve);
    EXPECT_TRUE(r.Release());
  }
  // Released before the restart, on a full volume: starts without it, produce refused.
  DiskReserve r(dir_.path(), kReserve, Free());
  ASSERT_TRUE(r.Start().ok());
  EXPECT_EQ(r.ballast_bytes(), 0u);
  EXPECT_EQ(r.AdmitProduce(1).code(), Status::Code::kNoSpace);
}

TEST_F(DiskReserveTest, NoReserveAdmitsEverythingAndGivesAFormerBallastBack) {
  {
    DiskReserve r(dir_.path(), kReserve, Free());
    ASSERT_TRUE(r.Start().ok());
  }
  DiskReserve r(dir_.path(), 0, Free());
  ASSERT_TRUE(r.Start().ok());
  EXPECT_FALSE(std::filesystem::exists(r.ballast_path()));
  free_ = 0;
  EXPECT_TRUE(r.AdmitProduce(1 << 30).ok());
  EXPECT_FALSE(r.Release());
}

// An inner file system whose writes find the volume full until the reserve is released.
class FullUntilReleased final : public FileSystem {
 public:
  explicit FullUntilReleased(DiskReserve& r) : r_(r) {}
  Result<std::unique_ptr<File>> Open(const std::string& path, bool truncate) override {
    return PosixFileSystem().Open(path, truncate);
  }
  Status ReadWholeFile(const std::string& path, std::string* out) override {
    return PosixFileSystem().ReadWholeFile(path, out);
  }
  Status WriteFileAtomic(const std::string& path, const std::string& contents) override {
    ++writes;
    if (r_.ballast_bytes() > 0) return Status::NoSpace("writing " + path + ": No space left");
    return PosixFileSystem().WriteFileAtomic(path, contents);
  }
  Status Remove(const std::string& path) override { return PosixFileSystem().Remove(path); }
  Status RemoveAll(const std::string& path) override { return PosixFileSystem().RemoveAll(path); }
  Status CreateDirs(const std::string& path) override {
    return PosixFileSystem().CreateDirs(path);
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    return PosixFileSystem().List(dir);
  }
  Status SyncDir(const std::string& dir) override { return PosixFileSystem().SyncDir(dir); }
  int writes = 0;

 private:
  DiskReserve& r_;
};

TEST_F(DiskReserveTest, AWriteThatFindsTheVolumeFullReleasesTheReserveAndIsTriedOnceMore) {
  DiskReserve r(dir_.path(), kReserve, Free());
  ASSERT_TRUE(r.Start().ok());
  FullUntilReleased inner(r);
  auto fs = WithReserve(inner, r);
  ASSERT_TRUE(fs->WriteFileAtomic(dir_.path() + "/groups.json", "{}").ok());
  EXPECT_EQ(inner.writes, 2);
  EXPECT_EQ(r.releases(), 1u);
  std::string back;
  ASSERT_TRUE(fs->ReadWholeFile(dir_.path() + "/groups.json", &back).ok());
  EXPECT_EQ(back, "{}");
}

TEST_F(DiskReserveTest, OtherErrorsAreNotRetriedAndDoNotTouchTheReserve) {
  DiskReserve r(dir_.path(), kReserve, Free());
  ASSERT_TRUE(r.Start().ok());
  auto fs = WithReserve(PosixFileSystem(), r);
  Status st = fs->WriteFileAtomic(dir_.path() + "/absent/dir/file", "x");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.code(), Status::Code::kNoSpace);
  EXPECT_EQ(r.releases(), 0u);
  EXPECT_EQ(r.ballast_bytes(), kReserve);
}

}  // namespace
}  // namespace shoal::storage
