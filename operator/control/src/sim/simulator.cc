#include "shoal/control/simulator.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include "shoal/common/hash.h"
#include "shoal/common/json.h"
#include "shoal/common/load_profile.h"
#include "shoal/common/partition_map.h"
#include "shoal/control/planner.h"
#include "shoal/control/policy.h"

namespace shoal::control {

double Trace::RateAt(double t) const {
  if (!profile.empty()) {
    return t < profile_duration_s ? profile_rate * LoadProfileFactor(profile, t, profile_duration_s)
                                  : 0;
  }
  if (rate.empty()) return 0;
  if (repeat_s > 0) t = std::fmod(t, repeat_s);
  if (t <= rate.front().first) return rate.front().second;
  for (size_t i = 1; i < rate.size(); ++i) {
    if (t <= rate[i].first) {
      const auto [t0, r0] = rate[i - 1];
      const auto [t1, r1] = rate[i];
      return t1 > t0 ? r0 + (r1 - r0) * (t - t0) / (t1 - t0) : r1;
    }
  }
  return rate.back().second;
}

namespace {

template <typename T>
Status Get(const YAML::Node& n, const std::string& path, const char* key, T* out) {
  if (!n[key]) return Status::Ok();
  try {
    *out = n[key].as<T>();
  } catch (const YAML::Exception&) {
    return Status::InvalidArgument(path + key + ": expected a " +
                                   (std::is_arithmetic_v<T> ? "number" : "string"));
  }
  return Status::Ok();
}

Status Known(const YAML::Node& n, const std::string& path, std::vector<std::string> keys) {
  if (!n.IsMap()) return Status::InvalidArgument(path + ": expected a mapping");
  for (const auto& kv : n) {
    const auto k = kv.first.as<std::string>();
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      std::string list;
      for (const auto& x : keys) list += (list.empty() ? "" : ", ") + x;
      return Status::InvalidArgument(path + k + ": unknown field (known: " + list + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateConsumer(const Trace::Consumer& c) {
  if (!(c.events_per_second > 0)) {
    return Status::InvalidArgument("consumer.events_per_second_per_pod: must be > 0");
  }
  if (!(c.service_us >= 0)) return Status::InvalidArgument("consumer.service_us: must be >= 0");
  if (c.concurrency < 1) return Status::InvalidArgument("consumer.concurrency: must be >= 1");
  if (!(c.cpu_us >= 0)) return Status::InvalidArgument("consumer.cpu_us: must be >= 0");
  if (c.batch_max > 100000) {
    return Status::InvalidArgument("consumer.batch_max: must be at most 100000");
  }
  if (!(c.round_trip_ms >= 0) || c.round_trip_ms > 60000) {
    return Status::InvalidArgument("consumer.round_trip_ms: must be in [0, 60000]");
  }
  if (c.batch_max > 0 && !(c.service_us > 0) && !(c.round_trip_ms > 0)) {
    return Status::InvalidArgument(
        "consumer.batch_max: a consumer loop needs service_us or round_trip_ms");
  }
  if (!(c.cpu_request_cores > 0)) {
    return Status::InvalidArgument("consumer.cpu_request_cores: must be > 0");
  }
  return Status::Ok();
}

Result<Trace> ParseTrace(std::string_view text) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("trace is not YAML: ") + e.what());
  }
  Trace t;
  SHOAL_RETURN_IF_ERROR(
      Known(doc, "",
            {"name", "duration_s", "step_s", "topic", "rate", "repeat_s", "noise", "seed",
             "hot_keys", "missing", "consumer", "pods", "initial_partitions", "initial_pods",
             "start_time", "profile", "parents"}));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "name", &t.name));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "duration_s", &t.duration_s));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "step_s", &t.step_s));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "topic", &t.topic_file));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "repeat_s", &t.repeat_s));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "noise", &t.noise));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "seed", &t.seed));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "initial_partitions", &t.initial_partitions));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "initial_pods", &t.initial_pods));
  SHOAL_RETURN_IF_ERROR(Get(doc, "", "start_time", &t.start_time));
  if (auto w = ParseWallTime(t.start_time); !w.ok()) {
    return Status::InvalidArgument("start_time: " + w.status().message());
  }
  if (auto p = doc["profile"]) {
    SHOAL_RETURN_IF_ERROR(Known(p, "profile.", {"name", "rate", "duration_s"}));
    SHOAL_RETURN_IF_ERROR(Get(p, "profile.", "name", &t.profile));
    SHOAL_RETURN_IF_ERROR(Get(p, "profile.", "rate", &t.profile_rate));
    SHOAL_RETURN_IF_ERROR(Get(p, "profile.", "duration_s", &t.profile_duration_s));
    const std::vector<std::string> names = {"steady", "surge", "ramp", "sawtooth"};
    if (std::find(names.begin(), names.end(), t.profile) == names.end()) {
      return Status::InvalidArgument("profile.name: \"" + t.profile +
                                     "\" is not a load profile (steady, surge, ramp, sawtooth)");
    }
    if (!(t.profile_rate > 0)) return Status::InvalidArgument("profile.rate: must be > 0");
    if (!(t.profile_duration_s > 0)) {
      return Status::InvalidArgument("profile.duration_s: must be > 0");
    }
    if (doc["rate"]) return Status::InvalidArgument("rate: give either rate or profile, not both");
  } else if (!doc["rate"] || !doc["rate"].IsSequence() || doc["rate"].size() == 0) {
    return Status::InvalidArgument(
        "rate: required (a list of [t_s, events_per_s] points) unless a profile is given");
  }
  if (doc["parents"]) {
    std::string how;
    SHOAL_RETURN_IF_ERROR(Get(doc, "", "parents", &how));
    if (how != "divided" && how != "whole") {
      return Status::InvalidArgument("parents: \"" + how + "\" must be divided or whole");
    }
    t.parents_whole = how == "whole";
  }
  double prev = -1;
  for (size_t i = 0; doc["rate"] && i < doc["rate"].size(); ++i) {
    const auto p = doc["rate"][i];
    const std::string path = "rate[" + std::to_string(i) + "]";
    if (!p.IsSequence() || p.size() != 2) {
      return Status::InvalidArgument(path + ": expected [t_s, events_per_s]");
    }
    double at, r;
    try {
      at = p[0].as<double>();
      r = p[1].as<double>();
    } catch (const YAML::Exception&) {
      return Status::InvalidArgument(path + ": expected two numbers");
    }
    if (at < prev) return Status::InvalidArgument(path + ": times must not decrease");
    if (r < 0 || !std::isfinite(r)) return Status::InvalidArgument(path + ": rate must be >= 0");
    prev = at;
    t.rate.emplace_back(at, r);
  }
  if (auto hk = doc["hot_keys"]) {
    for (size_t i = 0; i < hk.size(); ++i) {
      const std::string path = "hot_keys[" + std::to_string(i) + "].";
      SHOAL_RETURN_IF_ERROR(Known(hk[i], path, {"key", "share", "from_s", "until_s"}));
      Trace::HotKey k;
      SHOAL_RETURN_IF_ERROR(Get(hk[i], path, "key", &k.key));
      SHOAL_RETURN_IF_ERROR(Get(hk[i], path, "share", &k.share));
      SHOAL_RETURN_IF_ERROR(Get(hk[i], path, "from_s", &k.from_s));
      SHOAL_RETURN_IF_ERROR(Get(hk[i], path, "until_s", &k.until_s));
      if (k.key.empty()) return Status::InvalidArgument(path + "key: required");
      if (!(k.share > 0 && k.share <= 1)) {
        return Status::InvalidArgument(path + "share: must be in (0, 1]");
      }
      t.hot_keys.push_back(k);
    }
  }
  if (auto gaps = doc["missing"]) {
    for (size_t i = 0; i < gaps.size(); ++i) {
      const std::string path = "missing[" + std::to_string(i) + "].";
      SHOAL_RETURN_IF_ERROR(Known(gaps[i], path, {"from_s", "until_s", "pods"}));
      Trace::Gap g;
      SHOAL_RETURN_IF_ERROR(Get(gaps[i], path, "from_s", &g.from_s));
      SHOAL_RETURN_IF_ERROR(Get(gaps[i], path, "until_s", &g.until_s));
      try {
        if (gaps[i]["pods"]) g.pods = gaps[i]["pods"].as<std::vector<uint32_t>>();
      } catch (const YAML::Exception&) {
        return Status::InvalidArgument(path + "pods: expected a list of pod ordinals");
      }
      t.missing.push_back(g);
    }
  }
  if (auto c = doc["consumer"]) {
    SHOAL_RETURN_IF_ERROR(Known(
        c, "consumer.",
        {"events_per_second_per_pod", "service_us", "concurrency", "cpu_us", "cpu_request_cores",
         "batch_max", "round_trip_ms"}));
    SHOAL_RETURN_IF_ERROR(
        Get(c, "consumer.", "events_per_second_per_pod", &t.consumer.events_per_second));
    SHOAL_RETURN_IF_ERROR(Get(c, "consumer.", "service_us", &t.consumer.service_us));
    SHOAL_RETURN_IF_ERROR(Get(c, "consumer.", "concurrency", &t.consumer.concurrency));
    SHOAL_RETURN_IF_ERROR(Get(c, "consumer.", "cpu_us", &t.consumer.cpu_us));
    SHOAL_RETURN_IF_ERROR(Get(c, "consumer.", "cpu_request_cores", &t.consumer.cpu_request_cores));
    SHOAL_RETURN_IF_ERROR(Get(c, "consumer.", "batch_max", &t.consumer.batch_max));
    SHOAL_RETURN_IF_ERROR(Get(c, "consumer.", "round_trip_ms", &t.consumer.round_trip_ms));
  }
  SHOAL_RETURN_IF_ERROR(ValidateConsumer(t.consumer));
  if (auto p = doc["pods"]) {
    SHOAL_RETURN_IF_ERROR(Known(p, "pods.", {"start_s"}));
    SHOAL_RETURN_IF_ERROR(Get(p, "pods.", "start_s", &t.pod_start_s));
  }
  if (!(t.duration_s > 0)) return Status::InvalidArgument("duration_s: must be > 0");
  if (!(t.step_s > 0)) return Status::InvalidArgument("step_s: must be > 0");
  if (t.noise < 0 || t.noise >= 1) return Status::InvalidArgument("noise: must be in [0, 1)");
  return t;
}

