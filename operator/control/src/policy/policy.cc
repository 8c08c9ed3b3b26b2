#include "shoal/control/policy.h"

#include <algorithm>
#include <set>
#include <cmath>
#include <cstdio>
#include <queue>

#include "shoal/common/json.h"
#include "shoal/control/policy_stages.h"

namespace shoal::control {

const char* ToString(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::kSplit:
      return "split";
    case DecisionKind::kMerge:
      return "merge";
    case DecisionKind::kPodsUp:
      return "pods_up";
    case DecisionKind::kPodsDown:
      return "pods_down";
    case DecisionKind::kHold:
      return "hold";
  }
  return "unknown";
}

std::optional<DecisionKind> ParseDecisionKind(std::string_view text) {
  for (DecisionKind k : {DecisionKind::kSplit, DecisionKind::kMerge, DecisionKind::kPodsUp,
                         DecisionKind::kPodsDown, DecisionKind::kHold}) {
    if (text == ToString(k)) return k;
  }
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& out, DecisionKind kind) { return out << ToString(kind); }

std::string JoinKinds(const std::vector<DecisionKind>& kinds) {
  std::string out;
  for (DecisionKind k : kinds) {
    if (!out.empty()) out += ',';
    out += ToString(k);
  }
  return out;
}

namespace {

using std::chrono::seconds;

// A heaviest key below this share is treated as part of the spread load: uniform keys each have
// a tiny share, and the sketch's counts are upper bounds.
constexpr double kHotKeyShare = 0.05;

// The most a prediction raises the present rate: a trend extrapolated far beyond it is more
// likely a misread than a plan.
constexpr double kMaxPredictedFactor = 3;

std::string Num(double v) {
  char buf[32];
  if (v >= 100) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  }
  // Thousands separators make rates readable in logs and status.
  std::string s = buf;
  auto dot = s.find('.');
  int end = static_cast<int>(dot == std::string::npos ? s.size() : dot);
  for (int i = end - 3; i > (s[0] == '-' ? 1 : 0); i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LoadHistory

LoadHistory::LoadHistory(std::chrono::seconds horizon)
    : horizon_(std::max(horizon, seconds(1))),
      bucket_(std::max<seconds>(seconds(1), horizon_ / 20)) {}

void LoadHistory::SetHorizon(std::chrono::seconds horizon) {
  horizon_ = std::max(horizon, seconds(1));
  bucket_ = std::max<seconds>(seconds(1), horizon_ / 20);
}

void LoadHistory::Add(const Observation& o) {
  if (!first_at_) first_at_ = o.at;
  for (const auto& [pod, most] : o.max_partitions) max_partitions_[pod] = most;
  for (const auto& [pod, groups] : o.consumers) {
    for (const auto& [group, c] : groups) {
      const auto sample = CapacitySampleOf(c);
      if (!sample) continue;
      // Saturated samples are kept apart, so that light-load busy-time samples (after a surge,
      // from every pod) do not push them out: consumer_capacity prefers them.
      auto& kept = (sample->saturated ? saturated_ : capacity_)[group];
      kept.push_back(*sample);
      while (kept.size() > kCapacityKept) kept.pop_front();
    }
  }
  Sample s;
  s.at = o.at;
  s.complete = o.complete();
  double cpu_sum = 0;
  for (const auto& [pod, u] : o.cpu_utilization) cpu_sum += u;
  if (!o.cpu_utilization.empty()) {
    s.cpu = cpu_sum / static_cast<double>(o.cpu_utilization.size());
    s.cpu_pods = static_cast<uint32_t>(o.cpu_utilization.size());
  }
  for (const auto& [id, load] : o.partitions) {
    s.max_lag = std::max(s.max_lag, load.lag);
    s.total_lag += load.lag;
    if (!load.active) continue;
    s.total_rate += load.rate;
    ++s.active;
    auto [it, fresh] = partitions_.try_emplace(id);
    PartitionHistory& h = it->second;
    if (fresh) {
      h.first_seen = h.known_since = o.at;
      Inherit(h, load.parents);
    }
    if (!fresh) h.previous_rate = h.last.rate;
    h.last = load;
    h.last_at = o.at;
    const SteadyTime start = GridStart(o.at);
    if (h.buckets.empty() || h.buckets.back().start < start) {
      h.buckets.push_back({start, load.rate, load.rate});
    } else {
      auto& b = h.buckets.back();
      b.low = b.inherited ? load.rate : std::min(b.low, load.rate);
      b.peak = std::max(b.peak, load.rate);
      b.inherited = false;
    }
    while (h.buckets.size() > 1 && o.at - h.buckets[1].start > horizon_) h.buckets.pop_front();
  }
  if (!s.complete) {
    last_incomplete_ = o.at;
    last_missing_ = o.missing;
  }
  samples_.push_back(s);
  while (samples_.size() > 1 && o.at - samples_[1].at > horizon_) samples_.pop_front();
  // Partitions not seen for a whole horizon are gone (retired or changed away).
  for (auto it = partitions_.begin(); it != partitions_.end();) {
    it = (o.at - it->second.last_at > horizon_) ? partitions_.erase(it) : std::next(it);
  }
}

namespace {

constexpr size_t kLeadTimesKept = 8;

void Keep(std::deque<double>& d, double v) {
  d.push_back(v);
  while (d.size() > kLeadTimesKept) d.pop_front();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2) return v[mid];
  const double hi = v[mid];
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + hi) / 2;
}

}  // namespace

void LoadHistory::RecordChange(std::chrono::duration<double> took) {
  Keep(change_s_, std::max(0.0, took.count()));
}

void LoadHistory::RecordPodStart(std::chrono::duration<double> took) {
  Keep(pod_start_s_, std::max(0.0, took.count()));
}

std::optional<LoadHistory::CapacitySample> LoadHistory::CapacitySampleOf(const ConsumerLoad& c) {
  if (!(c.delivered_rate > 0)) return std::nullopt;
  const double backlog = static_cast<double>(c.backlog);
  if (c.backlog >= kSaturatedBacklogEvents &&
      backlog >= kSaturatedBacklogSeconds * c.delivered_rate) {
    return CapacitySample{c.delivered_rate, true};
  }
  if (!c.busy || !(*c.busy >= kBusyMinFraction) || !(c.interval_s > 0) ||
      c.delivered_rate * c.interval_s < kBusyMinEvents) {
    return std::nullopt;
  }
  return CapacitySample{c.delivered_rate / *c.busy, false};
}

std::optional<LoadHistory::ConsumerCapacity> LoadHistory::consumer_capacity() const {
  std::optional<ConsumerCapacity> out;
  std::set<std::string> groups;
  for (const auto& [group, kept] : capacity_) groups.insert(group);
  for (const auto& [group, kept] : saturated_) groups.insert(group);
  for (const auto& group : groups) {
    // Saturated samples, once there are any, are what the consumers take: a consumer's batches
    // grow with its backlog, and busy time at a light load (small batches, a round trip each)
    // reads low, the lower the lighter (after a surge, 50 ev/s a pod read as under 100 ev/s of
    // capacity, and the pods went up again for nothing).
    const auto s_it = saturated_.find(group);
    const bool any_saturated = s_it != saturated_.end() && !s_it->second.empty();
    const auto& kept = any_saturated ? s_it->second : capacity_.at(group);
    std::vector<double> rates;
    for (const auto& s : kept) rates.push_back(s.per_pod);
    const auto saturated = any_saturated ? static_cast<uint32_t>(kept.size()) : 0u;
    const double median = Median(std::move(rates));
    if (out && out->per_pod <= median) continue;
    out = ConsumerCapacity{median, static_cast<uint32_t>(kept.size()), saturated, group};
  }
  return out;
}

