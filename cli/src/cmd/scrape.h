// What a sidecar's /metrics says, for the benchmarks and the torture harness.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shoal/control/prom_text.h"

namespace shoal::cli {

// The samples of http://host:port/metrics; empty when it does not answer or cannot be read.
std::vector<control::PromSample> Scrape(const std::string& host, uint16_t port);

// Per value of `label`, the sum of the samples named `name` whose labels include `where`.
std::map<std::string, double> SumBy(const std::vector<control::PromSample>& samples,
                                    const std::string& name, const std::string& label,
                                    const std::map<std::string, std::string>& where = {});

}  // namespace shoal::cli