namespace {

using Steady = std::chrono::steady_clock;

double MsSince(Steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
}

// The events of a batch of `n` in the busiest of `lanes` lanes, keys spread at random: about
// n/lanes plus the spread of the largest of them (the expected maximum of balls in bins).
double BusiestLane(double n, uint32_t lanes) {
  if (lanes <= 1 || n <= 1) return n;
  const double mean = n / lanes;
  return std::min(n, std::max(std::ceil(mean), mean + std::sqrt(2 * mean * std::log(lanes))));
}

// One pod's consumer loop over `dt` seconds (Trace::Consumer): `waiting` events to read at the
// start, `arriving` more per second through it. Returns what it took and how long it was busy.
struct LoopStep {
  double took = 0;
  double busy_s = 0;
};
LoopStep ConsumerLoop(const Trace::Consumer& c, double waiting, double arriving, double dt) {
  LoopStep out;
  const double rtt = c.round_trip_ms / 1e3;
  double t = 0, avail = waiting;
  while (t < dt) {
    if (avail < 1) {
      // Parked until the next event arrives.
      if (!(arriving > 0)) break;
      const double wait = (1 - avail) / arriving;
      if (t + wait >= dt) break;
      t += wait;
      avail = 1;
    }
    const double n = std::min<double>(c.batch_max, std::floor(avail));
    const double busy = rtt + c.service_us / 1e6 * BusiestLane(n, c.concurrency);
    const double batch = rtt + busy;  // its fetch, then its work and its commit
    // A batch that runs past the step counts the part of it inside.
    const double inside = std::min(batch, dt - t) / batch;
    out.took += n * inside;
    out.busy_s += busy * inside;
    avail += arriving * batch * inside - n * inside;
    t += batch * inside;
  }
  return out;
}

class World {
 public:
  World(const TopicSpec& spec, const Trace& trace) : spec_(spec), trace_(trace), rng_(trace.seed) {
    for (const auto& k : trace.hot_keys) hot_.push_back({KeyHash(k.key), k});
  }

