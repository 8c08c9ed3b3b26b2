#include "shoal/common/load_profile.h"

#include <cmath>

namespace shoal {

double LoadProfileFactor(std::string_view profile, double t, double d, double surge_from,
                         double surge_until) {
  if (profile == "surge") {
    if (d <= 0) return 1;
    return (t >= surge_from * d && t < surge_until * d) ? 10.0 : 1.0;
  }
  if (profile == "ramp") {
    if (d <= 0) return 1;
    const double from = surge_from * d, until = surge_until * d;
    if (t < from) return 1;
    if (t < until) return 1.0 + 9.0 * (t - from) / (until - from);
    return t < until + (until - from) ? 10.0 : 1.0;
  }
  if (profile == "sawtooth") {
    const double period = d > 0 ? d / 3 : 10.0;
    const double phase = std::fmod(t, period) / period;
    return 1.0 + 9.0 * phase;
  }
  return 1.0;
}

}  // namespace shoal
