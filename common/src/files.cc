#include "shoal/common/files.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace shoal {

Status ErrnoError(const std::string& what) {
  const int err = errno;
  // Out of descriptors or memory: nothing is wrong with the disk, and the caller may try again
  // once some are free (or, for a change, the coordinator places the partition elsewhere).
  if (err == EMFILE || err == ENFILE) {
    rlimit r{};
    std::string limit;
    if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
      limit = " (this process may open " + std::to_string(r.rlim_cur) + " files: RLIMIT_NOFILE)";
    }
    return Status::Unavailable(what + ": " + std::strerror(err) + limit);
  }
  if (err == ENOMEM) return Status::Unavailable(what + ": " + std::strerror(err));
  // A full volume (or quota): the sidecar's disk reserve releases its ballast and the write is
  // tried again (storage/disk_reserve.h); produce is refused with it.
  if (err == ENOSPC || err == EDQUOT) return Status::NoSpace(what + ": " + std::strerror(err));
  return Status::IoError(what + ": " + std::strerror(err));
}

Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("opening directory " + dir);
  const int rc = ::fsync(fd);
  const Status st = rc != 0 ? ErrnoError("fsync of directory " + dir) : Status::Ok();
  ::close(fd);
  return st;
}

Status WriteFileDurable(const std::string& path, std::string_view content, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError("creating " + tmp);
  Status st = Status::Ok();
  size_t done = 0;
  while (st.ok() && done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      st = ErrnoError("writing " + tmp);
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (st.ok() && ::fdatasync(fd) != 0) st = ErrnoError("fdatasync of " + tmp);
  if (::close(fd) != 0 && st.ok()) st = ErrnoError("closing " + tmp);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("renaming " + tmp + " to " + path);
  const auto slash = path.rfind('/');
  return FsyncDir(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

Result<std::string> RandomToken(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (bytes > 0 && RAND_bytes(raw.data(), static_cast<int>(bytes)) != 1) {
    return Status::Internal("the random generator failed (RAND_bytes)");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char b : raw) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

}  // namespace shoal