  // The consumer group the simulated consumers belong to.
  static constexpr const char* kGroup = "sim";

  // Arrivals of one step into every active partition, then what each ready pod's consumers
  // take; returns the observation.
  Observation Step(const PartitionMap& map, double t, SteadyTime at, uint32_t ready_pods) {
    Observation o;
    o.at = at;
    o.epoch = map.epoch();
    const double rate = trace_.RateAt(t);
    double hot_share = 0;
    for (const auto& [h, k] : hot_) {
      if (t >= k.from_s && t < k.until_s) hot_share += k.share;
    }
    hot_share = std::min(hot_share, 1.0);
    const double dt = trace_.step_s;
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<uint32_t> gap_pods;
    for (const auto& g : trace_.missing) {
      if (t >= g.from_s && t < g.until_s)
        gap_pods.insert(gap_pods.end(), g.pods.begin(), g.pods.end());
    }
    auto in_gap = [&](int64_t ordinal) {
      return ordinal >= 0 && std::find(gap_pods.begin(), gap_pods.end(), ordinal) != gap_pods.end();
    };
    // Per pod: the partitions it holds (active, and sealed ones it still serves), to consume.
    std::map<std::string, std::vector<PartitionId>> held;
    for (const auto& p : map.partitions()) {
      if (!p.active()) continue;
      const double width = static_cast<double>(p.range.Width()) / static_cast<double>(kHashSpace);
      PartitionLoad load;
      load.id = p.id;
      for (const auto& parent : p.parents) load.parents.push_back(parent);
      double spread = rate * (1 - hot_share) * width;
      double top = 0;
      uint32_t top_hash = 0;
      for (size_t b = 0; b < kLoadBuckets; ++b) load.buckets[b] = spread / kLoadBuckets;
      double total = spread;
      for (const auto& [h, k] : hot_) {
        if (!(t >= k.from_s && t < k.until_s) || !p.range.Contains(h)) continue;
        const double r = rate * k.share;
        total += r;
        load.buckets[(h - p.range.lo) * kLoadBuckets / p.range.Width()] += r;
        if (r > top) {
          top = r;
          top_hash = h;
        }
      }
      const double noisy = total * (1 + trace_.noise * u(rng_));
      lag_[p.id] += total * dt;
      arrived_[p.id] = total * dt;
      load.rate = noisy;
      if (total > 0) {
        for (double& b : load.buckets) b /= total;
        load.top_hash = top_hash;
        load.top_share = top / total;
      }
      if (in_gap(OrdinalOf(map.topic(), p.owner))) {
        if (o.missing.size() < 5) {
          o.missing.push_back(p.owner.value() + ": /metrics: connection refused (simulated)");
        }
      } else {
        o.partitions[p.id] = load;
      }
      held[p.owner.value()].push_back(p.id);
    }
    for (const auto& [id, s] : sealed_) held[s.owner.value()].push_back(id);
    // Consumption: each ready pod's consumers take up to their capacity from the backlog they
    // can read (parents first), in proportion to it.
    const double cap = trace_.consumer.Capacity() * dt;
    const bool loop = trace_.consumer.batch_max > 0;
    for (auto& [pod, ids] : held) {
      const int64_t ordinal = OrdinalOf(map.topic(), PodName(pod));
      const bool ready = ordinal >= 0 && ordinal < ready_pods;
      double readable = 0, backlog = 0, arrived = 0;
      for (PartitionId id : ids) {
        backlog += lag_[id];
        if (!Waits(id)) {
          readable += lag_[id];
          if (auto a = arrived_.find(id); a != arrived_.end()) arrived += a->second;
        }
      }
      arrived = std::min(arrived, readable);
      LoopStep step;
      if (loop && ready) step = ConsumerLoop(trace_.consumer, readable - arrived, arrived / dt, dt);
      const double take = !ready ? 0 : loop ? std::min(step.took, readable) : std::min(cap, readable);
      for (PartitionId id : ids) {
        if (readable > 0 && !Waits(id)) lag_[id] -= take * lag_[id] / readable;
      }
      if (!ready || in_gap(ordinal)) continue;
      const double consumer_rate = take / dt;
      o.cpu_utilization[pod] =
          trace_.consumer.cpu_us > 0
              ? consumer_rate * trace_.consumer.cpu_us / 1e6 / trace_.consumer.cpu_request_cores
          : cap > 0 ? take / cap
                    : 0;
      // The sidecar's delivered and busy counters and the group's lag on what the pod serves:
      // busy for the share of their capacity they took.
      ConsumerLoad& c = o.consumers[pod][kGroup];
      c.delivered_rate = consumer_rate;
      c.backlog = static_cast<uint64_t>(std::max(0.0, backlog - take));
      c.busy = loop ? step.busy_s / dt : cap > 0 ? take / cap : 0;
      c.interval_s = dt;
    }
    RetireDrained();
    for (const auto& p : map.partitions()) {
      if (auto it = o.partitions.find(p.id); it != o.partitions.end()) {
        it->second.lag = static_cast<uint64_t>(std::max(0.0, lag_[p.id]));
      }
    }
    // Sealed partitions still read hold their lag, as their owners report it.
    for (const auto& [id, s] : sealed_) {
      if (in_gap(OrdinalOf(map.topic(), s.owner))) continue;
      PartitionLoad load;
      load.id = id;
      load.active = false;
      load.lag = static_cast<uint64_t>(std::max(0.0, lag_[id]));
      o.partitions[id] = load;
    }
    return o;
  }

