// The length of a UTF-8 string in code points, as JSON Schema and the Kubernetes API count
// minLength/maxLength (every byte but continuation bytes starts one). Header-only: the schema
// validators of tests/support and the CRD test share it.
#pragma once

#include <cstddef>
#include <string_view>

namespace shoal::testing {

inline size_t Utf8CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace shoal::testing
