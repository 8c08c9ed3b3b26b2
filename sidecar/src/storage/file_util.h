// Thin, errno-aware wrappers over the POSIX file calls the storage layer needs. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "shoal/common/status.h"

namespace shoal::storage {

Status PreadFull(int fd, char* buf, size_t len, uint64_t pos);
Status PwriteFull(int fd, const char* buf, size_t len, uint64_t pos);
Status ReadWholeFile(const std::string& path, std::string* out);
// Durable whole-file writes, directory syncs and ErrnoError are shoal/common/files.h's.

}  // namespace shoal::storage
