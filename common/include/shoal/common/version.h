// The version of this build of Shoal (the CMake project's version, the chart's appVersion), for
// `--version` on every binary and the shoal_build_info metric. Free function.
#pragma once

#include <string>

namespace shoal {

// "0.1.0".
const std::string& Version();

}  // namespace shoal
