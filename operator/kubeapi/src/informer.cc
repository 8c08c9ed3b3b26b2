// Informer: list, then watch from the list's resourceVersion; re-watch from the last RV seen when
// a stream ends; list again (and report the difference) when the watch fails or the history
// it needs is gone (410 Expired).
//
// Why no change is missed: every event and bookmark moves rv_ forward, and the server sends
// "every change after RV x" to a watch from x, so a re-watch from rv_ continues exactly where
// the previous stream stopped. When that history is gone the relist compares the fresh list
// with the cache: what is new is ADDED, what has another RV is MODIFIED, and what is missing
// was deleted while nobody watched (DELETED with the last state the cache knew).
#include "shoal/kubeapi/informer.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "shoal/common/logging.h"

namespace shoal::kubeapi {
namespace {

std::string Key(const Json& object) { return Namespace(object) + "/" + Name(object); }

// Waits `d`, returning early once `stop` is set (checked every 50 ms).
void SleepUnlessStopped(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  const auto deadline = std::chrono::steady_clock::now() + d;
  while (!stop.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(50)));
  }
}

}  // namespace

Informer::Informer(KubeClient& client, ResourceKind kind, InformerOptions options, Handler handler)
    : client_(client),
      kind_(std::move(kind)),
      opts_(std::move(options)),
      handler_(std::move(handler)) {}

void Informer::Run(const std::atomic<bool>& stop) {
  auto log = Logger("kube");
  std::chrono::milliseconds backoff = opts_.backoff;
  auto back_off = [&] {
    SleepUnlessStopped(backoff, stop);
    backoff = std::min(backoff * 2, opts_.backoff_max);
  };
  bool need_list = true;
  while (!stop.load()) {
    if (need_list) {
      const ApiError err = Relist();
      if (err.code != 0 || !err.reason.empty()) {
        log->warn("msg=\"list failed; backing off\" path={} error=\"{}\"",
                  kind_.CollectionPath(opts_.ns), err.ToString());
        back_off();
        continue;
      }
      need_list = false;
      backoff = opts_.backoff;
    }
    WatchOptions wo;
    wo.resource_version = resource_version();
    wo.label_selector = opts_.label_selector;
    wo.bookmarks = true;
    wo.timeout = opts_.watch_timeout;
    const ApiError err = client_.Watch(
        kind_, opts_.ns, wo,
        [this](const WatchEvent& ev) {
          if (ev.type == "BOOKMARK") {
            const std::string rv = ResourceVersion(ev.object);
            if (!rv.empty()) {
              std::lock_guard<std::mutex> lock(mu_);
              rv_ = rv;
            }
            return;
          }
          Apply(ev.type, ev.object);
        },
        stop);
    if (stop.load()) break;
    if (err.code == 0 && err.reason.empty()) {
      backoff = opts_.backoff;
      continue;  // the stream ended (timeout, server restart): watch again from rv_
    }
    if (err.IsGone()) {
      log->info("msg=\"watch history expired; relisting\" path={} rv={} error=\"{}\"",
                kind_.CollectionPath(opts_.ns), wo.resource_version, err.message);
    } else {
      log->warn("msg=\"watch failed; relisting\" path={} rv={} error=\"{}\"",
                kind_.CollectionPath(opts_.ns), wo.resource_version, err.ToString());
    }
    need_list = true;
    back_off();
  }
}

ApiError Informer::Relist() {
  auto list = client_.List(kind_, opts_.ns, ListOptions{.label_selector = opts_.label_selector});
  if (!list.ok()) return list.error();
  std::map<std::string, Json> fresh;
  const Json items = At(list.value(), "items");
  if (items.is_array()) {
    for (const auto& item : items.as_array()) {
      Json object = item;
      // Items of a list carry no kind; handlers compare objects with watch events', which do.
      if (object.is_object() && !object.has_field("kind")) {
        object["kind"] = Json::string(kind_.kind);
        object["apiVersion"] = Json::string(kind_.api_version());
      }
      fresh.emplace(Key(object), std::move(object));
    }
  }
  std::vector<std::pair<std::string, Json>> events;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, object] : fresh) {
      auto old = cache_.find(key);
      if (old == cache_.end()) {
        events.emplace_back("ADDED", object);
      } else if (ResourceVersion(old->second) != ResourceVersion(object)) {
        events.emplace_back("MODIFIED", object);
      }
    }
    for (const auto& [key, object] : cache_) {
      if (fresh.count(key) == 0) events.emplace_back("DELETED", object);
    }
    cache_ = std::move(fresh);
    rv_ = ResourceVersion(list.value());
    first = !synced_;
  }
  lists_.fetch_add(1);
  for (const auto& [type, object] : events) handler_(type, object);
  if (first) {
    // Synced once the handler has seen the first list, so that a caller of WaitForSync knows
    // every object of it was delivered.
    {
      std::lock_guard<std::mutex> lock(mu_);
      synced_ = true;
    }
    synced_cv_.notify_all();
  }
  return ApiError{};
}

void Informer::Apply(const std::string& type, const Json& object) {
  std::string effective = type;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string rv = ResourceVersion(object);
    if (!rv.empty()) rv_ = rv;
    const std::string key = Key(object);
    auto it = cache_.find(key);
    if (type == "DELETED") {
      if (it != cache_.end()) cache_.erase(it);
    } else if (type == "ADDED" || type == "MODIFIED") {
      if (it != cache_.end()) {
        // A synthetic ADDED of something the cache already has (a watch from RV "0").
        if (ResourceVersion(it->second) == rv) return;
        effective = "MODIFIED";
      } else {
        effective = "ADDED";
      }
      cache_[key] = object;
    } else {
      return;  // an event type this informer does not know
    }
  }
  handler_(effective, object);
}

bool Informer::synced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return synced_cv_.wait_for(lock, timeout, [this] { return synced_; });
}

std::optional<Json> Informer::Get(const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(ns + "/" + name);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> Informer::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Json> out;
  out.reserve(cache_.size());
  for (const auto& [key, object] : cache_) out.push_back(object);
  return out;
}

std::string Informer::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

}  // namespace shoal::kubeapi
