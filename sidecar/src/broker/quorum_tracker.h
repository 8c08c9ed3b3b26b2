// QuorumTracker: the leader's side of one replicated partition: what each follower last said it
// holds, and the mark that enough of them reach to make a quorum with the leader
// (common/replication.h); the high watermark is the lesser of that mark and what the leader
// holds.
//
// A produce waits here for its events to be held by a quorum (acks: quorum): OnReached calls
// back once the mark reaches them, so a waiting produce holds no thread (a thread held would be
// one the followers' fetches, which move the mark, may need). The tracker is shared
// (std::shared_ptr) between the Partition and such waiters, and Close answers them when the
// partition leaves. Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/replication.h"
#include "shoal/common/status.h"
#include "shoal/common/thread_annotations.h"

namespace shoal::broker {

class QuorumTracker {
 public:
  using Done = std::function<void(Status)>;
  // What the tracker counts: the followers' log ends, or the versions of the groups' commits
  // they mirror (Partition::commit_quorum); it only changes what a refusal says.
  enum class Counts { kEvents, kCommits };
  explicit QuorumTracker(Counts counts = Counts::kEvents) : counts_(counts) {}

  // The followers the map names; one that is new starts at 0 (nothing held), one that left is
  // forgotten. Returns whether the followers' mark moved.
  bool SetFollowers(const std::vector<PodName>& followers, int64_t now_ms) {
    bool moved;
    std::vector<Done> reached;
    {
      MutexLock lock(mu_);
      std::map<std::string, uint64_t> next;
      std::map<std::string, int64_t> caught_up;
      for (const auto& f : followers) {
        auto it = ends_.find(f.value());
        next[f.value()] = it == ends_.end() ? 0 : it->second;
        auto c = caught_up_ms_.find(f.value());
        caught_up[f.value()] = c == caught_up_ms_.end() ? now_ms : c->second;
      }
      ends_ = std::move(next);
      caught_up_ms_ = std::move(caught_up);
      moved = Recompute(&reached);
    }
    for (auto& done : reached) done(Status::Ok());
    return moved;
  }
  // A follower's fetch says it holds everything below `end`, when the leader's log ends at
  // `leader_end`. Returns whether the mark moved. The end may fall: a copy that lost its volume,
  // or cut a tail, holds less than it said before, and counting what it no longer holds would
  // acknowledge events a quorum does not hold (invariant 9).
  bool Holds(const std::string& pod, uint64_t end, uint64_t leader_end, int64_t now_ms) {
    bool moved = false;
    std::vector<Done> reached;
    {
      MutexLock lock(mu_);
      auto it = ends_.find(pod);
      if (it == ends_.end()) return false;
      if (end >= leader_end) caught_up_ms_[pod] = now_ms;
      if (end != it->second) {
        it->second = end;
        moved = Recompute(&reached);
      }
    }
    for (auto& done : reached) done(Status::Ok());
    return moved;
  }
  // A quorum is known to hold everything below `end` without the followers saying so again:
  // the end the map records for a sealed partition, which its seal was answered for only once a
  // quorum held it. A leader that restarts starts its followers at 0, and the followers of a
  // sealed partition whose end they hold fetch no more; the mark never falls below this floor.
  // Returns whether the mark moved.
  bool HeldByQuorum(uint64_t end) {
    bool moved;
    std::vector<Done> reached;
    {
      MutexLock lock(mu_);
      if (end <= floor_) return false;
      floor_ = end;
      moved = Recompute(&reached);
    }
    for (auto& done : reached) done(Status::Ok());
    return moved;
  }
  // Whether the map names followers (the partition is replicated).
  bool replicated() const { return replicated_.load(std::memory_order_acquire); }
  // The offset below which enough followers hold every event that, with the leader, they are a
  // quorum. UINT64_MAX when the partition has no followers.
  uint64_t followers_mark() const { return mark_.load(std::memory_order_acquire); }

  // Per follower: what it holds and for how long it has not been caught up with the leader's
  // end (0 while it is): Kafka's replica lag time.
  struct FollowerLag {
    uint64_t end = 0;
    double seconds = 0;
  };
  std::map<std::string, FollowerLag> Lags(int64_t now_ms) const {
    MutexLock lock(mu_);
    std::map<std::string, FollowerLag> out;
    for (const auto& [pod, end] : ends_) {
      auto c = caught_up_ms_.find(pod);
      const int64_t since = c == caught_up_ms_.end() ? now_ms : c->second;
      out[pod] = {end, static_cast<double>(std::max<int64_t>(0, now_ms - since)) / 1000.0};
    }
    return out;
  }

