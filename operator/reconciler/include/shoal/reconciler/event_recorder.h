// EventRecorder: Kubernetes Events (events.k8s.io/v1) about objects of one kind, in the shape of
// client-go's tools/events recorder.
//
// Isomorphic Events (same object, type, reason and action) within kSeriesWindow form a series,
// as client-go makes them: the first is created, the next ones patch its series.count and
// lastObservedTime (and its note to the latest), so a busy topic has one Event per kind of thing
// that happens, not one per decision. A series whose Event is gone (expired, deleted) starts
// again with a new Event. A failed write is logged and dropped: an Event is never worth a retry
// of the work that caused it.
//
// Thread-safe (one mutex, never held across a request). Owned by its user (TopicOperator); the
// client and clock outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "shoal/common/clock.h"
#include "shoal/common/thread_annotations.h"
#include "shoal/kubeapi/kube_client.h"

namespace shoal::reconciler {

struct EventRecorderOptions {
  std::string controller;  // reportingController, e.g. "shoal.dev/operator"
  std::string instance;    // reportingInstance: this process (cut to 128 characters)
  // What the Events are about (regarding's apiVersion and kind).
  std::string regarding_api_version;
  std::string regarding_kind;
};

class EventRecorder {
 public:
  // client-go tools/events: isomorphic events observed within 6 minutes form one series.
  static constexpr std::chrono::milliseconds kSeriesWindow{6 * 60 * 1000};

  EventRecorder(kubeapi::KubeClient& client, Clock& clock, EventRecorderOptions options);
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Records an Event about `regarding` (an object of the configured kind): `type` "Normal" or
  // "Warning", `reason` and `action` in CamelCase, `note` for humans (cut to 1 KiB).
  void Event(const kubeapi::Json& regarding, const std::string& type, const std::string& reason,
             const std::string& action, const std::string& note);

 private:
  struct Series {
    std::string name;  // of its Event
    int64_t count = 1;
    int64_t last_ms = 0;
  };

  // Grows the series `key` names, if one runs: true when its Event took the patch.
  bool GrowSeries(const std::string& key, const kubeapi::Json& regarding, const std::string& reason,
                  const std::string& note, int64_t now);
  void CreateEvent(const std::string& key, const kubeapi::Json& regarding, const std::string& type,
                   const std::string& reason, const std::string& action, const std::string& note,
                   int64_t now);

  kubeapi::KubeClient& client_;
  Clock& clock_;
  const EventRecorderOptions opts_;

  Mutex mu_;
  // The Events that can grow a series: key (namespace, uid, type, reason, action) -> its Event.
  std::map<std::string, Series> series_ GUARDED_BY(mu_);
};

}  // namespace shoal::reconciler
