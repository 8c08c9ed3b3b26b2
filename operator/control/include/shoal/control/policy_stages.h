// The stages of the scaling decision (policy.h Decide), each a pure function over one
// DecideInputs, in the order Decide composes them, as KEDA and the HPA keep theirs (metrics
// first, then the replica formula):
//   1. ReadLoad         the latest load of every active partition (the scale-up window applied)
//                       and the arrival trend
//   2. Predict          on a rising trend, the rate expected once a change could take effect
//   3. WantSplits       how many pieces each partition's rate asks for (raised in proportion to
//                       the backlog to drain: Decide runs ConsumeDemand first); hot keys
//   4. ConsumeDemand    the rate to consume: arrivals and a backlog over drainSeconds
//      PodsForCpu, PodsForLag, PodsForCapacity
//                       the pods the consumers' CPU, a growing lag and what one pod's consumers
//                       were measured to take ask for now
//      ScheduledFloor   (policy.h) what the schedules hold
//   5. PlaceSplits      the pieces within the cap, the step limit and the owners' room
//   6. ScaleDownBlocked why nothing may shrink now
//   7. PlaceMerges      runs of cold neighbours to merge
//   8. SizePods         the consumer pods, up at once, down to the window's highest
//                       recommendation
// Decide (policy.cc) runs them and joins their reasons in that order. Exposed for their table
// tests (tests/unit/operator/control/policy/policy_stages_test.cc); callers outside the policy
// use Decide. Values and functions; nothing here reads a clock or the network.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shoal/control/policy.h"

namespace shoal::control {

// What every stage reads: Decide's arguments and the spec's numbers taken from them once. A
// view: it refers to the caller's spec, history and map, which must outlive it. Not copyable.
struct DecideInputs {
  DecideInputs(const TopicSpec& spec, const LoadHistory& history, const PartitionMap& map,
               uint32_t replicas, SteadyTime now, std::optional<WallTime> wall = std::nullopt);
  DecideInputs(const DecideInputs&) = delete;
  DecideInputs& operator=(const DecideInputs&) = delete;

  const TopicSpec& spec;
  const LoadHistory& history;
  const PartitionMap& map;
  const uint32_t replicas;  // consumer pods now
  const SteadyTime now;
  const std::optional<WallTime> wall;  // for schedules; without it they are not applied