LoadHistory::LeadTimes LoadHistory::lead_times() const {
  LeadTimes t;
  t.changes = static_cast<uint32_t>(change_s_.size());
  t.pod_starts = static_cast<uint32_t>(pod_start_s_.size());
  t.change_s =
      change_s_.empty() ? kPriorChangeSeconds : Median({change_s_.begin(), change_s_.end()});
  t.pod_start_s = pod_start_s_.empty() ? kPriorPodStartSeconds
                                       : Median({pod_start_s_.begin(), pod_start_s_.end()});
  return t;
}

namespace {

// Theil-Sen and Kendall's tau over the complete samples of the last `window_s` seconds; nullopt
// with fewer than kTrendMinSamples or an incomplete sample among them.
std::optional<Trend> FitTrend(const std::deque<LoadHistory::Sample>& samples, double window_s) {
  if (samples.empty()) return std::nullopt;
  const SteadyTime last = samples.back().at;
  std::vector<std::pair<double, double>> pts;  // (seconds relative to the latest, rate)
  for (auto it = samples.rbegin(); it != samples.rend(); ++it) {
    const double ago = std::chrono::duration<double>(last - it->at).count();
    if (ago > window_s) break;
    // A gap in the metrics can fake a rise when they come back: no trend across one.
    if (!it->complete) return std::nullopt;
    pts.emplace_back(-ago, it->total_rate);
  }
  if (pts.size() < kTrendMinSamples) return std::nullopt;
  std::vector<double> slopes;
  slopes.reserve(pts.size() * (pts.size() - 1) / 2);
  long concordant = 0, pairs = 0;  // concordant: pairs that rose less those that fell
  for (size_t i = 0; i < pts.size(); ++i) {
    for (size_t j = i + 1; j < pts.size(); ++j) {
      const double dt = pts[i].first - pts[j].first;  // i is the later one
      if (dt <= 0) continue;
      const double dr = pts[i].second - pts[j].second;
      slopes.push_back(dr / dt);
      concordant += dr > 0 ? 1 : dr < 0 ? -1 : 0;
      ++pairs;
    }
  }
  if (pairs == 0) return std::nullopt;
  const long decided = std::count_if(slopes.begin(), slopes.end(), [](double x) { return x != 0; });
  Trend t;
  t.samples = pts.size();
  t.window_s = -pts.back().first;
  t.age_s = t.window_s;
  t.slope = Median(std::move(slopes));
  // Ties (a rate that did not move) count for neither direction.
  t.tau = decided ? static_cast<double>(concordant) / static_cast<double>(decided) : 0;
  std::vector<double> levels;
  levels.reserve(pts.size());
  for (const auto& [at, rate] : pts) levels.push_back(rate - t.slope * at);
  t.level = std::max(0.0, Median(std::move(levels)));
  t.latest = pts.front().second;
  return t;
}

// Rising, and the latest sample still on the line (within the topic's tolerance): a rate that
// turned (the top of a sawtooth) is no longer extrapolated.
bool Rising(const std::optional<Trend>& t, double tolerance) {
  return t && t->slope > 0 && t->tau >= kTrendMinTau && t->latest >= t->level * (1 - tolerance);
}

}  // namespace

std::optional<Trend> RisingTrend(const LoadHistory& history, double tolerance) {
  auto recent = FitTrend(history.samples(), kTrendSeconds);
  if (!Rising(recent, tolerance)) return std::nullopt;
  const auto& samples = history.samples();
  const SteadyTime last = samples.back().at;
  // Index of the oldest sample within `window_s` of the latest.
  auto first_within = [&](double window_s) {
    size_t i = samples.size() - 1;
    while (i > 0 && std::chrono::duration<double>(last - samples[i - 1].at).count() <= window_s) {
      --i;
    }
    return i;
  };
  // A ramp rises in steps of similar size; a step or a burst (producers sending a backlog at
  // once after a pause) rises in one: no interval of the window may carry more than half of it.
  // Nor is a rate that more than doubles within a second (measured against the window's
  // lowest): that is a surge seen over a few samples, which the present rate answers in one
  // decision; extrapolating it would multiply the overshoot.
  double jump = 0, lowest = recent->level;
  for (size_t i = first_within(recent->window_s); i < samples.size(); ++i) {
    lowest = std::min(lowest, samples[i].total_rate);
    if (i + 1 < samples.size()) {
      jump = std::max(jump, samples[i + 1].total_rate - samples[i].total_rate);
    }
  }
  if (jump > kTrendMaxJumpShare * recent->slope * recent->window_s) return std::nullopt;
  if (recent->slope > kTrendMaxRelativeSlope * std::max(lowest, 1.0)) return std::nullopt;
  // Its age: the longest of windows doubling from kTrendSeconds over which the rate rose too.
  const double reach = std::chrono::duration<double>(last - samples.front().at).count();
  for (double w = 2 * kTrendSeconds; w <= kTrendMaxAgeSeconds; w *= 2) {
    auto longer = FitTrend(samples, w);
    if (!Rising(longer, tolerance)) break;
    recent->age_s = longer->window_s;
    if (reach < w) break;  // the history reaches no further
  }
  // A window that reaches into the flat stretch before the ramp still rises as a whole (its ties
  // count for nothing): the ramp is no older than its rise from the window's lowest rate takes
  // at its slope.
  double base = recent->level;
  for (size_t i = first_within(recent->age_s); i < samples.size(); ++i) {
    base = std::min(base, samples[i].total_rate);
  }
  recent->age_s =
      std::max(std::min(recent->age_s, (recent->level - base) / recent->slope), recent->window_s);
  // And material: over its age the rate rose by more than twice the tolerance (noise within the
  // tolerance, the HPA's band, does not, even in samples that happen to agree).
  if (recent->slope * recent->age_s <= 2 * tolerance * recent->level) return std::nullopt;
  return recent;
}

SteadyTime LoadHistory::GridStart(SteadyTime at) const {
  const SteadyTime origin = first_at_.value_or(at);
  if (at <= origin) return origin;
  return origin + ((at - origin) / bucket_) * bucket_;
}

// A partition seen for the first time whose parents are all known: its buckets before it existed
// are the parents' peaks summed (its range lies within theirs, so its load was at most that),
// known from when all of theirs are. A bucket one parent lacks counts as that parent's highest.
void LoadHistory::Inherit(PartitionHistory& h, const std::vector<PartitionId>& parents) {
  if (parents.empty()) return;
  std::map<SteadyTime, double> sum;
  std::vector<const PartitionHistory*> from;
  SteadyTime known{};  // the latest of the parents' known_since
  for (PartitionId p : parents) {
    auto it = partitions_.find(p);
    if (it == partitions_.end() || it->second.buckets.empty()) return;
    from.push_back(&it->second);
    known = std::max(known, it->second.known_since);
  }
  for (const auto* f : from) {
    for (const auto& b : f->buckets) sum.try_emplace(b.start, 0.0);
  }
  for (const auto* f : from) {
    double highest = 0;
    for (const auto& b : f->buckets) highest = std::max(highest, b.peak);
    auto b = f->buckets.begin();
    for (auto& [start, total] : sum) {
      while (b != f->buckets.end() && b->start < start) ++b;
      total += (b != f->buckets.end() && b->start == start) ? b->peak : highest;
    }
  }
  for (const auto& [start, total] : sum) h.buckets.push_back({start, total, total, true});
  h.known_since = std::min(h.known_since, known);
}

