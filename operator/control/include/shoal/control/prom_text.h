// Prometheus text exposition format (version 0.0.4), the read side: what MetricsObserver uses to
// read a sidecar's /metrics. Only the samples are kept; # HELP, # TYPE and other comment lines
// are skipped, and so is the metric type (a reader asks for the names it knows).
//
// The grammar accepted, per line (blank lines and lines whose first non-blank character is '#'
// are skipped; '\r' before '\n' is tolerated):
//   name [ '{' [ label '=' '"' value '"' { ',' label '=' '"' value '"' } [ ',' ] ] '}' ]
//        value [ timestamp ]
// with blanks or tabs allowed between tokens; a metric name is [a-zA-Z_:][a-zA-Z0-9_:]*, a label
// name [a-zA-Z_][a-zA-Z0-9_]*; a label value escapes only \\, \" and \n; the value is a float or
// NaN, +Inf, -Inf (any case, as Prometheus reads them); the timestamp is an integer of
// milliseconds. A duplicate label name on one sample is an error, as in Prometheus.
//
// Free functions and values; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::control {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
  std::optional<int64_t> timestamp_ms;

  // The label's value, or nullptr when the sample has no such label.
  const std::string* Label(const std::string& label) const {
    auto it = labels.find(label);
    return it == labels.end() ? nullptr : &it->second;
  }
};

// Parses a whole exposition. A malformed line gives InvalidArgument naming its line number
// (1-based) and what is wrong with it ("line 7: expected '=' after label name \"topic\""); no
// partial result is returned then. Never throws.
Result<std::vector<PromSample>> ParsePromText(std::string_view text);

}  // namespace shoal::control
