// Durable whole-file writes and random tokens: the two OS services every Shoal process needs
// the same way (the sidecar's map, seals and snapshots; the local platform's control state and
// pid files; the admin tokens of the sidecar, the local platform and the operator).
// Free functions; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "shoal/common/status.h"

namespace shoal {

// IoError carrying strerror(errno) after `what` ("opening /d/x: No such file or directory"); call
// it right after the failed call, before anything else can change errno. Out of descriptors
// (EMFILE, ENFILE) or memory (ENOMEM) is Unavailable instead, with the process's open-files
// limit named: the disk is fine, and it may work again once some are free.
Status ErrnoError(const std::string& what);

// Writes `content` to `path` so that after a crash or a power cut the file holds either its old
// content or the new, whole: a temporary file beside it, written in full, fdatasync, rename over
// `path`, fsync of the directory. Returns only once the new content is durable. A failure leaves
// the old file as it was (IoError naming the step and errno).
Status WriteFileDurable(const std::string& path, std::string_view content, mode_t mode = 0644);

// fsync of a directory (an entry created or renamed in it becomes durable).
Status FsyncDir(const std::string& dir);

// `bytes` bytes from OpenSSL's CSPRNG (RAND_bytes), as 2 * bytes lowercase hex digits: admin
// tokens. Internal when the generator fails (never a weak or empty token).
Result<std::string> RandomToken(size_t bytes = 24);

}  // namespace shoal