std::optional<std::vector<double>> LoadHistory::WindowPeaks(const PartitionHistory& h,
                                                            SteadyTime since) const {
  const auto window_peak = h.PeakSince(since);
  if (!window_peak || samples_.empty()) return std::nullopt;
  const SteadyTime last = GridStart(samples_.back().at);
  // A window that starts after the latest sample (a zero-length window, asked later) has that
  // sample's bucket as its only one.
  const SteadyTime first = std::min(GridStart(std::max(since, *first_at_)), last);
  const size_t n = static_cast<size_t>((last - first) / bucket_) + 1;
  std::vector<double> peaks(n, -1);
  for (const auto& b : h.buckets) {
    if (b.start < first) continue;
    const auto i = static_cast<size_t>((b.start - first) / bucket_);
    if (i < n) peaks[i] = std::max(peaks[i], b.peak);
  }
  // A bucket starting before the window may hold samples inside it (its start is on an older
  // grid after SetHorizon): it counts for the window's first bucket, erring high.
  for (const auto& b : h.buckets) {
    if (b.start < first && b.start + bucket_ > since) peaks[0] = std::max(peaks[0], b.peak);
  }
  for (double& p : peaks) {
    if (p < 0) p = *window_peak;
  }
  return peaks;
}

const LoadHistory::PartitionHistory* LoadHistory::Partition(PartitionId id) const {
  auto it = partitions_.find(id);
  return it == partitions_.end() ? nullptr : &it->second;
}

std::optional<double> LoadHistory::PartitionHistory::PeakSince(SteadyTime since) const {
  if (known_since > since || buckets.empty()) return std::nullopt;
  // Buckets older than the horizon were dropped: a window reaching further back is unknown.
  if (buckets.front().start > since && buckets.front().start > known_since) return std::nullopt;
  double peak = 0;
  // A bucket that started before `since` may still hold samples after it: count it (the peak
  // errs high, which only makes scale-down more careful).
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    peak = std::max(peak, it->peak);
    if (it->start <= since) break;
  }
  return peak;
}

std::optional<double> LoadHistory::PartitionHistory::LowSince(SteadyTime since) const {
  if (buckets.empty()) return std::nullopt;
  // Inherited buckets say nothing about how low this partition's own rate went.
  std::optional<double> low;
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    if (!it->inherited) low = std::min(low.value_or(it->low), it->low);
    if (it->start <= since) break;
  }
  return low;
}

// ---------------------------------------------------------------------------------------------
// Cut points from the observed load

namespace {

// The partition's load as a distribution over its range: a point mass at the heaviest key (when
// it is heavy enough to matter) plus the rest spread over sixteen buckets, uniform within each.
struct LoadShape {
  HashRange range;
  double mass = 0;  // share of the heaviest key
  uint64_t hot = 0;
  std::array<double, kLoadBuckets> weight{};  // the rest, summing to 1 - mass

  LoadShape(const HashRange& r, const PartitionLoad& load) : range(r) {
    const uint64_t width = r.Width();
    double sum = 0;
    for (double b : load.buckets) sum += b;
    if (load.top_share >= kHotKeyShare && r.Contains(load.top_hash)) {
      mass = std::min(1.0, load.top_share);
      hot = load.top_hash;
    }
    std::array<double, kLoadBuckets> w{};
    if (sum > 0) {
      for (size_t i = 0; i < kLoadBuckets; ++i) w[i] = load.buckets[i] / sum;
      if (mass > 0) {
        const size_t hb = static_cast<size_t>((hot - r.lo) * kLoadBuckets / width);
        w[hb] = std::max(0.0, w[hb] - mass);
      }
    } else {
      w.fill(1.0);
    }
    double rest = 0;
    for (double x : w) rest += x;
    for (size_t i = 0; i < kLoadBuckets; ++i) {
      weight[i] = rest > 0 ? w[i] / rest * (1 - mass) : (1 - mass) / kLoadBuckets;
    }
  }

  uint64_t BucketLo(size_t i) const { return range.lo + range.Width() * i / kLoadBuckets; }

  // Share of the spread load below x (the point mass not included).
  double SpreadBelow(uint64_t x) const {
    double f = 0;
    for (size_t i = 0; i < kLoadBuckets; ++i) {
      const uint64_t a = BucketLo(i), b = BucketLo(i + 1);
      if (a == b) {  // a range narrower than 16 has empty buckets: their load sits at a
        if (x > a) f += weight[i];
        continue;
      }
      if (x >= b) {
        f += weight[i];
      } else {
        if (x > a) f += weight[i] * static_cast<double>(x - a) / static_cast<double>(b - a);
        break;
      }
    }
    return f;
  }
  // Share of the whole load in [a, b).
  double Between(uint64_t a, uint64_t b) const {
    double f = SpreadBelow(b) - SpreadBelow(a);
    if (mass > 0 && hot >= a && hot < b) f += mass;
    return f;
  }
  // The smallest x with spread-below(x) >= q (q within [0, 1 - mass]).
  uint64_t SpreadQuantile(double q) const {
    double f = 0;
    for (size_t i = 0; i < kLoadBuckets; ++i) {
      const uint64_t a = BucketLo(i), b = BucketLo(i + 1);
      if (weight[i] > 0 && f + weight[i] >= q) {
        const double frac = std::clamp((q - f) / weight[i], 0.0, 1.0);
        return a + static_cast<uint64_t>(frac * static_cast<double>(b - a));
      }
      f += weight[i];
    }
    return range.hi;
  }
};

}  // namespace

std::vector<uint64_t> LoadQuantileCuts(const HashRange& range, const PartitionLoad& load,
                                       uint32_t parts) {
  std::vector<uint64_t> cuts;
  if (parts < 2 || range.Width() < 2) return cuts;
  const LoadShape shape(range, load);
  const double below_hot = shape.mass > 0 ? shape.SpreadBelow(shape.hot) : 0;
  for (uint32_t j = 1; j < parts; ++j) {
    const double q = static_cast<double>(j) / parts;
    uint64_t x;
    if (shape.mass > 0 && q >= below_hot && q <= below_hot + shape.mass) {
      // The quantile falls on the hot key: cut on the nearer side of it, isolating it.
      x = (q - below_hot < shape.mass / 2) ? shape.hot : shape.hot + 1;
    } else {
      const double spread_q = (shape.mass > 0 && q > below_hot) ? q - shape.mass : q;
      x = shape.SpreadQuantile(spread_q);
      if (shape.mass > 0 && q > below_hot && x <= shape.hot) x = shape.hot + 1;
    }
    if (x <= range.lo || x >= range.hi) continue;
    if (!cuts.empty() && x <= cuts.back()) continue;
    cuts.push_back(x);
  }
  return cuts;
}

double HeaviestShare(const HashRange& range, const PartitionLoad& load,
                     const std::vector<uint64_t>& cuts) {
  const LoadShape shape(range, load);
  double heaviest = 0;
  uint64_t a = range.lo;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const uint64_t b = i < cuts.size() ? cuts[i] : range.hi;
    heaviest = std::max(heaviest, shape.Between(a, b));
    a = b;
  }
  return heaviest;
}

