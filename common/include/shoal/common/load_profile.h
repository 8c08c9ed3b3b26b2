// The shapes of load over time that the load generator offers and the simulator models (they
// must agree): the rate's multiplier at `t` seconds into a run of `duration_s`.
//   "surge":    10x from surge_from to surge_until (fractions of the duration), 1x around it
//   "ramp":     1x until surge_from, rising evenly to 10x at surge_until, held at 10x as long
//               again, then 1x
//   "sawtooth": 1x rising to 10x over each third of the duration (10 s without one), repeated
//   anything else ("steady"): 1x
// Without a duration, surge and ramp are steady. Pure; thread-safe.
#pragma once

#include <string_view>

namespace shoal {

double LoadProfileFactor(std::string_view profile, double t, double duration_s,
                         double surge_from = 0.3, double surge_until = 0.5);

}  // namespace shoal
