// Lock annotations for clang's thread-safety analysis (-Wthread-safety), and the mutex and lock
// types that carry them.
//
// libstdc++'s std::mutex and std::lock_guard have no capability attributes, so the analysis
// cannot see them: a member marked GUARDED_BY(mu_) is checked only when mu_ is a shoal::Mutex
// (or SharedMutex) and the code locks it with MutexLock, ReaderLock or WriterLock. Under GCC the
// macros are empty and the types are thin wrappers over the standard ones (no cost). The
// analysis runs in the suite: tests/static/thread_safety.sh compiles the sidecar with clang and
// -Werror=thread-safety. The attributes are clang's, documented at
// https://clang.llvm.org/docs/ThreadSafetyAnalysis.html (the macro names follow its mutex.h).
//
// Values: Mutex and SharedMutex are neither copyable nor movable; the lock types are scoped.
#pragma once

#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define SHOAL_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SHOAL_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) SHOAL_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY SHOAL_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) SHOAL_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SHOAL_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) SHOAL_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) SHOAL_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) SHOAL_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SHOAL_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) SHOAL_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SHOAL_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SHOAL_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SHOAL_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) SHOAL_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) SHOAL_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) SHOAL_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) SHOAL_THREAD_ANNOTATION(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS SHOAL_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace shoal {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

class CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex for its scope; unlock() and lock() release and take it again inside the scope
// (also what CondVar's waits call).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }
  void unlock() RELEASE() {
    held_ = false;
    mu_.unlock();
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// Holds a SharedMutex shared for its scope.
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() RELEASE() {
    if (held_) mu_.unlock_shared();
  }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;
  void unlock() RELEASE() {
    held_ = false;
    mu_.unlock_shared();
  }

 private:
  SharedMutex& mu_;
  bool held_ = true;
};

// Holds a SharedMutex exclusively for its scope.
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  void unlock() RELEASE() {
    held_ = false;
    mu_.unlock();
  }

 private:
  SharedMutex& mu_;
  bool held_ = true;
};

// A condition variable that waits on a MutexLock.
using CondVar = std::condition_variable_any;

}  // namespace shoal