// ---------------------------------------------------------------------------------------------
// Schedules

namespace {

uint32_t CeilDiv(double a, double b) {
  if (b <= 0) return 1;
  return static_cast<uint32_t>(std::max(1.0, std::ceil(a / b - 1e-9)));
}

WallTime PrepareFrom(const ScheduleSpec& sc, const ScheduleWindow& w,
                     const LoadHistory::LeadTimes& lt) {
  return w.start - seconds(sc.ready_seconds) -
         std::chrono::duration_cast<WallTime::duration>(
             std::chrono::duration<double>(lt.change_s + lt.pod_start_s));
}

}  // namespace

std::string SchedulesJson(const TopicSpec& spec, const LoadHistory& history, WallTime wall) {
  const auto lt = history.lead_times();
  std::string o = "[";
  for (const ScheduleSpec& sc : spec.scaling.schedules) {
    if (o.size() > 1) o += ',';
    o += "{\"name\":";
    json::AppendString(o, sc.name);
    const auto w = CurrentOrNextWindow(sc, wall);
    const WallTime prepare = w ? PrepareFrom(sc, *w, lt) : WallTime{};
    if (w) {
      o += ",\"start\":";
      json::AppendString(o, FormatWallTime(w->start));
      o += ",\"end\":";
      json::AppendString(o, FormatWallTime(w->end));
      o += ",\"prepare_from\":";
      json::AppendString(o, FormatWallTime(prepare));
    }
    o += ",\"min_partitions\":";
    json::AppendUint(o, sc.min_partitions);
    o += ",\"min_replicas\":";
    json::AppendUint(o, sc.min_replicas);
    o += ",\"state\":";
    json::AppendString(o, !w                ? "done"
                          : wall >= w->start ? "active"
                          : wall >= prepare  ? "preparing"
                                             : "scheduled");
    o += '}';
  }
  return o + "]";
}

