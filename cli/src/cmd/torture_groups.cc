#include "cmd/torture_groups.h"

#include <algorithm>

namespace shoal::cli {

void TortureGroup::Start(double rate) {
  std::vector<std::unique_ptr<harness::GroupConsumer>> started;
  for (const auto& target : targets_) {
    harness::ConsumerOptions co;
    co.target = target;
    co.group = name_;
    co.rate = rate;
    co.stop_commit_timeout = std::chrono::seconds(60);  // "retry a commit until it is accepted"
    // The ways a consumer talks to the data plane, all under the same checks: the slow and the
    // backlog groups (which read the most through ranges) in binary batches with each commit
    // carried by the next consume, the late group carrying its commits in JSON, the others
    // with a POST per commit.
    co.carry_commits = role_ == "slow" || role_ == "backlog" || role_ == "late";
    co.binary = role_ == "slow" || role_ == "backlog";
    started.push_back(std::make_unique<harness::GroupConsumer>(co));
    (void)started.back()->Start();  // in memory: cannot fail
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : started) live_.push_back(std::move(c));
  ++instances_;
}

void TortureGroup::Stop() {
  std::vector<std::unique_ptr<harness::GroupConsumer>> stopping;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping.swap(live_);
  }
  if (stopping.empty()) return;
  std::vector<harness::SeenEvent> seen;
  bool committed = true;
  uint64_t joined = 0;
  for (auto& c : stopping) {
    c->Stop();
    committed = committed && c->committed_all();
    if (c->joined_ns() && (!joined || c->joined_ns() < joined)) joined = c->joined_ns();
    auto s = c->TakeSeen();
    seen.insert(seen.end(), s.begin(), s.end());
  }
  std::lock_guard<std::mutex> lock(mu_);
  committed_all_ = committed_all_ && committed;
  if (joined && (!joined_ns_ || joined < joined_ns_)) joined_ns_ = joined;
  stopped_seen_ += seen.size();
  seen_.insert(seen_.end(), seen.begin(), seen.end());
}

void TortureGroup::SetRate(double rate) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : live_) c->SetRate(rate);
}

bool TortureGroup::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !live_.empty();
}

uint64_t TortureGroup::seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = stopped_seen_;
  for (const auto& c : live_) n += c->seen();
  return n;
}

uint64_t TortureGroup::joined_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t joined = joined_ns_;
  for (const auto& c : live_) {
    if (c->joined_ns() && (!joined || c->joined_ns() < joined)) joined = c->joined_ns();
  }
  return joined;
}

int TortureGroup::instances() const {
  std::lock_guard<std::mutex> lock(mu_);
  return instances_;
}

bool TortureGroup::committed_all() const {
  std::lock_guard<std::mutex> lock(mu_);
  return committed_all_;
}

harness::VerifyReport TortureGroup::Verify(const std::vector<harness::AckedEvent>& acked,
                                           uint64_t origin_ns) {
  Stop();
  std::vector<harness::SeenEvent> seen;
  uint64_t joined = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seen = seen_;
    joined = joined_ns_;
  }
  return harness::Verify(acked, std::move(seen),
                         role_ == "late" ? std::max<uint64_t>(joined, 1) : 0, origin_ns);
}

}  // namespace shoal::cli
