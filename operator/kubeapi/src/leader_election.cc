#include "shoal/kubeapi/leader_election.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <random>
#include <utility>

#include "shoal/common/logging.h"

namespace shoal::kubeapi {

namespace {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

std::shared_ptr<spdlog::logger> Log() { return Logger("leader-election"); }

// Durations go into leaseDurationSeconds rounded up, so that nobody waits less than meant.
int64_t CeilSeconds(milliseconds d) { return (d.count() + 999) / 1000; }

// A random (version 4) UUID: the identity must differ between restarts of the same pod, so
// that a new process never mistakes its predecessor's lease for its own.
std::string RandomUuid() {
  std::random_device rd;
  std::array<uint8_t, 16> b{};
  for (size_t i = 0; i < b.size(); i += 4) {
    const uint32_t r = rd();
    for (size_t j = 0; j < 4; ++j) b[i + j] = static_cast<uint8_t>(r >> (8 * j));
  }
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b[i] >> 4];
    out += kHex[b[i] & 0x0f];
  }
  return out;
}

std::string DefaultIdentity() {
  std::array<char, 256> host{};
  std::string name = "unknown";
  if (gethostname(host.data(), host.size() - 1) == 0 && host[0] != '\0') name = host.data();
  return name + "_" + RandomUuid();
}

std::string StringAt(const Json& lease, const std::string& dotted) {
  const Json v = At(lease, dotted);
  return v.is_string() ? v.as_string() : "";
}

int64_t IntAt(const Json& lease, const std::string& dotted) {
  const Json v = At(lease, dotted);
  return v.is_number() ? v.as_number().to_int64() : 0;
}

// The spec object of `lease`, made an object when it is missing or malformed.
Json& SpecOf(Json& lease) {
  if (!lease.has_field("spec") || !lease.at("spec").is_object()) lease["spec"] = Json::object();
  return lease["spec"];
}

}  // namespace

Result<std::unique_ptr<LeaderElector>> LeaderElector::Create(KubeClient& client,
                                                             LeaderElectionOptions options,
                                                             const Clock& clock) {
  if (options.ns.empty()) return Status::InvalidArgument("leader election: empty namespace");
  if (options.lease_name.empty()) {
    return Status::InvalidArgument("leader election: empty lease name");
  }
  if (options.retry_period <= milliseconds::zero()) {
    return Status::InvalidArgument("leader election: retry_period must be positive");
  }
  if (options.lease_duration <= options.renew_deadline) {
    return Status::InvalidArgument("leader election: lease_duration (" +
                                   std::to_string(options.lease_duration.count()) +
                                   " ms) must be longer than renew_deadline (" +
                                   std::to_string(options.renew_deadline.count()) + " ms)");
  }
  // renew_deadline > 1.2 x retry_period, in integers.
  if (options.renew_deadline.count() * 5 <= options.retry_period.count() * 6) {
    return Status::InvalidArgument("leader election: renew_deadline (" +
                                   std::to_string(options.renew_deadline.count()) +
                                   " ms) must be longer than 1.2 x retry_period (" +
                                   std::to_string(options.retry_period.count()) + " ms)");
  }
  if (options.identity.empty()) options.identity = DefaultIdentity();
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, std::move(options), clock));
}

LeaderElector::LeaderElector(KubeClient& client, LeaderElectionOptions options, const Clock& clock)
    : client_(client), opts_(std::move(options)), clock_(clock) {}

bool LeaderElector::is_leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leading_ && clock_.SteadyNow() - last_renew_ < opts_.renew_deadline;
}

void LeaderElector::ObserveLocked(const Json& lease, SteadyTime seen_at) {
  const std::string rv = ResourceVersion(lease);
  const std::string holder = StringAt(lease, "spec.holderIdentity");
  // Only a change restarts the expiry: a holder that renews changes the RV every time, a dead
  // one leaves it as it was.
  if (rv != observed_rv_ || holder != observed_holder_) observed_at_ = seen_at;
  observed_rv_ = rv;
  observed_holder_ = holder;
  observed_duration_ = milliseconds(IntAt(lease, "spec.leaseDurationSeconds") * 1000);
}

bool LeaderElector::ExpiredLocked(SteadyTime now) const {
  return now - observed_at_ >= std::max(opts_.lease_duration, observed_duration_);
}