Scheduled ScheduledFloor(const TopicSpec& spec, const LoadHistory& history, WallTime wall) {
  Scheduled out;
  const auto lt = history.lead_times();
  for (const ScheduleSpec& sc : spec.scaling.schedules) {
    const auto w = CurrentOrNextWindow(sc, wall);
    if (!w) continue;
    const WallTime prepare = PrepareFrom(sc, *w, lt);
    if (wall < prepare) continue;
    out.partitions = std::max(out.partitions, sc.min_partitions);
    out.replicas = std::max(out.replicas, sc.min_replicas);
    out.active.push_back(sc.name);
    if (!out.why.empty()) out.why += "; ";
    out.why +=
        "schedule " + sc.name + " (" + FormatWallTime(w->start) + " for " +
        std::to_string(sc.duration_seconds) + " s): at least " + std::to_string(sc.min_partitions) +
        " partitions and " + std::to_string(sc.min_replicas) + " pods" +
        (wall < w->start ? " from " + FormatWallTime(prepare) + " (ready " +
                               std::to_string(sc.ready_seconds) + " s before, change " +
                               Num(lt.change_s) + " s + pod start " + Num(lt.pod_start_s) + " s)"
                         : ", in progress");
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The stages of the decision (policy_stages.h), in the order Decide runs them

DecideInputs::DecideInputs(const TopicSpec& spec_in, const LoadHistory& history_in,
                           const PartitionMap& map_in, uint32_t replicas_in, SteadyTime now_in,
                           std::optional<WallTime> wall_in)
    : spec(spec_in),
      history(history_in),
      map(map_in),
      replicas(replicas_in),
      now(now_in),
      wall(wall_in),
      target(spec_in.scaling.events_per_second_per_partition),
      up_tol(spec_in.scale_up.tolerance),
      down_tol(spec_in.scale_down.tolerance),
      pmin(spec_in.partitions.min),
      pmax(spec_in.partitions.max),
      rmin(spec_in.replicas.min),
      rmax(spec_in.replicas.max),
      per_replica(std::max<uint32_t>(1, spec_in.scaling.partitions_per_replica)),
      up_window(spec_in.scale_up.stabilization_window_seconds),
      down_window(spec_in.scale_down.stabilization_window_seconds),
      since(now_in - down_window),
      active(static_cast<uint32_t>(map_in.active_count())),
      cpu_target(spec_in.scaling.cpu_utilization_percent / 100.0) {}

// 1. The latest load of every active partition; partitions without one are unknown.
CurrentLoad ReadLoad(const DecideInputs& in) {
  CurrentLoad load;
  load.latest = in.history.samples().empty() ? in.now : in.history.samples().back().at;
  // A rising trend (prediction on) is evidence that the rise lasts: it skips the scale-up window
  // as a surge does, which would otherwise size each step of a ramp by its rate a window ago.
  if (in.spec.scale_up.predictive) load.trend = RisingTrend(in.history, in.up_tol);
  load.known.reserve(in.active);
  for (uint32_t index : in.map.active_in_order()) {
    const PartitionInfo& info = in.map.partitions()[index];
    const auto* h = in.history.Partition(info.id);
    if (!h || h->last_at < load.latest) {
      load.unknown.push_back(info.id.value());
      continue;
    }
    Candidate c{.info = &info, .history = h, .load = h->last};
    // A scale-up window asks the rate to have stayed high for the whole window, unless it was
    // more than twice the target at the last two observations: a surge takes the fast path, sized
    // by its latest rate. (One observation is not enough: the first of a surge usually holds only
    // part of it, and a split sized by that part would need a second one.)
    double rate = h->last.rate;
    const bool surge =
        rate > 2 * in.target && h->previous_rate && *h->previous_rate > 2 * in.target;
    if (in.up_window.count() > 0 && !surge && !load.trend) {
      rate = std::min(rate, h->LowSince(in.now - in.up_window).value_or(rate));
    }
    c.load.rate = rate;
    load.total_rate += h->last.rate;
    load.sized_rate += rate;
    load.known.push_back(c);
  }
  return load;
}

// 2. Prediction, on a rising trend. It acts when the trend says that the capacity in place will
//    fall short by the time a change could take effect (`lead`: a change, plus a pod start when
//    pods will be short), and then sizes for the rate expected over a longer horizon: the next
//    decision comes only once this plan is done and takes as long again (2 x lead), and a ramp
//    that has lasted a while is taken to go on for twice as long again (2 x its age), which
//    keeps a long ramp to a few big decisions instead of a staircase. A rate that was higher
//    earlier in the scale-down window and fell back (a sawtooth) is expected back at that peak,
//    not beyond it. Prediction only raises what the scale-up sizing sees (at most
//    kMaxPredictedFactor times the present rate); merges and pods down look at what was
//    observed, and a partition without a current rate turns it off.
Prediction Predict(const DecideInputs& in, const CurrentLoad& load) {
  Prediction p;
  const auto& trend = load.trend;
  const double total_rate = load.total_rate;
  if (!trend || total_rate <= 0 || !load.unknown.empty()) return p;
  const auto& samples = in.history.samples();
  const auto lt = in.history.lead_times();
  const auto trend_start = load.latest - std::chrono::duration_cast<SteadyTime::duration>(
                                             std::chrono::duration<double>(trend->age_s));
  double earlier_peak = 0;  // the window's highest total before the trend's own samples
  for (const auto& s : samples) {
    if (s.at >= in.since && s.at < trend_start) earlier_peak = std::max(earlier_peak, s.total_rate);
  }
  const bool seen_before = earlier_peak >= trend->level;
  auto expected_in = [&](double seconds) {
    double e = trend->level + trend->slope * seconds;
    if (seen_before) e = std::min(e, earlier_peak);
    return std::min(e, kMaxPredictedFactor * total_rate);
  };
  // Pods a rate needs: by partitions per replica, by the consumers' CPU at their target, and by
  // what one pod's consumers were measured to take.
  const auto capacity = in.history.consumer_capacity();
  auto pods_for = [&](double rate) {
    uint32_t n = CeilDiv(std::min(CeilDiv(rate, in.target), in.pmax), in.per_replica);
    const auto& last = samples.back();
    if (last.cpu && *last.cpu > 0 && last.cpu_pods > 0) {
      const double per_pod = last.total_rate / (last.cpu_pods * *last.cpu);
      n = std::max(n, CeilDiv(rate, per_pod * in.cpu_target));
    }
    if (capacity) n = std::max(n, CeilDiv(rate, capacity->per_pod));
    return std::min(n, in.rmax);
  };
  const double pods_lead = lt.change_s + lt.pod_start_s;
  const bool pods_short = pods_for(expected_in(pods_lead)) > in.replicas;
  const double lead = pods_short ? pods_lead : lt.change_s;
  const double soon = expected_in(lead) / total_rate;
  bool parts_short = false;
  for (const auto& c : load.known) parts_short |= c.load.rate * soon > in.target * (1 + in.up_tol);
  if (!pods_short && !parts_short) return p;
  const double horizon = std::max(2 * lead, 2 * trend->age_s);
  const double want = expected_in(horizon);
  p.factor = std::max(1.0, want / total_rate);
  p.pods = pods_for(want);
  auto learned = [](uint32_t n) {
    return n == 0 ? std::string(" assumed") : " learned from " + std::to_string(n);
  };
  const std::string pods_part =
      pods_short ? " + pod start " + Num(lt.pod_start_s) + " s" + learned(lt.pod_starts) : "";
  char buf[480];
  std::snprintf(
      buf, sizeof buf,
      "rising %s ev/s per s for %.0f s: %s short in %s s (change %s s%s%s); sized for %s ev/s "
      "expected in %.0f s (%s)%s",
      Num(trend->slope).c_str(), trend->age_s,
      pods_short && parts_short ? "partitions and pods"
      : pods_short              ? "pods"
                                : "partitions",
      Num(lead).c_str(), Num(lt.change_s).c_str(), learned(lt.changes).c_str(), pods_part.c_str(),
      Num(want).c_str(), horizon,
      horizon > 2 * lead ? "twice as long as it has been rising"
                         : "twice the lead: until a next change could take effect",
      seen_before
          ? (", its peak of the last " + std::to_string(in.down_window.count()) + " s").c_str()
          : "");
  p.why = buf;
  return p;
}

// 3. Splits: each partition above its target by more than the tolerance asks for
//    ceil(rate / target) pieces, cut at its load quantiles; a piece count that cannot lower the
//    heaviest piece below the rate / (1 + tolerance) is pointless (a hot key).
SplitNeeds WantSplits(const DecideInputs& in, std::vector<Candidate>& known) {
  SplitNeeds out;
  for (auto& c : known) {
    if (c.load.rate <= in.target * (1 + in.up_tol)) continue;
    c.parts = CeilDiv(c.load.rate, in.target);
    auto cuts = LoadQuantileCuts(c.info->range, c.load, c.parts);
    c.useful = static_cast<uint32_t>(cuts.size()) + 1;
    c.heaviest = HeaviestShare(c.info->range, c.load, cuts);
    if (c.useful < 2 || c.heaviest * (1 + in.up_tol) >= 1) {
      c.useful = 1;
      out.hot_keys.push_back(
          {c.info->id, c.load.top_hash, c.history->last.rate * c.load.top_share});
      if (out.hot_notes.size() < 3) {
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "partition %u carries %s ev/s, %.0f%% of it one key (hash %u): splitting "
                      "cannot spread one key",
                      c.info->id.value(), Num(c.load.rate).c_str(), c.load.top_share * 100,
                      c.load.top_hash);
        out.hot_notes.push_back(buf);
      }
      continue;
    }
    out.extra += c.useful - 1;
  }
  return out;
}

// 4. Replicas the load asks for now (scale-up side): CPU and lag.
uint32_t CpuReplicas(const DecideInputs& in, const LoadHistory::Sample& s) {
  const uint32_t base = s.cpu_pods;
  if (!s.cpu || base == 0) return 0;
  const double ratio = *s.cpu / in.cpu_target;
  if (std::abs(ratio - 1) <= in.up_tol) return base;
  return CeilDiv(base * ratio, 1);
}

uint32_t PodsForCpu(const DecideInputs& in, double factor) {
  const auto& samples = in.history.samples();
  if (samples.empty()) return 0;
  // The consumers' CPU, raised as the prediction raises the rate they will carry.
  LoadHistory::Sample last = samples.back();
  if (last.cpu) last.cpu = *last.cpu * factor;
  return CpuReplicas(in, last);
}

LagPods PodsForLag(const DecideInputs& in, double factor) {
  LagPods out;
  const auto& samples = in.history.samples();
  if (samples.empty() || samples.back().max_lag <= in.spec.scaling.consumer_lag_events) return out;
  // Once what a pod's consumers take is measured, ConsumeDemand and PodsForCapacity size for the
  // backlog from it; the lag's growth is only a rough guess at it.
  if (in.history.consumer_capacity()) return out;
  // Lag above its target and still growing over the last few seconds: consumers fall behind.
  const auto& last = samples.back();
  const LoadHistory::Sample* before = nullptr;
  for (auto it = samples.rbegin(); it != samples.rend(); ++it) {
    if (last.at - it->at >= seconds(3)) {
      before = &*it;
      break;
    }
  }
  if (!before || last.total_lag <= before->total_lag) return out;
  // What the pods consume now is the arrivals less the lag's growth; enough pods to consume all
  // arrivals at the CPU target, and at least one more.
  const double dt = std::chrono::duration<double>(last.at - before->at).count();
  const double growth = static_cast<double>(last.total_lag - before->total_lag) / dt;
  const double consumed = std::max(1.0, last.total_rate - growth);
  const double per_pod = consumed / std::max<uint32_t>(1, in.replicas);
  out.pods = std::max(in.replicas + 1, CeilDiv(last.total_rate * factor, per_pod * in.cpu_target));
  out.why = "consumer lag " + Num(static_cast<double>(last.max_lag)) + " above its target " +
            Num(static_cast<double>(in.spec.scaling.consumer_lag_events)) + " and growing";
  return out;
}

Demand ConsumeDemand(const DecideInputs& in, const CurrentLoad& load, double factor) {
  Demand out;
  out.arrival = load.sized_rate * factor;
  const auto& samples = in.history.samples();
  if (samples.empty()) return out;
  const uint64_t lag = samples.back().total_lag;
  const uint64_t target = in.spec.scaling.consumer_lag_events;
  if (lag <= target) return out;
  // A split divides a parent's unread events among the successors by hash range, as it divides
  // the arrivals: the backlog is sized for as arrivals of lag / drainSeconds more.
  const double seconds = std::max<uint32_t>(1, in.spec.scaling.drain_seconds);
  out.backlog = lag;
  out.drain = static_cast<double>(lag) / seconds;
  out.why = "backlog " + Num(static_cast<double>(lag)) + " to drain in " + Num(seconds) + " s: +" +
            Num(out.drain) + " ev/s (consumer lag above its target " +
            Num(static_cast<double>(target)) + ")";
  return out;
}

CapacityPods PodsForCapacity(const DecideInputs& in, double rate) {
  CapacityPods out;
  const auto capacity = in.history.consumer_capacity();
  if (!capacity || !(capacity->per_pod > 0)) return out;
  out.pods = CeilDiv(rate, capacity->per_pod);
  // Within the tolerance of what the pods in place take: as many as now.
  if (out.pods > in.replicas && rate <= in.replicas * capacity->per_pod * (1 + in.up_tol)) {
    out.pods = in.replicas;
  }
  // Which samples: "3 saturated samples of group g", "16 samples of group g from busy time",
  // "16 samples of group g: 3 saturated, 13 from busy time".
  const uint32_t n = capacity->samples, saturated = capacity->saturated;
  std::string samples = std::to_string(n) + (saturated == n ? " saturated" : "") +
                        " samples of group " + capacity->group;
  if (saturated == 0) {
    samples += " from busy time";
  } else if (saturated < n) {
    samples += ": " + std::to_string(saturated) + " saturated, " + std::to_string(n - saturated) +
               " from busy time";
  }
  out.why = Num(rate) + " ev/s to consume: " + std::to_string(out.pods) + " pods at " +
            Num(capacity->per_pod) + " ev/s per pod measured (" + samples + ")";
  return out;
}

uint32_t BalancedPartitions(const DecideInputs& in, const CapacityPods& capacity, uint32_t want) {
  // Only when the measured capacity adds pods (a surge): then the pods are new and empty, and
  // the move that fills them can give each the same share.
  const uint32_t pods = std::min(capacity.pods, in.rmax);
  if (pods <= in.replicas || pods < 2 || want <= pods) return 0;
  // With many partitions a pod, one more is a small share of its load: not worth the pieces.
  const uint32_t per_pod = (want + pods - 1) / pods;
  if (per_pod > std::max<uint32_t>(1, in.per_replica)) return 0;
  const uint32_t rounded = per_pod * pods;
  return rounded <= in.pmax ? rounded : 0;
}

// 5. How many partitions: what the rates ask for, at least `floor` (one per wanted replica and
//    what a schedule holds), within the cap and the per-step limit; extra pieces go to the
//    hottest ranges first.
SplitPlan PlaceSplits(const DecideInputs& in, CurrentLoad& load, uint32_t extra, uint32_t floor) {
  SplitPlan out;
  std::vector<Candidate>& known = load.known;
  const uint32_t active = in.active;
  uint32_t want_total = active + extra;
  if (floor > want_total) want_total = floor;
  out.wanted = want_total;
  uint32_t allowed_total = std::min(want_total, in.pmax);
  if (in.spec.scale_up.max_partitions_per_step > 0) {
    allowed_total = std::min(allowed_total, active + in.spec.scale_up.max_partitions_per_step);
  }
  uint32_t budget = allowed_total > active ? allowed_total - active : 0;
  std::vector<uint32_t> pieces(known.size(), 1);
  // What each owner can still open (its sidecar's open-files limit): a split in place keeps the
  // sealed parent and adds every piece to the owner, so pieces beyond its room wait for pods.
  std::map<std::string, int64_t> room;
  for (const auto& [pod, most] : in.history.max_partitions()) room[pod] = most;
  for (const auto& p : in.map.partitions()) {
    if (auto it = room.find(p.owner.value()); it != room.end()) --it->second;
  }
  if (budget > 0) {
    // Give one more piece at a time to the partition whose pieces are hottest, up to what each
    // can use (rate pieces first; then, for replicas, any partition that can still be cut).
    using Entry = std::pair<double, size_t>;  // (rate per piece, index)
    std::priority_queue<Entry> pq;
    for (size_t i = 0; i < known.size(); ++i) pq.push({known[i].load.rate, i});
    const bool for_replicas = want_total > active + extra;
    const bool measured = in.history.consumer_capacity().has_value();
    while (budget > 0 && !pq.empty()) {
      auto [per_piece, i] = pq.top();
      pq.pop();
      Candidate& c = known[i];
      if (for_replicas && !c.halves_known) {
        // More consumers need more partitions than the rates ask for (pods, a schedule, or as
        // many per pod): beyond its rate's pieces, can it be halved usefully?
        c.halves_known = true;
        auto cuts = LoadQuantileCuts(c.info->range, c.load, 2);
        c.heaviest = cuts.empty() ? 1 : HeaviestShare(c.info->range, c.load, cuts);
      }
      // Beyond its rate's pieces only while its heaviest key is less than a piece's share: a
      // hot key's partition is cut to isolate the key, and more pieces of it spread nothing.
      // Only for pods measured to need them (BalancedPartitions): a floor of pods by CPU or
      // partitions per replica keeps to the rate's pieces of hot partitions, as before.
      const bool spreads =
          c.useful <= 1 || (measured && c.load.top_share * c.useful < 1);
      const uint32_t limit = for_replicas && spreads && c.heaviest * (1 + in.up_tol) < 1
                                 ? std::max<uint32_t>(c.useful, 64)
                                 : std::max<uint32_t>(c.useful, 1);
      if (pieces[i] >= limit || c.info->range.Width() <= pieces[i]) continue;
      if (auto it = room.find(c.info->owner.value()); it != room.end()) {
        const int64_t cost = pieces[i] == 1 ? 2 : 1;  // the first cut makes two pieces
        if (it->second < cost) {
          if (!out.room_limited) {
            out.room_note = "pod " + it->first + " can hold no more partitions (its sidecar's " +
                            "open-files limit allows " +
                            std::to_string(in.history.max_partitions().at(it->first)) + ")";
          }
          out.room_limited = true;
          continue;
        }
        it->second -= cost;
      }
      ++pieces[i];
      --budget;
      pq.push({c.load.rate / pieces[i], i});
    }
  }
  for (size_t i = 0; i < known.size(); ++i) {
    if (pieces[i] < 2) continue;
    auto cuts = LoadQuantileCuts(known[i].info->range, known[i].load, pieces[i]);
    if (cuts.empty()) continue;
    out.splits.push_back({known[i].info->id, std::move(cuts), known[i].load.rate});
  }
  out.after = active;
  for (const auto& s : out.splits) out.after += static_cast<uint32_t>(s.cuts.size());
  if (out.splits.empty()) return out;

  double hottest = 0;
  size_t above = 0;
  for (const auto& s : out.splits) {
    hottest = std::max(hottest, s.rate);
    above += s.rate > in.target * (1 + in.up_tol) ? 1 : 0;
  }
  const uint32_t pieces_total = out.after - active + static_cast<uint32_t>(out.splits.size());
  char buf[320];
  if (above > 0) {
    std::snprintf(buf, sizeof buf,
                  "arrival %s ev/s; %zu partition(s) above the target %s ev/s (+%.0f%%), "
                  "hottest %s ev/s: split into %u pieces in one step, %u -> %u partitions",
                  Num(load.total_rate).c_str(), above, Num(in.target).c_str(), in.up_tol * 100,
                  Num(hottest).c_str(), pieces_total, active, out.after);
  } else {  // for pods or a schedule, not for the rate
    std::snprintf(buf, sizeof buf,
                  "arrival %s ev/s; %zu partition(s) split into %u pieces in one step, %u -> "
                  "%u partitions",
                  Num(load.total_rate).c_str(), out.splits.size(), pieces_total, active, out.after);
  }
  out.why = buf;
  if (want_total > in.pmax) {
    out.cap = "capped at partitions.max " + std::to_string(in.pmax) + " (wanted " +
              std::to_string(want_total) + ")";
  } else if (allowed_total < want_total) {
    out.cap = "limited to " + std::to_string(in.spec.scale_up.max_partitions_per_step) +
              " new partitions per step";
  }
  return out;
}

// 6. What keeps anything from shrinking now.
std::vector<std::string> ScaleDownBlocked(const DecideInputs& in, const CurrentLoad& load) {
  std::vector<std::string> out;
  const LoadHistory& history = in.history;
  const bool covered = history.first_at() && *history.first_at() <= in.since;
  const bool gap = history.last_incomplete() && *history.last_incomplete() >= in.since;
  if (gap) {
    std::string what = history.last_missing().empty() ? "" : ": " + history.last_missing()[0];
    if (history.last_missing().size() > 1) {
      what += " (and " + std::to_string(history.last_missing().size() - 1) + " more)";
    }
    out.push_back("metrics missing within the scale-down window" + what +
                  "; nothing shrinks until they are complete for " +
                  std::to_string(in.down_window.count()) + " s");
  } else if (!covered) {
    out.push_back("observing for less than the scale-down window (" +
                  std::to_string(in.down_window.count()) + " s)");
  }
  if (load.trend) {
    out.push_back("arrival rising (" + Num(load.trend->slope) +
                  " ev/s per s); nothing shrinks on a rising trend");
  }
  // A backlog is no time to shrink: its events wait for consumers (and those of a merge's
  // parents for the merge), so nothing shrinks while the lag of the window is above its target.
  // The lag summed over the partitions, sealed ones included (as targetConsumerLag is defined):
  // a backlog spread over many partitions, or held in sealed parents, waits just the same.
  uint64_t window_lag = 0;
  for (const auto& s : history.samples()) {
    if (s.at >= in.since) window_lag = std::max(window_lag, s.total_lag);
  }
  if (in.spec.scaling.consumer_lag_events > 0 && window_lag > in.spec.scaling.consumer_lag_events) {
    out.push_back("consumer lag " + Num(static_cast<double>(window_lag)) + " above its target " +
                  Num(static_cast<double>(in.spec.scaling.consumer_lag_events)) +
                  " within the scale-down window; nothing shrinks while a backlog waits");
  }
  return out;
}

std::string MergesWaitForPods(const DecideInputs& in) {
  const auto capacity = in.history.consumer_capacity();
  if (!capacity || !(capacity->per_pod > 0) || in.replicas < 2) return "";
  double peak = 0;
  for (const auto& s : in.history.samples()) {
    if (s.at >= in.since) peak = std::max(peak, s.total_rate);
  }
  const uint32_t need = CeilDiv(peak, capacity->per_pod * (1 - in.down_tol));
  if (need < in.replicas) return "";
  return "partitions merge only as the pods come down: the window's peak " + Num(peak) +
         " ev/s still needs the " + std::to_string(in.replicas) + " pods in place at " +
         Num(capacity->per_pod) + " ev/s per pod";
}

// 7. Scale-down: merges of cold neighbours, only on a complete history that covers the window.
MergePlan PlaceMerges(const DecideInputs& in, const CurrentLoad& load, const Scheduled& scheduled) {
  MergePlan out;
  const auto& samples = in.history.samples();
  out.after = in.active;
  // Needed partitions by the window's peak total rate; merges never go below it or pmin.
  double peak_total = 0;
  for (const auto& s : samples) {
    if (s.at >= in.since) peak_total = std::max(peak_total, s.total_rate);
  }
  // Nor below the replicas the consumers' CPU asked for in the window: fewer partitions than
  // busy consumers would only be split again.
  uint32_t cpu_peak = 0;
  for (const auto& s : samples) {
    if (s.at >= in.since) cpu_peak = std::max(cpu_peak, CpuReplicas(in, s));
  }
  const uint32_t floor =
      std::max({in.pmin, CeilDiv(peak_total, in.target * (1 - in.down_tol)),
                std::min(in.rmin, in.active), std::min(cpu_peak, in.rmax),
                std::min(scheduled.partitions, in.pmax), std::min(scheduled.replicas, in.rmax)});
  const std::vector<Candidate>& by_range = load.known;  // already in hash order
  const double limit = in.target * (1 - in.down_tol);
  uint32_t remaining = in.active;
  std::vector<PartitionId> run;
  // The run's peaks per bucket of the window, summed over its members: the most the merged
  // partition would have carried at any time in the window.
  std::vector<double> run_peaks;
  auto peak_of = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  auto close_run = [&] {
    if (run.size() >= 2) {
      out.merges.push_back({run, peak_of(run_peaks)});
      remaining -= static_cast<uint32_t>(run.size() - 1);
    }
    run.clear();
    run_peaks.clear();
  };
  const uint32_t step_limit = in.spec.scale_down.max_partitions_per_step;
  uint32_t removed = 0;
  for (const auto& c : by_range) {
    auto peaks = in.history.WindowPeaks(*c.history, in.since);
    if (!peaks) {  // too young: its load over the whole window is unknown
      close_run();
      continue;
    }
    const bool room =
        remaining - (run.empty() ? 0 : static_cast<uint32_t>(run.size() - 1)) > floor &&
        (step_limit == 0 || removed < step_limit);
    if (!run.empty() && room && peaks->size() == run_peaks.size()) {
      std::vector<double> sum = run_peaks;
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += (*peaks)[i];
      if (peak_of(sum) <= limit) {
        run.push_back(c.info->id);
        run_peaks = std::move(sum);
        ++removed;
        continue;
      }
    }
    close_run();
    run.push_back(c.info->id);
    run_peaks = std::move(*peaks);
  }
  close_run();
  if (out.merges.empty()) return out;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "peak arrival %s ev/s over the last %llds; %zu run(s) of cold neighbours stay "
                "below %s ev/s merged: %u -> %u partitions",
                Num(peak_total).c_str(), static_cast<long long>(in.down_window.count()),
                out.merges.size(), Num(limit).c_str(), in.active, remaining);
  out.why = buf;
  out.after = remaining;
  return out;
}

