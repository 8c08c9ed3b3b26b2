#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "shoal/common/files.h"
#include "storage/file_system.h"
#include "storage/file_util.h"

namespace shoal::storage {

namespace {

// An error of std::filesystem as ErrnoError gives it: out of descriptors names RLIMIT_NOFILE and
// is Unavailable, a full volume is NoSpace, the rest IoError.
Status FromErrorCode(const std::string& what, const std::error_code& ec) {
  if (ec.category() == std::generic_category() || ec.category() == std::system_category()) {
    errno = ec.value();
    return ErrnoError(what);
  }
  return Status::IoError(what + ": " + ec.message());
}

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixFile() override { ::close(fd_); }

  Status ReadAt(uint64_t pos, char* buf, size_t len) const override {
    return PreadFull(fd_, buf, len, pos).Annotate(path_);
  }
  Status WriteAt(uint64_t pos, const char* buf, size_t len) override {
    return PwriteFull(fd_, buf, len, pos).Annotate(path_);
  }
  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return ErrnoError("truncating " + path_);
    return Status::Ok();
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return ErrnoError("fdatasync " + path_);
    return Status::Ok();
  }
  Result<uint64_t> Size() const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoError("stat " + path_);
    return static_cast<uint64_t>(st.st_size);
  }
  Result<int64_t> ModifiedMs() const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoError("stat " + path_);
    return int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
  }

 private:
  const int fd_;
  const std::string path_;
};

class Posix final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path, bool truncate) override {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0),
                          0644);
    if (fd < 0) return ErrnoError("opening " + path);
    return std::unique_ptr<File>(new PosixFile(fd, path));
  }
  Status ReadWholeFile(const std::string& path, std::string* out) override {
    return storage::ReadWholeFile(path, out);
  }
  Status WriteFileAtomic(const std::string& path, const std::string& contents) override {
    return WriteFileDurable(path, contents);
  }
  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("removing " + path);
    return Status::Ok();
  }
  Status RemoveAll(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return FromErrorCode("removing " + path, ec);
    return Status::Ok();
  }
  Status CreateDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return FromErrorCode("creating " + path, ec);
    return Status::Ok();
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    std::error_code ec;
    std::vector<std::string> out;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) {
      if (ec == std::errc::no_such_file_or_directory) return Status::NotFound(dir + " is absent");
      return FromErrorCode("listing " + dir, ec);
    }
    for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
      if (ec) return FromErrorCode("listing " + dir, ec);
      out.push_back(it->path().filename().string());
    }
    return out;
  }
  Status SyncDir(const std::string& dir) override { return shoal::FsyncDir(dir); }
};

}  // namespace

FileSystem& PosixFileSystem() {
  static Posix* fs = new Posix();
  return *fs;
}

}  // namespace shoal::storage
