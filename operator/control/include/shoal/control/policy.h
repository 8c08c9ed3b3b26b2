// The scaling policy: a pure function of (spec, load history, current map, replicas, now) to the
// desired partitions and consumer replicas, with the reason in words. Nothing here talks to the
// network or reads a clock, so the simulator replays traces through exactly this code and tests
// are tables.
//
// The rules (docs/control-loop.md, the CRD's scaling and behavior fields):
//  - Partitions follow the arrival rate per partition. A partition above its target by more than
//    the tolerance is split at the quantiles of its observed load (buckets of its hash range and
//    its heaviest key) into as many parts as the rate needs, all in one decision: a tenfold surge
//    is one change to the needed count, never 1->2->4->8. The hard cap (partitions.max) and the
//    per-step limit are kept by giving the extra partitions to the hottest ranges first.
//  - A split that cannot lower the hottest part by more than the tolerance is not made: a single
//    hot key is isolated once and its range is split no further.
//  - Scale-up acts on the latest observation (the fast path); a configured scale-up window is
//    skipped when the rate is more than twice the target (a surge).
//  - Scale-down is slow and safe: adjacent partitions merge only when their summed peak rate over
//    the whole scale-down window stays below the target less the tolerance, both existed for the
//    whole window, and every observation in the window was complete. Missing metrics never shrink
//    anything. Replicas shrink to the highest recommendation of the window (as the HPA does).
//  - Replicas follow partitions per replica, the consumers' CPU over their target, growing lag
//    above its target and, once measured (LoadHistory::consumer_capacity), the rate to consume
//    at what one pod's consumers take; never more replicas than active partitions.
//  - Prediction (behavior.scaleUp.predictive, on by default): on a rising trend of the arrival
//    rate, scale-up sizes for the rate expected when a next decision could take effect, from the
//    trend (RisingTrend) and the time this platform takes to change the map and to start a pod,
//    learned from the loop's own history (LeadTimes). It only ever adds to what the present rate
//    asks for; it never shrinks anything.
// Decide runs its stages in order, each a function over one DecideInputs with its own table
// test (policy_stages.h).
// Values and a const function; LoadHistory is a value owned by the control loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/partition_map.h"
#include "shoal/common/schedule.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/observer.h"

namespace shoal::control {

using SteadyTime = std::chrono::steady_clock::time_point;

// Observations over time, summarized so that a 10,000-partition topic over an hour-long window
// stays small: per partition its latest load and its peak rate in coarse time buckets; per
// observation a few totals.
class LoadHistory {
 public:
  // `horizon`: how far back decisions look (the longest stabilization window).
  explicit LoadHistory(std::chrono::seconds horizon = std::chrono::seconds(300));

  void Add(const Observation& o);
  // A new horizon (the spec's windows changed). What is already dropped stays unknown: PeakSince
  // answers nullopt for windows reaching before it.
  void SetHorizon(std::chrono::seconds horizon);
  std::chrono::seconds horizon() const { return horizon_; }

  struct Sample {
    SteadyTime at;
    double total_rate = 0;  // over the partitions observed
    uint64_t max_lag = 0;
    uint64_t total_lag = 0;
    std::optional<double> cpu;  // mean consumer CPU utilization over pods that report it
    uint32_t cpu_pods = 0;      // how many pods reported it
    uint32_t active = 0;        // active partitions observed
    bool complete = true;
  };
  struct PartitionHistory {
    SteadyTime first_seen;
    // From when its peaks are known: first_seen, or earlier for a partition whose buckets before
    // it existed were taken from its parents (their summed peaks bound its load from above).
    SteadyTime known_since;
    PartitionLoad last;
    SteadyTime last_at;
    std::optional<double> previous_rate;  // the rate of the observation before `last`
    // Lowest and highest rate per time bucket, oldest first; buckets start on a grid shared by
    // every partition (the history's first observation plus multiples of the bucket length), so
    // that peaks of neighbours can be summed bucket by bucket.
    struct Bucket {
      SteadyTime start;
      double low, peak;
      bool inherited = false;  // its peak is the parents' sum; it has no low of its own
    };
    std::deque<Bucket> buckets;
    // The peak (lowest) rate since `since`; nullopt when the history does not reach back that far.
    std::optional<double> PeakSince(SteadyTime since) const;
    std::optional<double> LowSince(SteadyTime since) const;
  };