// 8. Replicas: up at once to what the load asks now; down to the highest recommendation of the
//    scale-down window, only on complete observations.
PodsPlan SizePods(const DecideInputs& in, const PodsAsked& asked, const SplitPlan& split,
                  uint32_t after, bool may_shrink) {
  PodsPlan out;
  const auto& samples = in.history.samples();
  const uint32_t replicas = in.replicas;
  // Partitions per replica, no more than the tightest pod can hold open.
  uint32_t per_replica = in.per_replica;
  for (const auto& [pod, most] : in.history.max_partitions()) {
    per_replica = std::min(per_replica, std::max<uint32_t>(1, most / 2));  // with sealed parents
  }
  auto by_partitions = [&](uint32_t parts) { return CeilDiv(parts, per_replica); };
  uint32_t up = std::max({by_partitions(after), asked.cpu, asked.lag, asked.predicted,
                          asked.scheduled, asked.capacity.pods});
  if (split.room_limited) {
    // The pieces the pods could not open go to new pods: enough of them for what was wanted.
    const uint32_t wanted = std::min(split.wanted, in.pmax);
    up = std::max(up, by_partitions(wanted));
    out.why.push_back(split.room_note + ": more pods for the " + std::to_string(wanted) +
                      " partitions wanted");
  }
  uint32_t want = replicas;
  if (up > replicas) {
    want = up;
  } else if (may_shrink) {
    uint32_t peak_rec = std::max(by_partitions(after), asked.scheduled);
    const auto capacity = in.history.consumer_capacity();
    for (const auto& s : samples) {
      if (s.at < in.since) continue;
      peak_rec = std::max(peak_rec, CpuReplicas(in, s));
      if (capacity && capacity->per_pod > 0) {
        peak_rec = std::max(peak_rec, CeilDiv(s.total_rate, capacity->per_pod * (1 - in.down_tol)));
      }
    }
    if (peak_rec < replicas) want = peak_rec;
  }
  want = std::clamp(want, in.rmin, in.rmax);
  want = std::max(std::min(want, after), std::min(in.rmin, after));
  out.replicas = want;
  if (want > replicas) {
    out.kind = DecisionKind::kPodsUp;
    std::string r =
        "replicas " + std::to_string(replicas) + " -> " + std::to_string(want) + ": " +
        std::to_string(after) + " partitions at " + std::to_string(per_replica) + " per replica" +
        (per_replica < in.per_replica ? " (what the pods' open-files limits allow)" : "");
    if (asked.capacity.pods > by_partitions(after)) r += ", " + asked.capacity.why;
    if (asked.cpu > by_partitions(after) && samples.back().cpu) {
      r += ", consumer CPU " + Num(*samples.back().cpu * 100) + "% against " +
           std::to_string(in.spec.scaling.cpu_utilization_percent) + "%";
    }
    if (up > in.rmax) r += ", capped at replicas.max " + std::to_string(in.rmax);
    out.why.push_back(r);
  } else if (want < replicas) {
    out.kind = DecisionKind::kPodsDown;
    out.why.push_back("replicas " + std::to_string(replicas) + " -> " + std::to_string(want) +
                      ": the highest recommendation over the last " +
                      std::to_string(in.down_window.count()) + " s");
  }
  return out;
}

