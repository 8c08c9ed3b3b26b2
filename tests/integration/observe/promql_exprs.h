// What prometheus_test needs to read the expressions of a Grafana dashboard and of alert rules:
// a small PromQL lexer that finds the vector selectors of an expression, Grafana's variable
// substitution, and Grafana's templating queries (label_values, query_result) turned into
// Prometheus queries. Free functions of values; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shoal::testing {

// The vector selectors of a PromQL expression, in order of first appearance and without
// duplicates, as written: a metric name with its matcher block (`shoal_partitions{state=
// "active"}`), a bare metric name, or a matcher block alone (`{__name__=~"shoal_.*"}`). Range
// and subquery brackets, offsets and @ modifiers are left out. Skipped: function and
// aggregation names (an identifier before "("), aggregation operators before by/without,
// keywords (and or unless bool offset by without on ignoring group_left group_right inf nan),
// the label lists after by/without/on/ignoring/group_left/group_right, strings, numbers,
// durations and comments.
std::vector<std::string> VectorSelectors(std::string_view expr);

// Grafana's substitution in a query: $name, ${name}, ${name:format} and [[name]] of `vars`,
// and the built-in $__rate_interval, $__interval and $__range (as `interval`, e.g. "1m"),
// $__interval_ms, $__range_ms and $__range_s (its seconds and milliseconds). Longer names win
// ($topics before $topic).
std::string SubstituteVariables(std::string expr, const std::map<std::string, std::string>& vars,
                                int interval_seconds = 60);

// The first variable reference left in an expression ($x, ${x}, [[x]]), or nullopt. `$1` and
// the like (label_replace's groups) are not variables.
std::optional<std::string> UnresolvedVariable(std::string_view expr);

// A templating query of a Grafana Prometheus data source, as something Prometheus answers.
struct TemplateQuery {
  enum class Kind {
    kSeriesLabel,  // label_values(<selector>, <label>): the values of `label` in `expr`'s series
    kLabelName,    // label_values(<label>): /api/v1/label/<label>/values
    kExpr,         // query_result(<expr>), or anything else taken as PromQL
  };
  Kind kind = Kind::kExpr;
  std::string expr;
  std::string label;
};
TemplateQuery ParseTemplateQuery(std::string_view query);

}  // namespace shoal::testing
