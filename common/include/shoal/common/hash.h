// The key hash: the one function that decides which hash point (and so which partition) a key
// belongs to. The sidecar's router, the operator's planner and the verifier all call this.
#pragma once

#include <cstdint>
#include <string_view>

namespace shoal {

// zlib's IEEE CRC-32 of the key bytes: a point in [0, 2^32). Pure, thread-safe.
uint32_t KeyHash(std::string_view key);

// CRC-32 of arbitrary bytes, continuing from `crc` (0 to start). Used for record checksums.
uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0);

}  // namespace shoal
