// WorkQueue: the keys ("ns/name") waiting to be reconciled, in the shape of client-go's
// rate-limited work queue (k8s.io/client-go/util/workqueue).
//
//   - A key is queued at most once however often it is added (informer events come in bursts).
//   - A key handed out by Get is processing until Done. Added again meanwhile, it is not handed
//     to a second worker: it is marked dirty and queued again by Done, so the change that came
//     during the reconcile is looked at by one more reconcile, never lost and never concurrent.
//   - A key may carry a time before which Get does not hand it out: AddAfter sets it,
//     AddRateLimited sets it from the key's failures (start, 2 x start, ... up to max), Forget
//     resets the failures. Unlike client-go, adding a key that waits out such a delay does not
//     cut it short: a failing topic is retried at its backoff's pace however often its
//     informers see it change (what the operator did before this type, kept on purpose).
//
// Time is the injected Clock's (SteadyNow), so backoff and delays are deterministic in tests.
// The Clock has no timers: a Get waiting for a delayed key looks at the clock again at least
// every kRecheck of real time, which is how it notices a ManualClock moved by a test.
//
// Thread-safe (one mutex, never held across a call out). Owned by its user (TopicOperator);
// the clock outlives it.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "shoal/common/clock.h"
#include "shoal/common/thread_annotations.h"

namespace shoal::reconciler {

class WorkQueue {
 public:
  // Longest real-time wait of a Get between two looks at the clock.
  static constexpr std::chrono::milliseconds kRecheck{200};

  WorkQueue(Clock& clock, std::chrono::milliseconds backoff_start,
            std::chrono::milliseconds backoff_max);
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` (ready now, unless it waits out a delay). Ignored after ShutDown.
  void Add(const std::string& key);
  // Queues `key`, not to be handed out before `delay` from now (replacing a delay it had).
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  // Counts a failure of `key` and queues it after its backoff: backoff_start doubled per
  // failure since the last Forget, at most backoff_max. Returns that delay.
  std::chrono::milliseconds AddRateLimited(const std::string& key);
  // Forgets the failures of `key`: its next AddRateLimited waits backoff_start again.
  void Forget(const std::string& key);

  // The next key ready to be handed out (queued longest first), now processing. Blocks until
  // one is ready, `max_wait` of real time passed, or the queue shut down (nullopt for both).
  std::optional<std::string> Get(std::chrono::milliseconds max_wait);
  // Blocks until a key is ready or the queue shut down (nullopt).
  std::optional<std::string> Get();
  // The caller is finished with `key` (from Get); a key added meanwhile is queued again.
  void Done(const std::string& key);

  // Keys queued, ready or waiting out a delay (not those processing).
  size_t Len() const;
  // Wakes every Get (they return nullopt) and drops later adds. Queued keys are not drained.
  void ShutDown();
  bool ShuttingDown() const;

 private:
  // Queues `key` unless it is queued or processing (then it is dirty: Done queues it).
  void Insert(const std::string& key) REQUIRES(mu_);
  // The first queued key whose delay passed, taken off the queue; nullopt when none is, with
  // *next_ready the earliest delay's end (unchanged when no key waits).
  std::optional<std::string> TakeReady(std::chrono::steady_clock::time_point now,
                                       std::chrono::steady_clock::time_point* next_ready)
      REQUIRES(mu_);

  Clock& clock_;
  const std::chrono::milliseconds backoff_start_;
  const std::chrono::milliseconds backoff_max_;

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::string> queue_ GUARDED_BY(mu_);     // in the order they were queued
  std::set<std::string> dirty_ GUARDED_BY(mu_);       // to be processed (again): queued or not
  std::set<std::string> processing_ GUARDED_BY(mu_);  // handed out, not Done yet
  std::map<std::string, std::chrono::steady_clock::time_point> not_before_ GUARDED_BY(mu_);
  std::map<std::string, int> failures_ GUARDED_BY(mu_);  // since the last Forget
  bool shutting_down_ GUARDED_BY(mu_) = false;
};

}  // namespace shoal::reconciler
