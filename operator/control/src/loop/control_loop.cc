#include "shoal/control/control_loop.h"

#include <simdjson.h>

#include <algorithm>
#include <set>
#include <thread>

#include "loop/control_probe.h"
#include "shoal/control/failover.h"
#include "shoal/control/retirement.h"
#include "shoal/common/json.h"
#include "shoal/common/replication.h"
#include "shoal/common/logging.h"
#include "shoal/common/map_transition.h"

namespace shoal::control {

namespace {

using SteadyClock = std::chrono::steady_clock;

void AppendLosses(std::string& o, const std::vector<ControlLoop::DataLoss>& losses) {
  o += '[';
  for (size_t i = 0; i < losses.size(); ++i) {
    const ControlLoop::DataLoss& l = losses[i];
    if (i) o += ',';
    o += "{\"pod\":";
    json::AppendString(o, l.pod);
    o += ",\"epoch\":";
    json::AppendUint(o, l.epoch.value());
    o += ",\"partitions\":";
    AppendIdArray(o, l.partitions);
    o += ",\"successors\":";
    AppendIdArray(o, l.successors);
    o += ",\"events\":";
    json::AppendUint(o, l.events);
    o += ",\"unconsumed\":";
    json::AppendUint(o, l.unconsumed);
    o += '}';
  }
  o += ']';
}

// The ids of a JSON array of partition ids; out-of-range or non-numeric entries are left out.
std::vector<PartitionId> IdsFrom(simdjson::dom::element e) {
  std::vector<PartitionId> out;
  simdjson::dom::array a;
  if (e.get(a)) return out;
  for (auto v : a) {
    uint64_t id = 0;
    if (!v.get(id) && id <= kMaxPartitionId && out.size() < kMaxParents) {
      out.push_back(PartitionId(static_cast<uint32_t>(id)));
    }
  }
  return out;
}

std::chrono::seconds Horizon(const TopicSpec& spec) {
  return std::chrono::seconds(std::max(spec.scale_down.stabilization_window_seconds,
                                       spec.scale_up.stabilization_window_seconds) +
                              60);
}

// The kind of a change step, for metrics and logs.
std::string ChangeKind(const PlanStep& s) {
  if (!s.splits.empty()) return "split";
  if (!s.merges.empty()) return "merge";
  if (s.retire) return "retire";
  return "move";
}

std::string StepKind(const PlanStep& s) {
  return s.kind == PlanStep::Kind::kChange ? ChangeKind(s) : std::string(ToString(s.kind));
}

void AppendDecision(std::string& o, const DecisionRecord& d) {
  o += "{\"at_ms\":";
  json::AppendInt(o, d.at_ms);
  o += ",\"kinds\":[";
  for (size_t i = 0; i < d.kinds.size(); ++i) {
    if (i) o += ',';
    json::AppendString(o, ToString(d.kinds[i]));
  }
  o += "],\"partitions\":";
  json::AppendUint(o, d.partitions);
  o += ",\"replicas\":";
  json::AppendUint(o, d.replicas);
  o += ",\"reason\":";
  json::AppendString(o, d.reason);
  o += '}';
}

// A plan's steps in words, for the log.
std::string StepsText(const Plan& plan) {
  std::string steps;
  for (const auto& s : plan.steps) steps += (steps.empty() ? "" : " | ") + s.what;
  return steps;
}

bool SamePartitions(const PartitionMap& a, const PartitionMap& b) {
  return a.partitions() == b.partitions() && a.peers() == b.peers();
}

}  // namespace

ControlLoop::ControlLoop(TopicSpec spec, Platform& platform, Observer& observer,
                         client::AdminPlane& admin, Clock& clock, ControlLoopOptions options)
    : spec_(std::move(spec)),
      platform_(platform),
      observer_(observer),
      admin_(admin),
      clock_(clock),
      opts_(options),
      change_probe_(spec_.name),
      probe_(std::make_unique<ControlProbe>(*change_probe_.registry(), spec_.name)),
      executor_(admin, options.executor),
      history_(Horizon(spec_)) {
  probe_->Limits(spec_.partitions.max);
}

ControlLoop::~ControlLoop() = default;

std::shared_ptr<prometheus::Registry> ControlLoop::registry() const {
  return change_probe_.registry();
}

Status ControlLoop::Start() {
  auto text = platform_.LoadState();
  if (text.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    SHOAL_RETURN_IF_ERROR(LoadState(*text));
    Logger("control")->info("msg=\"resumed control state\" topic={} epoch={} plan={} next_step={}",
                            spec_.name, map_.epoch().value(),
                            plan_ ? std::to_string(plan_->id) : "none", plan_ ? plan_->next : 0);
    return Status::Ok();
  }
  if (text.status().code() != Status::Code::kNotFound) return text.status();
  // A new topic: its first pods. The initial map goes out once they are ready (Bootstrap).
  const uint32_t pods = std::max<uint32_t>(
      1, std::min(spec_.replicas.min, std::max<uint32_t>(1, spec_.partitions.initial)));
  if (platform_.DesiredPods() < pods) {
    bootstrap_asked_ = clock_.SteadyNow();  // how long they take is the first pod start learned
    SHOAL_RETURN_IF_ERROR(platform_.SetDesiredPods(pods));
  }
  Logger("control")->info("msg=\"new topic: starting pods\" topic={} pods={} partitions={}",
                          spec_.name, pods, spec_.partitions.initial);
  return Status::Ok();
}

void ControlLoop::UpdateSpec(TopicSpec spec) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_spec_ = std::move(spec);  // taken by the next Tick, on the loop's thread
}

std::map<std::string, PeerAddress> ControlLoop::ReadyPeers(const std::vector<PodInfo>& pods) const {
  std::map<std::string, PeerAddress> peers;
  for (const auto& p : pods) {
    if (p.ready && !p.draining) peers[p.name.value()] = p.address;
  }
  return peers;
}

Result<PartitionMap> ControlLoop::WithReplicas(const PartitionMap& map,
                                               const std::vector<PodInfo>& pods,
                                               uint32_t staying) const {
  // Copies go to the pods the map has addresses for and that are not leaving; a pod that is
  // down for a moment keeps its copies (it catches up when it is back).
  std::vector<PodName> names;
  std::set<PodName> leaving;
  std::map<std::string, replication::PodPlace> places;
  for (const auto& p : pods) {
    if (p.draining || !map.Peer(p.name)) continue;
    if (staying > 0 && p.ordinal >= staying) {
      leaving.insert(p.name);
      continue;
    }
    names.push_back(p.name);
    places[p.name.value()] = {p.node, p.zone};
  }
  return replication::PlaceReplicas(map, names, spec_.replication.factor, places, leaving);
}

size_t ControlLoop::CopiesJoining(uint32_t staying) {
  auto leaves = [&](const PodName& pod) {
    const int64_t o = OrdinalOf(spec_.name, pod);
    return o >= 0 && o >= static_cast<int64_t>(staying);
  };
  std::map<std::string, std::set<uint32_t>> caught_up;  // by pod: the copies it says caught up
  std::set<std::string> asked;
  size_t joining = 0;
  for (const auto& p : map_.partitions()) {
    if (leaves(p.owner) || std::none_of(p.replicas.begin(), p.replicas.end(), leaves)) continue;
    for (const auto& j : p.joined) {
      if (leaves(j.pod)) continue;
      if (asked.insert(j.pod.value()).second) {
        const PeerAddress* addr = map_.Peer(j.pod);
        auto copies = addr ? admin_.FollowedCopies(addr->admin)
                           : Result<std::vector<std::pair<PartitionId, replication::ReplicaState>>>(
                                 Status::Unavailable("no address"));
        if (copies.ok()) {
          for (const auto& [id, held] : *copies) {
            if (!held.joining && !held.refetching) caught_up[j.pod.value()].insert(id.value());
          }
        }
      }
      joining += caught_up[j.pod.value()].count(p.id.value()) ? 0 : 1;
    }
  }
  return joining;
}

