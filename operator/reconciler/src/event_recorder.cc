#include "shoal/reconciler/event_recorder.h"

#include <atomic>
#include <cstdio>

#include "shoal/common/logging.h"

namespace shoal::reconciler {

using kubeapi::Json;
using web::json::value;

EventRecorder::EventRecorder(kubeapi::KubeClient& client, Clock& clock,
                             EventRecorderOptions options)
    : client_(client), clock_(clock), opts_(std::move(options)) {}

void EventRecorder::Event(const Json& regarding, const std::string& type, const std::string& reason,
                          const std::string& action, const std::string& note) {
  const int64_t now = clock_.NowMs();
  const std::string key = kubeapi::Namespace(regarding) + "/" + kubeapi::Uid(regarding) + "|" +
                          type + "|" + reason + "|" + action;
  if (GrowSeries(key, regarding, reason, note, now)) return;
  CreateEvent(key, regarding, type, reason, action, note, now);
}

bool EventRecorder::GrowSeries(const std::string& key, const Json& regarding,
                               const std::string& reason, const std::string& note, int64_t now) {
  std::string name;
  int64_t count = 0;
  {
    MutexLock lock(mu_);
    // Series that ended are forgotten (bounded by the objects and their kinds of events).
    std::erase_if(series_, [&](const auto& entry) {
      return now - entry.second.last_ms > kSeriesWindow.count();
    });
    auto found = series_.find(key);
    if (found == series_.end()) return false;
    Series& series = found->second;
    ++series.count;
    series.last_ms = now;
    name = series.name;
    count = series.count;
  }
  value patch = value::object();
  patch["series"]["count"] = value::number(count);
  patch["series"]["lastObservedTime"] = value::string(kubeapi::FormatTime(now, 6));
  patch["note"] = value::string(note.substr(0, 1024));
  auto r = client_.MergePatch(kubeapi::Events(), kubeapi::Namespace(regarding), name, patch);
  if (r.ok()) return true;
  if (!r.error().IsNotFound()) {
    Logger("operator")
        ->warn("event {} on {} (series of {}): {}", reason, kubeapi::Name(regarding), count,
               r.error().ToString());
    return true;  // dropped, not made again as a new Event
  }
  // Gone (expired or deleted): a new Event starts a new series.
  MutexLock lock(mu_);
  series_.erase(key);
  return false;
}

void EventRecorder::CreateEvent(const std::string& key, const Json& regarding,
                                const std::string& type, const std::string& reason,
                                const std::string& action, const std::string& note, int64_t now) {
  // Process-wide, so that two recorders of one process never make one name in one millisecond.
  static std::atomic<uint64_t> seq{0};
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".%llx",
                static_cast<unsigned long long>(now * 1'000'000 + (seq.fetch_add(1) % 1'000'000)));
  const std::string ns = kubeapi::Namespace(regarding);
  const std::string name = kubeapi::Name(regarding) + suffix;
  value e = value::object();
  e["apiVersion"] = value::string("events.k8s.io/v1");
  e["kind"] = value::string("Event");
  e["metadata"]["name"] = value::string(name);
  e["metadata"]["namespace"] = value::string(ns);
  e["eventTime"] = value::string(kubeapi::FormatTime(now, 6));
  e["reportingController"] = value::string(opts_.controller);
  e["reportingInstance"] = value::string(opts_.instance.substr(0, 128));
  e["action"] = value::string(action);
  e["reason"] = value::string(reason);
  e["type"] = value::string(type);
  e["note"] = value::string(note.substr(0, 1024));
  e["regarding"]["apiVersion"] = value::string(opts_.regarding_api_version);
  e["regarding"]["kind"] = value::string(opts_.regarding_kind);
  e["regarding"]["name"] = value::string(kubeapi::Name(regarding));
  e["regarding"]["namespace"] = value::string(ns);
  e["regarding"]["uid"] = value::string(kubeapi::Uid(regarding));
  auto r = client_.Create(kubeapi::Events(), ns, e);
  if (!r.ok()) {
    Logger("operator")
        ->warn("event {} on {}: {}", reason, kubeapi::Name(regarding), r.error().ToString());
    return;
  }
  MutexLock lock(mu_);
  series_[key] = Series{.name = name, .count = 1, .last_ms = now};
}

}  // namespace shoal::reconciler
