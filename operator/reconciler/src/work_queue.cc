#include "shoal/reconciler/work_queue.h"

#include <algorithm>

namespace shoal::reconciler {

WorkQueue::WorkQueue(Clock& clock, std::chrono::milliseconds backoff_start,
                     std::chrono::milliseconds backoff_max)
    : clock_(clock), backoff_start_(backoff_start), backoff_max_(backoff_max) {}

void WorkQueue::Insert(const std::string& key) {
  if (shutting_down_ || !dirty_.insert(key).second) return;
  if (!processing_.count(key)) queue_.push_back(key);
}

void WorkQueue::Add(const std::string& key) {
  {
    MutexLock lock(mu_);
    Insert(key);
  }
  cv_.notify_all();
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  {
    MutexLock lock(mu_);
    if (shutting_down_) return;
    not_before_[key] = clock_.SteadyNow() + delay;
    Insert(key);
  }
  cv_.notify_all();
}

std::chrono::milliseconds WorkQueue::AddRateLimited(const std::string& key) {
  std::chrono::milliseconds delay;
  {
    MutexLock lock(mu_);
    const int n = ++failures_[key];
    // The shift stops at 2^16: past it any sane backoff_max is reached, and the product cannot
    // overflow.
    delay = std::min<std::chrono::milliseconds>(backoff_start_ * (1LL << std::min(n - 1, 16)),
                                                backoff_max_);
    if (shutting_down_) return delay;
    not_before_[key] = clock_.SteadyNow() + delay;
    Insert(key);
  }
  cv_.notify_all();
  return delay;
}

void WorkQueue::Forget(const std::string& key) {
  MutexLock lock(mu_);
  failures_.erase(key);
}

std::optional<std::string> WorkQueue::TakeReady(std::chrono::steady_clock::time_point now,
                                                std::chrono::steady_clock::time_point* next_ready) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    auto delay = not_before_.find(*it);
    if (delay != not_before_.end() && delay->second > now) {
      *next_ready = std::min(*next_ready, delay->second);
      continue;
    }
    std::string key = std::move(*it);
    queue_.erase(it);
    if (delay != not_before_.end()) not_before_.erase(delay);
    dirty_.erase(key);
    processing_.insert(key);
    return key;
  }
  return std::nullopt;
}

std::optional<std::string> WorkQueue::Get(std::chrono::milliseconds max_wait) {
  const auto give_up = std::chrono::steady_clock::now() + max_wait;
  MutexLock lock(mu_);
  while (!shutting_down_) {
    const auto now = clock_.SteadyNow();
    auto next_ready = std::chrono::steady_clock::time_point::max();
    if (auto key = TakeReady(now, &next_ready)) return key;
    const auto left = give_up - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    auto wait = std::min<std::chrono::steady_clock::duration>(kRecheck, left);
    if (next_ready != std::chrono::steady_clock::time_point::max()) {
      wait = std::min(wait, next_ready - now);
    }
    cv_.wait_for(lock, wait);
  }
  return std::nullopt;
}

std::optional<std::string> WorkQueue::Get() {
  while (!ShuttingDown()) {
    if (auto key = Get(std::chrono::hours(1))) return key;
  }
  return std::nullopt;
}

void WorkQueue::Done(const std::string& key) {
  {
    MutexLock lock(mu_);
    processing_.erase(key);
    if (!dirty_.count(key)) return;
    queue_.push_back(key);
  }
  cv_.notify_all();
}

size_t WorkQueue::Len() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void WorkQueue::ShutDown() {
  {
    MutexLock lock(mu_);
    shutting_down_ = true;
  }
  cv_.notify_all();
}

bool WorkQueue::ShuttingDown() const {
  MutexLock lock(mu_);
  return shutting_down_;
}

}  // namespace shoal::reconciler
