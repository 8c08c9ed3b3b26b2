#include "shoal/harness/run_report.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include "shoal/common/json.h"

namespace shoal::harness {
namespace {

// The checks' thresholds, as the report's readers know them.
constexpr double kLagWindowAfterSurgeS = 30;
constexpr double kLagStopsGrowingWithinS = 15;
constexpr double kMaxPartitionSecondsRatio = 0.5;  // dynamic / static-at-peak
constexpr double kMaxPeakLagRatio = 2;             // dynamic / static-at-peak
constexpr double kMinBaselineLagRatio = 10;        // static-baseline at the surge's end / dynamic
constexpr double kMinIdleRatio = 2;  // static-peak / dynamic partition-seconds outside the surge
// An unannounced surge: the topic reacts, so its lag is compared with the static baseline's.
constexpr double kMaxPeakLagToBaseline = 0.5;        // dynamic / static-baseline peak lag
constexpr double kLagBackWithinS = 35;               // from the surge's start
constexpr double kMaxEventSecondsToBaseline = 0.15;  // dynamic / static-baseline lag area

bool HasSurge(const RunSummary& run) { return run.surge_end_s > run.surge_start_s; }

// The failover of each kill (by index; nullptr when none): the first failover at or after the
// kill whose pods name the killed pod.
std::vector<const RunFailover*> KillFailovers(const RunSummary& run) {
  std::vector<const RunFailover*> out;
  for (const RunKill& k : run.kills) {
    const RunFailover* found = nullptr;
    for (const RunFailover& fo : run.failovers) {
      if (fo.t >= k.t && std::find(fo.pods.begin(), fo.pods.end(), k.pod) != fo.pods.end()) {
        found = &fo;
        break;
      }
    }
    out.push_back(found);
  }
  return out;
}

struct LagPeak {
  double after_surge_s = -1;  // -1: no surge, or no samples in the window
  double lag = 0;
};

// The lag consumers hold in flight, not a backlog: what was fetched and not yet committed is a
// quarter of a second of arrivals at the surge's rate, or whatever the lag reached before the
// surge. Lag up to this floor is not growth.
constexpr double kInFlightSeconds = 0.25;

double InFlightFloor(const RunSummary& run) {
  double floor = kInFlightSeconds * run.base_rate * run.surge_factor;
  for (const auto& s : run.samples) {
    if (s.t < run.surge_start_s && std::isfinite(s.lag)) floor = std::max(floor, s.lag);
  }
  return floor;
}

// When the lag stopped growing: the first sample holding the highest lag in [surge start, surge
// end + 30 s] (strictly greater wins, so on a plateau the lag stopped growing when it first got
// there); 0 s after the surge start when it never rose above the in-flight floor.
LagPeak FindLagPeak(const RunSummary& run) {
  LagPeak peak;
  if (!HasSurge(run)) return peak;
  const double from = run.surge_start_s, to = run.surge_end_s + kLagWindowAfterSurgeS;
  double best = -std::numeric_limits<double>::infinity();
  for (const auto& s : run.samples) {
    if (s.t >= from && s.t <= to && std::isfinite(s.lag) && s.lag > best) {
      best = s.lag;
      peak = {s.t - from, s.lag};
    }
  }
  if (peak.after_surge_s >= 0 && peak.lag <= InFlightFloor(run)) peak.after_surge_s = 0;
  return peak;
}

// ---------------------------------------------------------------------------------------------
// Numbers for people: thousands separators, fixed decimals.

std::string GroupThousands(std::string_view digits) {
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string FormatNumber(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(v));
  std::string_view s(buf);
  const size_t dot = std::min(s.find('.'), s.size());
  std::string out = GroupThousands(s.substr(0, dot));
  out += s.substr(dot);
  // No "-0.0": a sign only when something nonzero survived the rounding.
  if (v < 0 && out.find_first_of("123456789") != std::string::npos) out.insert(0, "-");
  return out;
}

std::string FormatCount(uint64_t v) { return GroupThousands(std::to_string(v)); }

// Integers stay integers; small fractional values keep one decimal (a rate of 2.5 events/s).
std::string FormatQuantity(double v) {
  const bool fractional = std::isfinite(v) && std::fabs(v) < 100 && v != std::round(v);
  return FormatNumber(v, fractional ? 1 : 0);
}

std::string FormatSeconds(double v) { return FormatNumber(v, 1) + " s"; }

std::string FormatRatio(double v) {
  if (!std::isfinite(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// Shortest round-trip form for machine-readable files (CSV); empty for non-finite values.
void AppendCsvDouble(std::string& out, double v) {
  if (!std::isfinite(v)) return;
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// ---------------------------------------------------------------------------------------------
// Escaping.

// Text inside a Markdown paragraph or table cell: no cell breaks, no HTML, no emphasis.
std::string Md(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '*':
        out += "\\*";
        break;
      case '<':
        out += "&lt;";
        break;
      case '\n':
      case '\r':
      case '\t':
        out += ' ';
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A fenced code block longer than any run of backticks inside `s`.
std::string MdCodeBlock(std::string_view s) {
  size_t longest = 0, run = 0;
  for (char c : s) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  return fence + "sh\n" + std::string(s) + "\n" + fence + "\n";
}

// Text and attribute values in XML. Control characters that XML 1.0 forbids become spaces.
std::string Xml(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
  return out;
}

// A run's name as a file-name fragment: [A-Za-z0-9._-], anything else becomes '_'.
std::string FileSafe(std::string_view name) {
  std::string out;
  for (char c : name) {
    const bool keep =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "run" + out;
  return out;
}

// chart-<name>.svg per compared run, in order; a repeated name gets "-2", "-3", ...
std::vector<std::string> ChartFileNames(const std::vector<RunSummary>& runs) {
  std::vector<std::string> names;
  std::set<std::string> taken;
  for (const auto& run : runs) {
    const std::string base = "chart-" + FileSafe(run.name);
    std::string name = base + ".svg";
    for (int i = 2; taken.count(name); ++i) name = base + "-" + std::to_string(i) + ".svg";
    taken.insert(name);
    names.push_back(name);
  }
  return names;
}

// ---------------------------------------------------------------------------------------------
// Checks: computed once, rendered in Markdown and JSON alike.

enum class Verdict { kPass, kFail, kNotApplicable };

std::string_view VerdictText(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kNotApplicable:
      return "n/a";
  }
  return "n/a";
}

struct Check {
  std::string name;
  std::string measured;                                     // for people
  double value = std::numeric_limits<double>::quiet_NaN();  // for machines; NaN when none
  Verdict verdict = Verdict::kNotApplicable;
};

Verdict PassIf(bool ok) { return ok ? Verdict::kPass : Verdict::kFail; }

std::vector<Check> RunChecks(const RunSummary& run, const RunFigures& f) {
  std::vector<Check> checks;

  Check lag{"lag stops growing within 15 s after the surge begins", "", f.lag_peak_after_surge_s,
            Verdict::kNotApplicable};
  if (!HasSurge(run)) {
    lag.measured = "no surge in this run";
    lag.value = std::numeric_limits<double>::quiet_NaN();
  } else if (f.lag_peak_after_surge_s < 0) {
    lag.measured = "no samples during the surge";
    lag.value = std::numeric_limits<double>::quiet_NaN();
  } else {
    const LagPeak peak = FindLagPeak(run);
    if (peak.lag <= InFlightFloor(run)) {
      lag.measured = "lag peaked at " + FormatQuantity(peak.lag) +
                     " events, within what consumers hold in flight (" +
                     FormatQuantity(InFlightFloor(run)) + "): it never grew";
    } else {
      lag.measured = "lag peaked at " + FormatQuantity(peak.lag) + " events " +
                     FormatSeconds(f.lag_peak_after_surge_s) + " after the surge began";
    }
    lag.verdict = PassIf(f.lag_peak_after_surge_s <= kLagStopsGrowingWithinS);
  }
  checks.push_back(std::move(lag));

  Check back{"partitions and pods return toward the baseline after the surge",
             "partitions " + std::to_string(f.baseline_partitions) + " -> " +
                 std::to_string(f.max_partitions) + " -> " + std::to_string(f.final_partitions) +
                 ", pods " + std::to_string(f.baseline_pods) + " -> " + std::to_string(f.max_pods) +
                 " -> " + std::to_string(f.final_pods) + " (baseline -> max -> final)",
             std::numeric_limits<double>::quiet_NaN(), Verdict::kNotApplicable};
  if (run.samples.empty()) {
    back.measured = "no samples";
  } else if (!f.scaled_up) {
    back.measured += "; never above the baseline";
  } else {
    back.value = f.scaled_down ? 1 : 0;
    back.verdict = PassIf(f.scaled_down);
  }
  checks.push_back(std::move(back));

  if (run.chaos) {
    Check chaos{"every killed leader's partitions are failed over", "",
                static_cast<double>(f.kills_failed_over), PassIf(f.chaos_failed_over)};
    if (f.kills == 0) {
      chaos.measured = "no leader was killed";
    } else {
      if (f.kills < run.kills_planned) {
        chaos.measured = std::to_string(f.kills) + " of " + std::to_string(run.kills_planned) +
                         " kills planned made; ";
      }
      chaos.measured += std::to_string(f.kills_failed_over) + " of " + std::to_string(f.kills) +
                        " kills followed by a failover";
      if (f.kills_failed_over > 0) {
        chaos.measured += ", the longest in " + FormatSeconds(f.failover_s) +
                          " (the loop's measure), its map " + FormatSeconds(f.kill_to_failover_s) +
                          " after the kill";
      }
    }
    checks.push_back(std::move(chaos));
  }
  return checks;
}

const RunSummary* FindRun(const std::vector<RunSummary>& runs, std::string_view name) {
  for (const auto& r : runs) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

namespace {

// The last sample at or before `t` (nullptr when none).
const RunSample* SampleAt(const RunSummary& run, double t) {
  const RunSample* at = nullptr;
  for (const auto& s : run.samples) {
    if (s.t <= t) at = &s;
  }
  return at;
}

// Partition-seconds outside the surge: each sample's partitions times the time to the next
// sample, for samples before the surge or from its end on.
double PartitionSecondsOutsideSurge(const RunSummary& run) {
  double sum = 0;
  for (size_t i = 0; i + 1 < run.samples.size(); ++i) {
    const RunSample& s = run.samples[i];
    if (s.t >= run.surge_start_s && s.t < run.surge_end_s) continue;
    sum += s.partitions * (run.samples[i + 1].t - s.t);
  }
  return sum;
}

}  // namespace

std::vector<Check> CompareChecks(const std::vector<RunSummary>& runs) {
  const RunSummary* dyn = FindRun(runs, "dynamic");
  const RunSummary* peak = FindRun(runs, "static-peak");
  if (dyn == nullptr || peak == nullptr) return {};
  const RunFigures d = ComputeFigures(*dyn);
  const RunFigures p = ComputeFigures(*peak);
  std::vector<Check> checks;

  const RunSummary* base = FindRun(runs, "static-baseline");
  if (!dyn->announced && base) {
    // Unannounced, the topic reacts: the backlog the surge builds before the split is the
    // baseline's too, and what counts is how much smaller it stays and how fast it goes.
    const RunFigures b = ComputeFigures(*base);
    Check peak_half{"dynamic's peak lag is at most half static-baseline's", "",
                    std::numeric_limits<double>::quiet_NaN(), Verdict::kNotApplicable};
    const std::string peak_numbers =
        " (" + FormatQuantity(d.peak_lag) + " / " + FormatQuantity(b.peak_lag) + " events)";
    if (b.peak_lag > 0) {
      peak_half.value = d.peak_lag / b.peak_lag;
      peak_half.measured = "ratio " + FormatRatio(peak_half.value) + peak_numbers;
      peak_half.verdict = PassIf(peak_half.value <= kMaxPeakLagToBaseline);
    } else {
      peak_half.measured = "static-baseline had no lag" + peak_numbers;
    }
    checks.push_back(std::move(peak_half));
    Check back{"dynamic's lag is back under 1,000 events within 35 s of the surge's start", "",
               d.lag_back_under_s,
               PassIf(d.lag_back_under_s >= 0 && d.lag_back_under_s <= kLagBackWithinS)};
    back.measured = d.lag_back_under_s < 0
                        ? "never back under " + FormatQuantity(kNormalLag) + " events"
                        : FormatSeconds(d.lag_back_under_s) + " after the surge began";
    checks.push_back(std::move(back));
    Check area{"dynamic's event-seconds of lag are at most 15% of static-baseline's", "",
               std::numeric_limits<double>::quiet_NaN(), Verdict::kNotApplicable};
    const std::string area_numbers = " (" + FormatQuantity(d.lag_event_seconds) + " / " +
                                     FormatQuantity(b.lag_event_seconds) + " event-seconds)";
    if (b.lag_event_seconds > 0) {
      area.value = d.lag_event_seconds / b.lag_event_seconds;
      area.measured = "ratio " + FormatRatio(area.value) + area_numbers;
      area.verdict = PassIf(area.value <= kMaxEventSecondsToBaseline);
    } else {
      area.measured = "static-baseline had no lag" + area_numbers;
    }
    checks.push_back(std::move(area));
  }
  // The static baseline leaves customers waiting: its lag grows through the surge, to at least
  // ten times the dynamic run's peak by the surge's end.
  if (dyn->announced && base) {
    Check grows{"static-baseline's lag grows through the surge to at least 10x dynamic's peak", "",
                std::numeric_limits<double>::quiet_NaN(), Verdict::kNotApplicable};
    const RunSample* first = SampleAt(*base, base->surge_start_s);
    const RunSample* last = SampleAt(*base, base->surge_end_s);
    if (first == nullptr || last == nullptr || base->surge_end_s <= base->surge_start_s) {
      grows.measured = "no samples of its surge";
    } else {
      const double at_end = last->lag, at_start = first->lag;
      const std::string numbers = " (" + FormatQuantity(at_start) + " at the surge's start, " +
                                  FormatQuantity(at_end) + " at its end; dynamic's peak " +
                                  FormatQuantity(d.peak_lag) + ")";
      grows.value = d.peak_lag > 0 ? at_end / d.peak_lag
                                   : (at_end > 0 ? std::numeric_limits<double>::infinity() : 0);
      grows.measured =
          (d.peak_lag > 0 ? "ratio " + FormatRatio(grows.value)
                          : std::string(at_end > 0 ? "ratio infinite" : "ratio 0.00")) +
          numbers;
      grows.verdict = PassIf(at_end > at_start && grows.value >= kMinBaselineLagRatio);
    }
    checks.push_back(std::move(grows));
  }

  Check ps{"dynamic uses at most half the partition-seconds of static-at-peak", "",
           std::numeric_limits<double>::quiet_NaN(), Verdict::kNotApplicable};
  const std::string ps_numbers = " (" + FormatQuantity(d.partition_seconds) + " / " +
                                 FormatQuantity(p.partition_seconds) + " partition-seconds)";
  if (p.partition_seconds > 0) {
    ps.value = d.partition_seconds / p.partition_seconds;
    ps.measured = "ratio " + FormatRatio(ps.value) + ps_numbers;
    ps.verdict = PassIf(ps.value <= kMaxPartitionSecondsRatio);
  } else {
    ps.measured = "static-at-peak has no partition-seconds" + ps_numbers;
  }
  checks.push_back(std::move(ps));

  // A static run without any lag leaves no room: the dynamic run must then have none either.
  // (Announced: the capacity is in place when the surge begins, so the lag can be as low.)
  if (dyn->announced) {
    Check lag{"dynamic's peak lag is no worse than twice static-at-peak's", "",
              std::numeric_limits<double>::quiet_NaN(),
              PassIf(d.peak_lag <= kMaxPeakLagRatio * p.peak_lag)};
    const std::string lag_numbers =
        " (" + FormatQuantity(d.peak_lag) + " / " + FormatQuantity(p.peak_lag) + " events)";
    if (p.peak_lag > 0) {
      lag.value = d.peak_lag / p.peak_lag;
      lag.measured = "ratio " + FormatRatio(lag.value) + lag_numbers;
    } else {
      lag.value = d.peak_lag > 0 ? std::numeric_limits<double>::infinity() : 0;
      lag.measured = (d.peak_lag > 0 ? std::string("ratio infinite") : "ratio 0.00") + lag_numbers;
    }
    checks.push_back(std::move(lag));
  }

  // What static-at-peak pays for: its peak size before and after the surge, when the load
  // needs the baseline's.
  Check idle{"static-peak holds at least twice dynamic's partition-seconds outside the surge", "",
             std::numeric_limits<double>::quiet_NaN(), Verdict::kNotApplicable};
  const double idle_d = PartitionSecondsOutsideSurge(*dyn);
  const double idle_p = PartitionSecondsOutsideSurge(*peak);
  const std::string idle_numbers =
      " (" + FormatQuantity(idle_p) + " / " + FormatQuantity(idle_d) + " partition-seconds)";
  if (idle_d > 0) {
    idle.value = idle_p / idle_d;
    idle.measured = "ratio " + FormatRatio(idle.value) + idle_numbers;
    idle.verdict = PassIf(idle.value >= kMinIdleRatio);
  } else {
    idle.measured = "dynamic has no partition-seconds outside the surge" + idle_numbers;
  }
  checks.push_back(std::move(idle));
  return checks;
}

std::string ChecksTable(const std::vector<Check>& checks) {
  std::string out = "| check | measured | result |\n|---|---|---|\n";
  for (const auto& c : checks) {
    out += "| " + Md(c.name) + " | " + Md(c.measured) + " | **" +
           std::string(VerdictText(c.verdict)) + "** |\n";
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The chart.

constexpr double kWidth = 900, kHeight = 700;
constexpr double kLeft = 86, kRight = 20;
constexpr double kFirstPanelTop = 68, kPanelHeight = 128, kPanelGap = 26;
constexpr double kPlotWidth = kWidth - kLeft - kRight;

double PanelTop(int i) { return kFirstPanelTop + i * (kPanelHeight + kPanelGap); }

std::string Coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// 1, 2 or 5 times a power of ten, so that `range` spans about `ticks` steps.
double NiceStep(double range, int ticks) {
  if (!(range > 0) || !std::isfinite(range)) return 1;
  const double raw = range / ticks;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

std::string TickLabel(double v, double step) {
  if (std::fabs(v) >= 1e6) return FormatNumber(v / 1e6, step >= 1e6 ? 0 : 1) + "M";
  if (step >= 1) return FormatNumber(v, 0);
  return FormatNumber(v, static_cast<int>(std::ceil(-std::log10(step))));
}

struct Series {
  std::vector<double> values;  // one per sample
  const char* color;
  const char* label;
  bool step = false;  // a count that holds until the next sample (partitions, pods)
  bool dashed = false;
  bool area = false;
};

struct Panel {
  const char* title;
  const char* unit;
  bool integral;  // ticks at whole numbers only
  std::vector<Series> series;
};

// Renders one run's SVG. Used once (construct, Render); holds a reference to the run, which must
// outlive it; not thread-safe.
class Chart {
 public:
  explicit Chart(const RunSummary& run) : run_(run) {
    t0_ = 0;
    t1_ = std::max(run.duration_s, HasSurge(run) ? run.surge_end_s : 0.0);
    for (const auto& s : run.samples) {
      if (!std::isfinite(s.t)) continue;
      t0_ = std::min(t0_, s.t);
      t1_ = std::max(t1_, s.t);
    }
    if (t1_ <= t0_) t1_ = t0_ + 1;
  }

  std::string Render() {
    const std::string w = std::to_string(static_cast<int>(kWidth));
    const std::string h = std::to_string(static_cast<int>(kHeight));
    out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
            "\" viewBox=\"0 0 " + w + " " + h +
            "\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#222\">\n";
    const std::string heading =
        "Shoal run \"" + run_.name + "\": topic " + run_.topic + ", profile " + run_.profile;
    out_ += "<title>" + Xml(heading) + "</title>\n";
    out_ += "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"#ffffff\"/>\n";
    Text(kLeft, 22, heading, "font-size=\"15\" font-weight=\"bold\"");
    std::string sub = "base " + FormatQuantity(run_.base_rate) + " events/s";
    if (HasSurge(run_)) {
      sub += ", surge " + FormatQuantity(run_.surge_factor) + "x from " +
             FormatSeconds(run_.surge_start_s) + " to " + FormatSeconds(run_.surge_end_s) +
             " (shaded)";
    }
    if (run_.decisions.empty()) {
      sub += "; no decisions";
    } else {
      sub += "; " + std::to_string(run_.decisions.size()) +
             " decisions (dashed lines; hover one for its reason)";
    }
    Text(kLeft, 38, sub, "fill=\"#555\"");

    std::vector<Panel> panels(4);
    panels[0] = {"Arrival and consumed rate", "events/s", false, {}};
    panels[1] = {"Active partitions", "partitions", true, {}};
    panels[2] = {"Consumer pods", "pods", true, {}};
    panels[3] = {"Consumer lag", "events", false, {}};
    Series arrival{{}, "#1f77b4", "arrival", false, false, false};
    Series consumed{{}, "#2ca02c", "consumed", false, true, false};
    Series partitions{{}, "#9467bd", "partitions", true, false, false};
    Series pods{{}, "#ff7f0e", "desired", true, false, false};
    Series ready{{}, "#7f7f7f", "ready", true, true, false};
    Series lag{{}, "#d62728", "lag", false, false, true};
    for (const auto& s : run_.samples) {
      arrival.values.push_back(s.arrival_rate);
      consumed.values.push_back(s.consumed_rate);
      partitions.values.push_back(s.partitions);
      pods.values.push_back(s.pods);
      ready.values.push_back(s.ready_pods);
      lag.values.push_back(s.lag);
    }
    panels[0].series = {std::move(arrival), std::move(consumed)};
    panels[1].series = {std::move(partitions)};
    panels[2].series = {std::move(pods), std::move(ready)};
    panels[3].series = {std::move(lag)};
    for (int i = 0; i < static_cast<int>(panels.size()); ++i) DrawPanel(i, panels[i]);

    DrawTimeAxis(PanelTop(static_cast<int>(panels.size()) - 1) + kPanelHeight);
    DrawDecisions(PanelTop(0), PanelTop(static_cast<int>(panels.size()) - 1) + kPanelHeight);
    out_ += "</svg>\n";
    return std::move(out_);
  }

 private:
  double X(double t) const { return kLeft + (t - t0_) / (t1_ - t0_) * kPlotWidth; }

  void Text(double x, double y, std::string_view s, std::string_view attrs = "") {
    out_ += "<text x=\"" + Coord(x) + "\" y=\"" + Coord(y) + "\"";
    if (!attrs.empty()) out_ += " " + std::string(attrs);
    out_ += ">" + Xml(s) + "</text>\n";
  }

  void Line(double x1, double y1, double x2, double y2, std::string_view attrs) {
    out_ += "<line x1=\"" + Coord(x1) + "\" y1=\"" + Coord(y1) + "\" x2=\"" + Coord(x2) +
            "\" y2=\"" + Coord(y2) + "\" " + std::string(attrs) + "/>\n";
  }

  void DrawPanel(int index, const Panel& panel) {
    const double top = PanelTop(index), bottom = top + kPanelHeight;
    const double right = kLeft + kPlotWidth;
    out_ += "<g class=\"panel\">\n";
    Text(kLeft, top - 8, panel.title, "font-size=\"12\" font-weight=\"bold\"");

    // Legend, right-aligned above the panel.
    double lx = right - 90.0 * static_cast<double>(panel.series.size());
    for (const auto& s : panel.series) {
      Line(lx, top - 12, lx + 18, top - 12,
           std::string("stroke=\"") + s.color + "\" stroke-width=\"2\"" +
               (s.dashed ? " stroke-dasharray=\"4,3\"" : ""));
      Text(lx + 22, top - 8, s.label);
      lx += 90;
    }

    out_ += "<rect x=\"" + Coord(kLeft) + "\" y=\"" + Coord(top) + "\" width=\"" +
            Coord(kPlotWidth) + "\" height=\"" + Coord(kPanelHeight) +
            "\" fill=\"#fafafa\" stroke=\"#cccccc\"/>\n";
    if (HasSurge(run_)) {
      const double x1 = std::clamp(X(run_.surge_start_s), kLeft, right);
      const double x2 = std::clamp(X(run_.surge_end_s), kLeft, right);
      out_ += "<rect x=\"" + Coord(x1) + "\" y=\"" + Coord(top) + "\" width=\"" + Coord(x2 - x1) +
              "\" height=\"" + Coord(kPanelHeight) +
              "\" fill=\"#ffb74d\" fill-opacity=\"0.22\"><title>" +
              Xml("surge " + FormatQuantity(run_.surge_factor) + "x: " +
                  FormatSeconds(run_.surge_start_s) + " to " + FormatSeconds(run_.surge_end_s)) +
              "</title></rect>\n";
    }

    // Y axis: 0 to a round number at or above the highest value.
    double max = 0;
    for (const auto& s : panel.series) {
      for (double v : s.values) {
        if (std::isfinite(v)) max = std::max(max, v);
      }
    }
    // A little headroom, so that a line at the maximum does not hide in the frame.
    const double top_value = max * 1.08;
    double step = NiceStep(top_value, 4);
    if (panel.integral) step = std::max(step, 1.0);
    const double ymax = std::max(step, std::ceil(top_value / step) * step);
    auto y = [&](double v) {
      if (!std::isfinite(v)) v = 0;
      return bottom - std::clamp(v, 0.0, ymax) / ymax * kPanelHeight;
    };
    for (int i = 0; i * step <= ymax * (1 + 1e-9); ++i) {
      const double v = i * step, yy = y(v);
      if (i > 0) Line(kLeft, yy, right, yy, "stroke=\"#e6e6e6\"");
      Line(kLeft - 4, yy, kLeft, yy, "stroke=\"#888888\"");
      Text(kLeft - 7, yy + 4, TickLabel(v, step), "text-anchor=\"end\"");
    }
    const double cy = top + kPanelHeight / 2;
    Text(16, cy, panel.unit,
         "text-anchor=\"middle\" transform=\"rotate(-90 16 " + Coord(cy) + ")\" fill=\"#555\"");

    // Vertical grid at the time ticks.
    const double tstep = NiceStep(t1_ - t0_, 10);
    for (double t = std::ceil(t0_ / tstep) * tstep; t <= t1_ + 1e-9; t += tstep) {
      Line(X(t), top, X(t), bottom, "stroke=\"#eeeeee\"");
    }

    if (run_.samples.empty()) {
      Text(kLeft + kPlotWidth / 2, cy, "no samples", "text-anchor=\"middle\" fill=\"#999\"");
    }
    for (const auto& s : panel.series) {
      std::string points;
      for (size_t i = 0; i < s.values.size(); ++i) {
        const double x = X(run_.samples[i].t), yy = y(s.values[i]);
        if (s.step && i > 0) points += Coord(x) + "," + Coord(y(s.values[i - 1])) + " ";
        points += Coord(x) + "," + Coord(yy) + " ";
      }
      if (points.empty()) continue;
      points.pop_back();
      if (s.area) {
        out_ += std::string("<polygon fill=\"") + s.color + "\" fill-opacity=\"0.12\" points=\"" +
                Coord(X(run_.samples.front().t)) + "," + Coord(bottom) + " " + points + " " +
                Coord(X(run_.samples.back().t)) + "," + Coord(bottom) + "\"/>\n";
      }
      out_ += std::string("<polyline fill=\"none\" stroke=\"") + s.color +
              "\" stroke-width=\"1.6\" stroke-linejoin=\"round\"" +
              (s.dashed ? " stroke-dasharray=\"4,3\"" : "") + " points=\"" + points + "\"/>\n";
    }
    out_ += "</g>\n";
  }

  void DrawTimeAxis(double bottom) {
    out_ += "<g class=\"time-axis\">\n";
    const double tstep = NiceStep(t1_ - t0_, 10);
    for (double t = std::ceil(t0_ / tstep) * tstep; t <= t1_ + 1e-9; t += tstep) {
      Line(X(t), bottom, X(t), bottom + 4, "stroke=\"#888888\"");
      Text(X(t), bottom + 16, TickLabel(t, tstep), "text-anchor=\"middle\"");
    }
    Text(kLeft + kPlotWidth / 2, bottom + 34, "time since the load started (s)",
         "text-anchor=\"middle\" fill=\"#555\"");
    out_ += "</g>\n";
  }

  void DrawDecisions(double top, double bottom) {
    out_ += "<g class=\"decisions\">\n";
    for (const auto& d : run_.decisions) {
      if (!std::isfinite(d.t) || d.t < t0_ || d.t > t1_) continue;
      const std::string tip =
          "t " + FormatSeconds(d.t) + ": " + d.kinds + "; partitions " +
          std::to_string(d.partitions_from) + " -> " + std::to_string(d.partitions_to) + ", pods " +
          std::to_string(d.pods_from) + " -> " + std::to_string(d.pods_to) + ": " + d.reason;
      const double x = X(d.t);
      out_ += "<g><title>" + Xml(tip) + "</title>\n";
      Line(x, top, x, bottom,
           "stroke=\"#444444\" stroke-width=\"1\" stroke-opacity=\"0.7\" "
           "stroke-dasharray=\"3,3\"");
      // An invisible wider line, so that the tooltip does not need a pixel-exact pointer.
      Line(x, top, x, bottom,
           "stroke=\"#000000\" stroke-opacity=\"0\" stroke-width=\"8\" pointer-events=\"stroke\"");
      out_ += "</g>\n";
    }
    out_ += "</g>\n";
  }

  const RunSummary& run_;
  double t0_ = 0, t1_ = 1;
  std::string out_;
};

// ---------------------------------------------------------------------------------------------
// Markdown and files.

// The kills of a chaos run and the failovers that followed, with the chaos PASS/FAIL line.
std::string ChaosMarkdown(const RunSummary& run, const RunFigures& f) {
  std::string out = "## Chaos\n\n";
  if (f.chaos_failed_over) {
    out += "**Chaos: PASS**: " +
           std::string(f.kills == 1 ? "the killed leader's" : "each killed leader's") +
           " partitions failed over (" + FormatCount(f.failed_over_partitions) + " partitions in " +
           FormatCount(f.failovers) + " failover" + (f.failovers == 1 ? "" : "s") +
           ", the longest " + FormatSeconds(f.failover_s) +
           " as the control loop measured it, its map " + FormatSeconds(f.kill_to_failover_s) +
           " after the kill).\n\n";
  } else if (f.kills < std::max<uint32_t>(1, run.kills_planned)) {
    out += "**Chaos: FAIL**: " + FormatCount(f.kills) + " of the " +
           FormatCount(run.kills_planned) +
           " kills planned were made (no other pod led a partition with copies while a kill was "
           "due), so not every failover was shown.\n\n";
  } else {
    out += "**Chaos: FAIL**: " + FormatCount(f.kills - f.kills_failed_over) + " of " +
           FormatCount(f.kills) +
           " kills were not followed by a failover of the killed pod's partitions.\n\n";
  }
  const std::vector<const RunFailover*> matched = KillFailovers(run);
  if (!run.kills.empty()) {
    out +=
        "| killed at | pod | pid | partitions it led | failed over at | failover (loop's measure) "
        "|\n|---:|---|---:|---:|---:|---:|\n";
    for (size_t i = 0; i < run.kills.size(); ++i) {
      const RunKill& k = run.kills[i];
      out += "| t=" + FormatSeconds(k.t) + " | " + Md(k.pod) + " | " + std::to_string(k.pid) +
             " | " + std::to_string(k.partitions_led) + " | ";
      if (matched[i]) {
        out += "t=" + FormatSeconds(matched[i]->t) + " (" + FormatSeconds(matched[i]->t - k.t) +
               " after the kill) | " + FormatSeconds(matched[i]->seconds) + " |\n";
      } else {
        out += "not failed over | n/a |\n";
      }
    }
    out += "\n";
  }
  if (run.failovers.empty()) {
    out += "The control loop made no failover in this run.\n\n";
  } else {
    out +=
        "Every failover of the run:\n\n| at | leaders that stopped answering | partitions | "
        "seconds (loop's measure) |\n|---:|---|---:|---:|\n";
    for (const RunFailover& fo : run.failovers) {
      std::string pods;
      for (const auto& p : fo.pods) pods += (pods.empty() ? "" : ", ") + Md(p);
      out += "| t=" + FormatSeconds(fo.t) + " | " + pods + " | " + std::to_string(fo.partitions) +
             " | " + FormatSeconds(fo.seconds) + " |\n";
    }
    out += "\n";
  }
  out +=
      "A kill is SIGKILL of the pod's sidecar, which the platform starts again after a few "
      "seconds down (`shoal up --chaos-down`). The control loop fails over the partitions of a "
      "leader that has not answered its readiness probe for 2 s; its measure runs from the "
      "pod's last ready answer to the failover map.\n\n";
  return out;
}

std::string SummaryMarkdownImpl(const RunSummary& run, const RunFigures& f, bool link_compare) {
  std::string out = "# Shoal run report: " + Md(run.name) + "\n\n";
  out += "Topic **" + Md(run.topic) + "**, profile **" + Md(run.profile) + "**, " +
         FormatSeconds(run.duration_s) + " of load.\n\n";
  if (run.chaos) {
    // A chaos run passes only when nothing was lost or reordered and its kills were failed over.
    const bool pass = f.lost == 0 && f.reordered == 0 && f.chaos_failed_over;
    out += std::string("**Run: ") + (pass ? "PASS" : "FAIL") +
           "** (chaos): " + FormatCount(f.lost) + " lost, " + FormatCount(f.reordered) +
           " reordered; " + FormatCount(f.kills_failed_over) + " of " + FormatCount(f.kills) +
           " killed leaders failed over.\n\n";
  }
  out += "![Arrival rate, partitions, pods and consumer lag over the run](chart.svg)\n\n";
  if (link_compare) {
    out += "Static and dynamic partitioning under the same load: [compare.md](compare.md).\n\n";
  }

  out += "## What ran\n\n| | |\n|---|---|\n";
  out += "| run | " + Md(run.name) + " |\n";
  out += "| topic | " + Md(run.topic) + " |\n";
  out += "| profile | " + Md(run.profile) + " |\n";
  out += "| base rate | " + FormatQuantity(run.base_rate) + " events/s |\n";
  if (HasSurge(run)) {
    out += "| surge | " + FormatQuantity(run.surge_factor) + "x (" +
           FormatQuantity(run.base_rate * run.surge_factor) + " events/s) from " +
           FormatSeconds(run.surge_start_s) + " to " + FormatSeconds(run.surge_end_s) + " |\n";
  } else {
    out += "| surge | none |\n";
  }
  out += "| duration | " + FormatSeconds(run.duration_s) + " |\n";
  out += "| samples | " + FormatCount(run.samples.size()) + " |\n\n";
  if (run.command.empty()) {
    out += "Command: not recorded.\n\n";
  } else {
    out += "Command:\n\n" + MdCodeBlock(run.command) + "\n";
  }

  const VerifyReport& v = run.verify;
  out += "## Verifier\n\n";
  if (f.lost == 0 && f.reordered == 0) {
    out += "**Verifier: PASS**: none of " + FormatCount(f.acked) +
           " acknowledged events lost, per-key order kept.\n\n";
  } else {
    out += "**Verifier: FAIL**: " + FormatCount(f.lost) + " acknowledged events lost, " +
           FormatCount(f.reordered) + " reordered.\n\n";
  }
  out +=
      "| acked | seen | lost | reordered | duplicated | appended but unacked |\n"
      "|---:|---:|---:|---:|---:|---:|\n";
  out += "| " + FormatCount(v.acked) + " | " + FormatCount(v.seen) + " | " + FormatCount(v.lost) +
         " | " + FormatCount(v.reordered) + " | " + FormatCount(v.duplicated) + " | " +
         FormatCount(v.unacked_seen) + " |\n\n";
  out +=
      "Lost or reordered events fail the run. Duplicates are reported, not failed: a consumer "
      "that stops before committing sees its uncommitted events again.\n\n";
  if (!v.examples.empty()) {
    out += "Examples:\n\n";
    for (const auto& e : v.examples) out += "- " + Md(e) + "\n";
    out += "\n";
  }

  if (run.chaos) out += ChaosMarkdown(run, f);

  out += "## Figures\n\n| figure | value |\n|---|---:|\n";
  out += "| peak consumer lag | " + FormatQuantity(f.peak_lag) + " events |\n";
  out += "| lag peak after the surge began | " +
         (f.lag_peak_after_surge_s < 0 ? std::string("n/a")
                                       : FormatSeconds(f.lag_peak_after_surge_s)) +
         " |\n";
  out += "| produce latency p99 | " + FormatNumber(f.produce_p99_ms, 1) + " ms |\n";
  out += "| partitions: baseline / max / final | " + std::to_string(f.baseline_partitions) + " / " +
         std::to_string(f.max_partitions) + " / " + std::to_string(f.final_partitions) + " |\n";
  out += "| pods: baseline / max / final | " + std::to_string(f.baseline_pods) + " / " +
         std::to_string(f.max_pods) + " / " + std::to_string(f.final_pods) + " |\n";
  if (run.surge_end_s > run.surge_start_s) {
    out += "| in place when the surge began: partitions / ready pods | " +
           std::to_string(f.surge_partitions) + " / " + std::to_string(f.surge_ready_pods) + " |\n";
  }
  out += "| partition-seconds | " + FormatQuantity(f.partition_seconds) + " |\n";
  out += "| pod-seconds | " + FormatQuantity(f.pod_seconds) + " |\n";
  out += std::string("| scaled up | ") + (f.scaled_up ? "yes" : "no") + " |\n";
  out += std::string("| scaled back down | ") + (f.scaled_down ? "yes" : "no") + " |\n\n";

  out += "## Checks\n\n" + ChecksTable(RunChecks(run, f)) + "\n";

  out += "## Decisions\n\n";
  if (run.decisions.empty()) {
    out += "None: the topic kept its layout.\n";
  } else {
    out += "| t (s) | partitions | pods | kinds | reason |\n|---:|---|---|---|---|\n";
    for (const auto& d : run.decisions) {
      out += "| " + FormatNumber(d.t, 1) + " | " + std::to_string(d.partitions_from) + " -> " +
             std::to_string(d.partitions_to) + " | " + std::to_string(d.pods_from) + " -> " +
             std::to_string(d.pods_to) + " | " + Md(d.kinds) + " | " + Md(d.reason) + " |\n";
    }
  }
  return out;
}

void AppendFiguresJson(std::string& out, const RunFigures& f) {
  out += "{\"peak_lag\":";
  json::AppendDouble(out, f.peak_lag);
  out += ",\"lag_peak_after_surge_s\":";
  json::AppendDouble(out, f.lag_peak_after_surge_s);
  out += ",\"produce_p99_ms\":";
  json::AppendDouble(out, f.produce_p99_ms);
  out += ",\"partition_seconds\":";
  json::AppendDouble(out, f.partition_seconds);
  out += ",\"pod_seconds\":";
  json::AppendDouble(out, f.pod_seconds);
  out += ",\"lag_event_seconds\":";
  json::AppendDouble(out, f.lag_event_seconds);
  out += ",\"lag_back_under_s\":";
  json::AppendDouble(out, f.lag_back_under_s);
  const std::pair<const char*, uint64_t> counts[] = {
      {"max_partitions", f.max_partitions},
      {"max_pods", f.max_pods},
      {"baseline_partitions", f.baseline_partitions},
      {"baseline_pods", f.baseline_pods},
      {"final_partitions", f.final_partitions},
      {"final_pods", f.final_pods},
      {"surge_partitions", f.surge_partitions},
      {"surge_ready_pods", f.surge_ready_pods},
      {"lost", f.lost},
      {"reordered", f.reordered},
      {"duplicated", f.duplicated},
      {"acked", f.acked},
  };
  for (const auto& [name, value] : counts) {
    out += ",\"";
    out += name;
    out += "\":";
    json::AppendUint(out, value);
  }
  out += std::string(",\"scaled_up\":") + (f.scaled_up ? "true" : "false");
  out += std::string(",\"scaled_down\":") + (f.scaled_down ? "true" : "false");
  const std::pair<const char*, uint64_t> chaos_counts[] = {
      {"kills", f.kills},
      {"failovers", f.failovers},
      {"failed_over_partitions", f.failed_over_partitions},
      {"kills_failed_over", f.kills_failed_over},
  };
  for (const auto& [name, value] : chaos_counts) {
    out += ",\"";
    out += name;
    out += "\":";
    json::AppendUint(out, value);
  }
  out += ",\"failover_s\":";
  json::AppendDouble(out, f.failover_s);
  out += ",\"kill_to_failover_s\":";
  json::AppendDouble(out, f.kill_to_failover_s);
  out += std::string(",\"chaos_failed_over\":") + (f.chaos_failed_over ? "true" : "false");
  out += "}";
}

void AppendChecksJson(std::string& out, const std::vector<Check>& checks) {
  out += "[";
  for (size_t i = 0; i < checks.size(); ++i) {
    if (i) out += ",";
    out += "{\"name\":";
    json::AppendString(out, checks[i].name);
    out += ",\"measured\":";
    json::AppendString(out, checks[i].measured);
    out += ",\"value\":";
    json::AppendDouble(out, checks[i].value);
    out += ",\"result\":";
    json::AppendString(out, VerdictText(checks[i].verdict));
    out += "}";
  }
  out += "]";
}

std::string ReportJson(const RunSummary& run, const RunFigures& f,
                       const std::vector<RunSummary>& compare) {
  std::string out = "{\"name\":";
  json::AppendString(out, run.name);
  out += ",\"topic\":";
  json::AppendString(out, run.topic);
  out += ",\"profile\":";
  json::AppendString(out, run.profile);
  out += ",\"announced\":";
  out += run.announced ? "true" : "false";
  out += ",\"command\":";
  json::AppendString(out, run.command);
  const std::pair<const char*, double> params[] = {
      {"base_rate", run.base_rate},         {"surge_factor", run.surge_factor},
      {"surge_start_s", run.surge_start_s}, {"surge_end_s", run.surge_end_s},
      {"duration_s", run.duration_s},
  };
  for (const auto& [name, value] : params) {
    out += ",\"";
    out += name;
    out += "\":";
    json::AppendDouble(out, value);
  }
  out += ",\"samples\":";
  json::AppendUint(out, run.samples.size());
  out += std::string(",\"verified\":") + (f.lost == 0 && f.reordered == 0 ? "true" : "false");
  out += std::string(",\"chaos\":") + (run.chaos ? "true" : "false");
  out += ",\"kills_planned\":";
  json::AppendUint(out, run.kills_planned);
  out += ",\"kills\":[";
  for (size_t i = 0; i < run.kills.size(); ++i) {
    const RunKill& k = run.kills[i];
    if (i) out += ",";
    out += "{\"t\":";
    json::AppendDouble(out, k.t);
    out += ",\"pod\":";
    json::AppendString(out, k.pod);
    out += ",\"pid\":";
    json::AppendUint(out, static_cast<uint64_t>(std::max<int64_t>(0, k.pid)));
    out += ",\"partitions_led\":";
    json::AppendUint(out, k.partitions_led);
    out += "}";
  }
  out += "],\"failovers\":[";
  for (size_t i = 0; i < run.failovers.size(); ++i) {
    const RunFailover& fo = run.failovers[i];
    if (i) out += ",";
    out += "{\"t\":";
    json::AppendDouble(out, fo.t);
    out += ",\"pods\":[";
    for (size_t j = 0; j < fo.pods.size(); ++j) {
      if (j) out += ",";
      json::AppendString(out, fo.pods[j]);
    }
    out += "],\"partitions\":";
    json::AppendUint(out, fo.partitions);
    out += ",\"seconds\":";
    json::AppendDouble(out, fo.seconds);
    out += "}";
  }
  out += "]";
  out += ",\"figures\":";
  AppendFiguresJson(out, f);
  out += ",\"checks\":";
  AppendChecksJson(out, RunChecks(run, f));
  out += ",\"verify\":" + run.verify.ToJson();
  out += ",\"decisions\":[";
  for (size_t i = 0; i < run.decisions.size(); ++i) {
    const RunDecision& d = run.decisions[i];
    if (i) out += ",";
    out += "{\"t\":";
    json::AppendDouble(out, d.t);
    out += ",\"kinds\":";
    json::AppendString(out, d.kinds);
    out += ",\"reason\":";
    json::AppendString(out, d.reason);
    out += ",\"partitions_from\":";
    json::AppendUint(out, d.partitions_from);
    out += ",\"partitions_to\":";
    json::AppendUint(out, d.partitions_to);
    out += ",\"pods_from\":";
    json::AppendUint(out, d.pods_from);
    out += ",\"pods_to\":";
    json::AppendUint(out, d.pods_to);
    out += "}";
  }
  out += "]";
  if (!compare.empty()) {
    out += ",\"compare\":{\"runs\":[";
    for (size_t i = 0; i < compare.size(); ++i) {
      if (i) out += ",";
      out += "{\"name\":";
      json::AppendString(out, compare[i].name);
      out += ",\"figures\":";
      AppendFiguresJson(out, ComputeFigures(compare[i]));
      out += "}";
    }
    out += "],\"checks\":";
    AppendChecksJson(out, CompareChecks(compare));
    out += "}";
  }
  out += "}\n";
  return out;
}

std::string TimelineCsv(const RunSummary& run) {
  std::string out =
      "t_s,arrival_rate_eps,consumed_rate_eps,partitions,pods,ready_pods,lag_events,"
      "produce_p99_ms\n";
  for (const auto& s : run.samples) {
    AppendCsvDouble(out, s.t);
    out += ',';
    AppendCsvDouble(out, s.arrival_rate);
    out += ',';
    AppendCsvDouble(out, s.consumed_rate);
    out += ',' + std::to_string(s.partitions) + ',' + std::to_string(s.pods) + ',' +
           std::to_string(s.ready_pods) + ',';
    AppendCsvDouble(out, s.lag);
    out += ',';
    AppendCsvDouble(out, s.produce_p99_ms);
    out += '\n';
  }
  return out;
}

Status WriteFile(const std::filesystem::path& path, const std::string& content) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return Status::IoError("writing " + path.string() + ": " + std::strerror(errno));
  }
  int err = 0;
  if (std::fwrite(content.data(), 1, content.size(), file) != content.size()) {
    err = errno != 0 ? errno : EIO;
  }
  if (std::fclose(file) != 0 && err == 0) err = errno != 0 ? errno : EIO;
  if (err != 0) return Status::IoError("writing " + path.string() + ": " + std::strerror(err));
  return Status::Ok();
}

}  // namespace

RunFigures ComputeFigures(const RunSummary& run) {
  RunFigures f;
  f.lost = run.verify.lost;
  f.reordered = run.verify.reordered;
  f.duplicated = run.verify.duplicated;
  f.acked = run.verify.acked;
  f.kills = static_cast<uint32_t>(run.kills.size());
  f.failovers = static_cast<uint32_t>(run.failovers.size());
  for (const RunFailover& fo : run.failovers) f.failed_over_partitions += fo.partitions;
  const std::vector<const RunFailover*> matched = KillFailovers(run);
  for (size_t i = 0; i < matched.size(); ++i) {
    if (matched[i] == nullptr) continue;
    ++f.kills_failed_over;
    f.failover_s = std::max(f.failover_s, matched[i]->seconds);
    f.kill_to_failover_s = std::max(f.kill_to_failover_s, matched[i]->t - run.kills[i].t);
  }
  f.chaos_failed_over =
      run.chaos && f.kills > 0 && f.kills >= run.kills_planned && f.kills_failed_over == f.kills;
  const auto& samples = run.samples;
  if (samples.empty()) return f;

  f.baseline_partitions = samples.front().partitions;
  f.baseline_pods = samples.front().pods;
  f.final_partitions = samples.back().partitions;
  f.final_pods = samples.back().pods;
  if (run.surge_end_s > run.surge_start_s) {
    for (const RunSample& s : samples) {
      if (s.t > run.surge_start_s) break;
      f.surge_partitions = s.partitions;
      f.surge_ready_pods = s.ready_pods;
    }
  }
  std::vector<double> p99s;
  for (size_t i = 0; i < samples.size(); ++i) {
    const RunSample& s = samples[i];
    if (std::isfinite(s.lag)) f.peak_lag = std::max(f.peak_lag, s.lag);
    f.max_partitions = std::max(f.max_partitions, s.partitions);
    f.max_pods = std::max(f.max_pods, s.pods);
    if (s.produce_p99_ms > 0 && std::isfinite(s.produce_p99_ms)) p99s.push_back(s.produce_p99_ms);
    // Each sample holds until the next one; the last one for as long as the one before it.
    double spacing = 1;
    if (i + 1 < samples.size()) {
      spacing = samples[i + 1].t - s.t;
    } else if (i > 0) {
      spacing = s.t - samples[i - 1].t;
    }
    if (!(spacing > 0)) spacing = 0;
    f.partition_seconds += s.partitions * spacing;
    f.pod_seconds += s.pods * spacing;
  }

  if (!p99s.empty()) {
    std::sort(p99s.begin(), p99s.end());
    const size_t rank = (99 * p99s.size() + 99) / 100;  // nearest rank: ceil(0.99 n)
    f.produce_p99_ms = p99s[rank - 1];
  }

  f.lag_peak_after_surge_s = FindLagPeak(run).after_surge_s;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double spacing = i + 1 < samples.size() ? samples[i + 1].t - samples[i].t
                           : i > 0                ? samples[i].t - samples[i - 1].t
                                                  : 1;
    if (std::isfinite(samples[i].lag) && spacing > 0)
      f.lag_event_seconds += samples[i].lag * spacing;
  }
  if (HasSurge(run)) {
    // Back to normal: the first sample under kNormalLag after the highest lag since the surge
    // began (so a lag still low at the surge's very start does not count).
    double peak = -1, peak_t = run.surge_start_s;
    for (const RunSample& s : samples) {
      if (s.t >= run.surge_start_s && std::isfinite(s.lag) && s.lag > peak) {
        peak = s.lag;
        peak_t = s.t;
      }
    }
    for (const RunSample& s : samples) {
      if (s.t >= peak_t && std::isfinite(s.lag) && s.lag < kNormalLag) {
        f.lag_back_under_s = s.t - run.surge_start_s;
        break;
      }
    }
  }

  const bool partitions_up = f.max_partitions > f.baseline_partitions;
  const bool pods_up = f.max_pods > f.baseline_pods;
  f.scaled_up = partitions_up || pods_up;
  f.scaled_down = f.scaled_up && (!partitions_up || f.final_partitions < f.max_partitions) &&
                  (!pods_up || f.final_pods < f.max_pods);
  return f;
}

std::string ChartSvg(const RunSummary& run) { return Chart(run).Render(); }

std::string SummaryMarkdown(const RunSummary& run, const RunFigures& f) {
  return SummaryMarkdownImpl(run, f, /*link_compare=*/false);
}

std::string CompareMarkdown(const std::vector<RunSummary>& runs) {
  std::string out = "# Static and dynamic partitioning compared\n\n";
  if (!runs.empty()) {
    const RunSummary& first = runs.front();
    out += "The same load on topic **" + Md(first.topic) + "** (profile **" + Md(first.profile) +
           "**, base " + FormatQuantity(first.base_rate) + " events/s";
    if (HasSurge(first)) {
      out += ", surge " + FormatQuantity(first.surge_factor) + "x from " +
             FormatSeconds(first.surge_start_s) + " to " + FormatSeconds(first.surge_end_s);
    }
    out +=
        "): static runs keep their partitions and pods, the dynamic run follows the load. "
        "Each run's name links its chart.\n\n";
  }
  out +=
      "| run | partitions (min-max) | pods (min-max) | lag at peak | lag back under 1,000 | "
      "lag event-seconds | produce p99 (ms) | events lost | events reordered | "
      "partition-seconds | pod-seconds |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const std::vector<std::string> charts = ChartFileNames(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSummary& run = runs[i];
    const RunFigures f = ComputeFigures(run);
    std::string partitions = "n/a", pods = "n/a";
    if (!run.samples.empty()) {
      uint32_t min_partitions = f.max_partitions, min_pods = f.max_pods;
      for (const auto& s : run.samples) {
        min_partitions = std::min(min_partitions, s.partitions);
        min_pods = std::min(min_pods, s.pods);
      }
      partitions = std::to_string(min_partitions) + "-" + std::to_string(f.max_partitions);
      pods = std::to_string(min_pods) + "-" + std::to_string(f.max_pods);
    }
    out += "| [" + Md(run.name) + "](" + charts[i] + ") | " + partitions + " | " + pods + " | " +
           FormatQuantity(f.peak_lag) + " | " +
           (f.lag_back_under_s < 0 ? std::string("n/a")
                                   : FormatSeconds(f.lag_back_under_s) + " after the surge began") +
           " | " + FormatQuantity(f.lag_event_seconds) + " | " + FormatNumber(f.produce_p99_ms, 1) +
           " | " + FormatCount(f.lost) + " | " + FormatCount(f.reordered) + " | " +
           FormatQuantity(f.partition_seconds) + " | " + FormatQuantity(f.pod_seconds) + " |\n";
  }
  out += "\n## Checks\n\n";
  const std::vector<Check> checks = CompareChecks(runs);
  if (checks.empty()) {
    out += "The checks need runs named \"dynamic\" and \"static-peak\"; not both are here.\n";
  } else {
    out += ChecksTable(checks);
  }
  return out;
}

Status WriteReport(const std::string& dir, const RunSummary& run,
                   const std::vector<RunSummary>& compare) {
  namespace fs = std::filesystem;
  if (dir.empty()) return Status::InvalidArgument("report directory: empty path");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("creating report directory " + dir + ": " + ec.message());
  if (!fs::is_directory(dir, ec)) {
    return Status::IoError("creating report directory " + dir + ": not a directory");
  }
  const fs::path root(dir);
  const RunFigures f = ComputeFigures(run);
  SHOAL_RETURN_IF_ERROR(WriteFile(root / "report.json", ReportJson(run, f, compare)));
  SHOAL_RETURN_IF_ERROR(WriteFile(root / "timeline.csv", TimelineCsv(run)));
  SHOAL_RETURN_IF_ERROR(WriteFile(root / "chart.svg", ChartSvg(run)));
  if (!compare.empty()) {
    const std::vector<std::string> charts = ChartFileNames(compare);
    for (size_t i = 0; i < compare.size(); ++i) {
      SHOAL_RETURN_IF_ERROR(WriteFile(root / charts[i], ChartSvg(compare[i])));
    }
    SHOAL_RETURN_IF_ERROR(WriteFile(root / "compare.md", CompareMarkdown(compare)));
  }
  return WriteFile(root / "summary.md", SummaryMarkdownImpl(run, f, !compare.empty()));
}

}  // namespace shoal::harness
