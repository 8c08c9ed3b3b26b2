// QuorumTracker: the leader's side of one replicated partition: what each follower last said it
// holds, and the high watermark a quorum of the copies reaches (common/replication.h).
//
// A producing thread waits here for its events to be held by a quorum (acks: quorum) after it
// let go of the topic's map lock, so the tracker is shared (std::shared_ptr) between the
// Partition and such waiters and outlives a partition retired meanwhile: Close wakes them.
// Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/replication.h"
#include "shoal/common/status.h"
#include "shoal/common/thread_annotations.h"

namespace shoal::broker {

class QuorumTracker {
 public:
  // The followers the map names; one that is new starts at 0 (nothing held), one that left is
  // forgotten. Returns whether the followers' mark moved.
  bool SetFollowers(const std::vector<PodName>& followers) {
    MutexLock lock(mu_);
    std::map<std::string, uint64_t> next;
    for (const auto& f : followers) {
      auto it = ends_.find(f.value());
      next[f.value()] = it == ends_.end() ? 0 : it->second;
    }
    ends_ = std::move(next);
    return Recompute();
  }
  // Whether the map names followers (the partition is replicated).
  bool replicated() const { return replicated_.load(std::memory_order_acquire); }
  bool Follows(const std::string& pod) const {
    MutexLock lock(mu_);
    return ends_.count(pod) > 0;
  }
  // A follower's fetch says it holds everything below `end`. Returns whether the mark moved.
  bool Holds(const std::string& pod, uint64_t end) {
    MutexLock lock(mu_);
    auto it = ends_.find(pod);
    if (it == ends_.end() || end <= it->second) return false;
    it->second = end;
    return Recompute();
  }
  // The offset below which enough followers hold every event that, with the leader, they are a
  // quorum; the high watermark is the lesser of this and what the leader holds. UINT64_MAX when
  // the partition has no followers.
  uint64_t followers_mark() const { return mark_.load(std::memory_order_acquire); }
  // What each follower last said it holds (for the admin plane and metrics).
  std::map<std::string, uint64_t> Ends() const {
    MutexLock lock(mu_);
    return ends_;
  }
  // Waits until the followers' mark reaches `end` (the leader holds it already), for at most
  // `timeout`. Unavailable on timeout or once closed.
  Status Await(uint64_t end, std::chrono::milliseconds timeout) {
    MutexLock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!closed_ && mark_.load() < end) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
    }
    if (mark_.load() >= end) return Status::Ok();
    if (closed_) {
      return Status::Unavailable(
          "the partition left this sidecar while its events were being copied; retry");
    }
    size_t have = 1;  // the leader
    for (const auto& [pod, e] : ends_) have += e >= end ? 1 : 0;
    return Status::Unavailable(
        "the events are on the leader but " + std::to_string(have) + " of " +
        std::to_string(ends_.size() + 1) + " replicas hold them, and a quorum of " +
        std::to_string(replication::QuorumOf(ends_.size() + 1)) +
        " must before they are acknowledged; retry (a retry with the same producer and seq is "
        "answered from the producer state)");
  }
  void Close() {
    MutexLock lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  bool Recompute() REQUIRES(mu_) {
    uint64_t mark = UINT64_MAX;
    if (!ends_.empty()) {
      // With the leader, quorum - 1 followers make a quorum: the (quorum - 1)-th largest end.
      std::vector<uint64_t> e;
      for (const auto& [pod, end] : ends_) e.push_back(end);
      std::sort(e.begin(), e.end(), std::greater<uint64_t>());
      mark = e[replication::QuorumOf(e.size() + 1) - 2];
    }
    replicated_.store(!ends_.empty(), std::memory_order_release);
    const bool moved = mark != mark_.exchange(mark, std::memory_order_acq_rel);
    if (moved) cv_.notify_all();
    return moved;
  }

  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::string, uint64_t> ends_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> mark_{UINT64_MAX};
  std::atomic<bool> replicated_{false};
};

}  // namespace shoal::broker