  const double target;            // events/s per partition
  const double up_tol, down_tol;  // the behaviours' tolerances
  const uint32_t pmin, pmax, rmin, rmax;
  const uint32_t per_replica;  // partitions per replica, at least 1
  const std::chrono::seconds up_window, down_window;
  const SteadyTime since;   // the scale-down window's start
  const uint32_t active;    // active partitions of the map
  const double cpu_target;  // the consumers' CPU target as a fraction
};

// One active partition with a current rate, as the stages see it.
struct Candidate {
  const PartitionInfo* info = nullptr;                     // in the inputs' map
  const LoadHistory::PartitionHistory* history = nullptr;  // in the inputs' history
  PartitionLoad load;   // its latest load; `rate` as sized (scale-up window, prediction)
  uint32_t parts = 1;   // pieces the rate asks for
  uint32_t useful = 1;  // pieces that help (a hot key caps it)
  double heaviest = 1;  // share of the heaviest piece at `parts`
  bool halves_known = false;
};

// 1. The load now.
struct CurrentLoad {
  std::vector<Candidate> known;   // active partitions with a current rate, in hash order
  std::vector<uint32_t> unknown;  // ids of active partitions without one
  double total_rate = 0;          // the latest arrival rate over `known`
  double sized_rate = 0;          // the sum of `known`'s rates as sized (the scale-up window's)
  SteadyTime latest{};            // the latest observation (the inputs' now without one)
  std::optional<Trend> trend;     // the rising trend, when prediction is on
};
// A partition's rate is its latest, or with a scale-up window the lowest over the window unless
// it was a surge (more than twice the target at the last two observations) or the trend rises.
CurrentLoad ReadLoad(const DecideInputs& in);

// 2. Prediction.
struct Prediction {
  double factor = 1;  // the rate to size for over the present one (1: it does not act)
  uint32_t pods = 0;  // pods for that rate
  std::string why;    // empty when it does not act
};
// On a rising trend, when the capacity in place falls short by the time a change (and, when
// pods run short, a pod start) could take effect: the factor for the rate expected over twice
// the lead or twice the trend's age, at most kMaxPredictedFactor.
Prediction Predict(const DecideInputs& in, const CurrentLoad& load);

// 3. Pieces the rates ask for.
struct SplitNeeds {
  uint32_t extra = 0;  // pieces beyond one per partition
  std::vector<HotKey> hot_keys;
  std::vector<std::string> hot_notes;  // at most three
};
// Sets each candidate's parts, useful and heaviest: ceil(rate / target) pieces for a partition
// above its target by more than the tolerance, unless no cut lowers its heaviest piece below
// rate / (1 + tolerance) (one key: a hot key, not split).
SplitNeeds WantSplits(const DecideInputs& in, std::vector<Candidate>& known);

// 4. Pods the consumers ask for now.
// The pods whose CPU the sample measured, scaled by their utilization over the target (as many
// as measured within the tolerance); 0 without a measurement.
uint32_t CpuReplicas(const DecideInputs& in, const LoadHistory::Sample& s);
// CpuReplicas of the latest sample, its CPU raised by `factor` (the prediction's).
uint32_t PodsForCpu(const DecideInputs& in, double factor);
struct LagPods {
  uint32_t pods = 0;  // 0: the lag asks for nothing
  std::string why;
};
// Lag above its target and grown over the last 3 s: enough pods to consume every arrival (times
// `factor`) at the rate the pods consume now per pod at the CPU target, and at least one more.
// Nothing once the consumers' capacity is measured (PodsForCapacity sizes for the backlog then).
LagPods PodsForLag(const DecideInputs& in, double factor);

struct Demand {
  double arrival = 0;    // events/s arriving as sized, times the prediction's factor
  uint64_t backlog = 0;  // the topic's lag, when above its target (0 otherwise)
  double drain = 0;      // events/s more to consume it within spec.scaling.drainSeconds
  std::string why;       // empty without a backlog to drain
  double rate() const { return arrival + drain; }
};
// What the consumers must take: the arrival rate as the partitions are sized for it (the
// scale-up window's, times `factor`) plus, while the latest observation's total lag is above
// targetConsumerLag, that lag over drainSeconds.
Demand ConsumeDemand(const DecideInputs& in, const CurrentLoad& load, double factor);

struct CapacityPods {
  uint32_t pods = 0;  // 0: the consumers' capacity is not measured yet
  std::string why;
};
// Pods for consumers to take `rate` events/s at what one pod's consumers were measured to take
// (LoadHistory::consumer_capacity): ceil(rate / per pod), no more than now while the rate is
// within the tolerance of what the pods in place take. The reason names the samples: saturated,
// from busy time, or both.
CapacityPods PodsForCapacity(const DecideInputs& in, double rate);

// 4b. Partitions in whole multiples of the pods the measured capacity asks for, when it adds
//     pods: each pod then gets as many partitions, so as much of the arrivals and of the
//     parents' backlog (a split divides both by range). With one pod holding a partition more
//     than the others, that pod runs at its capacity while they idle, and the drain waits for
//     it (shoal up's unannounced sale: 11 partitions on 8 pods, three of them saturated by two).
//     Only while a pod gets at most partitions.perReplica of them: with more, one partition
//     more is a small share of a pod's load. `want` is what the rates ask for; 0 when there is
//     nothing to round (or it would pass the cap).
uint32_t BalancedPartitions(const DecideInputs& in, const CapacityPods& capacity, uint32_t want);

// 5. Where the pieces go.
struct SplitPlan {
  std::vector<SplitDecision> splits;
  uint32_t after = 0;         // active partitions once split
  uint32_t wanted = 0;        // partitions wanted (rates, pods, schedules), before the cap
  bool room_limited = false;  // an owner's open-files limit held pieces back
  std::string room_note;
  std::string why;  // the split, when there is one
  std::string cap;  // the cap or step limit that held it, when one did
};
// At least `floor` partitions (the pods and schedules wanted), extra pieces one at a time to
// the partition whose pieces are hottest, within partitions.max, the step limit and what each
// owner can still open.
SplitPlan PlaceSplits(const DecideInputs& in, CurrentLoad& load, uint32_t extra, uint32_t floor);

// 6. Why nothing may shrink now (empty: it may): metrics missing within the scale-down window,
// a history shorter than it, a rising trend, a lag above its target within it.
std::vector<std::string> ScaleDownBlocked(const DecideInputs& in, const CurrentLoad& load);

// 7. Merges.
struct MergePlan {
  std::vector<MergeDecision> merges;
  uint32_t after = 0;  // active partitions once merged
  std::string why;     // empty without merges
};
// Runs of adjacent partitions whose summed peaks per bucket of the scale-down window stay below
// the target less the tolerance, never below partitions.min, the window's peak total rate, the
// pods the CPU asked for in it or what schedules hold, within the step limit. For a decision
// that splits nothing, may shrink and knows every partition's rate.
MergePlan PlaceMerges(const DecideInputs& in, const CurrentLoad& load, const Scheduled& scheduled);
// Why partitions may not merge now, or empty: once the consumers' capacity is measured, merges
// wait until the scale-down window's peak rate needs fewer pods than are in place. Partitions
// split for the pods (as many on each) would otherwise merge back at the peak, each change one
// more generation for the consumers to read through, while the pods they were split for stay.
std::string MergesWaitForPods(const DecideInputs& in);

// 8. Consumer pods.
struct PodsAsked {  // what the load asks for now, on the scale-up side
  uint32_t cpu = 0, lag = 0, predicted = 0, scheduled = 0;
  CapacityPods capacity{};
};
struct PodsPlan {
  uint32_t replicas = 0;
  std::optional<DecisionKind> kind;  // kPodsUp, kPodsDown, or none
  std::vector<std::string> why;
};
// Up at once to the most that `asked` or the partitions (per replica, no more than the tightest
// pod can hold open) ask for; down, when `may_shrink`, to the highest recommendation of the
// scale-down window (partitions, schedules, and per observation its CPU and its rate at the
// measured capacity less the tolerance); within the replica bounds and never above the
// partitions.
PodsPlan SizePods(const DecideInputs& in, const PodsAsked& asked, const SplitPlan& split,
                  uint32_t after, bool may_shrink);

// The stages composed: Decide(spec, history, map, replicas, now, wall) is Decide of its inputs.
Decision Decide(const DecideInputs& in);

}  // namespace shoal::control
