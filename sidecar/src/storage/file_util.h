// Thin, errno-aware wrappers over the POSIX file calls the storage layer needs. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "shoal/common/status.h"

namespace shoal::storage {

// IoError carrying strerror(errno) after `what`.
Status ErrnoStatus(const std::string& what);
Status PreadFull(int fd, char* buf, size_t len, uint64_t pos);
Status PwriteFull(int fd, const char* buf, size_t len, uint64_t pos);
Status FsyncDir(const std::string& dir);
Status ReadWholeFile(const std::string& path, std::string* out);
// Writes tmp, fsyncs it, renames over `path`, fsyncs the directory: all or nothing after a crash.
Status WriteFileAtomic(const std::string& path, const std::string& contents);

}  // namespace shoal::storage