Status ControlLoop::Bootstrap(const std::vector<PodInfo>& pods) {
  const uint32_t want = std::max<uint32_t>(1, platform_.DesiredPods());
  std::vector<PodName> owners;
  PartitionMap map;
  for (const auto& p : pods) {
    if (p.ordinal < want && p.ready) owners.push_back(p.name);
  }
  if (owners.size() < want) {
    return Status::Unavailable("waiting for the first pods: " + std::to_string(owners.size()) +
                               " of " + std::to_string(want) + " ready");
  }
  auto initial = PartitionMap::Initial(spec_.name, spec_.partitions.initial, owners);
  if (!initial.ok()) return initial.status();
  map = *initial;
  for (const auto& p : pods) {
    if (p.ordinal < want) map = map.WithPeer(p.name, p.address);
  }
  auto placed = WithReplicas(map, pods);
  if (!placed.ok()) return placed.status();
  map = std::move(placed).value();
  {
    std::lock_guard<std::mutex> lock(mu_);
    map_ = map;
    bootstrapped_ = true;
  }
  // Saved before it is sent: a restarted loop re-installs this map rather than inventing one.
  SHOAL_RETURN_IF_ERROR(Save());
  SHOAL_RETURN_IF_ERROR(executor_.InstallEverywhere(map));
  FirstVolumes volumes;
  for (const auto& [pod, addr] : map.peers())
    (void)RecordFirstVolume(admin_, PodName(pod), addr.admin, &volumes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [pod, addr] : map.peers()) seen_with_map_.insert(pod);
    first_volumes_.insert(volumes.begin(), volumes.end());
  }
  SHOAL_RETURN_IF_ERROR(Save());
  Logger("control")->info("msg=\"topic created\" topic={} partitions={} pods={} epoch={}",
                          spec_.name, map.active_count(), owners.size(), map.epoch().value());
  return Status::Ok();
}

Status ControlLoop::Tick() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_spec_) {
      spec_ = std::move(*pending_spec_);
      pending_spec_.reset();
      if (history_.horizon() != Horizon(spec_)) history_.SetHorizon(Horizon(spec_));
      probe_->Limits(spec_.partitions.max);
    }
  }
  auto listed = platform_.ListPods();
  if (!listed.ok()) return listed.status().Annotate("listing pods");
  const std::vector<PodInfo>& pods = *listed;
  uint32_t ready = 0;
  for (const auto& p : pods) ready += p.ready ? 1 : 0;
  if (!bootstrapped_) {
    const auto asked = clock_.SteadyNow();
    Status st = Bootstrap(pods);
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.ok()) {
      last_error_ = st.message();
    } else if (bootstrap_asked_) {
      // The topic's first pods, from asked for to ready: the first pod start learned.
      history_.RecordPodStart(asked - *bootstrap_asked_);
    }
    return st;
  }

  // A leader that stopped answering is failed over before the observation, and while its
  // failover is counted down the observation does not scrape it: a hung pod's scrape would hold
  // the tick until its deadline, and the failover with it (its partitions are missing meanwhile).
  if (!paused_.load()) MaybeFailOver(pods);
  std::vector<PodInfo> answering;
  for (const auto& p : pods) {
    if (!down_since_.count(p.name.value())) answering.push_back(p);
  }

  // Observe every tick, plan or not, so the windows of the policy stay filled.
  Observation o = observer_.Observe(map_, answering);
  double arrival = 0, lag = 0;
  for (const auto& [id, load] : o.partitions) {
    if (load.active) arrival += load.rate;
    lag += static_cast<double>(load.lag);
  }
  probe_->Observed(arrival, lag, o.missing.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, load] : o.partitions) {
      if (load.active) last_rates_[id] = load.rate;
      last_seen_[id] = {load.end, load.lag};
    }
    history_.Add(o);
    pods_disk_pressure_.clear();
    for (const auto& [pod, disk] : o.disks) {
      if (disk.pressure()) pods_disk_pressure_.emplace(pod, disk);
    }
    observed_ = Observed{
        .arrival_rate = arrival, .lag = lag, .missing = o.missing.size(), .ready_pods = ready};
  }

  // The schedules' windows as the state shows them; saved when one moves on or changes state.
  {
    std::string schedules =
        SchedulesJson(spec_, history_, WallTime(std::chrono::milliseconds(clock_.NowMs())));
    bool changed = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      changed = schedules != schedules_json_;
      if (changed) schedules_json_ = std::move(schedules);
    }
    if (changed) SHOAL_RETURN_IF_ERROR(Save());
  }

  const auto now = clock_.SteadyNow();
  Status result = Status::Ok();
  if (plan_) {
    if (now >= retry_at_) {
      PutRecoveryFirst();
      // RunStep works on a copy; StatusJson readers see the plan only under mu_.
      PlanStep step = plan_->steps[plan_->next];
      if (step_started_ == SteadyClock::time_point{}) step_started_ = now;
      const auto t0 = SteadyClock::now();
      const uint64_t generation = plan_generation_;
      Status st = RunStep(step, pods);
      if (plan_generation_ != generation) {
        // Reconcile dropped this plan or took over another coordinator's: the step is not ours
        // to write back, and what comes next is the new plan's (or the next decision's).
        probe_->StepFinished(StepKind(step), false,
                             std::chrono::duration<double>(SteadyClock::now() - t0).count());
        retry_at_ = now;
        ReportState(ready);
        return st;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        plan_->steps[plan_->next] = step;
      }
      const double seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
      const std::string kind = StepKind(step);
      if (st.ok() && step.state == PlanStep::State::kDone) {
        probe_->StepFinished(kind, true, seconds);
        LearnLeadTime(step, pods, clock_.SteadyNow());  // the step's own time included
        Logger("control")->info(
            "msg=\"plan step done\" plan={} step={} kind={} what=\"{}\" "
            "epoch={} seconds={:.3f}",
            plan_->id, plan_->next, kind, step.what, map_.epoch().value(), seconds);
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++plan_->next;
          backoff_ = std::chrono::milliseconds(0);
          step_started_ = {};
          last_error_.clear();
          if (plan_->done()) {
            Logger("control")->info("msg=\"plan done\" plan={} epoch={} partitions={}", plan_->id,
                                    map_.epoch().value(), map_.active_count());
            plan_.reset();
          }
        }
        SHOAL_RETURN_IF_ERROR(Save());
      } else if (!st.ok()) {
        // Failing: report, back off, try again; a step is never skipped.
        probe_->StepFinished(kind, false, seconds);
        backoff_ =
            std::min(opts_.backoff_max, backoff_.count() == 0 ? opts_.backoff_start : backoff_ * 2);
        retry_at_ = now + backoff_;
        {
          std::lock_guard<std::mutex> lock(mu_);
          PlanStep& held = plan_->steps[plan_->next];
          ++held.attempts;
          held.last_error = st.message();
          step = held;
          last_error_ = "plan " + std::to_string(plan_->id) + " step " +
                        std::to_string(plan_->next) + " (" + step.what + "): " + st.message();
        }
        Logger("control")->warn(
            "msg=\"plan step failed; retrying\" plan={} step={} kind={} "
            "attempt={} backoff_ms={} reason=\"{}\"",
            plan_->id, plan_->next, kind, step.attempts, backoff_.count(), st.message());
        (void)Save();
        // A pod behind the current map can hold the step up: a seal waits for a quorum of the
        // partition's copies, and a copy that missed a failover's map does not fetch from the
        // new leader. It gets the current map now (an older map than the step's target, which
        // every sidecar takes while the step is in progress).
        if (st.code() == Status::Code::kUnavailable) (void)InstallOnLaggingPods(pods);
        result = st;
      }
    }
  } else {
    // A pod that came back without its data first: any other change would be installed on it
    // too, and it would open its old partitions empty.
    if (!paused_.load()) PlanRecovery(pods);
    if (!plan_ && !paused_.load()) Decide(pods);
    if (!plan_ && !paused_.load()) PlanRoll(pods);
    if (!plan_ && now - last_retire_check_ >= opts_.retire_every) {
      last_retire_check_ = now;
      (void)InstallOnLaggingPods(pods);
      auto retirable = OneHoldersRetirement(map_, Retirable(pods));
      if (!retirable.empty()) {
        Plan p;
        p.reason = std::to_string(retirable.size()) +
                   " sealed partition(s) consumed by every group: retire them";
        PlanStep s;
        s.kind = PlanStep::Kind::kChange;
        s.what = "retire " + std::to_string(retirable.size()) + " consumed sealed partition(s)";
        s.retire = true;
        s.pods = std::max<uint32_t>(platform_.DesiredPods(), 1);
        p.steps.push_back(std::move(s));
        {
          std::lock_guard<std::mutex> lock(mu_);
          p.id = next_plan_id_++;
          plan_ = std::move(p);
        }
        SHOAL_RETURN_IF_ERROR(Save());
      }
    }
  }
  ReportState(ready);
  return result;
}

