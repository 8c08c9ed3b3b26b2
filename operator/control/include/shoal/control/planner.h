// The change planner: (current map, decision, pods) -> an ordered plan of steps against the
// platform and the sidecars' admin planes. Pure, like the policy: the control loop executes the
// plan, the simulator replays it.
//
// Order (fast relief first, nothing removed before it is empty):
//   scale-up:   more pods -> split in place -> wait until they are ready -> move partitions to them
//   scale-down: merge cold neighbours -> move everything off the pods to remove -> wait until
//               their sealed partitions are consumed -> retire them -> drain -> fewer pods
//   roll (pods that run an old template): per pod, move everything off it -> wait until its
//               sealed partitions are consumed -> retire them -> restart it on the new template
//               and wait until it is ready; then balance over all pods again. A topic of one pod
//               first gets a second one (new template) to hold the partitions meanwhile, and
//               gives it back at the end as a scale-down does.
// A change step names its intent (splits, merges, rebalance, retire); the concrete target map is
// resolved when the step starts, from the map and pods of that moment, and persisted before it is
// applied, so a restarted loop applies exactly the same target again (every protocol step is
// idempotent) instead of inventing another one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shoal/common/partition_map.h"
#include "shoal/common/status.h"
#include "shoal/control/policy.h"

namespace shoal::control {

// Pods are named like a StatefulSet's: <topic>-<ordinal>.
PodName PodFor(const std::string& topic, uint32_t ordinal);
// The ordinal of such a name, or -1.
int64_t OrdinalOf(const std::string& topic, const PodName& pod);

struct PlanStep {
  enum class Kind { kChange, kSetPods, kWaitReady, kWaitConsumed, kDrain, kRestart };
  enum class State { kPending, kDone };

  Kind kind = Kind::kChange;
  std::string what;  // in words, for status and logs
  // kChange: what to compose into one map at epoch + 1.
  std::vector<SplitDecision> splits;  // by id: valid on the map the plan was made from
  std::vector<MergeDecision> merges;  // likewise
  bool rebalance = false;             // move partitions to balance load over `pods` pods
  bool retire = false;                // retire consumed sealed partitions; drop pods >= `pods`
  // Declare this pod's partitions lost (its volume came back empty; PartitionMap::DeclareLost),
  // alone in its change: their ranges take writes again in successors on it.
  std::string lost_pod;
  // kSetPods, kWaitReady: the pod count; kChange with rebalance: pods to balance over (those
  // with higher ordinals are emptied); kWaitConsumed, kDrain: pods >= this are the ones leaving.
  uint32_t pods = 0;
  // kChange with rebalance, kWaitConsumed: also empty (wait for) this pod, which stays (a roll
  // restarts it); kRestart: the pod to restart.
  std::optional<uint32_t> vacate;

  // Progress, persisted.
  State state = State::kPending;
  int attempts = 0;
  std::string last_error;
  std::string target;  // kChange: the resolved target map (JSON), once resolved
};

struct Plan {
  uint64_t id = 0;
  std::string reason;
  std::vector<PlanStep> steps;
  size_t next = 0;  // the first step not done

  bool done() const { return next >= steps.size(); }
};

std::string_view ToString(PlanStep::Kind k);

// The steps that carry out `d` on `map`, run by `pods` pods now. Empty when there is nothing to
// do.
Plan MakePlan(const PartitionMap& map, const Decision& d, uint32_t pods);

// The steps that bring `outdated` (ordinals of pods that run an old template; every one below
// `pods`) to the new template one at a time, each emptied before it restarts. Empty when
// `outdated` is.
Plan MakeRollPlan(const std::vector<uint32_t>& outdated, uint32_t pods);

// Moves that spread the active partitions over pods 0..pods-1 by load (rate, with a floor so
// that idle partitions still spread by count) and empty every pod at or above `pods`. Greedy:
// the heaviest partition of the most loaded pod goes to the least loaded one while that narrows
// the gap by more than `slack` of the mean. At most `max_moves` (0: unlimited), evacuations first.
// `vacate`: a pod below `pods` that is emptied too and receives nothing.
std::vector<std::pair<PartitionId, PodName>> Rebalance(const PartitionMap& map,
                                                       const std::map<PartitionId, double>& rates,
                                                       uint32_t pods, double slack = 0.25,
                                                       size_t max_moves = 0,
                                                       std::optional<uint32_t> vacate = {});

// The target of a change step on `current`: its splits and merges, then (rebalance) the moves of
// Rebalance, (retire) the `retirable` partitions retired and the peers of pods >= step.pods
// dropped. `peers` are added to the map's peers first (new pods' addresses). A step whose
// intent is already met yields a map equal to `current` but for the epoch: callers may skip it.
Result<PartitionMap> ResolveChange(const PlanStep& step, const PartitionMap& current,
                                   const std::map<PartitionId, double>& rates,
                                   const std::vector<PartitionId>& retirable,
                                   const std::map<std::string, PeerAddress>& peers);

// Plan and steps as JSON for the control state (and back).
std::string PlanToJson(const Plan& plan);
// [1,3,7]: partition ids as a JSON array.
void AppendIdArray(std::string& out, const std::vector<PartitionId>& ids);
Result<Plan> PlanFromJson(std::string_view json);

}  // namespace shoal::control