  // A change replaced partitions: by default their backlog goes to their successors by range
  // (each successor's pod reads its range of the parent); with parents whole it stays with the
  // sealed partition on the pod that held it, and its successors wait for it.
  void Changed(const PartitionMap& before, const PartitionMap& after) {
    std::map<PartitionId, std::vector<const PartitionInfo*>> successors;
    for (const auto& s : after.partitions()) {
      if (!s.active()) continue;
      for (PartitionId parent : s.parents) successors[parent].push_back(&s);
    }
    for (const auto& p : before.partitions()) {
      if (!p.active()) continue;
      auto it = successors.find(p.id);
      if (it == successors.end()) continue;
      if (trace_.parents_whole) {
        sealed_[p.id] = {p.owner, parents_[p.id]};
        parents_.erase(p.id);
        continue;
      }
      const double backlog = lag_[p.id];
      lag_.erase(p.id);
      for (const PartitionInfo* s : it->second) {
        const uint64_t lo = std::max(s->range.lo, p.range.lo);
        const uint64_t hi = std::min(s->range.hi, p.range.hi);
        if (hi > lo) {
          lag_[s->id] +=
              backlog * static_cast<double>(hi - lo) / static_cast<double>(p.range.Width());
        }
      }
    }
    if (!trace_.parents_whole) return;
    for (const auto& s : after.partitions()) {
      if (s.active() && !s.parents.empty() && !parents_.count(s.id)) parents_[s.id] = s.parents;
    }
    RetireDrained();
  }