// The policy's prediction sizes for what is expected once a decision has taken effect: how long
// this platform takes for a change (first run to installed, retries included) and for new pods
// (asked for to ready) is learned from the plans carried out.
void ControlLoop::LearnLeadTime(const PlanStep& step, const std::vector<PodInfo>& pods,
                                std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  switch (step.kind) {
    case PlanStep::Kind::kChange:
      if (!step.retire) history_.RecordChange(now - step_started_);
      break;
    case PlanStep::Kind::kSetPods:
      if (step.pods > pods.size()) pods_asked_at_ = now;
      break;
    case PlanStep::Kind::kWaitReady:
      if (pods_asked_at_) history_.RecordPodStart(now - *pods_asked_at_);
      pods_asked_at_.reset();
      break;
    default:
      break;
  }
}

void ControlLoop::ReportState(uint32_t ready_pods) {
  const size_t sealed = map_.partitions().size() - map_.active_count();
  probe_->State(map_.active_count(), sealed, platform_.DesiredPods(), ready_pods,
                plan_.has_value());
}

void ControlLoop::SetPaused(bool paused) {
  if (paused_.exchange(paused) != paused) {
    Logger("control")->info("msg=\"{}\"", paused ? "paused: no new decisions" : "resumed");
  }
}

bool ControlLoop::paused() const { return paused_.load(); }

void ControlLoop::Decide(const std::vector<PodInfo>& pods) {
  (void)pods;
  const uint32_t replicas = std::max<uint32_t>(1, platform_.DesiredPods());
  TopicSpec spec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    spec = spec_;
  }
  Decision d = control::Decide(spec, history_, map_, replicas, clock_.SteadyNow(),
                               WallTime(std::chrono::milliseconds(clock_.NowMs())));
  const double unix_s = static_cast<double>(clock_.NowMs()) / 1000.0;
  for (DecisionKind k : d.kinds) probe_->Decided(ToString(k), unix_s);
  probe_->HotKeys(d.hot_keys);
  std::optional<Plan> plan;
  if (!d.holds()) {
    plan = MakePlan(map_, d, replicas);
    if (plan->steps.empty()) plan.reset();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_decision_ = DecisionRecord{.at_ms = clock_.NowMs(),
                                    .kinds = d.kinds,
                                    .partitions = d.partitions,
                                    .replicas = d.replicas,
                                    .reason = d.reason};
    if (!plan) return;
    plan->id = next_plan_id_++;
  }
  Logger("control")->info(
      "msg=\"decision\" topic={} plan={} partitions={}->{} replicas={}->{} "
      "reason=\"{}\" steps=\"{}\"",
      spec.name, plan->id, map_.active_count(), d.partitions, replicas, d.replicas, d.reason,
      StepsText(*plan));
  Adopt(std::move(*plan));
}

void ControlLoop::Adopt(Plan plan) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = std::move(plan);
  }
  step_started_ = {};
  // The plan is saved before its first step runs (next Tick).
  Status st = Save();
  if (!st.ok()) {
    Logger("control")->error("msg=\"cannot save the plan; dropping it\" reason=\"{}\"",
                             st.message());
    std::lock_guard<std::mutex> lock(mu_);
    plan_.reset();
  }
}

bool ControlLoop::PlanRoll(const std::vector<PodInfo>& pods) {
  // Only from a settled topic: every pod asked for is there and ready (a pod starting or
  // restarting is not rolled, and nothing is rolled while the pods are short).
  const uint32_t desired = std::max<uint32_t>(1, platform_.DesiredPods());
  std::vector<uint32_t> outdated;
  uint32_t ready = 0;
  for (const auto& p : pods) {
    if (p.ordinal >= desired) return false;  // a pod on its way out
    if (!p.ready || p.draining) return false;
    ++ready;
    if (p.outdated) outdated.push_back(p.ordinal);
  }
  if (ready < desired || outdated.empty()) return false;
  // Highest ordinal first, as the StatefulSet controller would.
  std::sort(outdated.rbegin(), outdated.rend());
  Plan plan = MakeRollPlan(outdated, desired);
  if (plan.steps.empty()) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    plan.id = next_plan_id_++;
  }
  Logger("control")->info("msg=\"roll\" topic={} plan={} reason=\"{}\" steps=\"{}\"",
                          spec_.name, plan.id, plan.reason, StepsText(plan));
  Adopt(std::move(plan));
  return plan_.has_value();
}

Status ControlLoop::RunRestart(PlanStep& step, const std::vector<PodInfo>& pods) {
  const uint32_t ordinal = step.vacate.value_or(0);
  const PodInfo* pod = nullptr;
  for (const auto& p : pods) {
    if (p.ordinal == ordinal) pod = &p;
  }
  if (pod != nullptr && pod->ready && !pod->outdated) {  // back, on the new template
    step.state = PlanStep::State::kDone;
    restart_asked_uid_.clear();
    return Status::Ok();
  }
  if (pod != nullptr && pod->outdated && pod->uid != restart_asked_uid_) {
    // Never a pod that owns a partition: producers would wait for it (the move step emptied it;
    // a map changed since by another coordinator is caught here).
    for (const auto& p : map_.partitions()) {
      if (p.active() && p.owner == pod->name) {
        return Status::FailedPrecondition("not restarting " + pod->name.value() +
                                          ": it owns active partition " +
                                          std::to_string(p.id.value()));
      }
    }
    SHOAL_RETURN_IF_ERROR(platform_.RestartPod(*pod));
    restart_asked_uid_ = pod->uid;
    Logger("control")->info("msg=\"restarting an emptied pod on the new template\" pod={}",
                            pod->name.value());
  }
  if (clock_.SteadyNow() - step_started_ > opts_.ready_timeout) {
    return Status::Unavailable("pod " + std::to_string(ordinal) + " not back and ready after " +
                               std::to_string(opts_.ready_timeout.count()) + " s");
  }
  return Status::Ok();  // waiting for it to come back
}

