#include "shoal/control/planner.h"

#include <simdjson.h>

#include <algorithm>
#include <set>

#include "shoal/common/json.h"

namespace shoal::control {

PodName PodFor(const std::string& topic, uint32_t ordinal) {
  return PodName(topic + "-" + std::to_string(ordinal));
}

int64_t OrdinalOf(const std::string& topic, const PodName& pod) {
  const std::string& s = pod.value();
  if (s.size() <= topic.size() + 1 || s.compare(0, topic.size(), topic) != 0 ||
      s[topic.size()] != '-') {
    return -1;
  }
  int64_t v = 0;
  for (size_t i = topic.size() + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || v > (int64_t{1} << 40)) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

std::string_view ToString(PlanStep::Kind k) {
  switch (k) {
    case PlanStep::Kind::kChange:
      return "change";
    case PlanStep::Kind::kSetPods:
      return "set_pods";
    case PlanStep::Kind::kWaitReady:
      return "wait_ready";
    case PlanStep::Kind::kWaitConsumed:
      return "wait_consumed";
    case PlanStep::Kind::kDrain:
      return "drain";
    case PlanStep::Kind::kRestart:
      return "restart";
  }
  return "?";
}

namespace {

PlanStep Step(PlanStep::Kind kind, std::string what, uint32_t pods) {
  PlanStep s;
  s.kind = kind;
  s.what = std::move(what);
  s.pods = pods;
  return s;
}

}  // namespace

Plan MakePlan(const PartitionMap& map, const Decision& d, uint32_t pods) {
  Plan plan;
  plan.reason = d.reason;
  const uint32_t want = std::max<uint32_t>(1, d.replicas ? d.replicas : pods);
  // Scale-up asks for the pods first: they take longest (seconds to minutes), and the split in
  // place goes on meanwhile on the pods that are ready; once the new ones are, partitions move.
  if (want > pods) {
    plan.steps.push_back(Step(PlanStep::Kind::kSetPods,
                              "pods " + std::to_string(pods) + " -> " + std::to_string(want),
                              want));
  }
  if (!d.splits.empty()) {
    PlanStep s = Step(PlanStep::Kind::kChange, "", pods);
    uint32_t pieces = 0;
    for (const auto& sp : d.splits) pieces += static_cast<uint32_t>(sp.cuts.size()) + 1;
    s.what = "split " + std::to_string(d.splits.size()) + " partition(s) into " +
             std::to_string(pieces) + " in place";
    s.splits = d.splits;
    plan.steps.push_back(std::move(s));
  }
  if (!d.merges.empty()) {
    PlanStep s = Step(PlanStep::Kind::kChange, "", pods);
    uint32_t parts = 0;
    for (const auto& m : d.merges) parts += static_cast<uint32_t>(m.run.size());
    s.what = "merge " + std::to_string(parts) + " cold partitions into " +
             std::to_string(d.merges.size());
    s.merges = d.merges;
    plan.steps.push_back(std::move(s));
  }
  if (want > pods) {
    plan.steps.push_back(Step(PlanStep::Kind::kWaitReady,
                              "wait until " + std::to_string(want) + " pods are ready", want));
    PlanStep s =
        Step(PlanStep::Kind::kChange,
             "move partitions to the new pods (balance over " + std::to_string(want) + ")", want);
    s.rebalance = true;
    plan.steps.push_back(std::move(s));
  } else if (want < pods) {
    PlanStep s = Step(
        PlanStep::Kind::kChange,
        "move every partition off pods " + std::to_string(want) + ".." + std::to_string(pods - 1),
        want);
    s.rebalance = true;
    plan.steps.push_back(std::move(s));
    plan.steps.push_back(Step(PlanStep::Kind::kWaitConsumed,
                              "wait until the leaving pods' sealed partitions are consumed", want));
    PlanStep r = Step(PlanStep::Kind::kChange, "retire the leaving pods' partitions", want);
    r.retire = true;
    plan.steps.push_back(std::move(r));
    plan.steps.push_back(
        Step(PlanStep::Kind::kDrain,
             "drain pods " + std::to_string(want) + ".." + std::to_string(pods - 1), want));
    plan.steps.push_back(Step(PlanStep::Kind::kSetPods,
                              "pods " + std::to_string(pods) + " -> " + std::to_string(want),
                              want));
  } else if (!d.merges.empty() || !d.splits.empty()) {
    // Same pods: even the load out after the partitions changed (a no-op when balanced).
    PlanStep s = Step(PlanStep::Kind::kChange, "balance partitions over the pods", pods);
    s.rebalance = true;
    plan.steps.push_back(std::move(s));
  }
  (void)map;
  return plan;
}

Plan MakeRollPlan(const std::vector<uint32_t>& outdated, uint32_t pods) {
  Plan plan;
  if (outdated.empty() || pods == 0) return plan;
  std::string list;
  for (uint32_t o : outdated) list += (list.empty() ? "" : ", ") + std::to_string(o);
  plan.reason = std::to_string(outdated.size()) + " pod(s) run an old template (" + list +
                "): roll them one at a time, each emptied first";
  // One pod cannot be emptied onto the others: a second one (already on the new template) holds
  // the partitions meanwhile, as a Deployment's maxSurge would.
  const bool surge = pods == 1;
  const uint32_t during = surge ? 2 : pods;
  if (surge) {
    plan.steps.push_back(Step(PlanStep::Kind::kSetPods, "pods 1 -> 2 while pod 0 restarts", 2));
    plan.steps.push_back(Step(PlanStep::Kind::kWaitReady, "wait until 2 pods are ready", 2));
  }
  for (uint32_t o : outdated) {
    const std::string pod = "pod " + std::to_string(o);
    PlanStep move = Step(PlanStep::Kind::kChange, "move every partition off " + pod, during);
    move.rebalance = true;
    move.vacate = o;
    plan.steps.push_back(std::move(move));
    PlanStep wait = Step(PlanStep::Kind::kWaitConsumed,
                         "wait until " + pod + "'s sealed partitions are consumed", during);
    wait.vacate = o;
    plan.steps.push_back(std::move(wait));
    PlanStep retire = Step(PlanStep::Kind::kChange, "retire " + pod + "'s partitions", during);
    retire.retire = true;
    plan.steps.push_back(std::move(retire));
    PlanStep restart = Step(PlanStep::Kind::kRestart,
                            "restart " + pod + " on the new template and wait until it is ready",
                            during);
    restart.vacate = o;
    plan.steps.push_back(std::move(restart));
  }
  if (surge) {
    PlanStep s = Step(PlanStep::Kind::kChange, "move every partition off pod 1", 1);
    s.rebalance = true;
    plan.steps.push_back(std::move(s));
    plan.steps.push_back(Step(PlanStep::Kind::kWaitConsumed,
                              "wait until pod 1's sealed partitions are consumed", 1));
    PlanStep r = Step(PlanStep::Kind::kChange, "retire pod 1's partitions", 1);
    r.retire = true;
    plan.steps.push_back(std::move(r));
    plan.steps.push_back(Step(PlanStep::Kind::kDrain, "drain pod 1", 1));
    plan.steps.push_back(Step(PlanStep::Kind::kSetPods, "pods 2 -> 1", 1));
  } else {
    PlanStep s = Step(PlanStep::Kind::kChange, "balance partitions over the pods", pods);
    s.rebalance = true;
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

std::vector<std::pair<PartitionId, PodName>> Rebalance(const PartitionMap& map,
                                                       const std::map<PartitionId, double>& rates,
                                                       uint32_t pods, double slack,
                                                       size_t max_moves,
                                                       std::optional<uint32_t> vacate) {
  std::vector<std::pair<PartitionId, PodName>> moves;
  if (pods == 0) return moves;
  const std::string& topic = map.topic();
  // Weights: the rate, with a floor of 1% of the mean so idle partitions spread by count.
  double total = 0;
  size_t active = 0;
  for (const auto& p : map.partitions()) {
    if (!p.active()) continue;
    ++active;
    if (auto it = rates.find(p.id); it != rates.end()) total += it->second;
  }
  if (active == 0) return moves;
  const double floor = std::max(1e-9, 0.01 * total / static_cast<double>(active)) + 1e-9;
  struct Item {
    double w;
    PartitionId id;
  };
  std::vector<std::vector<Item>> held(pods);
  std::vector<double> load(pods, 0);
  std::vector<Item> homeless;  // on pods that leave, or on names outside the set
  for (const auto& p : map.partitions()) {
    if (!p.active()) continue;
    double w = floor;
    if (auto it = rates.find(p.id); it != rates.end()) w = std::max(floor, it->second);
    const int64_t o = OrdinalOf(topic, p.owner);
    if (o >= 0 && o < pods && (!vacate || o != *vacate)) {
      held[o].push_back({w, p.id});
      load[o] += w;
    } else {
      homeless.push_back({w, p.id});
    }
  }
  // Pods ordered by load: the lightest and the heaviest in O(log pods).
  std::set<std::pair<double, uint32_t>> by_load;
  for (uint32_t i = 0; i < pods; ++i) {
    if (!vacate || i != *vacate) by_load.insert({load[i], i});
  }
  if (by_load.empty()) return moves;  // nowhere to go: the only pod is the one to vacate
  auto shift = [&](uint32_t pod, double delta) {
    by_load.erase({load[pod], pod});
    load[pod] += delta;
    by_load.insert({load[pod], pod});
  };
  // Evacuations first, heaviest first, each to the lightest pod.
  std::sort(homeless.begin(), homeless.end(),
            [](const Item& a, const Item& b) { return a.w > b.w || (a.w == b.w && a.id < b.id); });
  for (const auto& item : homeless) {
    if (max_moves && moves.size() >= max_moves) break;
    const uint32_t to = by_load.begin()->second;
    moves.emplace_back(item.id, PodFor(topic, to));
    shift(to, item.w);
    held[to].push_back(item);
  }
  // Then even out: from the heaviest pod, the partition that best closes the gap to the lightest.
  double sum = 0;
  for (double l : load) sum += l;
  const double mean = sum / static_cast<double>(by_load.size());
  std::set<uint32_t> moved;
  for (size_t guard = 0; guard < 4 * active; ++guard) {
    if (max_moves && moves.size() >= max_moves) break;
    const uint32_t from = by_load.rbegin()->second;
    const uint32_t to = by_load.begin()->second;
    const double gap = load[from] - load[to];
    if (from == to || gap <= slack * mean) break;
    // The best item: its weight closest to gap / 2 without reaching the gap (which would only
    // swap the imbalance), never one moved already.
    auto& items = held[from];
    size_t best = items.size();
    double best_err = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].w >= gap || moved.count(items[i].id.value())) continue;
      const double err = std::abs(items[i].w - gap / 2);
      if (best == items.size() || err < best_err) {
        best = i;
        best_err = err;
      }
    }
    if (best == items.size()) break;
    const Item item = items[best];
    items.erase(items.begin() + static_cast<long>(best));
    shift(from, -item.w);
    shift(to, item.w);
    held[to].push_back(item);
    moved.insert(item.id.value());
    moves.emplace_back(item.id, PodFor(topic, to));
  }
  return moves;
}

Result<PartitionMap> ResolveChange(const PlanStep& step, const PartitionMap& current,
                                   const std::map<PartitionId, double>& rates,
                                   const std::vector<PartitionId>& retirable,
                                   const std::map<std::string, PeerAddress>& peers) {
  PartitionMap base = current;
  for (const auto& [pod, addr] : peers) {
    const PeerAddress* held = base.Peer(PodName(pod));
    if (!held || !(*held == addr)) base = base.WithPeer(PodName(pod), addr);
  }
  if (!step.lost_pod.empty()) return base.DeclareLost(PodName(step.lost_pod));
  MapChange change(base);
  for (const auto& s : step.splits) {
    // A split decided on an older map whose partition is gone (changed meanwhile) is dropped.
    const PartitionInfo* p = base.Find(s.partition);
    if (!p || !p->active()) continue;
    SHOAL_RETURN_IF_ERROR(change.Split(s.partition, s.cuts));
  }
  for (const auto& m : step.merges) {
    bool ok = true;
    for (PartitionId id : m.run) {
      const PartitionInfo* p = base.Find(id);
      ok &= p && p->active();
    }
    if (!ok) continue;
    SHOAL_RETURN_IF_ERROR(change.MergeRun(m.run));
  }
  if (step.rebalance) {
    for (const auto& [id, to] : Rebalance(base, rates, step.pods, 0.25, 0, step.vacate)) {
      SHOAL_RETURN_IF_ERROR(change.Move(id, to));
    }
  }
  if (step.retire) {
    for (PartitionId id : retirable) {
      const PartitionInfo* p = base.Find(id);
      if (p && !p->active()) SHOAL_RETURN_IF_ERROR(change.Retire(id));
    }
  }
  auto next = change.Build();
  if (!next.ok()) return next.status();
  PartitionMap out = std::move(next).value();
  if (step.retire) {
    // Pods at or above step.pods leave: once they own nothing, drop their addresses.
    std::set<std::string> owners;
    for (const auto& p : out.partitions()) owners.insert(p.owner.value());
    for (const auto& [pod, addr] : base.peers()) {
      const int64_t o = OrdinalOf(base.topic(), PodName(pod));
      if (o >= step.pods && !owners.count(pod)) out = out.WithoutPeer(PodName(pod));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON

void AppendIdArray(std::string& out, const std::vector<PartitionId>& ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    json::AppendUint(out, ids[i].value());
  }
  out += ']';
}

std::string PlanToJson(const Plan& plan) {
  std::string out = "{\"id\":";
  json::AppendUint(out, plan.id);
  out += ",\"reason\":";
  json::AppendString(out, plan.reason);
  out += ",\"next\":";
  json::AppendUint(out, plan.next);
  out += ",\"steps\":[";
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (i) out += ',';
    out += "{\"kind\":";
    json::AppendString(out, ToString(s.kind));
    out += ",\"what\":";
    json::AppendString(out, s.what);
    out += ",\"pods\":";
    json::AppendUint(out, s.pods);
    out += ",\"state\":";
    json::AppendString(out, s.state == PlanStep::State::kDone ? "done" : "pending");
    out += ",\"attempts\":";
    json::AppendUint(out, static_cast<uint64_t>(s.attempts));
    out += ",\"last_error\":";
    json::AppendString(out, s.last_error);
    out += ",\"rebalance\":";
    out += s.rebalance ? "true" : "false";
    out += ",\"retire\":";
    out += s.retire ? "true" : "false";
    if (s.vacate) {
      out += ",\"vacate\":";
      json::AppendUint(out, *s.vacate);
    }
    if (!s.lost_pod.empty()) {
      out += ",\"lost_pod\":";
      json::AppendString(out, s.lost_pod);
    }
    out += ",\"splits\":[";
    for (size_t j = 0; j < s.splits.size(); ++j) {
      if (j) out += ',';
      out += "{\"partition\":";
      json::AppendUint(out, s.splits[j].partition.value());
      out += ",\"rate\":";
      json::AppendDouble(out, s.splits[j].rate);
      out += ",\"cuts\":[";
      for (size_t k = 0; k < s.splits[j].cuts.size(); ++k) {
        if (k) out += ',';
        json::AppendUint(out, s.splits[j].cuts[k]);
      }
      out += "]}";
    }
    out += "],\"merges\":[";
    for (size_t j = 0; j < s.merges.size(); ++j) {
      if (j) out += ',';
      out += "{\"run\":";
      AppendIdArray(out, s.merges[j].run);
      out += ",\"peak_rate\":";
      json::AppendDouble(out, s.merges[j].peak_rate);
      out += '}';
    }
    out += "],\"target\":";
    out += s.target.empty() ? "null" : s.target;
    out += '}';
  }
  out += "]}";
  return out;
}

namespace {

Result<PlanStep::Kind> KindFrom(std::string_view k) {
  for (auto kind : {PlanStep::Kind::kChange, PlanStep::Kind::kSetPods, PlanStep::Kind::kWaitReady,
                    PlanStep::Kind::kWaitConsumed, PlanStep::Kind::kDrain,
                    PlanStep::Kind::kRestart}) {
    if (ToString(kind) == k) return kind;
  }
  return Status::InvalidArgument("unknown plan step kind \"" + std::string(k) + "\"");
}

}  // namespace

Result<Plan> PlanFromJson(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element doc;
  if (auto err = parser.parse(padded).get(doc); err) {
    return Status::InvalidArgument(std::string("plan is not JSON: ") +
                                   simdjson::error_message(err));
  }
  Plan plan;
  std::string_view reason;
  uint64_t next = 0;
  simdjson::dom::array steps;
  if (doc["id"].get(plan.id) || doc["reason"].get(reason) || doc["next"].get(next) ||
      doc["steps"].get(steps)) {
    return Status::InvalidArgument("plan needs id, reason, next and steps");
  }
  plan.reason = std::string(reason);
  plan.next = next;
  for (auto el : steps) {
    PlanStep s;
    std::string_view kind, what, state, error;
    uint64_t pods = 0, attempts = 0;
    bool rebalance = false, retire = false;
    simdjson::dom::array splits, merges;
    simdjson::dom::element target;
    if (el["kind"].get(kind) || el["what"].get(what) || el["pods"].get(pods) ||
        el["state"].get(state) || el["attempts"].get(attempts) || el["last_error"].get(error) ||
        el["rebalance"].get(rebalance) || el["retire"].get(retire) || el["splits"].get(splits) ||
        el["merges"].get(merges) || el["target"].get(target)) {
      return Status::InvalidArgument(
          "plan step needs kind, what, pods, state, attempts, "
          "last_error, rebalance, retire, splits, merges, target");
    }
    auto k = KindFrom(kind);
    if (!k.ok()) return k.status();
    if (pods > UINT32_MAX) return Status::InvalidArgument("plan step pods out of range");
    if (state != "done" && state != "pending") {
      return Status::InvalidArgument("plan step state must be done or pending, not \"" +
                                     std::string(state) + "\"");
    }
    s.kind = *k;
    s.what = std::string(what);
    s.pods = static_cast<uint32_t>(pods);
    s.state = state == "done" ? PlanStep::State::kDone : PlanStep::State::kPending;
    s.attempts = static_cast<int>(attempts);
    s.last_error = std::string(error);
    s.rebalance = rebalance;
    s.retire = retire;
    // Optional: plans saved before rolls existed have none.
    uint64_t vacate = 0;
    if (auto err = el["vacate"].get(vacate); err == simdjson::SUCCESS) {
      if (vacate > UINT32_MAX) return Status::InvalidArgument("plan step vacate out of range");
      s.vacate = static_cast<uint32_t>(vacate);
    } else if (err != simdjson::NO_SUCH_FIELD) {
      return Status::InvalidArgument("plan step vacate must be a pod ordinal");
    }
    std::string_view lost_pod;  // optional, as vacate
    if (auto err = el["lost_pod"].get(lost_pod); err == simdjson::SUCCESS) {
      s.lost_pod = std::string(lost_pod);
    } else if (err != simdjson::NO_SUCH_FIELD) {
      return Status::InvalidArgument("plan step lost_pod must be a pod name");
    }
    if (s.kind == PlanStep::Kind::kRestart && !s.vacate) {
      return Status::InvalidArgument("a restart step needs vacate (the pod to restart)");
    }
    for (auto sp : splits) {
      SplitDecision d;
      uint64_t id = 0;
      simdjson::dom::array cuts;
      if (sp["partition"].get(id) || sp["rate"].get(d.rate) || sp["cuts"].get(cuts)) {
        return Status::InvalidArgument("split needs partition, rate and cuts");
      }
      if (id > UINT32_MAX) return Status::InvalidArgument("split partition id out of range");
      d.partition = PartitionId(static_cast<uint32_t>(id));
      for (auto c : cuts) {
        uint64_t v = 0;
        if (c.get(v)) return Status::InvalidArgument("bad split point");
        d.cuts.push_back(v);
      }
      s.splits.push_back(std::move(d));
    }
    for (auto m : merges) {
      MergeDecision d;
      simdjson::dom::array run;
      if (m["run"].get(run) || m["peak_rate"].get(d.peak_rate)) {
        return Status::InvalidArgument("merge needs run and peak_rate");
      }
      for (auto r : run) {
        uint64_t v = 0;
        if (r.get(v) || v > UINT32_MAX) return Status::InvalidArgument("bad merge partition");
        d.run.push_back(PartitionId(static_cast<uint32_t>(v)));
      }
      s.merges.push_back(std::move(d));
    }
    if (!target.is_null()) s.target = simdjson::minify(target);
    plan.steps.push_back(std::move(s));
  }
  if (plan.next > plan.steps.size()) return Status::InvalidArgument("plan's next is past its end");
  return plan;
}

}  // namespace shoal::control