  // Whether a sealed partition that pods >= `from` hold is still being read.
  bool SealedOn(const std::string& topic, uint32_t from) const {
    for (const auto& [id, s] : sealed_) {
      if (OrdinalOf(topic, s.owner) >= static_cast<int64_t>(from)) return true;
    }
    return false;
  }

  double TotalLag() const {
    double s = 0;
    for (const auto& [id, l] : lag_) s += l;
    return s;
  }

 private:
  struct Sealed {
    PodName owner;
    std::vector<PartitionId> parents;
  };

  // Parents first (with parents whole): a partition is read only once none of its parents is
  // still held sealed with events unread. (Sealed partitions leave once drained and no longer
  // waiting, so their own parents are gone before them: the direct parents tell.)
  bool Waits(PartitionId id) const {
    const std::vector<PartitionId>* parents = nullptr;
    if (auto s = sealed_.find(id); s != sealed_.end()) {
      parents = &s->second.parents;
    } else if (auto a = parents_.find(id); a != parents_.end()) {
      parents = &a->second;
    }
    if (parents == nullptr) return false;
    return std::any_of(parents->begin(), parents->end(),
                       [&](PartitionId p) { return sealed_.count(p) > 0; });
  }

  // Sealed partitions read to the end (and no longer waiting: an empty parent's own parents
  // still come first) are retired, which may free their successors.
  void RetireDrained() {
    for (bool again = true; again;) {
      again = false;
      for (auto it = sealed_.begin(); it != sealed_.end();) {
        if (lag_[it->first] <= kDrained && !Waits(it->first)) {
          lag_.erase(it->first);
          it = sealed_.erase(it);
          again = true;
        } else {
          ++it;
        }
      }
    }
  }