Status ControlLoop::RunStep(PlanStep& step, const std::vector<PodInfo>& pods) {
  switch (step.kind) {
    case PlanStep::Kind::kChange:
      return RunChange(step, pods);
    case PlanStep::Kind::kSetPods:
      SHOAL_RETURN_IF_ERROR(platform_.SetDesiredPods(step.pods));
      step.state = PlanStep::State::kDone;
      return Status::Ok();
    case PlanStep::Kind::kWaitReady: {
      uint32_t ready = 0;
      for (const auto& p : pods) ready += (p.ordinal < step.pods && p.ready) ? 1 : 0;
      if (ready >= step.pods) {
        step.state = PlanStep::State::kDone;
        return Status::Ok();
      }
      if (clock_.SteadyNow() - step_started_ > opts_.ready_timeout) {
        return Status::Unavailable(std::to_string(ready) + " of " + std::to_string(step.pods) +
                                   " pods ready after " +
                                   std::to_string(opts_.ready_timeout.count()) + " s");
      }
      return Status::Ok();  // waiting
    }
    case PlanStep::Kind::kWaitConsumed: {
      std::set<uint32_t> retirable;
      for (PartitionId id : Retirable(pods)) retirable.insert(id.value());
      size_t waiting = 0;
      for (const auto& p : map_.partitions()) {
        const int64_t o = OrdinalOf(spec_.name, p.owner);
        if (o < step.pods && !(step.vacate && o == *step.vacate)) continue;
        if (p.active()) {
          return Status::FailedPrecondition("pod " + p.owner.value() +
                                            " still owns active partition " +
                                            std::to_string(p.id.value()));
        }
        waiting += retirable.count(p.id.value()) ? 0 : 1;
      }
      // And the copies that replace the leaving pods' copies hold their leaders' ends: only
      // then may the retirement drop the old ones (Kafka's reassignment waits for the new
      // replicas to join the ISR before it removes the old).
      if (waiting == 0 && !step.vacate) waiting = CopiesJoining(step.pods);
      if (waiting == 0) step.state = PlanStep::State::kDone;
      return Status::Ok();
    }
    case PlanStep::Kind::kDrain:
      for (const auto& p : pods) {
        if (p.ordinal >= step.pods) SHOAL_RETURN_IF_ERROR(platform_.DrainPod(p.name));
      }
      step.state = PlanStep::State::kDone;
      return Status::Ok();
    case PlanStep::Kind::kRestart:
      return RunRestart(step, pods);
  }
  return Status::Internal("unknown plan step");
}

Status ControlLoop::RunChange(PlanStep& step, const std::vector<PodInfo>& pods) {
  if (step.target.empty()) {
    std::vector<PartitionId> retirable;
    // One pod's partitions per change (retirement.h); the step repeats until none is left.
    if (step.retire) retirable = OneHoldersRetirement(map_, Retirable(pods));
    std::map<PartitionId, double> rates;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rates = last_rates_;
    }
    auto target = ResolveChange(step, map_, rates, retirable, ReadyPeers(pods));
    if (target.ok()) target = WithReplicas(*target, pods, step.pods);
    if (!target.ok()) return target.status().Annotate("resolving \"" + step.what + "\"");
    if (SamePartitions(*target, map_)) {  // nothing left to do (say, already balanced)
      step.state = PlanStep::State::kDone;
      return Status::Ok();
    }
    // After a refusal by fencing, the next try is at a later epoch than the refused one.
    if (target->epoch() < epoch_floor_) target = target->WithEpoch(epoch_floor_);
    step.target = target->ToJson();
    {
      std::lock_guard<std::mutex> lock(mu_);
      plan_->steps[plan_->next].target = step.target;
    }
    // Persisted before any sidecar sees it: a restart applies this very target.
    SHOAL_RETURN_IF_ERROR(Save());
  }
  auto target = PartitionMap::FromJson(step.target);
  if (!target.ok()) return target.status().Annotate("the saved target of \"" + step.what + "\"");
  if (target->epoch() <= map_.epoch()) {  // applied and saved before a restart
    step.state = PlanStep::State::kDone;
    return Status::Ok();
  }
  ChangeTiming timing;
  // The ends of the seals a quorum held go with the change before any pod is given its map
  // (ChangeExecutor::Apply): its next try, and a failover carried into it, seal a parent's new
  // leader at that end.
  auto keep_ends = [&](const PartitionMap& with_ends) -> Status {
    if (with_ends == *target) return Status::Ok();
    *target = with_ends;
    step.target = target->ToJson();
    {
      std::lock_guard<std::mutex> lock(mu_);
      plan_->steps[plan_->next].target = step.target;
    }
    return Save();
  };
  auto applied = executor_.Apply(map_, *target, &timing, keep_ends);
  const std::string kind = ChangeKind(step);
  if (!applied.ok()) {
    change_probe_.Failed(kind);
    if (IsFencing(applied.status())) {
      return Reconcile(step, applied.status(), pods, target->epoch());
    }
    if (applied.status().code() == Status::Code::kDataLost) {
      // A pod the change needs lost its data. Parts of the change may have taken effect (seals
      // confirmed by successors), so it is not dropped: the pod's partitions are declared lost
      // on top of it, and the change goes on as one at the next epoch.
      NoticePodsWithoutData(pods);
      std::string pod;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [name, ids] : pods_without_data_) {
          if (pod.empty() && !PartitionsMadeBefore(*target, PodName(name), target->epoch()).empty()) {
            pod = name;
          }
        }
      }
      auto composed = pod.empty() ? Result<PartitionMap>(applied.status())
                                  : target->DeclareLost(PodName(pod), /*in_change=*/true);
      // Nothing to declare lost, and the pod leads partitions with copies (active or sealed,
      // which DeclareLost leaves alone): MaybeFailOver gives them to a copy inside the change
      // once a quorum of their copies answers, and the change waits for it. Dropping it would
      // undo the seals a successor may have confirmed already (the sidecars would refuse the
      // re-planned map for ever), and lose what the copies hold.
      if (!composed.ok() && !pod.empty()) {
        const auto& parts = target->partitions();
        if (std::any_of(parts.begin(), parts.end(), [&](const PartitionInfo& p) {
              return p.owner.value() == pod && !p.lost && !p.replicas.empty();
            })) {
          return applied.status();
        }
      }
      // No pod is known to have lost its data, and a pod that leads partitions with copies is
      // not ready (down, hung, cut off from the coordinator but not from its peers): the loss
      // may be its, which a successor's owner passed on ("the leader of parent N of partition M
      // lost its data; it waits for the parent's failover", Topic::SeedSuccessor), after it may
      // have confirmed the seals of its other parents. The change is kept, as for any pod that does
      // not answer: MaybeFailOver counts the pod down and gives what it leads to a copy inside the
      // change, or NoticePodsWithoutData names it once it answers. Dropping the change would wedge
      // the topic as above.
      if (!composed.ok() && pod.empty()) {
        std::set<PodName> ready;
        for (const auto& p : pods) {
          if (p.ready) ready.insert(p.name);
        }
        const auto& parts = target->partitions();
        if (std::any_of(parts.begin(), parts.end(), [&](const PartitionInfo& p) {
              return !p.lost && !p.replicas.empty() && !ready.count(p.owner);
            })) {
          return applied.status();
        }
      }
      if (!composed.ok()) return Reconcile(step, applied.status(), pods, target->epoch());
      Logger("control")->warn(
          "msg=\"declaring a pod's partitions lost on top of the change in progress\" pod={} "
          "epoch={}",
          pod, composed->epoch().value());
      step.target = composed->ToJson();
      step.lost_pod = pod;
      {
        std::lock_guard<std::mutex> lock(mu_);
        plan_->steps[plan_->next].target = step.target;
        plan_->steps[plan_->next].lost_pod = pod;
      }
      SHOAL_RETURN_IF_ERROR(Save());
      return applied.status();  // retried with the composed target
    }
    return applied.status();
  }
  change_probe_.Applied(kind, timing.pause_ms / 1000, timing.total_ms / 1000,
                        applied->epoch().value());
  const PartitionMap before = map_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    map_ = std::move(applied).value();
  }
  if (!step.lost_pod.empty()) RecordLoss(before, step.lost_pod);
  step.target.clear();  // the map now holds it, with the parents' end offsets
  // A retirement step goes on with the next pod's partitions at the next tick; it is done when
  // resolving it changes nothing.
  if (!step.retire) step.state = PlanStep::State::kDone;
  return Status::Ok();
}

