#include "storage/disk_reserve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "shoal/common/files.h"
#include "shoal/common/logging.h"

namespace shoal::storage {

namespace {

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

// Allocates `size` bytes to the file at `fd`: fallocate where the file system has it, zeros
// written otherwise.
Status Allocate(int fd, uint64_t size, const std::string& path) {
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (rc == 0) return Status::Ok();
  if (rc != EOPNOTSUPP && rc != EINVAL) {
    errno = rc;
    return ErrnoError("allocating " + path);
  }
  std::vector<char> zeros(1 << 20, 0);
  for (uint64_t done = 0; done < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), size - done));
    const ssize_t w = ::pwrite(fd, zeros.data(), n, static_cast<off_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoError("writing " + path);
    done += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

}  // namespace

Result<uint64_t> DiskReserve::StatvfsFree(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return ErrnoError("statvfs " + dir);
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

DiskReserve::DiskReserve(std::string dir, uint64_t reserve_bytes, FreeBytesFn free_bytes)
    : dir_(std::move(dir)),
      path_(dir_ + "/reserve.ballast"),
      reserve_(reserve_bytes),
      free_fn_(std::move(free_bytes)) {}

void DiskReserve::Look() {
  auto free = free_fn_(dir_);
  if (free.ok()) free_.store(*free, std::memory_order_relaxed);
}

Status DiskReserve::Start() {
  MutexLock lock(mu_);
  if (reserve_ == 0) {
    // No reserve asked for: a ballast a former run left is given back to the volume.
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) return ErrnoError("removing " + path_);
    Look();
    return Status::Ok();
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_blocks) * 512 >= reserve_) {
    ballast_.store(reserve_, std::memory_order_relaxed);
    Look();
    return Status::Ok();
  }
  Look();
  // A first start, or a restart after the ballast was released: taken when the volume has
  // room for it and the reserve again (a full volume starts without it; Tick takes it later).
  if (free_bytes() >= 2 * reserve_) return TakeLocked();
  Logger("storage")->warn(
      "msg=\"the data volume has no room for the disk reserve; produce is refused until it "
      "has\" dir={} free_bytes={} reserve_bytes={}",
      dir_, free_bytes(), reserve_);
  return Status::Ok();
}

Status DiskReserve::TakeLocked() {
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("opening " + path_);
  Status st = Allocate(fd, reserve_, path_);
  if (st.ok() && ::fdatasync(fd) != 0) st = ErrnoError("fdatasync " + path_);
  if (!st.ok()) {
    // Whatever was allocated is given back: a half ballast holds nothing useful.
    (void)::ftruncate(fd, 0);
  }
  ::close(fd);
  if (st.ok()) {
    ballast_.store(reserve_, std::memory_order_relaxed);
    Logger("storage")->info("msg=\"disk reserve held\" path={} reserve_bytes={}", path_,
                            reserve_);
  }
  Look();
  return st;
}

Status DiskReserve::AdmitProduce(uint64_t bytes) {
  if (reserve_ == 0) return Status::Ok();
  Look();
  const uint64_t free = free_bytes();
  if (ballast_bytes() < reserve_) {
    return Status::NoSpace(
        "the data volume is full: its reserve of " + Bytes(reserve_) +
        ", kept for commits, group registrations, seals and retirement, is in use (" +
        Bytes(free) + " free); produce resumes once retention or retirement frees " +
        Bytes(2 * reserve_) + ", or the volume grows");
  }
  const uint64_t slack = reserve_ / 8;
  if (free < slack || free - slack < bytes) {
    return Status::NoSpace("the data volume has " + Bytes(free) + " free beside its reserve of " +
                           Bytes(reserve_) +
                           " (kept for commits, group registrations, seals and retirement); "
                           "produce resumes when retention or retirement frees space, or the "
                           "volume grows");
  }
  return Status::Ok();
}