  const std::deque<Sample>& samples() const { return samples_; }
  const PartitionHistory* Partition(PartitionId id) const;
  // `h`'s peak per bucket of the grid from the one holding `since` to the latest, oldest first
  // (a bucket it lacks counts as its peak over the window); nullopt when its history does not
  // reach back to `since`. Elementwise sums of these bound the peak of partitions merged.
  std::optional<std::vector<double>> WindowPeaks(const PartitionHistory& h,
                                                 SteadyTime since) const;
  // How long carrying out a decision took: a map change (asked to installed) and a new pod (asked
  // for to ready), measured by whoever carries out the plans (the control loop, the simulator).
  void RecordChange(std::chrono::duration<double> took);
  void RecordPodStart(std::chrono::duration<double> took);
  struct LeadTimes {
    double change_s = 0, pod_start_s = 0;
    uint32_t changes = 0, pod_starts = 0;  // how many were measured (0: the prior)
  };
  // The median of the last few of each; until one is measured, a prior (kPriorChange/PodStart).
  LeadTimes lead_times() const;
  static constexpr double kPriorChangeSeconds = 1;
  static constexpr double kPriorPodStartSeconds = 15;
  // Per pod, the most partitions its sidecar can hold open, as last reported (a pod keeps its
  // last report while it owns nothing and is not scraped).
  const std::map<std::string, uint32_t>& max_partitions() const { return max_partitions_; }
  // What one pod's consumers take, per consumer group, from samples of one pod over one
  // observation interval (CapacitySampleOf): the median of the group's last kCapacityKept
  // samples over every pod; the topic's is the lowest over its groups (every group must keep
  // up), with that group's name. Samples do not expire with the horizon: they measure the
  // consumers' speed, not the load. nullopt until one is measured.
  struct ConsumerCapacity {
    double per_pod = 0;  // events/s one pod's consumers take
    uint32_t samples = 0;
    uint32_t saturated = 0;  // of `samples`, saturated ones (the others from busy time)
    std::string group;
  };
  std::optional<ConsumerCapacity> consumer_capacity() const;
  struct CapacitySample {
    double per_pod = 0;
    bool saturated = false;
  };
  // The sample one pod's consumers of a group give over an interval, if any:
  //  - saturated: their pod served them a backlog of at least kSaturatedBacklogSeconds of what
  //    they took, and at least kSaturatedBacklogEvents, while they took something; they had more
  //    to read than they could take, so what they took (the delivered rate) is what they take;
  //  - from busy time, when not saturated: they held a batch at least kBusyMinFraction of the
  //    interval and took at least kBusyMinEvents in it; what they take while working is the
  //    delivered rate over the busy fraction (at most 1 / kBusyMinFraction times what they took),
  //    known before they ever fall behind. Not without a busy fraction or an interval.
  // nullopt otherwise: consumers that took nothing (a pod waiting for parents), or too little to
  // tell.
  static std::optional<CapacitySample> CapacitySampleOf(const ConsumerLoad& c);
  static constexpr size_t kCapacityKept = 16;
  // A backlog below this many seconds of what the consumers take may be events in flight (read
  // and not yet committed), not a wait.
  static constexpr double kSaturatedBacklogSeconds = 2;
  static constexpr uint64_t kSaturatedBacklogEvents = 100;
  // Below this share of the interval busy, or this many events taken, the busy time is mostly
  // the round trips and timing of a few batches.
  static constexpr double kBusyMinFraction = 0.1;
  static constexpr double kBusyMinEvents = 50;
  // The last time an observation missed something (nullopt: never).
  std::optional<SteadyTime> last_incomplete() const { return last_incomplete_; }
  std::optional<SteadyTime> first_at() const { return first_at_; }
  const std::vector<std::string>& last_missing() const { return last_missing_; }

 private:
  SteadyTime GridStart(SteadyTime at) const;
  void Inherit(PartitionHistory& h, const std::vector<PartitionId>& parents);

