#include "shoal/control/metrics_observer.h"

// clang-format off
#include <utility>  // std::exchange, before boost::asio (awaitable.hpp needs it)
// clang-format on

#include <cpprest/http_client.h>

#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <set>

#include "shoal/common/tls_cpprest.h"
#include "shoal/control/prom_text.h"

namespace shoal::control {

namespace {

constexpr std::string_view kMetricsPath = "/metrics";
constexpr std::string_view kAdminPath = "/v1/admin/partitions";
constexpr std::string_view kAppended = "shoal_events_appended_total";
constexpr std::string_view kLag = "shoal_consumer_lag_events";
constexpr std::string_view kEndOffset = "shoal_partition_end_offset";
constexpr std::string_view kDelivered = "shoal_events_delivered_total";
constexpr std::string_view kBusy = "shoal_consumer_busy_seconds_total";
constexpr std::string_view kDiskFree = "shoal_disk_free_bytes";
constexpr std::string_view kDiskReserve = "shoal_disk_reserve_bytes";
constexpr std::string_view kDiskInUse = "shoal_disk_reserve_in_use";
// How much of an error answer's body goes into a message.
constexpr size_t kBodyInMessage = 200;

std::optional<uint32_t> ParsePartitionLabel(const std::string* label) {
  if (label == nullptr || label->empty()) return std::nullopt;
  uint32_t id = 0;
  const char* end = label->data() + label->size();
  const auto [ptr, ec] = std::from_chars(label->data(), end, id);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return id;
}

uint64_t ToCount(double v) {
  if (!(v > 0)) return 0;  // also NaN
  if (v >= 18446744073709551615.0) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(std::round(v));
}

// What one pod's /metrics says about the topic, by partition id.
struct MetricsView {
  std::map<uint32_t, double> appended;
  std::map<uint32_t, uint64_t> lag;  // max over groups; absent with no group
  std::map<uint32_t, uint64_t> end;  // end offsets
  std::map<uint32_t, std::map<std::string, uint64_t>> group_lag;  // per partition and group
  std::set<uint32_t> reported;                                    // partitions the sidecar holds
  std::map<std::string, double> delivered;  // per group: events handed to its consumers
  std::map<std::string, double> busy;       // per group: seconds its consumers held a batch
  // The data volume (sidecars with a disk reserve; all three or none).
  std::optional<double> disk_free, disk_reserve, disk_in_use;
};

MetricsView ReadMetrics(const std::vector<PromSample>& samples, const std::string& topic) {
  MetricsView view;
  for (const auto& s : samples) {
    const bool appended = s.name == kAppended;
    const bool lag = s.name == kLag;
    const bool delivered = s.name == kDelivered;
    const bool busy = s.name == kBusy;
    const bool disk = s.name == kDiskFree || s.name == kDiskReserve || s.name == kDiskInUse;
    if (!appended && !lag && !delivered && !busy && !disk && s.name != kEndOffset) continue;
    const std::string* t = s.Label("topic");
    if (t == nullptr || *t != topic) continue;
    if (disk) {
      (s.name == kDiskFree ? view.disk_free
                           : s.name == kDiskReserve ? view.disk_reserve : view.disk_in_use) = s.value;
      continue;
    }
    const std::string* group = s.Label("group");
    if (delivered || busy) {
      // Summed over any other label (one series per topic and group is what sidecars export).
      if (group == nullptr || group->empty()) continue;
      (delivered ? view.delivered : view.busy)[*group] += s.value;
      continue;
    }
    const auto id = ParsePartitionLabel(s.Label("partition"));
    if (!id) continue;
    if (appended) {
      view.appended[*id] = s.value;
      view.reported.insert(*id);
    } else if (lag) {
      uint64_t& l = view.lag[*id];
      l = std::max(l, ToCount(s.value));
      if (group != nullptr) view.group_lag[*id][*group] = ToCount(s.value);
    } else {
      view.reported.insert(*id);
      view.end[*id] = ToCount(s.value);
    }
  }
  return view;
}

// The backlog of one group that `pod` serves under `map` (ConsumerLoad::backlog), from the
// group's lag per partition as each partition's owner reports it. An ancestor reached along
// several paths from one active partition counts once for it.
uint64_t ServedBacklog(const PartitionMap& map, const std::string& pod,
                       const std::map<uint32_t, uint64_t>& lag) {
  auto lag_of = [&](PartitionId id) {
    auto it = lag.find(id.value());
    return it == lag.end() ? 0.0 : static_cast<double>(it->second);
  };
  double backlog = 0;
  for (const auto& p : map.partitions()) {
    if (p.owner.value() != pod) continue;
    backlog += lag_of(p.id);
    if (!p.active()) continue;
    // Its range of every sealed ancestor held elsewhere, which its consumer reads through it.
    std::set<uint32_t> seen;
    std::vector<PartitionId> next(p.parents.begin(), p.parents.end());
    while (!next.empty()) {
      const PartitionId id = next.back();
      next.pop_back();
      const PartitionInfo* a = map.Find(id);
      if (a == nullptr || !seen.insert(id.value()).second) continue;
      next.insert(next.end(), a->parents.begin(), a->parents.end());
      if (a->owner.value() == pod || a->range.Width() == 0) continue;  // counted as its own
      const uint64_t lo = std::max(a->range.lo, p.range.lo);
      const uint64_t hi = std::min(a->range.hi, p.range.hi);
      if (hi <= lo) continue;
      backlog += lag_of(id) * static_cast<double>(hi - lo) / static_cast<double>(a->range.Width());
    }
  }
  return ToCount(backlog);
}

// What went wrong with an answer, or nullopt for a 200.
std::optional<std::string> Failure(const std::string& pod, std::string_view path, int status,
                                   const std::string& body, const std::string& error) {
  if (status == 200) return std::nullopt;
  std::string out = pod + ": " + std::string(path) + ": ";
  if (status == 0) return out + error;
  return out + "answered " + std::to_string(status) + " " + body.substr(0, kBodyInMessage);
}

}  // namespace

MetricsObserver::MetricsObserver(Clock& clock, std::string admin_token, Options options)
    : clock_(clock), token_(std::move(admin_token)), opts_(options) {}

MetricsObserver::~MetricsObserver() = default;

std::shared_ptr<web::http::client::http_client> MetricsObserver::ClientFor(
    const std::string& host_port, bool admin) {
  std::lock_guard<std::mutex> lock(clients_mu_);
  auto& client = clients_[host_port];
  if (!client) {
    web::http::client::http_client_config config;
    config.set_timeout(opts_.timeout);
    const TlsClientFiles tls = admin ? opts_.tls : TlsClientFiles{};
    UseTls(config, tls);
    // May throw on a malformed address: StartGet catches it.
    client = std::make_shared<web::http::client::http_client>(BaseUrl(host_port, tls), config);
  }
  return client;
}

std::future<MetricsObserver::Answer> MetricsObserver::StartGet(const std::string& host_port,
                                                               const std::string& path,
                                                               bool admin) {
  auto promise = std::make_shared<std::promise<Answer>>();
  std::future<Answer> future = promise->get_future();
  // For failures before the request leaves (no or a malformed address): no continuation runs.
  auto fail = [&promise](std::string error) {
    Answer a;
    a.error = std::move(error);
    try {
      promise->set_value(std::move(a));
    } catch (const std::future_error&) {
      // Answered already; cannot happen, but a second answer must not escape as an exception.
    }
  };
  if (host_port.empty()) {
    fail("the pod has no address for it");
    return future;
  }
  try {
    std::shared_ptr<web::http::client::http_client> client = ClientFor(host_port, admin);
    web::http::http_request req(web::http::methods::GET);
    req.set_request_uri(path);
    if (admin) {
      req.headers().add("Authorization", "Bearer " + token_);
      NameTheServer(req, opts_.tls);
    }
    auto status = std::make_shared<int>(0);
    // The continuations run on cpprestsdk's pool: they only copy the answer out, never wait.
    client->request(req)
        .then([status](web::http::http_response resp) {
          *status = resp.status_code();
          return resp.extract_vector();
        })
        .then([promise, status, client](pplx::task<std::vector<unsigned char>> body) {
          Answer a;
          try {
            const std::vector<unsigned char>& bytes = body.get();  // ready: does not block
            a.status = *status;
            a.body.assign(bytes.begin(), bytes.end());
          } catch (const std::exception& e) {
            a.error = e.what();
          } catch (...) {
            a.error = "unknown error";
          }
          promise->set_value(std::move(a));
        });
  } catch (const std::exception& e) {
    fail(e.what());
  } catch (...) {
    fail("unknown error");
  }
  return future;
}

std::chrono::steady_clock::time_point MetricsObserver::Deadline() const {
  // cpprestsdk's timeout restarts on progress; this bounds a whole answer (twice the timeout,
  // plus slack for the pool to get to the continuation).
  return std::chrono::steady_clock::now() + 2 * opts_.timeout + std::chrono::milliseconds(500);
}

MetricsObserver::Answer MetricsObserver::Wait(
    std::future<Answer>& answer, std::chrono::steady_clock::time_point deadline) const {
  if (answer.wait_until(deadline) != std::future_status::ready) {
    Answer a;
    a.error = "no answer within " + std::to_string((2 * opts_.timeout).count()) + " ms";
    return a;
  }
  return answer.get();
}

Observation MetricsObserver::Observe(const PartitionMap& map, const std::vector<PodInfo>& pods) {
  std::lock_guard<std::mutex> lock(observe_mu_);
  // The pods whose counters the previous Observe kept (they answered it).
  std::set<std::string> answered_before;
  for (const auto& [key, sample] : previous_) answered_before.insert(key.first);
  Observation obs;
  obs.at = clock_.SteadyNow();
  obs.epoch = map.epoch();

  std::map<std::string, const PodInfo*> by_name;
  for (const auto& pod : pods) {
    by_name[pod.name.value()] = &pod;
    if (pod.cpu_utilization) obs.cpu_utilization[pod.name.value()] = *pod.cpu_utilization;
  }

  // Every owner's two requests go out before any answer is awaited.
  struct PodScrape {
    std::future<Answer> metrics, admin;
    std::optional<std::string> metrics_error;
    MetricsView view;
    // kAbsent: the endpoint answered 404, bucket shapes are unknown but nothing is wrong.
    enum class Admin { kOk, kAbsent, kFailed } admin_state = Admin::kFailed;
    std::string admin_error;
    std::map<uint32_t, AdminPartition> admin_partitions;
  };
  std::map<std::string, PodScrape> scrapes;
  std::set<std::string> addresses;
  for (const auto& info : map.partitions()) {
    const std::string& owner = info.owner.value();
    auto pod = by_name.find(owner);
    if (pod == by_name.end() || scrapes.count(owner)) continue;
    PodScrape& s = scrapes[owner];
    s.metrics = StartGet(pod->second->metrics, std::string(kMetricsPath), false);
    s.admin = StartGet(pod->second->address.admin, std::string(kAdminPath), true);
    addresses.insert(pod->second->metrics);
    addresses.insert(pod->second->address.admin);
  }

  const auto deadline = Deadline();
  for (auto& [name, s] : scrapes) {
    Answer m = Wait(s.metrics, deadline);
    Answer a = Wait(s.admin, deadline);
    s.metrics_error = Failure(name, kMetricsPath, m.status, m.body, m.error);
    if (!s.metrics_error) {
      auto samples = ParsePromText(m.body);
      if (samples.ok()) {
        s.view = ReadMetrics(*samples, map.topic());
      } else {
        s.metrics_error =
            name + ": " + std::string(kMetricsPath) + ": " + samples.status().message();
      }
    }
    if (a.status == 404) {
      s.admin_state = PodScrape::Admin::kAbsent;
    } else if (auto failure = Failure(name, kAdminPath, a.status, a.body, a.error)) {
      s.admin_error = *failure;
    } else if (auto report = ParseAdminPartitions(a.body); !report.ok()) {
      s.admin_error = name + ": " + std::string(kAdminPath) + ": " + report.status().message();
    } else {
      s.admin_state = PodScrape::Admin::kOk;
      if (auto most = report->limits.MaxPartitions(report->partitions.size())) {
        obs.max_partitions[name] = *most;
      }
      for (auto& p : report->partitions) s.admin_partitions[p.id.value()] = std::move(p);
    }
  }

  // Only what was read now is kept for the next diff: a pod that did not answer may have
  // restarted meanwhile, and its next counters must not be diffed against older ones.
  std::map<std::pair<std::string, uint32_t>, Sample> next;
  for (const auto& info : map.partitions()) {
    const uint32_t id = info.id.value();
    const std::string& owner = info.owner.value();
    const std::string where = "partition " + std::to_string(id) + ": ";
    auto sit = scrapes.find(owner);
    if (sit == scrapes.end()) {
      obs.missing.push_back(where + "its owner " + owner + " is not among the pods");
      continue;
    }
    PodScrape& s = sit->second;
    if (s.metrics_error) {
      obs.missing.push_back(where + *s.metrics_error);
      continue;
    }
    if (!s.view.reported.count(id)) {
      obs.missing.push_back(where + "its owner " + owner + " does not report it on " +
                            std::string(kMetricsPath));
      continue;
    }
    const auto key = std::make_pair(owner, id);
    const auto prev = previous_.find(key);
    Sample sample;
    sample.at = obs.at;
    auto appended = s.view.appended.find(id);
    const bool has_counter = appended != s.view.appended.end();
    if (has_counter) sample.appended = appended->second;

    PartitionLoad load;
    load.id = info.id;
    load.active = info.active();
    for (const auto& parent : info.parents) load.parents.push_back(parent);
    auto lag = s.view.lag.find(id);
    if (lag != s.view.lag.end()) load.lag = lag->second;
    if (auto end = s.view.end.find(id); end != s.view.end.end()) load.end = end->second;

    // The shape first: its counters are kept for the next diff even when this time's rate is
    // unknown.
    std::optional<std::string> no_shape;
    switch (s.admin_state) {
      case PodScrape::Admin::kAbsent:
        break;
      case PodScrape::Admin::kFailed:
        no_shape = s.admin_error + " (load shape unknown)";
        break;
      case PodScrape::Admin::kOk: {
        auto ap = s.admin_partitions.find(id);
        if (ap == s.admin_partitions.end()) {
          no_shape = "its owner " + owner + " does not list it on " + std::string(kAdminPath);
          break;
        }
        if (prev != previous_.end() && prev->second.has_admin) {
          const HashLoad shape = DiffHashLoad(prev->second.admin, ap->second);
          load.buckets = shape.buckets;
          load.top_hash = shape.top_hash;
          load.top_share = shape.top_share;
        }
        sample.has_admin = true;
        sample.admin = std::move(ap->second);
        break;
      }
    }

    if (load.active) {
      std::optional<std::string> no_rate;
      if (!has_counter) {
        no_rate = "its owner " + owner + " has no " + std::string(kAppended);
      } else if (prev == previous_.end()) {
        no_rate = "no earlier sample at " + owner + " to take a rate from";
      } else if (sample.appended < prev->second.appended) {
        no_rate = std::string(kAppended) + " at " + owner + " went down (the sidecar restarted?)";
      } else if (obs.at <= prev->second.at) {
        no_rate = "no time passed since the earlier sample";
      } else {
        const std::chrono::duration<double> dt = obs.at - prev->second.at;
        load.rate = (sample.appended - prev->second.appended) / dt.count();
      }
      if (no_rate) {
        // Not observed: no made-up rate. The new counters stay for the next Observe. A partition
        // new at a pod that answered last time (a split or merge there) is young, not unseen:
        // it gets a rate next time and is not reported missing (missing blocks scale-down).
        const bool young = has_counter && prev == previous_.end() && answered_before.count(owner);
        if (!young) obs.missing.push_back(where + *no_rate);
        if (has_counter) next[key] = std::move(sample);
        continue;
      }
    }
    if (no_shape) obs.missing.push_back(where + *no_shape);
    next[key] = std::move(sample);
    obs.partitions[info.id] = load;
  }
  previous_ = std::move(next);

  // What each pod's consumers took, per group, and what waited for them.
  std::map<std::string, std::map<uint32_t, uint64_t>> group_lag;  // group -> partition -> lag
  for (const auto& info : map.partitions()) {
    auto sit = scrapes.find(info.owner.value());
    if (sit == scrapes.end() || sit->second.metrics_error) continue;
    auto lags = sit->second.view.group_lag.find(info.id.value());
    if (lags == sit->second.view.group_lag.end()) continue;
    for (const auto& [group, l] : lags->second) group_lag[group][info.id.value()] = l;
  }
  // Each pod's data volume, where its sidecar reports one.
  for (const auto& [name, s] : scrapes) {
    if (s.metrics_error || !s.view.disk_free || !s.view.disk_reserve || !s.view.disk_in_use) {
      continue;
    }
    obs.disks[name] = {*s.view.disk_free, *s.view.disk_reserve, *s.view.disk_in_use >= 1};
  }
  std::map<std::pair<std::string, std::string>, Delivered> next_delivered;
  for (const auto& [name, s] : scrapes) {
    if (s.metrics_error) continue;
    for (const auto& [group, count] : s.view.delivered) {
      const auto key = std::make_pair(name, group);
      Delivered& now = next_delivered[key];
      now = {count, obs.at, std::nullopt};
      if (auto b = s.view.busy.find(group); b != s.view.busy.end()) now.busy = b->second;
      const auto prev = previous_delivered_.find(key);
      if (prev == previous_delivered_.end() || count < prev->second.count ||
          obs.at <= prev->second.at) {
        continue;  // no earlier sample, or the sidecar restarted
      }
      const std::chrono::duration<double> dt = obs.at - prev->second.at;
      ConsumerLoad& c = obs.consumers[name][group];
      c.delivered_rate = (count - prev->second.count) / dt.count();
      c.backlog = ServedBacklog(map, name, group_lag[group]);
      c.interval_s = dt.count();
      // Its busy time over the same interval, when both samples have it and it did not go down.
      if (now.busy && prev->second.busy && *now.busy >= *prev->second.busy) {
        c.busy = (*now.busy - *prev->second.busy) / dt.count();
      }
    }
  }
  previous_delivered_ = std::move(next_delivered);

  // Forget the clients of addresses no pod has any more (their pods are gone).
  {
    std::lock_guard<std::mutex> clients_lock(clients_mu_);
    std::erase_if(clients_, [&](const auto& c) { return !addresses.count(c.first); });
  }
  return obs;
}

Result<AdminPartitionsReport> MetricsObserver::PartitionsOf(const PodInfo& pod) {
  std::future<Answer> pending = StartGet(pod.address.admin, std::string(kAdminPath), true);
  Answer a = Wait(pending, Deadline());
  const std::string what = pod.name.value() + ": " + std::string(kAdminPath);
  if (auto failure = Failure(pod.name.value(), kAdminPath, a.status, a.body, a.error)) {
    if (a.status == 404) return Status::NotFound(*failure);
    if (a.status == 401) return Status::Unauthenticated(*failure);
    return Status::Unavailable(*failure);
  }
  auto report = ParseAdminPartitions(a.body);
  if (!report.ok()) return report.status().Annotate(what);
  return report;
}

}  // namespace shoal::control
