// The report of a local run (`shoal up` writes one at the end of a run): what ran, what the
// verifier found, how partitions, pods and lag followed the load, and the trade-off against static
// partitioning when static runs of the same load are given to compare.
//
// Everything here is a pure function of plain values (RunSummary in, text out) except WriteReport,
// which writes files. No threads, no clocks; thread-safe as long as each caller owns its values.
//
// The two checks of a run read the figures like this:
//   - "lag stops growing within 15 s after the surge begins": lag_peak_after_surge_s is in
//     [0, 15]. The peak is taken over [surge start, surge end + 30 s], so a lag that keeps growing
//     through the surge peaks near the end of that window and fails. A peak no higher than what
//     consumers hold in flight (a quarter second of the surge's arrivals, or the lag's peak
//     before the surge) is not growth: it counts as 0 s.
//   - "partitions and pods return toward the baseline after the surge": scaled_down, i.e. every one
//     of partitions and pods that rose above its first-sample value ends below its maximum.
// Both read "n/a" when they do not apply (no surge; never scaled up).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shoal/common/status.h"
#include "shoal/harness/verifier.h"

namespace shoal::harness {

// One per second of a run.
struct RunSample {
  double t = 0;               // seconds since the load started
  double arrival_rate = 0;    // events/s produced (acknowledged) in the last second
  double consumed_rate = 0;   // events/s consumed
  uint32_t partitions = 0;    // active partitions
  uint32_t pods = 0;          // desired pods
  uint32_t ready_pods = 0;    // pods that are ready
  double lag = 0;             // consumer lag, events, summed over partitions
  double produce_p99_ms = 0;  // produce latency p99 over the last second (0 if none)
};

// One decision of the control loop that changed something.
struct RunDecision {
  double t = 0;       // seconds since the load started
  std::string kinds;  // e.g. "split,pods_up"
  std::string reason;
  uint32_t partitions_from = 0, partitions_to = 0, pods_from = 0, pods_to = 0;
};

// A pod's sidecar killed on purpose during the run (`shoal up --chaos`).
struct RunKill {
  double t = 0;  // seconds since the load started
  std::string pod;
  int64_t pid = 0;
  uint32_t partitions_led = 0;  // the partitions with copies it led when it was killed
};

// A failover the control loop made during the run: partitions whose leader had stopped
// answering given to one of their copies.
struct RunFailover {
  double t = 0;                   // when the loop made the failover map
  std::vector<std::string> pods;  // the leaders that had stopped answering
  uint32_t partitions = 0;        // partitions that got a new leader
  // The loop's measure (shoal_control_failover_seconds): from those pods' last ready answer to
  // the failover map.
  double seconds = 0;
};

// Everything recorded about one run; a value.
struct RunSummary {
  std::string name;            // "dynamic", "static-baseline", "static-peak"
  std::string topic, profile;  // e.g. "orders", "flash-sale"
  double base_rate = 0, surge_factor = 1;
  // The surge is [surge_start_s, surge_end_s); a run has none when surge_end_s <= surge_start_s.
  double surge_start_s = 0, surge_end_s = 0, duration_s = 0;
  std::vector<RunSample> samples;  // in time order
  std::vector<RunDecision> decisions;
  VerifyReport verify;
  std::string command;  // the command line that produced it
  // The surge was announced ahead (a schedule held its capacity); otherwise the topic met it
  // unannounced and compare.md checks how fast the backlog it built came back down.
  bool announced = true;
  // A chaos run (`shoal up --chaos`): leaders' sidecars were killed, and each kill must be
  // followed by a failover of the killed pod's partitions.
  bool chaos = false;
  uint32_t kills_planned = 0;          // the kills the run was to make
  std::vector<RunKill> kills;          // those made, in time order
  std::vector<RunFailover> failovers;  // every failover of the run, in time order
};

// The numbers of one run, computed from its samples and verifier report.
struct RunFigures {
  double peak_lag = 0;
  // Seconds from the surge start to the first sample holding the highest lag within
  // [surge_start, surge_end + 30 s] (after it the lag never rises above that peak in the window);
  // 0 when that peak is within the in-flight floor (see above); -1 without a surge or without
  // samples in that window.
  double lag_peak_after_surge_s = -1;
  // The 99th percentile (nearest rank) of the run's per-second p99 values, zeros ignored; 0 if
  // none.
  double produce_p99_ms = 0;
  // Sums over the samples of partitions (pods) times the sample's spacing: the time to the next
  // sample; the last sample counts the spacing before it (1 s when it is the only one).
  double partition_seconds = 0, pod_seconds = 0;
  uint32_t max_partitions = 0, max_pods = 0;
  uint32_t baseline_partitions = 0, baseline_pods = 0;  // at the first sample
  uint32_t final_partitions = 0, final_pods = 0;        // at the last sample
  // At the last sample before the surge began (as a schedule holds them ahead of it); 0 without
  // a surge.
  uint32_t surge_partitions = 0, surge_ready_pods = 0;
  // The area under the lag curve: lag times each sample's spacing, summed (event-seconds).
  double lag_event_seconds = 0;
  // Seconds from the surge start to the first sample at or after the lag's peak with the lag
  // back under kNormalLag events; -1 without a surge or when it never came back.
  double lag_back_under_s = -1;
  uint64_t lost = 0, reordered = 0, duplicated = 0, acked = 0;
  bool scaled_up = false;    // partitions or pods went above the baseline
  bool scaled_down = false;  // scaled up, and each that went up ends below its maximum
  // Chaos (all 0 / -1 / false without kills). A kill is failed over by the first failover at or
  // after it whose pods name the killed pod.
  uint32_t kills = 0;
  uint32_t failovers = 0;               // every failover of the run
  uint32_t failed_over_partitions = 0;  // summed over every failover
  uint32_t kills_failed_over = 0;       // kills followed by a failover of the killed pod
  // Over the kills failed over: the longest failover as the loop measured it, and the longest
  // time from a kill to its failover's map; -1 when none.
  double failover_s = -1;
  double kill_to_failover_s = -1;
  // A chaos run that made every kill it planned (at least one), each of them failed over.
  bool chaos_failed_over = false;
};

// The lag a run is back to normal under (the report's "lag back under 1,000 events").
inline constexpr double kNormalLag = 1000;

RunFigures ComputeFigures(const RunSummary& run);

// A self-contained SVG (900x700, no external fonts or scripts): four stacked panels sharing the
// time axis: arrival and consumed rate, partitions, desired and ready pods, consumer lag. The surge
// is shaded; each decision is a thin vertical line whose <title> tooltip gives its reason.
std::string ChartSvg(const RunSummary& run);

// summary.md: what ran, the verifier's numbers with a PASS/FAIL line (FAIL on lost or reordered
// events; duplicates are reported but do not fail), for a chaos run the kills and failovers with
// their own PASS/FAIL line (FAIL when a kill was not failed over, or no kill was made), the
// figures, the two checks above with their
// measured values, the decisions and the chart (chart.svg beside it).
std::string SummaryMarkdown(const RunSummary& run, const RunFigures& f);

// compare.md: the trade-off table between static and dynamic partitioning, one row per run (the
// run's name links chart-<name>.svg as WriteReport writes it); then, when runs named "dynamic" and
// "static-peak" are both present, the checks: "dynamic uses at most half the partition-seconds
// of static-at-peak" and "static-peak holds at least twice dynamic's partition-seconds outside
// the surge" always; for an announced surge "static-baseline's lag grows through the surge to at
// least 10x dynamic's peak" and "dynamic's peak lag is no worse than twice static-at-peak's"; for
// an unannounced one (the topic only reacts) "dynamic's peak lag is at most half
// static-baseline's", "dynamic's lag is back under 1,000 events within 35 s of the surge's
// start" and "dynamic's event-seconds of lag are at most 15% of static-baseline's".
std::string CompareMarkdown(const std::vector<RunSummary>& runs);

// Creates `dir` (and its parents) and writes summary.md, chart.svg, timeline.csv (a header and one
// row per sample) and report.json (figures, checks, verify, decisions); with a non-empty `compare`
// also compare.md and chart-<name>.svg per compared run (names made file-safe), and summary.md
// links compare.md. summary.md is written last, so its presence means the report is complete.
// Errors are IoError naming the path that could not be created or written.
Status WriteReport(const std::string& dir, const RunSummary& run,
                   const std::vector<RunSummary>& compare);

}  // namespace shoal::harness
