#include "storage/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shoal::storage {

Status ErrnoStatus(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

Status PreadFull(int fd, char* buf, size_t len, uint64_t pos) {
  while (len > 0) {
    ssize_t n = ::pread(fd, buf, len, static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("pread");
    if (n == 0) return Status::IoError("pread: unexpected end of file");
    buf += n;
    len -= static_cast<size_t>(n);
    pos += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status PwriteFull(int fd, const char* buf, size_t len, uint64_t pos) {
  while (len > 0) {
    ssize_t n = ::pwrite(fd, buf, len, static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("pwrite");
    buf += n;
    len -= static_cast<size_t>(n);
    pos += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("opening directory " + dir);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoStatus("fsync directory " + dir);
  return Status::Ok();
}

Status ReadWholeFile(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist");
    return ErrnoStatus("opening " + path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return ErrnoStatus("stat " + path);
  }
  out->resize(static_cast<size_t>(st.st_size));
  Status s = out->empty() ? Status::Ok() : PreadFull(fd, out->data(), out->size(), 0);
  ::close(fd);
  return s;
}

Status WriteFileAtomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("creating " + tmp);
  Status s = PwriteFull(fd, contents.data(), contents.size(), 0);
  if (s.ok() && ::fdatasync(fd) != 0) s = ErrnoStatus("fdatasync " + tmp);
  ::close(fd);
  if (!s.ok()) return s;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("renaming " + tmp);
  auto slash = path.rfind('/');
  return FsyncDir(slash == std::string::npos ? "." : path.substr(0, slash));
}

}  // namespace shoal::storage
