// ControlLoop: keeps one topic's partitions and pods matched to its load. Each Tick observes the
// sidecars, then either carries out the next step of the plan in progress or, with none, asks
// the policy for a decision and the planner for a plan. It is the same loop on every platform:
// Kubernetes (state in the PartitionedTopic's status) and LocalPlatform (state in a directory).
//
// Authority and resumption (docs/design.md, "Authority"): the loop is the only writer of the
// topic's partition map. The control state (the current map, the plan and each step's progress, the
// last decision) is saved through the platform before each action: a plan is saved before its first
// step, a change's resolved target map before it is sent to any sidecar, and every finished
// step at once. A loop killed anywhere and started again loads that state and re-applies the
// step it was in: every protocol step is idempotent (a sealed partition answers its end again, an
// installed epoch answers "stale"), so the change completes instead of starting over or forking.
// Never two changes of one topic at once: one plan at a time, one step at a time.
//
// A failing step is retried with exponential backoff and reported (status, log, metrics); it is
// never skipped. Thread-compatible: Tick from one thread; Status()/StatusJson() from any thread.
// Owned by main (or the test); platform, observer, admin client and clock outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shoal/client/admin_plane.h"
#include "shoal/common/clock.h"
#include "shoal/common/partition_map.h"
#include "shoal/common/topic_spec.h"
#include "shoal/control/change_executor.h"
#include "shoal/control/change_probe.h"
#include "shoal/control/failover.h"
#include "shoal/control/metrics_observer.h"
#include "shoal/control/planner.h"
#include "shoal/control/platform.h"
#include "shoal/control/policy.h"

namespace prometheus {
class Registry;
}

namespace shoal::control {

class ControlProbe;

struct ControlLoopOptions {
  std::chrono::milliseconds interval{1000};
  // How long new pods may take to become ready before the step is reported as failing.
  std::chrono::seconds ready_timeout{120};
  std::chrono::milliseconds backoff_start{250};
  std::chrono::milliseconds backoff_max{15000};
  // How often, with no plan in progress, consumed sealed partitions are looked for and retired.
  std::chrono::seconds retire_every{5};
  // A replicated partition whose leader's pod has not answered its readiness probe for this
  // long (from its last answer) is failed over to the most complete of its copies (invariant
  // 10); the loop ticks again when that time comes, not at its next interval.
  std::chrono::milliseconds failover_after{2000};
  ChangeExecutor::Options executor;
};

// The last decision as recorded in the control state.
struct DecisionRecord {
  int64_t at_ms = 0;  // wall time
  std::vector<DecisionKind> kinds;
  uint32_t partitions = 0, replicas = 0;
  std::string reason;
};

class ControlLoop {
 public:
  ControlLoop(TopicSpec spec, Platform& platform, Observer& observer,
              client::AdminPlane& admin, Clock& clock, ControlLoopOptions options);
  ~ControlLoop();
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // Loads the control state (resuming a plan in progress) or, for a new topic, asks for the
  // first pods; the initial map is installed by the ticks that follow, once they are ready.
  Status Start();
  // One iteration. Errors are reported and retried by later ticks; the returned status is for
  // logs and tests.
  Status Tick();
  // Ticks every interval until `stop` becomes true.
  void Run(const std::atomic<bool>& stop);

  // A new spec (the user edited the topic): takes effect at the next decision.
  void UpdateSpec(TopicSpec spec);
  // Paused (the topic's shoal.dev/paused annotation): no new decisions; a plan in progress
  // still finishes, so no change is left half done. Takes effect at the next tick.
  void SetPaused(bool paused);
  bool paused() const;

