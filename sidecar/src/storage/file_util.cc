#include "storage/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shoal/common/files.h"

namespace shoal::storage {

Status PreadFull(int fd, char* buf, size_t len, uint64_t pos) {
  while (len > 0) {
    ssize_t n = ::pread(fd, buf, len, static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("pread");
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
    if (n < 0) return ErrnoError("pwrite");
    buf += n;
    len -= static_cast<size_t>(n);
    pos += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status ReadWholeFile(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist");
    return ErrnoError("opening " + path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return ErrnoError("stat " + path);
  }
  out->resize(static_cast<size_t>(st.st_size));
  Status s = out->empty() ? Status::Ok() : PreadFull(fd, out->data(), out->size(), 0);
  ::close(fd);
  return s;
}

}  // namespace shoal::storage