Decision Decide(const DecideInputs& in) {
  Decision d;
  CurrentLoad load = ReadLoad(in);
  const Prediction predicted = Predict(in, load);
  const Demand demand = ConsumeDemand(in, load, predicted.factor);
  // Partitions are sized for the backlog to drain too, spread as the arrivals are: only when
  // every active partition's rate is known. Right after a change the new partitions have none
  // yet, the arrivals read low, and the backlog spread over the few known ones would split them
  // again for nothing (shoal up's unannounced sale: 11 -> 13 -> 16 on "arrival 393 ev/s").
  const double backlog_factor =
      demand.arrival > 0 && load.unknown.empty() ? demand.rate() / demand.arrival : 1;
  for (auto& c : load.known) c.load.rate *= predicted.factor * backlog_factor;
  SplitNeeds needs = WantSplits(in, load.known);
  d.hot_keys = std::move(needs.hot_keys);
  const LagPods lag = PodsForLag(in, predicted.factor);
  const uint32_t cpu_now = PodsForCpu(in, predicted.factor);
  const CapacityPods capacity = PodsForCapacity(in, demand.rate());
  // Scheduled capacity: while a window is in progress, or from when it must be prepared (its
  // readySeconds before the start, less what a change and a pod start take here), at least its
  // partitions and pods, whatever the load.
  const Scheduled scheduled = in.wall ? ScheduledFloor(in.spec, in.history, *in.wall) : Scheduled{};
  uint32_t floor =
      std::max(std::min(std::max({cpu_now, lag.pods, scheduled.replicas, capacity.pods}), in.rmax),
               std::min(scheduled.partitions, in.pmax));
  floor = std::max(floor, BalancedPartitions(in, capacity, in.active + needs.extra));
  SplitPlan split = PlaceSplits(in, load, needs.extra, floor);
  d.splits = std::move(split.splits);
  if (!d.splits.empty()) d.kinds.push_back(DecisionKind::kSplit);

  const std::vector<std::string> blocked = ScaleDownBlocked(in, load);
  MergePlan merge;
  merge.after = split.after;
  const std::string keep = MergesWaitForPods(in);
  if (d.splits.empty() && blocked.empty() && load.unknown.empty() && in.active > in.pmin &&
      keep.empty()) {
    merge = PlaceMerges(in, load, scheduled);
    d.merges = std::move(merge.merges);
    if (!d.merges.empty()) d.kinds.push_back(DecisionKind::kMerge);
  }
  const uint32_t after = merge.after;
  const PodsPlan pods = SizePods(in,
                                 {.cpu = cpu_now,
                                  .lag = lag.pods,
                                  .predicted = predicted.pods,
                                  .scheduled = scheduled.replicas,
                                  .capacity = capacity},
                                 split, after, blocked.empty());
  if (pods.kind) d.kinds.push_back(*pods.kind);
  d.partitions = after;
  d.replicas = pods.replicas;
  std::sort(d.hot_keys.begin(), d.hot_keys.end(),
            [](const HotKey& a, const HotKey& b) { return a.rate > b.rate; });

  // The reason: what was predicted (when it changed something), the change of partitions, then
  // what asked for pods, the cap, the pods, hot keys and what is unknown.
  std::vector<std::string> why;
  const bool up = !d.splits.empty() || pods.replicas > in.replicas;
  if (!predicted.why.empty() && up) why.push_back(predicted.why);
  const std::string none;
  const std::string* const parts[] = {&split.why, &merge.why,     up ? &demand.why : &none,
                                      &lag.why,   &scheduled.why, &split.cap};
  for (const std::string* w : parts) {
    if (!w->empty()) why.push_back(*w);
  }
  why.insert(why.end(), pods.why.begin(), pods.why.end());
  why.insert(why.end(), needs.hot_notes.begin(), needs.hot_notes.end());
  if (!load.unknown.empty()) {
    why.push_back(std::to_string(load.unknown.size()) +
                  " active partition(s) without a current rate; they are not split or merged");
  }
  if (d.kinds.empty()) {
    d.kinds.push_back(DecisionKind::kHold);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "hold: arrival %s ev/s over %u partitions (%s per partition, target %s), %u "
                  "replicas",
                  Num(load.total_rate).c_str(), in.active,
                  Num(in.active ? load.total_rate / in.active : 0).c_str(), Num(in.target).c_str(),
                  in.replicas);
    why.insert(why.begin(), buf);
    why.insert(why.end(), blocked.begin(), blocked.end());
  } else if (d.merges.empty() && pods.replicas >= in.replicas && !blocked.empty() &&
             d.splits.empty()) {
    why.insert(why.end(), blocked.begin(), blocked.end());
  }
  for (size_t i = 0; i < why.size(); ++i) d.reason += (i ? "; " : "") + why[i];
  return d;
}

Decision Decide(const TopicSpec& spec, const LoadHistory& history, const PartitionMap& map,
                uint32_t replicas, SteadyTime now, std::optional<WallTime> wall) {
  return Decide(DecideInputs(spec, history, map, replicas, now, wall));
}

}  // namespace shoal::control