  // Below this many events a backlog is read (consumption is continuous here).
  static constexpr double kDrained = 1e-6;

  const TopicSpec& spec_;
  const Trace& trace_;
  std::mt19937_64 rng_;
  std::vector<std::pair<uint32_t, Trace::HotKey>> hot_;
  std::map<PartitionId, double> lag_;
  std::map<PartitionId, double> arrived_;  // what the last step added to each partition
  // With parents whole: sealed partitions not yet read to the end, and the parents of active
  // partitions (the map forgets them once it drops the sealed ones).
  std::map<PartitionId, Sealed> sealed_;
  std::map<PartitionId, std::vector<PartitionId>> parents_;
};

// Drops sealed partitions from the map: the world keeps what is left to read of them.
PartitionMap WithoutSealed(const PartitionMap& m) {
  MapChange c(m);
  for (const auto& p : m.partitions()) {
    if (!p.active()) (void)c.Retire(p.id);
  }
  if (c.empty()) return m;
  auto next = c.Build();
  return next.ok() ? next->WithEpoch(m.epoch()) : m;
}

}  // namespace

Result<SimResult> Simulate(const TopicSpec& spec, const Trace& trace) {
  SimResult out;
  const uint32_t initial_parts =
      trace.initial_partitions ? trace.initial_partitions : spec.partitions.initial;
  uint32_t pods = trace.initial_pods ? trace.initial_pods : spec.replicas.min;
  auto initial = PartitionMap::Initial(spec.name, initial_parts, PodFor(spec.name, 0));
  if (!initial.ok()) return initial.status();
  PartitionMap map = *initial;
  {
    // Spread the initial partitions over the initial pods, as the control loop does.
    MapChange c(map);
    uint32_t i = 0;
    for (const auto& p : map.partitions()) {
      const uint32_t to = i++ % pods;
      if (to != 0) SHOAL_RETURN_IF_ERROR(c.Move(p.id, PodFor(spec.name, to)));
    }
    if (!c.empty()) {
      auto m = c.Build();
      if (!m.ok()) return m.status();
      map = WithoutSealed(*m);
    }
  }
  World world(spec, trace);
  const std::chrono::seconds horizon(std::max(spec.scale_down.stabilization_window_seconds,
                                              spec.scale_up.stabilization_window_seconds) +
                                     60);
  LoadHistory history(horizon);
  const SteadyTime t0{};
  const auto parsed_start = ParseWallTime(trace.start_time);
  const WallTime wall0 = parsed_start.ok() ? *parsed_start : WallTime{};
  uint32_t ready_pods = pods;
  std::vector<std::pair<double, uint32_t>> starting;  // (ready at, ordinal count)
  Plan plan;
  bool have_plan = false;
  std::map<PartitionId, double> last_rates;
  double pods_asked_at = -1;  // when the plan in progress asked for more pods (-1: it did not)

  for (double t = 0; t < trace.duration_s; t += trace.step_s) {
    const SteadyTime now =
        t0 + std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(t));
    const WallTime wall =
        wall0 + std::chrono::duration_cast<WallTime::duration>(std::chrono::duration<double>(t));
    // Pods asked for become ready after the start time.
    for (auto it = starting.begin(); it != starting.end();) {
      if (t >= it->first) {
        ready_pods = std::max(ready_pods, it->second);
        it = starting.erase(it);
      } else {
        ++it;
      }
    }
    ready_pods = std::min(ready_pods, pods);
    Observation o = world.Step(map, t, now, ready_pods);
    for (const auto& [id, l] : o.partitions) last_rates[id] = l.rate;
    history.Add(o);

    // Carry out the plan in progress: one step per interval, waits hold it. A decision comes
    // only on an observation taken after the last step, as in the control loop.
    const bool acting = have_plan;
    if (have_plan && !plan.done()) {
      PlanStep& s = plan.steps[plan.next];
      const auto t_plan = Steady::now();
      double step_ms = 0;
      bool advanced = true;
      switch (s.kind) {
        case PlanStep::Kind::kChange: {
          auto next = ResolveChange(s, map, last_rates, {}, {});
          if (!next.ok()) return next.status().Annotate("plan step \"" + s.what + "\"");
          step_ms = MsSince(t_plan);
          world.Changed(map, *next);
          map = WithoutSealed(*next);
          // A change takes one step here; the policy learns it as the control loop does.
          history.RecordChange(std::chrono::duration<double>(trace.step_s));
          break;
        }
        case PlanStep::Kind::kSetPods:
          if (s.pods > pods) {
            starting.emplace_back(t + trace.pod_start_s, s.pods);
            pods_asked_at = t;
          }
          pods = s.pods;
          ready_pods = std::min(ready_pods, pods);
          break;
        case PlanStep::Kind::kWaitReady:
          advanced = ready_pods >= s.pods;
          if (advanced && pods_asked_at >= 0) {
            history.RecordPodStart(std::chrono::duration<double>(t - pods_asked_at));
            pods_asked_at = -1;
          }
          break;
        case PlanStep::Kind::kWaitConsumed:
          // Until the leaving pods' sealed partitions are read (they hold some only with
          // parents whole: otherwise their backlog went to the successors).
          advanced = !world.SealedOn(spec.name, s.pods);
          break;
        case PlanStep::Kind::kDrain:
        case PlanStep::Kind::kRestart:  // traces have no pod templates: no plan rolls pods
          break;
      }
      // The planner's part of carrying out a step: resolving a change's target.
      if (!out.decisions.empty()) {
        out.decisions.back().plan_ms += step_ms;
        out.max_resolve_ms = std::max(out.max_resolve_ms, step_ms);
      }
      if (advanced) ++plan.next;
      if (plan.done()) have_plan = false;
    }
    if (!acting) {
      const auto t_decide = Steady::now();
      Decision d = Decide(spec, history, map, pods, now, wall);
      const double decide_ms = MsSince(t_decide);
      out.max_decide_ms = std::max(out.max_decide_ms, decide_ms);
      if (d.holds()) {
        ++out.holds;
      } else {
        const auto t_plan = Steady::now();
        plan = MakePlan(map, d, pods);
        // Planning includes resolving the first change against the current map.
        if (!plan.steps.empty() && plan.steps[0].kind == PlanStep::Kind::kChange) {
          auto first = ResolveChange(plan.steps[0], map, last_rates, {}, {});
          if (!first.ok())
            return first.status().Annotate("resolving \"" + plan.steps[0].what + "\"");
        }
        const double plan_ms = MsSince(t_plan);
        out.max_plan_ms = std::max(out.max_plan_ms, plan_ms);
        have_plan = !plan.steps.empty();
        if (std::any_of(d.kinds.begin(), d.kinds.end(), [](DecisionKind k) {
              return k == DecisionKind::kSplit || k == DecisionKind::kPodsUp;
            })) {
          ++out.scale_ups;
        }
        out.decisions.push_back(
            SimDecision{.t = t,
                        .partitions_before = static_cast<uint32_t>(map.active_count()),
                        .partitions_after = d.partitions,
                        .pods_before = pods,
                        .pods_after = d.replicas,
                        .kinds = d.kinds,
                        .reason = d.reason,
                        .decide_ms = decide_ms,
                        .plan_ms = plan_ms,
                        .plan_steps = plan.steps.size()});
      }
    }
    SimPoint pt{.t = t,
                .rate = trace.RateAt(t),
                .partitions = static_cast<uint32_t>(map.active_count()),
                .pods = pods,
                .lag = world.TotalLag(),
                .plan_in_progress = have_plan};
    pt.scheduled = !ScheduledFloor(spec, history, wall).active.empty();
    out.max_lag = std::max(out.max_lag, pt.lag);
    out.lag_event_seconds += pt.lag * trace.step_s;
    out.partition_seconds += pt.partitions * trace.step_s;
    out.pod_seconds += pt.pods * trace.step_s;
    out.max_partitions = std::max(out.max_partitions, pt.partitions);
    out.max_pods = std::max(out.max_pods, pt.pods);
    out.timeline.push_back(pt);
  }
  return out;
}