Status ControlLoop::InstallOnLaggingPods(const std::vector<PodInfo>& pods) {
  // A pod that restarted from an old disk, or missed an install while it was down, gets the
  // current map again (the change executor gave up on it only after its step timeout).
  std::map<std::string, std::vector<PartitionId>> without_data;
  bool newly_seen = false;
  for (const auto& p : pods) {
    if (!p.ready || !map_.Peer(p.name)) continue;
    auto held = admin_.GetMap(p.address.admin);
    // NotFound: the sidecar holds no map at all.
    if (!held.ok() && held.status().code() != Status::Code::kNotFound) continue;
    const uint64_t held_epoch = held.ok() ? held->epoch().value() : 0;
    std::vector<PartitionId> owned =
        PartitionsMadeBefore(map_, p.name, Epoch(map_.epoch().value() + 1));
    bool seen, volume_known;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (held_epoch > 0) newly_seen |= seen_with_map_.insert(p.name.value()).second;
      seen = seen_with_map_.count(p.name.value()) > 0;
      volume_known = first_volumes_.count(p.name.value()) > 0;
    }
    if (held_epoch > 0 && !volume_known) {
      // The volume it holds a map on: a failover tells a copy's refetching mark after a wipe
      // from a first start's by it (replication::RefetchingCounts).
      FirstVolumes one;
      if (RecordFirstVolume(admin_, p.name, p.address.admin, &one)) {
        std::lock_guard<std::mutex> lock(mu_);
        newly_seen |= first_volumes_.insert(*one.begin()).second;
      }
    }
    if (held_epoch == 0 && !owned.empty() && seen) {
      // This loop saw it hold a map, and it holds none now: its volume was emptied or replaced.
      // (A pod never seen with one, after a bootstrap or a restart of this loop, gets the map
      // as before.)
      bool known;
      {
        std::lock_guard<std::mutex> lock(mu_);
        known = pods_without_data_.count(p.name.value()) > 0;
      }
      if (!known) LogPodWithoutData(p.name, owned, "it holds no map");
      without_data.emplace(p.name.value(), std::move(owned));
      continue;
    }
    if (held_epoch >= map_.epoch().value()) continue;
    Logger("control")->info("msg=\"re-installing the current map\" pod={} held={} current={}",
                            p.name.value(), held_epoch, map_.epoch().value());
    Status installed = executor_.InstallOn(p.name, map_);
    if (installed.code() == Status::Code::kDataLost && held_epoch == 0) {
      // It says so itself: partitions it held once are gone (a volume emptied while this loop
      // did not see the pod, or a state from before pods_seen_with_map).
      LogPodWithoutData(p.name, owned, installed.message());
      without_data.emplace(p.name.value(), std::move(owned));
      continue;
    }
    SHOAL_RETURN_IF_ERROR(installed);
  }
  // A pod noticed before stays noticed while it is not ready or not asked (it cannot have its
  // data back); one no longer in the map or owning nothing is forgotten.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [pod, ids] : pods_without_data_) {
      if (without_data.count(pod) || !map_.Peer(PodName(pod))) continue;
      bool asked = false;
      for (const auto& p : pods) asked |= p.name.value() == pod && p.ready;
      if (!asked) without_data.emplace(pod, ids);
    }
    pods_without_data_ = std::move(without_data);
    size_t partitions = 0;
    for (const auto& [pod, ids] : pods_without_data_) partitions += ids.size();
    probe_->PodsWithoutData(pods_without_data_.size(), partitions);
  }
  if (newly_seen) SHOAL_RETURN_IF_ERROR(Save());
  return Status::Ok();
}

void ControlLoop::LogPodWithoutData(const PodName& pod, const std::vector<PartitionId>& owned,
                                    const std::string& reason) {
  Logger("control")->error(
      "msg=\"a pod came back without its data; not installing the map on it, its partitions "
      "are declared lost next\" pod={} partitions=\"{}\" reason=\"{}\"",
      pod.value(), JoinIds(owned), reason);
}

void ControlLoop::NoticePodsWithoutData(const std::vector<PodInfo>& pods) {
  for (const auto& p : pods) {
    if (!p.ready || !map_.Peer(p.name) || !executor_.HoldsNoMap(p.address)) continue;
    std::vector<PartitionId> owned =
        PartitionsMadeBefore(map_, p.name, Epoch(map_.epoch().value() + 1));
    if (owned.empty()) continue;
    LogPodWithoutData(p.name, owned, "");
    std::lock_guard<std::mutex> lock(mu_);
    pods_without_data_[p.name.value()] = std::move(owned);
  }
}

size_t ControlLoop::Declarable(const std::string& pod, const std::vector<PartitionId>& ids) const {
  size_t n = 0;
  for (PartitionId id : ids) {
    const PartitionInfo* p = map_.Find(id);
    n += (p && p->owner.value() == pod && !p->lost && !(p->active() && !p->replicas.empty()))
             ? 1
             : 0;
  }
  return n;
}

void ControlLoop::PutRecoveryFirst() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!plan_ || pods_without_data_.empty()) return;
  const PlanStep& next = plan_->steps[plan_->next];
  // Only before a change not resolved yet (a resolved one is carried out, or re-resolved after
  // a refusal), and once per pod.
  if (next.kind != PlanStep::Kind::kChange || !next.target.empty() || !next.lost_pod.empty()) {
    return;
  }
  std::string pod;
  for (const auto& [name, ids] : pods_without_data_) {
    if (pod.empty() && Declarable(name, ids) > 0) pod = name;
  }
  if (pod.empty()) return;  // only partitions with copies: MaybeFailOver moves them
  PlanStep s;
  s.kind = PlanStep::Kind::kChange;
  s.what = "declare " + pod + "'s partitions lost";
  s.lost_pod = pod;
  s.pods = next.pods;
  plan_->steps.insert(plan_->steps.begin() + static_cast<long>(plan_->next), std::move(s));
  Logger("control")->warn("msg=\"recovery first\" plan={} pod={}", plan_->id, pod);
}

void ControlLoop::RecoverFences(const std::vector<PodInfo>& pods) {
  // A failover begun by this loop before it restarted: copies fenced for it, whose map it never
  // saved, would refuse their live leader for ever. The fences are read back from the copies
  // (GET /v1/admin/replica, `fenced`), once every ready pod answered, and the failover goes on.
  bool all = true;
  for (const auto& p : pods) {
    if (!p.ready || !map_.Peer(p.name)) continue;
    auto body = admin_.Get(p.address.admin, "/v1/admin/replica", /*admin=*/true);
    if (!body.ok()) {
      all = false;
      continue;
    }
    simdjson::dom::parser parser;
    simdjson::padded_string padded(*body);
    simdjson::dom::element doc;
    simdjson::dom::array followed;
    if (parser.parse(padded).get(doc) || doc["followed"].get(followed)) continue;
    for (auto f : followed) {
      uint64_t id = 0, fenced = 0;
      if (f["id"].get(id) || f["fenced"].get(fenced) || id > kMaxPartitionId) continue;
      const PartitionInfo* info = map_.Find(PartitionId(static_cast<uint32_t>(id)));
      if (!info || !info->active() || info->lost || fenced <= info->LeaderEpoch().value()) continue;
      Epoch& at = fenced_[info->id];
      if (Epoch(fenced) > at) {
        at = Epoch(fenced);
        Logger("control")->warn(
            "msg=\"a copy is fenced for a failover that did not finish; it goes on\" "
            "partition={} pod={} leader_epoch={}",
            id, p.name.value(), fenced);
      }
    }
  }
  fences_recovered_ = all;
}

