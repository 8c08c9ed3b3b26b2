// LeaderElector: one leader among the operator's replicas through a coordination.k8s.io/v1
// Lease, as client-go's leaderelection does (reference/kubernetes-api.md "Leader election"):
//   - a candidate reads the Lease; it takes it when it is missing, released (holder empty) or
//     expired, and a lease is expired when the lease duration has passed on the candidate's own
//     clock since the candidate last saw the Lease change (no clocks are compared with the
//     holder's renewTime); the write is a PUT (or POST) with the RV it read, so of two
//     candidates exactly one wins (409 for the other);
//   - the leader renews every retry_period; when it has not renewed for renew_deadline it stops
//     acting (is_leader() turns false and on_stopped_leading runs) before its lease, which lasts
//     lease_duration > renew_deadline, can expire and another can take it;
//   - on a clean stop the leader releases the Lease (holder empty, duration 1 s) so that the
//     next one takes over at once.
// The expiry a candidate waits for is the longer of its own lease_duration and the
// leaseDurationSeconds the holder wrote: the holder stops acting within its renew_deadline, which
// is shorter than the duration it advertises, whatever the candidate's own settings are.
// Expiry and renew deadlines are read on the injected Clock; only the pace of the loop (one
// attempt every retry_period) runs on real time.
//
// Lease spec fields: holderIdentity, leaseDurationSeconds, acquireTime, renewTime (MicroTime),
// leaseTransitions. Verbs used on leases: get, create, update (what
// deploy/rbac/operator-rules.yaml grants). A request that hangs delays on_stopped_leading
// (is_leader() still turns false in time): give the client a request_timeout shorter than
// renew_deadline.
//
// Lifecycle: made by Create, owned by main (or the test), Run until stopped, then destroyed; the
// client and clock outlive it. Thread-safe: Run on one thread; is_leader(), identity() and
// transitions() from any. Not copyable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "shoal/common/clock.h"
#include "shoal/kubeapi/kube_client.h"

namespace shoal::kubeapi {

struct LeaderElectionOptions {
  std::string ns = "default";
  std::string lease_name = "shoal-operator";
  std::string identity;  // hostname_<uuid>; empty: made up at construction
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
};

class LeaderElector {
 public:
  // Checks lease_duration > renew_deadline > 1.2 x retry_period > 0 and non-empty ns and
  // lease_name (InvalidArgument otherwise); makes up the identity when it is empty.
  static Result<std::unique_ptr<LeaderElector>> Create(KubeClient& client,
                                                       LeaderElectionOptions options,
                                                       const Clock& clock);
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Campaigns, leads and renews until `stop` becomes true (seen within kStopPoll); releases the
  // Lease if it holds it. on_started_leading runs on this thread when it becomes leader and must
  // return quickly (start the work elsewhere); on_stopped_leading runs on this thread when it
  // loses or gives up the lease (on stop: before the release, so that the work has stopped
  // before another replica can start it). Call Run once at a time.
  void Run(const std::atomic<bool>& stop, const std::function<void()>& on_started_leading,
           const std::function<void()>& on_stopped_leading);

  // True while this candidate holds the lease and renewed it within renew_deadline (checked on
  // the clock at the call, so a leader cut off from the API server stops acting in time).
  bool is_leader() const;
  const std::string& identity() const { return opts_.identity; }
  // Times it became leader.
  uint64_t transitions() const { return became_leader_.load(); }

  // How often Run looks at its `stop` flag while it waits (the flag cannot wake it).
  static constexpr std::chrono::milliseconds kStopPoll{20};

 private:
  LeaderElector(KubeClient& client, LeaderElectionOptions options, const Clock& clock);
  // One attempt to acquire or renew; true when this candidate holds the lease afterwards.
  bool TryAcquireOrRenew();
  // Gives the lease up when the Lease still names this candidate.
  void Release();
  // Records what the Lease looks like now (rv, holder, duration) and, when that changed, when
  // it was seen.
  void ObserveLocked(const Json& lease, std::chrono::steady_clock::time_point seen_at);
  // The observed holder's lease has run out on this candidate's clock.
  bool ExpiredLocked(std::chrono::steady_clock::time_point now) const;
  // Waits `period` of real time, returning early when `stop` becomes true.
  void Wait(const std::atomic<bool>& stop, std::chrono::milliseconds period);

  KubeClient& client_;
  LeaderElectionOptions opts_;
  const Clock& clock_;

  mutable std::mutex mu_;  // guards the fields below; never held across a request
  std::condition_variable cv_;
  bool leading_ = false;
  // Taken before the request that renewed, so the deadline errs on the early side.
  std::chrono::steady_clock::time_point last_renew_{};
  // What this candidate last saw of the Lease and when (its own clock).
  std::string observed_rv_;
  std::string observed_holder_;
  std::chrono::milliseconds observed_duration_{0};
  std::chrono::steady_clock::time_point observed_at_{};
  std::atomic<uint64_t> became_leader_{0};
};

}  // namespace shoal::kubeapi