  std::shared_ptr<prometheus::Registry> registry() const;
  // Epoch, partitions, pods, plan and its steps, the last decision: the control state as JSON
  // (what `shoal status` prints and the Kubernetes status carries).
  std::string StatusJson() const;
  bool plan_in_progress() const;
  PartitionMap map() const;
  // The last observation in totals, for live views.
  struct Observed {
    double arrival_rate = 0;  // events/s over the active partitions
    double lag = 0;           // consumer lag summed over the partitions
    size_t missing = 0;
    uint32_t ready_pods = 0;  // pods the platform listed as ready at that tick
  };
  Observed last_observed() const;
  DecisionRecord last_decision() const;
  // Pods of the map that came back without their data (their sidecar holds no map while the
  // map gives them partitions: an emptied or replaced volume), with the partitions they held.
  // The current map is never installed on them (their partitions would start again at offset
  // 0, the events and the groups' positions gone unsaid): the next change declares those
  // partitions lost (PartitionMap::DeclareLost) and their ranges take writes again in new
  // partitions on the pod, the loss said in losses(). Empty when none.
  std::map<std::string, std::vector<PartitionId>> pods_without_data() const;
  // What a pod's emptied volume cost, as the change that declared its partitions lost found it.
  struct DataLoss {
    std::string pod;
    Epoch epoch{0};                       // the map that declared them lost
    std::vector<PartitionId> partitions;  // declared lost
    std::vector<PartitionId> successors;  // their ranges' new partitions
    // From the last observation of the lost partitions: the events they had taken (their end
    // offsets; retention may have removed some before), and the most any group had not read.
    uint64_t events = 0;
    uint64_t unconsumed = 0;
  };
  // The losses this loop declared, oldest first (the last kMaxLosses).
  static constexpr size_t kMaxLosses = 16;
  std::vector<DataLoss> losses() const;
  // A failover this loop made (MaybeFailOver, when its map was made): the pods that had stopped
  // answering, the partitions that got a new leader, the epoch of the map, and how long from
  // the earliest last ready answer of those pods to the map (what
  // shoal_control_failover_seconds reports).
  struct FailOverRecord {
    std::chrono::steady_clock::time_point at{};  // the loop's clock
    std::vector<std::string> pods;
    size_t partitions = 0;
    Epoch epoch{0};
    double seconds = 0;
  };
  // The failovers this loop made, oldest first (the last kMaxFailOvers).
  static constexpr size_t kMaxFailOvers = 64;
  std::vector<FailOverRecord> failovers() const;
  // Pods whose data volume is under pressure at the last observation (DiskState::pressure):
  // produce to their partitions is or will soon be refused. Empty when none.
  std::map<std::string, DiskState> pods_under_disk_pressure() const;

 private:
  // `map` with every partition's followers placed per spec.replication.factor on `pods` (those
  // the map has addresses for, not draining; common/replication.h). With `staying` > 0, pods of
  // that ordinal and higher are leaving (a scale-down's): their copies move to the others and
  // stay beside their replacements until the retirement that drops the pods from the map.
  Result<PartitionMap> WithReplicas(const PartitionMap& map, const std::vector<PodInfo>& pods,
                                    uint32_t staying = 0) const;
  // How many copies that replace copies on pods of ordinal `staying` and higher (WithReplicas)
  // have not caught up with their leader yet, as their pods say (or do not answer).
  size_t CopiesJoining(uint32_t staying);
  Status Bootstrap(const std::vector<PodInfo>& pods);
  Status RunStep(PlanStep& step, const std::vector<PodInfo>& pods);
  Status RunChange(PlanStep& step, const std::vector<PodInfo>& pods);
  Status InstallOnLaggingPods(const std::vector<PodInfo>& pods);
  // With no plan and a pod without its data: plans the change that declares its partitions
  // lost. True when it made one.
  bool PlanRecovery(const std::vector<PodInfo>& pods);
  // Of `ids`, noted for `pod` without its data, how many a declaration of loss would take: those
  // it still owns, less active ones with copies (MaybeFailOver gives those to a copy).
  size_t Declarable(const std::string& pod, const std::vector<PartitionId>& ids) const;
  // Failover (docs/replication.md): the active replicated partitions led by pods not ready for
  // failover_after get, in one map at the next epoch, the most complete of a quorum of their
  // copies as leader (ChooseLeader over what each copy says it holds, GET /v1/admin/replica).
  // The map is saved, then installed on every ready pod (new leaders first); a pod that is
  // down takes it when it is back (InstallOnLaggingPods). A change in progress resolves its step
  // again on the new map. Returns whether a failover map was made.
  bool MaybeFailOver(const std::vector<PodInfo>& pods);
  // Reads back the fences of copies a failover of an earlier run of this loop left (fenced_).
  void RecoverFences(const std::vector<PodInfo>& pods);
  // Asks every ready pod of the map for its map: one that holds none while the map gives it
  // partitions (not lost) goes to pods_without_data_.
  void NoticePodsWithoutData(const std::vector<PodInfo>& pods);
  // The one log line that names a pod without its data (`reason`: what it answered, if any).
  static void LogPodWithoutData(const PodName& pod, const std::vector<PartitionId>& owned,
                                const std::string& reason);
  // With a plan whose next step is a change not resolved yet and a pod without data: the
  // recovery is put before it (any change would need that pod's partitions).
  void PutRecoveryFirst();
  // After that change: what was lost, logged, counted and kept for losses().
  void RecordLoss(const PartitionMap& before, const std::string& pod);
  // Sealed partitions that may leave the map (retirement.h), from every pod's admin plane;
  // empty when anything needed cannot be read.
  std::vector<PartitionId> Retirable(const std::vector<PodInfo>& pods);
  static bool IsFencing(const Status& st);
  // After a fencing refusal of `step` (its target had epoch `tried`): re-reads the record and the
  // sidecars' maps, takes over whatever is newer, else clears the step's target for a later try.
  Status Reconcile(PlanStep& step, const Status& why, const std::vector<PodInfo>& pods,
                   Epoch tried);
  // Epoch, digest, plan id and next plan id of a control state: what tells one coordinator's
  // record from another's.
  static std::string StateSummary(std::string_view state);
  Status Save();
  // The map's and the plan's shape on the loop's metrics.
  void ReportState(uint32_t ready_pods);
  void LearnLeadTime(const PlanStep& step, const std::vector<PodInfo>& pods,
                     std::chrono::steady_clock::time_point now);
  std::string StateJsonLocked() const;
  Status LoadState(std::string_view json);
  void Decide(const std::vector<PodInfo>& pods);
  // With no plan: when every pod asked for is ready and some run an old template, plans their
  // roll (planner.h MakeRollPlan). True when it made one.
  bool PlanRoll(const std::vector<PodInfo>& pods);
  Status RunRestart(PlanStep& step, const std::vector<PodInfo>& pods);
  // `plan` (numbered already) becomes the plan in progress, saved before its first step runs
  // (next Tick); dropped when the save fails.
  void Adopt(Plan plan);
  std::map<std::string, PeerAddress> ReadyPeers(const std::vector<PodInfo>& pods) const;
  // The incarnation a restart step asked the platform to restart (not persisted: a restarted
  // loop asks again, which the platform ignores for a pod restarted already).
  std::string restart_asked_uid_;