bool LeaderElector::TryAcquireOrRenew() {
  // Taken before any request: the write that renews lands after this, so the leader's deadline
  // counts from no later than the moment the others see the renewal.
  const SteadyTime attempt_start = clock_.SteadyNow();

  auto got = client_.Get(Leases(), opts_.ns, opts_.lease_name);
  // The moment of the decision, after the read: a candidate's expiry errs on the late side,
  // and the times written are this moment's (the wall clock read second, so never earlier).
  const SteadyTime seen = clock_.SteadyNow();
  const std::string now = FormatTime(clock_.NowMs(), 6);
  if (!got.ok()) {
    if (!got.error().IsNotFound()) {
      Log()->warn("msg=\"cannot read the lease\" lease={}/{} error=\"{}\"", opts_.ns,
                  opts_.lease_name, got.error().ToString());
      return false;
    }
    Json lease = Json::object();
    lease["apiVersion"] = Json::string(Leases().api_version());
    lease["kind"] = Json::string(Leases().kind);
    lease["metadata"]["name"] = Json::string(opts_.lease_name);
    lease["metadata"]["namespace"] = Json::string(opts_.ns);
    Json& spec = lease["spec"];
    spec["holderIdentity"] = Json::string(opts_.identity);
    spec["leaseDurationSeconds"] = Json::number(CeilSeconds(opts_.lease_duration));
    spec["acquireTime"] = Json::string(now);
    spec["renewTime"] = Json::string(now);
    spec["leaseTransitions"] = Json::number(0);
    auto created = client_.Create(Leases(), opts_.ns, lease);
    if (!created.ok()) {
      // AlreadyExists: another candidate created it first; the next attempt reads it.
      if (!created.error().IsAlreadyExists()) {
        Log()->warn("msg=\"cannot create the lease\" lease={}/{} error=\"{}\"", opts_.ns,
                    opts_.lease_name, created.error().ToString());
      }
      return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ObserveLocked(created.value(), clock_.SteadyNow());
    last_renew_ = attempt_start;
    return true;
  }

  Json lease = std::move(got).value();
  const std::string holder = StringAt(lease, "spec.holderIdentity");
  const bool mine = holder == opts_.identity;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ObserveLocked(lease, seen);
    if (!holder.empty() && !mine && !ExpiredLocked(seen)) return false;
  }

  const int64_t transitions = IntAt(lease, "spec.leaseTransitions");
  Json& spec = SpecOf(lease);
  spec["holderIdentity"] = Json::string(opts_.identity);
  spec["leaseDurationSeconds"] = Json::number(CeilSeconds(opts_.lease_duration));
  spec["renewTime"] = Json::string(now);
  if (!mine) {
    spec["acquireTime"] = Json::string(now);
    spec["leaseTransitions"] = Json::number(transitions + 1);
    Log()->info("msg=\"taking the lease\" lease={}/{} from=\"{}\" identity={}", opts_.ns,
                opts_.lease_name, holder, opts_.identity);
  }
  // The PUT carries the RV read: of two candidates taking an expired lease one gets 409.
  auto updated = client_.Update(Leases(), opts_.ns, opts_.lease_name, lease);
  if (!updated.ok()) {
    if (!updated.error().IsConflict()) {
      Log()->warn("msg=\"cannot write the lease\" lease={}/{} error=\"{}\"", opts_.ns,
                  opts_.lease_name, updated.error().ToString());
    }
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ObserveLocked(updated.value(), clock_.SteadyNow());
  last_renew_ = attempt_start;
  return true;
}

void LeaderElector::Release() {
  auto got = client_.Get(Leases(), opts_.ns, opts_.lease_name);
  if (!got.ok()) {
    Log()->warn("msg=\"cannot read the lease to release it\" lease={}/{} error=\"{}\"", opts_.ns,
                opts_.lease_name, got.error().ToString());
    return;
  }
  Json lease = std::move(got).value();
  if (StringAt(lease, "spec.holderIdentity") != opts_.identity) return;  // not ours any more
  Json& spec = SpecOf(lease);
  spec["holderIdentity"] = Json::string("");
  spec["leaseDurationSeconds"] = Json::number(1);
  auto updated = client_.Update(Leases(), opts_.ns, opts_.lease_name, lease);
  if (!updated.ok()) {
    Log()->warn("msg=\"cannot release the lease\" lease={}/{} error=\"{}\"", opts_.ns,
                opts_.lease_name, updated.error().ToString());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ObserveLocked(updated.value(), clock_.SteadyNow());
  Log()->info("msg=\"released the lease\" lease={}/{} identity={}", opts_.ns, opts_.lease_name,
              opts_.identity);
}

void LeaderElector::Wait(const std::atomic<bool>& stop, milliseconds period) {
  // Nobody can notify us when the caller's flag flips, so the wait is cut into kStopPoll slices
  // that look at it; the predicate also covers spurious wake-ups.
  const auto deadline = std::chrono::steady_clock::now() + period;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return;
    const auto slice = std::min<std::chrono::steady_clock::duration>(deadline - now, kStopPoll);
    cv_.wait_for(lock, slice, [&] { return stop.load(); });
  }
}

void LeaderElector::Run(const std::atomic<bool>& stop,
                        const std::function<void()>& on_started_leading,
                        const std::function<void()>& on_stopped_leading) {
  while (!stop.load()) {
    const bool held = TryAcquireOrRenew();
    bool started = false;
    bool stopped = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const SteadyTime now = clock_.SteadyNow();
      if (held) {
        started = !leading_;
        leading_ = true;
      } else if (leading_) {
        // Another holder means the lease was taken: stop at once. Otherwise keep trying until
        // renew_deadline, which is shorter than the lease duration the others wait for.
        const bool taken = !observed_holder_.empty() && observed_holder_ != opts_.identity;
        if (taken || now - last_renew_ >= opts_.renew_deadline) {
          leading_ = false;
          stopped = true;
          Log()->warn("msg=\"stopped leading\" lease={}/{} identity={} reason={}", opts_.ns,
                      opts_.lease_name, opts_.identity, taken ? "taken" : "renew_deadline");
        }
      }
    }
    if (started) {
      became_leader_.fetch_add(1);
      Log()->info("msg=\"became leader\" lease={}/{} identity={}", opts_.ns, opts_.lease_name,
                  opts_.identity);
      if (on_started_leading) on_started_leading();
    }
    if (stopped && on_stopped_leading) on_stopped_leading();
    Wait(stop, opts_.retry_period);
  }

  bool was_leading = false;
  bool holds = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_leading = std::exchange(leading_, false);
    holds = observed_holder_ == opts_.identity;
  }
  // The work stops before the release lets another replica start it.
  if (was_leading && on_stopped_leading) on_stopped_leading();
  // Also after giving up at renew_deadline: the Lease may still name us.
  if (holds) Release();
}

}  // namespace shoal::kubeapi
