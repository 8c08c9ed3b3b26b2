#include "shoal/common/hash.h"

#include <zlib.h>

namespace shoal {

uint32_t KeyHash(std::string_view key) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(key.data()), static_cast<uInt>(key.size())));
}

uint32_t Crc32(const void* data, size_t size, uint32_t crc) {
  return static_cast<uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef*>(data), static_cast<z_size_t>(size)));
}

}  // namespace shoal