  TopicSpec spec_;
  Platform& platform_;
  Observer& observer_;
  client::AdminPlane& admin_;
  Clock& clock_;
  const ControlLoopOptions opts_;
  ChangeProbe change_probe_;
  std::unique_ptr<ControlProbe> probe_;
  ChangeExecutor executor_;
  LoadHistory history_;

  mutable std::mutex mu_;  // guards the state below for StatusJson readers
  std::atomic<bool> paused_{false};
  bool bootstrapped_ = false;
  PartitionMap map_;
  std::optional<Plan> plan_;
  // Counts the times Reconcile dropped or replaced plan_ (a step run before must not be written
  // back into a plan that is not its own).
  uint64_t plan_generation_ = 0;
  uint64_t next_plan_id_ = 1;
  DecisionRecord last_decision_;
  std::string last_error_;
  std::map<PartitionId, double> last_rates_;
  std::map<std::string, std::vector<PartitionId>> pods_without_data_;
  std::vector<DataLoss> losses_;
  std::vector<FailOverRecord> failovers_;
  // Per partition, from the last observation that saw it: end offset and largest lag.
  std::map<PartitionId, std::pair<uint64_t, uint64_t>> last_seen_;
  std::map<std::string, DiskState> pods_disk_pressure_;
  // Pods seen holding a map (the bootstrap's installs, InstallOnLaggingPods), kept in the
  // control state so that a restarted loop still tells an emptied volume from a pod that never
  // had a map.
  std::set<std::string> seen_with_map_;
  // Per pod, the volume this loop first saw it hold a map on (control/failover.h), kept in the
  // control state likewise.
  FirstVolumes first_volumes_;
  std::optional<TopicSpec> pending_spec_;
  Observed observed_;

  // Backoff of the failing step (not persisted: a restarted loop tries at once).
  std::chrono::steady_clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point step_started_{};
  // When the plan in progress asked for more pods (to learn how long they take to be ready).
  std::optional<std::chrono::steady_clock::time_point> pods_asked_at_;
  std::optional<std::chrono::steady_clock::time_point> bootstrap_asked_;  // the first tick
  std::string schedules_json_ = "[]";  // SchedulesJson at the last tick (guarded by mu_)
  std::chrono::steady_clock::time_point last_retire_check_{};
  Epoch epoch_floor_{0};  // a change is minted at no lower epoch (after a fencing refusal)
  // Pods of the map seen not ready, since when: their last ready answer (the loop's thread
  // only).
  std::map<std::string, std::chrono::steady_clock::time_point> down_since_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_ready_;
  // When a leader that is down comes due for its failover: the loop's next tick is no later
  // (the loop's thread only).
  std::optional<std::chrono::steady_clock::time_point> failover_due_;
  // Partitions whose copies were fenced for a failover, at which leader epoch; the failover
  // goes on until a map names a leader at or above it (the loop's thread only).
  std::map<PartitionId, Epoch> fenced_;
  bool fences_recovered_ = false;  // RecoverFences read every ready pod (the loop's thread)
};

}  // namespace shoal::control