  std::chrono::seconds horizon_;
  std::chrono::seconds bucket_;
  std::deque<Sample> samples_;
  std::map<PartitionId, PartitionHistory> partitions_;
  std::optional<SteadyTime> last_incomplete_, first_at_;
  std::vector<std::string> last_missing_;
  std::deque<double> change_s_, pod_start_s_;  // the last few, oldest first
  std::map<std::string, uint32_t> max_partitions_;
  // Per group, the last few capacity samples, oldest first.
  std::map<std::string, std::deque<CapacitySample>> capacity_;   // from busy time
  std::map<std::string, std::deque<CapacitySample>> saturated_;  // saturated samples
};

// A trend of the topic's arrival rate over the last kTrendSeconds of complete observations:
// Theil-Sen's slope (the median of the slopes between every two samples) and the fitted level at
// the latest one, with Kendall's tau as the share of sample pairs that agree with its direction.
// Robust by construction: one spike (producers catching up after a pause) moves neither the median
// slope nor the level, where a least-squares or Holt fit would extrapolate it; a step is not a
// ramp either (the pairs across it are fewer than half).
// Why not Holt's linear method: its level and trend follow every sample with fixed weights, so a
// burst raises the trend it extrapolates, and its two constants would need tuning per topic.
struct Trend {
  double slope = 0;   // events/s per second
  double level = 0;   // the fitted rate at the latest sample
  double tau = 0;     // Kendall's tau, in [-1, 1] (ties left out)
  double latest = 0;  // the latest sample's rate
  double window_s = 0;
  size_t samples = 0;
  // How long it has been rising: the longest window (kTrendSeconds doubled up to
  // kTrendMaxAgeSeconds) over which the rate rose too, by the same test.
  double age_s = 0;
};
inline constexpr double kTrendSeconds = 5;
inline constexpr double kTrendMaxAgeSeconds = 160;
inline constexpr size_t kTrendMinSamples = 5;
inline constexpr double kTrendMinTau = 0.7;
// The most of the window's rise one interval may carry (more: a step or a burst, not a ramp).
inline constexpr double kTrendMaxJumpShare = 0.5;
// The steepest ramp, per second relative to the window's lowest rate (steeper: a surge).
inline constexpr double kTrendMaxRelativeSlope = 1.0;
// The trend when it is rising: enough samples, tau >= kTrendMinTau, a positive slope, no step
// carrying more than kTrendMaxJumpShare of the rise, a rise over its age of more than twice the
// tolerance, and the
// latest sample no more than `tolerance` below the fitted level (a rate that turned is not
// extrapolated); nullopt otherwise (noise, a flat or falling rate, too few samples, an
// incomplete one).
std::optional<Trend> RisingTrend(const LoadHistory& history, double tolerance);

struct SplitDecision {
  PartitionId partition;
  std::vector<uint64_t> cuts;  // strictly inside the partition's range, increasing
  double rate = 0;             // the partition's rate when decided
};

struct MergeDecision {
  std::vector<PartitionId> run;  // two or more adjacent partitions, in hash order
  double peak_rate = 0;          // their summed peak rate over the scale-down window
};

// What a decision changes, for metrics, logs and the control state ("split", "merge", "pods_up",
// "pods_down", "hold" as text).
enum class DecisionKind { kSplit, kMerge, kPodsUp, kPodsDown, kHold };
const char* ToString(DecisionKind kind);
// nullopt for a text that names no kind.
std::optional<DecisionKind> ParseDecisionKind(std::string_view text);
std::ostream& operator<<(std::ostream& out, DecisionKind kind);
// The kinds as text joined by commas ("split,pods_up").
std::string JoinKinds(const std::vector<DecisionKind>& kinds);

// A key that alone carries more than a partition's target: no split can spread it. By its hash
// (crc32 of the key), never the key itself: keys are the application's data.
struct HotKey {
  PartitionId partition;
  uint32_t hash = 0;
  double rate = 0;  // the key's events/s, as observed
};

struct Decision {
  uint32_t partitions = 0;  // active partitions once the decision is carried out
  uint32_t replicas = 0;    // consumer pods
  std::vector<SplitDecision> splits;
  std::vector<MergeDecision> merges;
  std::string reason;
  // The kinds of change; {kHold} alone when nothing changes.
  std::vector<DecisionKind> kinds;
  // Partitions held back by one key (the hottest first): the reason names at most three.
  std::vector<HotKey> hot_keys;

  bool holds() const { return kinds.size() == 1 && kinds[0] == DecisionKind::kHold; }
};

// What the topic's schedules (spec.scaling.schedules) hold at wall time `wall`: the highest
// minimums of the windows in progress or being prepared (from readySeconds plus the learned
// change and pod-start times before their start), their names, and the reason in words.
struct Scheduled {
  uint32_t partitions = 0, replicas = 0;
  std::vector<std::string> active;
  std::string why;
};
Scheduled ScheduledFloor(const TopicSpec& spec, const LoadHistory& history, WallTime wall);

// Each schedule's current or next window at `wall`, as the control state and the Kubernetes
// status show it: [{"name","start","end","prepare_from","min_partitions","min_replicas",
// "state"}] with times in RFC 3339 UTC and state "active" (in progress), "preparing" (capacity
// being put in place) or "scheduled"; a schedule with no window left shows state "done".
std::string SchedulesJson(const TopicSpec& spec, const LoadHistory& history, WallTime wall);

// The decision for a topic whose current map is `map`, run by `replicas` consumer pods, at `now`
// (and at wall time `wall`, for schedules; without it schedules are not applied).
Decision Decide(const TopicSpec& spec, const LoadHistory& history, const PartitionMap& map,
                uint32_t replicas, SteadyTime now, std::optional<WallTime> wall = std::nullopt);

// The points that cut `range` into `parts` pieces of equal load, from the partition's observed
// load (its buckets and heaviest key); may return fewer than parts - 1 points when a hot key
// makes more pieces useless. Exposed for tests.
std::vector<uint64_t> LoadQuantileCuts(const HashRange& range, const PartitionLoad& load,
                                       uint32_t parts);
// The load of the heaviest piece after cutting `range` at `cuts`, as a share of the partition's.
double HeaviestShare(const HashRange& range, const PartitionLoad& load,
                     const std::vector<uint64_t>& cuts);

}  // namespace shoal::control
