#pragma once
// The nccl backend's watchdog: the backend's communicators are blocking (NCCL
// calls return once enqueued, in the caller's thread, and the caller waits for
// its stream on a CUDA event without sleeping), and one watchdog thread per
// backend bounds every section that can wait on a peer (a run, a split, a
// registration, teardown). While armed, the thread wakes every `period`, asks
// the target for an asynchronous error (ncclCommGetAsyncError) and compares the
// clock with the deadline; on either it aborts the target once (ncclCommAbort of
// every watched communicator), which ends the NCCL kernels and host calls the
// caller is blocked in. disarm() then tells the caller what happened.
//
// Per-section cost on the caller's path: two mutex acquisitions and, when the
// thread is idle, one condition-variable wake-up (bench/bench_watchdog.cpp), no
// sleep; a stuck peer or an asynchronous error is seen within one period.
//
// Host code with no NCCL in it: the target is an interface, so tests drive it with
// a fake clock and a counting abort (threaded = false: the test calls check()).

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace artune::nccl {

/// What a watchdog watches: its clock, its asynchronous error, how to stop it.
class WatchTarget {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~WatchTarget() = default;
  /// The time the deadline is compared with (tests: a fake clock).
  virtual Clock::time_point now() const { return Clock::now(); }
  /// Empty while the watched work is healthy, else its error (the backend: ncclCommGetAsyncError).
  virtual std::string async_error() = 0;
  /// Stops the watched work (the backend: ncclCommAbort of every watched communicator). Called at most once
  /// per armed section, never after disarm() returned, with the watchdog's lock held.
  virtual void abort() noexcept = 0;
};

/// How an armed section ended.
struct WatchVerdict {
  enum class Kind { kCompleted, kTimedOut, kFailed };
  Kind kind = Kind::kCompleted;
  std::string message;  ///< kTimedOut, kFailed: the error (it names the section and says the target was aborted)
  bool fired() const { return kind != Kind::kCompleted; }
};

/// Bounds sections of work by a deadline and aborts their target on an asynchronous error.
class Watchdog {
 public:
  /// `threaded`: start the checking thread (false: nothing checks unless the caller calls check()).
  Watchdog(WatchTarget& target, std::chrono::nanoseconds period, bool threaded = true);
  ~Watchdog();  ///< stops and joins the thread; the target is never aborted afterwards
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Starts a section named `what` ("rank 1: the run") that must end within `timeout_s` seconds.
  void arm(std::string what, double timeout_s);
  /// Ends the section; after it returns the target is not aborted for it any more.
  WatchVerdict disarm();
  /// One check (what the thread does every period): when armed and not yet fired, aborts the target if it
  /// reports an error or the deadline has passed. True when it aborted now.
  bool check();

 private:
  bool check_locked();
  void loop();

  WatchTarget& target_;
  std::chrono::nanoseconds period_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool armed_ = false;
  bool idle_ = false;  // the thread waits for arm() (no timed wake-ups while nothing is armed)
  bool stopping_ = false;
  std::string what_;
  double timeout_s_ = 0;
  WatchTarget::Clock::time_point deadline_{};
  WatchVerdict verdict_;
  std::thread thread_;
};

}  // namespace artune::nccl