std::string SimResult::ToJson(bool with_timeline) const {
  std::string o = "{\"summary\":{\"decisions\":";
  json::AppendUint(o, decisions.size());
  o += ",\"holds\":";
  json::AppendUint(o, holds);
  o += ",\"scale_ups\":";
  json::AppendUint(o, scale_ups);
  o += ",\"max_lag\":";
  json::AppendDouble(o, max_lag);
  o += ",\"lag_event_seconds\":";
  json::AppendDouble(o, lag_event_seconds);
  o += ",\"partition_seconds\":";
  json::AppendDouble(o, partition_seconds);
  o += ",\"pod_seconds\":";
  json::AppendDouble(o, pod_seconds);
  o += ",\"max_partitions\":";
  json::AppendUint(o, max_partitions);
  o += ",\"max_pods\":";
  json::AppendUint(o, max_pods);
  o += ",\"max_decide_ms\":";
  json::AppendDouble(o, max_decide_ms);
  o += ",\"max_plan_ms\":";
  json::AppendDouble(o, max_plan_ms);
  o += ",\"max_resolve_ms\":";
  json::AppendDouble(o, max_resolve_ms);
  o += "},\"decisions\":[";
  for (size_t i = 0; i < decisions.size(); ++i) {
    const auto& d = decisions[i];
    if (i) o += ',';
    o += "{\"t\":";
    json::AppendDouble(o, d.t);
    o += ",\"partitions\":[";
    json::AppendUint(o, d.partitions_before);
    o += ',';
    json::AppendUint(o, d.partitions_after);
    o += "],\"pods\":[";
    json::AppendUint(o, d.pods_before);
    o += ',';
    json::AppendUint(o, d.pods_after);
    o += "],\"kinds\":[";
    for (size_t k = 0; k < d.kinds.size(); ++k) {
      if (k) o += ',';
      json::AppendString(o, ToString(d.kinds[k]));
    }
    o += "],\"reason\":";
    json::AppendString(o, d.reason);
    o += ",\"decide_ms\":";
    json::AppendDouble(o, d.decide_ms);
    o += ",\"plan_ms\":";
    json::AppendDouble(o, d.plan_ms);
    o += ",\"plan_steps\":";
    json::AppendUint(o, d.plan_steps);
    o += '}';
  }
  o += ']';
  if (with_timeline) {
    o += ",\"timeline\":[";
    for (size_t i = 0; i < timeline.size(); ++i) {
      const auto& p = timeline[i];
      if (i) o += ',';
      o += "{\"t\":";
      json::AppendDouble(o, p.t);
      o += ",\"rate\":";
      json::AppendDouble(o, p.rate);
      o += ",\"partitions\":";
      json::AppendUint(o, p.partitions);
      o += ",\"pods\":";
      json::AppendUint(o, p.pods);
      o += ",\"lag\":";
      json::AppendDouble(o, p.lag);
      o += '}';
    }
    o += ']';
  }
  o += '}';
  return o;
}

}  // namespace shoal::control