  // Calls `done` with Ok once the mark reaches `end` (the leader holds it already), or with a
  // retryable refusal once `deadline` passed (Expire) or the tracker closed; at once, on this
  // thread, when the mark is there already. `done` runs on the thread that moved the mark,
  // expired or closed, with no lock held, and must not block.
  void OnReached(uint64_t end, std::chrono::steady_clock::time_point deadline, Done done) {
    Status st;
    {
      MutexLock lock(mu_);
      if (mark_.load() >= end) {
        st = Status::Ok();
      } else if (closed_) {
        st = Refusal(end);
      } else {
        waiters_.push_back({end, deadline, std::move(done)});
        return;
      }
    }
    done(st);
  }
  // Answers the waiters whose deadline passed (the sidecar's ticker calls it).
  void Expire(std::chrono::steady_clock::time_point now) {
    std::vector<std::pair<Done, Status>> due;
    {
      MutexLock lock(mu_);
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->deadline > now) {
          ++it;
          continue;
        }
        due.emplace_back(std::move(it->done), Refusal(it->end));
        it = waiters_.erase(it);
      }
    }
    for (auto& [done, st] : due) done(st);
  }
  // Waits until the mark reaches `end`, for at most `timeout` (for callers that may block).
  Status Await(uint64_t end, std::chrono::milliseconds timeout) {
    MutexLock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!closed_ && mark_.load() < end) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
    }
    if (mark_.load() >= end) return Status::Ok();
    return Refusal(end);
  }
  // The leadership moved away (a failover): waiters are answered with a refusal and the
  // followers are forgotten; the tracker serves again if this copy leads again.
  void Abandon() {
    std::vector<Done> due;
    {
      MutexLock lock(mu_);
      for (auto& w : waiters_) due.push_back(std::move(w.done));
      waiters_.clear();
      ends_.clear();
      caught_up_ms_.clear();
      std::vector<Done> none;
      Recompute(&none);
    }
    for (auto& done : due) {
      done(Status::Unavailable(
          std::string("the partition's leadership moved to another pod by a failover before a "
                      "quorum held ") +
          (counts_ == Counts::kEvents ? "these events" : "this commit") + "; retry"));
    }
  }
  // The partition left: waiters are answered with a refusal.
  void Close() {
    std::vector<std::pair<Done, Status>> due;
    {
      MutexLock lock(mu_);
      closed_ = true;
      cv_.notify_all();
      for (auto& w : waiters_) due.emplace_back(std::move(w.done), Refusal(w.end));
      waiters_.clear();
    }
    for (auto& [done, st] : due) done(st);
  }

 private:
  struct Waiter {
    uint64_t end;
    std::chrono::steady_clock::time_point deadline;
    Done done;
  };

  Status Refusal(uint64_t end) const REQUIRES(mu_) {
    if (closed_) {
      return Status::Unavailable(
          "the partition left this sidecar while its events were being copied; retry");
    }
    size_t have = 1;  // the leader
    for (const auto& [pod, e] : ends_) have += e >= end ? 1 : 0;
    if (counts_ == Counts::kCommits) {
      return Status::Unavailable(
          "the commit is on the leader but " + std::to_string(have) + " of " +
          std::to_string(ends_.size() + 1) + " replicas hold it, and a quorum of " +
          std::to_string(replication::QuorumOf(ends_.size() + 1)) +
          " must before it is answered; retry (a commit only raises a group's position)");
    }
    return Status::Unavailable(
        "the events are on the leader but " + std::to_string(have) + " of " +
        std::to_string(ends_.size() + 1) + " replicas hold them, and a quorum of " +
        std::to_string(replication::QuorumOf(ends_.size() + 1)) +
        " must before they are acknowledged; retry (a retry with the same producer and seq is "
        "answered from the producer state)");
  }

  // Sets the mark from the followers' ends; moves the waiters it satisfies to `reached`, for the
  // caller to answer once it let go of the lock. Returns whether the mark moved.
  bool Recompute(std::vector<Done>* reached) REQUIRES(mu_) {
    uint64_t mark = UINT64_MAX;
    if (!ends_.empty()) {
      // With the leader, quorum - 1 followers make a quorum: the (quorum - 1)-th largest end.
      std::vector<uint64_t> e;
      for (const auto& [pod, end] : ends_) e.push_back(end);
      std::sort(e.begin(), e.end(), std::greater<uint64_t>());
      mark = std::max(e[replication::QuorumOf(e.size() + 1) - 2], floor_);
    }
    replicated_.store(!ends_.empty(), std::memory_order_release);
    const bool moved = mark != mark_.exchange(mark, std::memory_order_acq_rel);
    if (!moved) return false;
    cv_.notify_all();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->end > mark) {
        ++it;
        continue;
      }
      reached->push_back(std::move(it->done));
      it = waiters_.erase(it);
    }
    return true;
  }

  const Counts counts_;
  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::string, uint64_t> ends_ GUARDED_BY(mu_);
  std::map<std::string, int64_t> caught_up_ms_ GUARDED_BY(mu_);  // last seen at the leader's end
  std::vector<Waiter> waiters_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  uint64_t floor_ GUARDED_BY(mu_) = 0;  // HeldByQuorum
  std::atomic<uint64_t> mark_{UINT64_MAX};
  std::atomic<bool> replicated_{false};
};

}  // namespace shoal::broker
