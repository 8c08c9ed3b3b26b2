// WorkerPool: a fixed set of threads that run submitted work in order of arrival.
//
// The data frontend runs consumes and commits here, not on cpprestsdk's pool: they may wait on a
// peer (a successor's owner reads an ancestor's range from its owner and passes its consumers'
// commits on), and the I/O of that peer call runs on cpprestsdk's pool, so pool threads that
// waited for it could leave none to carry it: with enough consumers, a sidecar would stop
// answering altogether.
//
// Thread-safe. Owned by the frontend; Stop (or the destructor) runs what was submitted, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shoal::http {

class WorkerPool {
 public:
  explicit WorkerPool(size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `work` on a worker. After Stop, runs it on the caller's thread.
  void Submit(std::function<void()> work);
  // Runs what is queued, then joins the workers. Idempotent.
  void Stop();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace shoal::http