bool ControlLoop::MaybeFailOver(const std::vector<PodInfo>& pods) {
  if (!fences_recovered_) RecoverFences(pods);
  const auto now = clock_.SteadyNow();
  std::map<std::string, const PodInfo*> by_name;
  for (const auto& p : pods) {
    by_name[p.name.value()] = &p;
    if (!p.ready) continue;
    down_since_.erase(p.name.value());
    last_ready_[p.name.value()] = now;
  }
  failover_due_.reset();
  std::map<std::string, std::vector<PartitionId>> led_by_down;
  std::set<std::string> without_data;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [pod, ids] : pods_without_data_) without_data.insert(pod);
  }
  auto earliest = now;
  for (const auto& info : map_.partitions()) {
    // Active or sealed: a sealed partition's consumers drain it from the copy made its leader.
    if (info.lost || info.replicas.empty()) continue;
    // Copies fenced for a failover that did not finish: the failover goes on, whatever the old
    // leader's readiness now (its followers take nothing more from it).
    if (auto f = fenced_.find(info.id); f != fenced_.end()) {
      if (info.LeaderEpoch() >= f->second) {
        fenced_.erase(f);
      } else {
        led_by_down[info.owner.value()].push_back(info.id);
        continue;
      }
    }
    // A pod that came back without its data leads nothing any more: at once, whatever its
    // readiness (its copies elsewhere hold the partition).
    const bool wiped = without_data.count(info.owner.value()) > 0;
    auto it = by_name.find(info.owner.value());
    if (!wiped && it != by_name.end() && it->second->ready) continue;
    if (wiped) down_since_.emplace(info.owner.value(), now - opts_.failover_after);
    // Down since its last ready answer (a tick's probe learns it only later).
    auto last = last_ready_.find(info.owner.value());
    const auto since =
        down_since_.emplace(info.owner.value(), last != last_ready_.end() ? last->second : now)
            .first->second;
    if (now - since < opts_.failover_after) {
      const auto due = since + opts_.failover_after;
      failover_due_ = failover_due_ ? std::min(*failover_due_, due) : due;
      continue;
    }
    earliest = std::min(earliest, since);
    led_by_down[info.owner.value()].push_back(info.id);
  }
  if (led_by_down.empty()) return false;
  // The epoch of the failover map: never one a change in progress may have sent already, nor
  // below a fence of an earlier attempt.
  Epoch floor = std::max(epoch_floor_, Epoch(map_.epoch().value() + 1));
  PlanStep* in_progress = nullptr;
  std::optional<PartitionMap> change;
  if (plan_ && plan_->next < plan_->steps.size() && !plan_->steps[plan_->next].target.empty()) {
    in_progress = &plan_->steps[plan_->next];
    if (auto t = PartitionMap::FromJson(in_progress->target); t.ok()) {
      floor = std::max(floor, Epoch(t->epoch().value() + 1));
      change = std::move(t).value();
    }
  }
  // With a change in progress whose parents all have a leader that answers or copies, the
  // failover goes into the change's map: parts of the change may have taken effect (a parent
  // sealed for it and confirmed by a successor), which a map without the change would
  // contradict, wedging the topic. The change's successors and parents led by the pods that are
  // down are failed over with it (a parent's new leader is sealed for the change). Otherwise (a
  // parent without copies is led by a pod that is down, so the change cannot go on) the
  // failover goes into the current map and the change resolves its step again on it: a seal it
  // made that no successor confirmed is void under that map, and undone by its install.
  if (change) {
    bool parents_answer = true;
    std::map<std::string, std::vector<PartitionId>> in_change;
    for (const auto& info : change->partitions()) {
      const PartitionInfo* now = map_.Find(info.id);
      // A parent led by a pod that is down is failed over inside the change when it has copies:
      // the copy made its leader is sealed for the change (Topic::Seal).
      if (!info.active() && !info.lost && now && now->active() &&
          led_by_down.count(now->owner.value()) && info.replicas.empty()) {
        parents_answer = false;
      }
      // Active or sealed (the change's parents among them have leaders that answer).
      if (!info.lost && !info.replicas.empty() && led_by_down.count(info.owner.value())) {
        in_change[info.owner.value()].push_back(info.id);
      }
    }
    if (parents_answer) {
      led_by_down = std::move(in_change);
      if (led_by_down.empty()) return false;
    } else {
      change.reset();
    }
  }
  const PartitionMap& base = change ? *change : map_;
  for (const auto& [pod, ids] : led_by_down) {
    for (PartitionId id : ids) {
      if (auto f = fenced_.find(id); f != fenced_.end()) floor = std::max(floor, f->second);
    }
  }
  // Fence the copies, and the old leader when it answers with its data, then choose each
  // partition's leader from a quorum of their answers (control/failover.h).
  std::vector<PartitionId> ids;
  for (const auto& [pod, pids] : led_by_down) ids.insert(ids.end(), pids.begin(), pids.end());
  auto reachable = [&](const PodName& pod) -> const PeerAddress* {
    auto it = by_name.find(pod.value());
    if (it == by_name.end() || !it->second->ready || without_data.count(pod.value())) {
      return nullptr;
    }
    return &it->second->address;
  };
  std::string why;
  std::set<PartitionId> fenced;
  FirstVolumes first_volumes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first_volumes = first_volumes_;
  }
  auto leaders =
      FenceAndChooseLeaders(admin_, base, ids, reachable, floor, first_volumes, &why, &fenced);
  for (PartitionId id : fenced) fenced_[id] = std::max(fenced_[id], floor);
  if (!why.empty()) {
    Logger("control")->warn("msg=\"cannot fail over every partition yet\" reason=\"{}\"", why);
  }
  if (!leaders.ok()) {
    probe_->FailedOver("failed", 0, 0);
    return false;
  }
  auto target = FailOverMap(base, *leaders, floor);
  if (target.ok() && change) target = target->CarryingChange(change->epoch());
  if (!target.ok()) {
    probe_->FailedOver("failed", 0, 0);
    Logger("control")->error("msg=\"failover map refused\" reason=\"{}\"",
                             target.status().message());
    return false;
  }
  std::string moved;
  for (const auto& [id, leader] : *leaders) {
    moved += (moved.empty() ? "" : ",") + std::to_string(id.value()) + "->" + leader.value();
  }
  std::string installed_on;  // the pods that took the map, when it is installed here
  if (change) {
    // The change's target now, saved before anything is sent; the change's next try carries it
    // out (its parents sealed first, then the map installed everywhere).
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_progress->target = target->ToJson();
    }
    (void)Save();
  } else {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (in_progress) in_progress->target.clear();
      map_ = *target;
    }
    (void)Save();  // saved before it is sent: a restarted loop installs this map
    std::string failed;
    const size_t installed =
        InstallFailOverMap(admin_, *target, *leaders, reachable, &failed).size();
    if (!failed.empty()) {
      Logger("control")->warn("msg=\"failover map not installed everywhere; retried later\" "
                              "reason=\"{}\"",
                              failed);
    }
    installed_on = " installed_on=" + std::to_string(installed);
  }
  const double seconds = std::chrono::duration<double>(clock_.SteadyNow() - earliest).count();
  probe_->FailedOver("ok", leaders->size(), seconds);
  {
    FailOverRecord rec;
    rec.at = clock_.SteadyNow();
    for (const auto& [pod, pids] : led_by_down) rec.pods.push_back(pod);
    rec.partitions = leaders->size();
    rec.epoch = target->epoch();
    rec.seconds = seconds;
    std::lock_guard<std::mutex> lock(mu_);
    failovers_.push_back(std::move(rec));
    if (failovers_.size() > kMaxFailOvers) failovers_.erase(failovers_.begin());
  }
  Logger("control")->warn(
      "msg=\"failed over partitions whose leader stopped answering{}\" epoch={} moved=\"{}\"{} "
      "seconds={:.3f}",
      change ? ", inside the change in progress" : "", target->epoch().value(), moved,
      installed_on, seconds);
  for (const auto& [pod, ids] : led_by_down) down_since_.erase(pod);
  for (const auto& [id, leader] : *leaders) fenced_.erase(id);
  return true;
}

