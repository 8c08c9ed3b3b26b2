#include "shoal/common/version.h"

#ifndef SHOAL_VERSION
#error "SHOAL_VERSION comes from CMake (the project's version)"
#endif

namespace shoal {

const std::string& Version() {
  static const std::string v = SHOAL_VERSION;
  return v;
}

}  // namespace shoal