bool DiskReserve::Release() {
  MutexLock lock(mu_);
  if (ballast_bytes() == 0) return false;
  const int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  bool freed = false;
  if (fd >= 0) {
    freed = ::ftruncate(fd, 0) == 0;
    ::close(fd);
  }
  if (!freed) {
    Logger("storage")->error("msg=\"could not release the disk reserve\" path={}", path_);
    return false;
  }
  ballast_.store(0, std::memory_order_relaxed);
  releases_.fetch_add(1, std::memory_order_relaxed);
  Look();
  Logger("storage")->warn(
      "msg=\"the data volume is full: released the disk reserve for commits, groups, seals and "
      "retirement; produce is refused until it is back\" path={} reserve_bytes={} free_bytes={}",
      path_, reserve_, free_bytes());
  return true;
}

void DiskReserve::Tick() {
  Look();
  if (reserve_ == 0 || ballast_bytes() >= reserve_ || free_bytes() < 2 * reserve_) return;
  MutexLock lock(mu_);
  if (ballast_bytes() >= reserve_) return;
  if (Status st = TakeLocked(); !st.ok()) {
    Logger("storage")->warn("msg=\"could not take the disk reserve back\" reason=\"{}\"",
                            st.message());
  }
}

namespace {

bool Full(const Status& st) { return st.code() == Status::Code::kNoSpace; }

class ReservedFile final : public File {
 public:
  ReservedFile(std::unique_ptr<File> inner, DiskReserve& reserve)
      : inner_(std::move(inner)), reserve_(reserve) {}

  Status ReadAt(uint64_t pos, char* buf, size_t len) const override {
    return inner_->ReadAt(pos, buf, len);
  }
  Status WriteAt(uint64_t pos, const char* buf, size_t len) override {
    Status st = inner_->WriteAt(pos, buf, len);
    if (Full(st) && reserve_.Release()) st = inner_->WriteAt(pos, buf, len);
    return st;
  }
  Status Truncate(uint64_t size) override {
    Status st = inner_->Truncate(size);
    if (Full(st) && reserve_.Release()) st = inner_->Truncate(size);
    return st;
  }
  // A failed fdatasync is never tried again: what it did not write may be gone (see DiskLog).
  Status Sync() override { return inner_->Sync(); }
  Result<uint64_t> Size() const override { return inner_->Size(); }
  Result<int64_t> ModifiedMs() const override { return inner_->ModifiedMs(); }

 private:
  const std::unique_ptr<File> inner_;
  DiskReserve& reserve_;
};

class ReservedFileSystem final : public FileSystem {
 public:
  ReservedFileSystem(FileSystem& inner, DiskReserve& reserve) : inner_(inner), reserve_(reserve) {}

  Result<std::unique_ptr<File>> Open(const std::string& path, bool truncate) override {
    auto f = inner_.Open(path, truncate);
    if (!f.ok() && Full(f.status()) && reserve_.Release()) f = inner_.Open(path, truncate);
    if (!f.ok()) return f.status();
    return std::unique_ptr<File>(new ReservedFile(std::move(f).value(), reserve_));
  }
  Status ReadWholeFile(const std::string& path, std::string* out) override {
    return inner_.ReadWholeFile(path, out);
  }
  Status WriteFileAtomic(const std::string& path, const std::string& contents) override {
    Status st = inner_.WriteFileAtomic(path, contents);
    if (Full(st) && reserve_.Release()) st = inner_.WriteFileAtomic(path, contents);
    return st;
  }
  Status Remove(const std::string& path) override { return inner_.Remove(path); }
  Status RemoveAll(const std::string& path) override { return inner_.RemoveAll(path); }
  Status CreateDirs(const std::string& path) override {
    Status st = inner_.CreateDirs(path);
    if (Full(st) && reserve_.Release()) st = inner_.CreateDirs(path);
    return st;
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    return inner_.List(dir);
  }
  Status SyncDir(const std::string& dir) override { return inner_.SyncDir(dir); }

 private:
  FileSystem& inner_;
  DiskReserve& reserve_;
};

}  // namespace

std::unique_ptr<FileSystem> WithReserve(FileSystem& inner, DiskReserve& reserve) {
  return std::make_unique<ReservedFileSystem>(inner, reserve);
}

}  // namespace shoal::storage