bool ControlLoop::PlanRecovery(const std::vector<PodInfo>& pods) {
  std::string pod;
  size_t count = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, ids] : pods_without_data_) {
      const size_t n = Declarable(name, ids);
      if (n > 0) {
        pod = name;
        count = n;
        break;
      }
    }
  }
  if (pod.empty()) return false;
  bool ready = false;
  for (const auto& p : pods) ready |= p.name.value() == pod && p.ready;
  if (!ready) return false;
  // With one copy of each partition their events are gone; waiting brings nothing back and
  // leaves their ranges without a writer. Kafka's unclean leader election makes the same
  // choice explicitly; here there is no other replica to prefer.
  Plan p;
  p.reason = "pod " + pod + " came back without its data: declare its " + std::to_string(count) +
             " partition(s) lost and give their ranges new partitions";
  PlanStep s;
  s.kind = PlanStep::Kind::kChange;
  s.what = "declare " + pod + "'s partitions lost";
  s.lost_pod = pod;
  s.pods = std::max<uint32_t>(platform_.DesiredPods(), 1);
  p.steps.push_back(std::move(s));
  {
    std::lock_guard<std::mutex> lock(mu_);
    p.id = next_plan_id_++;
  }
  Logger("control")->warn("msg=\"planning recovery\" plan={} reason=\"{}\"", p.id, p.reason);
  Adopt(std::move(p));
  return plan_.has_value();
}

void ControlLoop::RecordLoss(const PartitionMap& before, const std::string& pod) {
  DataLoss loss;
  loss.pod = pod;
  std::lock_guard<std::mutex> lock(mu_);
  loss.epoch = map_.epoch();
  for (const auto& p : map_.partitions()) {
    const PartitionInfo* was = before.Find(p.id);
    if (!was) {
      loss.successors.push_back(p.id);
    } else if (p.lost && !was->lost) {
      loss.partitions.push_back(p.id);
      if (auto seen = last_seen_.find(p.id); seen != last_seen_.end()) {
        loss.events += seen->second.first;
        loss.unconsumed += seen->second.second;
      }
    }
  }
  Logger("control")->error(
      "msg=\"partitions declared lost\" pod={} epoch={} partitions=\"{}\" events={} "
      "unconsumed={} successors=\"{}\"",
      pod, loss.epoch.value(), JoinIds(loss.partitions), loss.events, loss.unconsumed,
      JoinIds(loss.successors));
  probe_->PartitionsLost(loss.partitions.size(), loss.events);
  pods_without_data_.erase(pod);
  losses_.push_back(std::move(loss));
  if (losses_.size() > kMaxLosses) losses_.erase(losses_.begin());
}

std::vector<ControlLoop::DataLoss> ControlLoop::losses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return losses_;
}

std::vector<ControlLoop::FailOverRecord> ControlLoop::failovers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failovers_;
}

std::map<std::string, DiskState> ControlLoop::pods_under_disk_pressure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pods_disk_pressure_;
}

std::map<std::string, std::vector<PartitionId>> ControlLoop::pods_without_data() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pods_without_data_;
}

std::vector<PartitionId> ControlLoop::Retirable(const std::vector<PodInfo>& pods) {
  bool any_sealed = false;
  for (const auto& p : map_.partitions()) any_sealed |= !p.active();
  if (!any_sealed) return {};
  // Every pod of the map: the topic's groups are the union of all their registries.
  std::map<std::string, AdminPartitionsReport> reports;
  for (const auto& pod : pods) {
    if (!pod.ready || !map_.Peer(pod.name)) continue;
    auto report = observer_.PartitionsOf(pod);
    if (!report.ok()) return {};  // that pod's groups are unknown: wait for the next check
    reports.emplace(pod.name.value(), std::move(report).value());
  }
  return RetirablePartitions(map_, reports);
}

bool ControlLoop::IsFencing(const Status& st) {
  return st.code() == Status::Code::kConflict || st.code() == Status::Code::kStaleEpoch;
}

// Stop and re-read (invariant 5): a sidecar answered that another map holds the epoch, or that a
// partition is sealed for another change. Some other coordinator acted; this one's record may be
// behind the authority's, or the sidecars may have moved on without it. Nothing is counted as
// done: the record is read again and, failing that, the newest map the sidecars hold is taken
// over; only when neither is newer is the step tried again, at a later epoch than the refused
// one, so it cannot collide with the same change again.
Status ControlLoop::Reconcile(PlanStep& step, const Status& why, const std::vector<PodInfo>& pods,
                              Epoch tried) {
  Logger("control")->warn(
      "msg=\"another coordinator acted; re-reading before planning again\" topic={} "
      "reason=\"{}\"",
      spec_.name, why.message());
  auto text = platform_.LoadState();
  if (text.ok()) {
    std::string mine;
    {
      std::lock_guard<std::mutex> lock(mu_);
      mine = StateJsonLocked();
    }
    if (StateSummary(*text) != StateSummary(mine)) {
      std::lock_guard<std::mutex> lock(mu_);
      plan_.reset();
      ++plan_generation_;
      SHOAL_RETURN_IF_ERROR(LoadState(*text));
      step_started_ = {};
      last_error_ = "took over the control state another coordinator saved: " + why.message();
      return Status::Conflict(last_error_);
    }
  }
  std::optional<PartitionMap> newest;
  for (const auto& p : pods) {
    if (!p.ready) continue;
    auto held = admin_.GetMap(p.address.admin);
    if (!held.ok() || held->epoch() <= map_.epoch()) continue;
    if (!newest || held->epoch() > newest->epoch()) newest = std::move(held).value();
  }
  if (newest) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      map_ = *newest;
      plan_.reset();
      ++plan_generation_;
      step_started_ = {};
      last_error_ = "took over epoch " + std::to_string(newest->epoch().value()) +
                    ", which the sidecars hold: " + why.message();
    }
    SHOAL_RETURN_IF_ERROR(Save());
    return Status::Conflict(last_error_);
  }
  epoch_floor_ = Epoch(std::max(epoch_floor_.value(), tried.value() + 1));
  step.target.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (plan_) plan_->steps[plan_->next].target.clear();
  }
  SHOAL_RETURN_IF_ERROR(Save());
  return why;
}

std::string ControlLoop::StateSummary(std::string_view state) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(state);
  simdjson::dom::element doc;
  if (parser.parse(padded).get(doc)) return "unreadable";
  uint64_t epoch = 0, plan = 0, next = 0;
  if (doc["map"]["epoch"].get(epoch)) epoch = 0;
  if (doc["plan"]["id"].get(plan)) plan = 0;
  if (doc["next_plan_id"].get(next)) next = 0;
  std::string digest;
  simdjson::dom::element map;
  if (!doc["map"].get(map) && !map.is_null()) {
    auto m = PartitionMap::FromJson(simdjson::minify(map));
    if (m.ok()) digest = m->Digest();
  }
  return std::to_string(epoch) + "/" + digest + "/" + std::to_string(plan) + "/" +
         std::to_string(next);
}

// ---------------------------------------------------------------------------------------------
// State

Status ControlLoop::Save() {
  std::string json;
  {
    std::lock_guard<std::mutex> lock(mu_);
    json = StateJsonLocked();
  }
  Status st = platform_.SaveState(json);
  if (st.code() == Status::Code::kConflict) {
    // Another coordinator recorded its state since this one last wrote or read it: that record
    // is the authority now (invariant 5). Take it over rather than overwrite it; whatever this
    // loop was about to do is dropped, and the next tick plans from the record.
    auto text = platform_.LoadState();
    if (text.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      plan_.reset();
      Status loaded = LoadState(*text);
      last_error_ = "took over the control state another coordinator saved: " + st.message();
      Logger("control")->warn("msg=\"{}\" loaded=\"{}\"", last_error_, loaded.ToString());
    }
  }
  return st;
}

std::string ControlLoop::StateJsonLocked() const {
  std::string o = "{\"version\":1,\"topic\":";
  json::AppendString(o, spec_.name);
  o += ",\"map\":";
  o += bootstrapped_ ? map_.ToJson() : "null";
  o += ",\"plan\":";
  o += plan_ ? PlanToJson(*plan_) : "null";
  o += ",\"next_plan_id\":";
  json::AppendUint(o, next_plan_id_);
  o += ",\"losses\":";
  AppendLosses(o, losses_);
  o += ",\"last_decision\":";
  AppendDecision(o, last_decision_);
  o += ",\"schedules\":";
  o += schedules_json_;
  o += ",\"pods_seen_with_map\":[";
  bool first = true;
  for (const auto& pod : seen_with_map_) {
    if (!first) o += ',';
    first = false;
    json::AppendString(o, pod);
  }
  o += "],\"pod_volumes\":{";
  first = true;
  for (const auto& [pod, volume] : first_volumes_) {
    if (!first) o += ',';
    first = false;
    json::AppendString(o, pod);
    o += ':';
    json::AppendUint(o, volume);
  }
  o += "}}";
  return o;
}

Status ControlLoop::LoadState(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element doc;
  if (auto err = parser.parse(padded).get(doc); err) {
    return Status::InvalidArgument(std::string("control state is not JSON: ") +
                                   simdjson::error_message(err));
  }
  uint64_t version = 0;
  std::string_view topic;
  simdjson::dom::element map, plan;
  if (doc["version"].get(version) || doc["topic"].get(topic) || doc["map"].get(map) ||
      doc["plan"].get(plan) || doc["next_plan_id"].get(next_plan_id_)) {
    return Status::InvalidArgument("control state needs version, topic, map, plan, next_plan_id");
  }
  if (version != 1) {
    return Status::InvalidArgument("control state version " + std::to_string(version) +
                                   " is not 1");
  }
  if (topic != spec_.name) {
    return Status::InvalidArgument("the control state is of topic \"" + std::string(topic) +
                                   "\", not \"" + spec_.name + "\"");
  }
  if (!map.is_null()) {
    auto m = PartitionMap::FromJson(simdjson::minify(map));
    if (!m.ok()) return m.status().Annotate("control state map");
    map_ = std::move(m).value();
    bootstrapped_ = true;
  }
  if (!plan.is_null()) {
    auto p = PlanFromJson(simdjson::minify(plan));
    if (!p.ok()) return p.status().Annotate("control state plan");
    plan_ = std::move(p).value();
    if (plan_->done()) plan_.reset();
  }
  // Absent from states written before it was kept: nobody counts as seen.
  seen_with_map_.clear();
  simdjson::dom::array seen;
  if (doc["pods_seen_with_map"].get(seen) == simdjson::SUCCESS) {
    for (auto pod : seen) {
      std::string_view name;
      if (!pod.get(name) && seen_with_map_.size() < kMaxMapPeers) {
        seen_with_map_.insert(std::string(name));
      }
    }
  }
  // Absent from states written before volumes were named: recorded again as pods are seen.
  first_volumes_.clear();
  simdjson::dom::object volumes;
  if (doc["pod_volumes"].get(volumes) == simdjson::SUCCESS) {
    for (auto [pod, volume] : volumes) {
      uint64_t v = 0;
      if (!volume.get(v) && v != 0 && first_volumes_.size() < kMaxMapPeers) {
        first_volumes_.emplace(std::string(pod), v);
      }
    }
  }
  // Absent from states written before losses were kept.
  losses_.clear();
  simdjson::dom::array losses;
  if (doc["losses"].get(losses) == simdjson::SUCCESS) {
    for (auto l : losses) {
      DataLoss loss;
      std::string_view pod;
      uint64_t epoch = 0;
      if (l["pod"].get(pod) || l["epoch"].get(epoch) || l["events"].get(loss.events) ||
          l["unconsumed"].get(loss.unconsumed)) {
        continue;
      }
      loss.pod = std::string(pod);
      loss.epoch = Epoch(epoch);
      loss.partitions = IdsFrom(l["partitions"]);
      loss.successors = IdsFrom(l["successors"]);
      losses_.push_back(std::move(loss));
      if (losses_.size() > kMaxLosses) losses_.erase(losses_.begin());
    }
  }
  simdjson::dom::element last;
  if (doc["last_decision"].get(last) == simdjson::SUCCESS) {
    std::string_view reason;
    int64_t at = 0;
    uint64_t parts = 0, reps = 0;
    simdjson::dom::array kinds;
    if (!last["at_ms"].get(at) && !last["reason"].get(reason) && !last["partitions"].get(parts) &&
        !last["replicas"].get(reps) && !last["kinds"].get(kinds)) {
      last_decision_.at_ms = at;
      last_decision_.reason = std::string(reason);
      last_decision_.partitions = static_cast<uint32_t>(parts);
      last_decision_.replicas = static_cast<uint32_t>(reps);
      for (auto k : kinds) {
        std::string_view s;
        if (k.get(s)) continue;
        // A kind this version does not know (a newer operator's) is left out of the record.
        if (auto kind = ParseDecisionKind(s)) last_decision_.kinds.push_back(*kind);
      }
    }
  }
  return Status::Ok();
}

std::string ControlLoop::StatusJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t sealed = map_.partitions().size() - map_.active_count();
  std::string o = "{\"topic\":";
  json::AppendString(o, spec_.name);
  o += ",\"epoch\":";
  json::AppendUint(o, map_.epoch().value());
  o += ",\"partitions\":{\"active\":";
  json::AppendUint(o, map_.active_count());
  o += ",\"sealed\":";
  json::AppendUint(o, sealed);
  o += "},\"pods\":{\"desired\":";
  json::AppendUint(o, platform_.DesiredPods());
  o += ",\"in_map\":";
  json::AppendUint(o, map_.peers().size());
  o += "},\"plan\":";
  o += plan_ ? PlanToJson(*plan_) : "null";
  o += ",\"last_error\":";
  json::AppendString(o, last_error_);
  o += ",\"pods_under_disk_pressure\":{";
  bool first_disk = true;
  for (const auto& [pod, disk] : pods_disk_pressure_) {
    if (!first_disk) o += ',';
    first_disk = false;
    json::AppendString(o, pod);
    o += ":{\"free_bytes\":";
    json::AppendUint(o, static_cast<uint64_t>(std::max(0.0, disk.free_bytes)));
    o += ",\"reserve_bytes\":";
    json::AppendUint(o, static_cast<uint64_t>(std::max(0.0, disk.reserve_bytes)));
    o += ",\"reserve_in_use\":";
    o += disk.reserve_in_use ? "true" : "false";
    o += '}';
  }
  o += '}';
  o += ",\"pods_without_data\":{";
  bool first_pod = true;
  for (const auto& [pod, ids] : pods_without_data_) {
    if (!first_pod) o += ',';
    first_pod = false;
    json::AppendString(o, pod);
    o += ':';
    AppendIdArray(o, ids);
  }
  o += '}';
  o += ",\"losses\":";
  AppendLosses(o, losses_);
  o += ",\"last_decision\":";
  AppendDecision(o, last_decision_);
  o += ",\"schedules\":";
  o += schedules_json_;
  o += '}';
  return o;
}

bool ControlLoop::plan_in_progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_.has_value();
}

ControlLoop::Observed ControlLoop::last_observed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_;
}

DecisionRecord ControlLoop::last_decision() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_decision_;
}

PartitionMap ControlLoop::map() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_;
}

void ControlLoop::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    const auto t0 = SteadyClock::now();
    Status st = Tick();
    if (!st.ok() && st.code() != Status::Code::kUnavailable) {
      Logger("control")->warn("msg=\"tick\" reason=\"{}\"", st.message());
    }
    // Wait for the rest of the interval, waking early when asked to stop or when a failover
    // comes due.
    const auto wake =
        failover_due_ ? std::clamp(*failover_due_, t0 + std::chrono::milliseconds(50),
                                   t0 + opts_.interval)
                      : t0 + opts_.interval;
    while (!stop.load() && SteadyClock::now() < wake) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace shoal::control
