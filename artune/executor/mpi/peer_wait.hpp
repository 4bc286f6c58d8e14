#pragma once
// How an mpi rank waits for its peers once a poll (MPI_Test, MPI_Testsome) found nothing: poll again (a peer
// on a core of its own answers within microseconds, as a blocking MPI call spins), then yield the core; and
// where this machine's ranks outnumber its cores (mpirun --oversubscribe), sleep in steps that grow with the
// wait (an eighth of it, at most kPeerWaitMaxSleep), so that a waiting rank leaves the cores to its peers and
// to its own caller's computation (a DDP hook's all-reduce waits on the communicator's progress thread while
// backward runs) instead of taking turns on them. A sleep adds at most an eighth of the wait (plus the
// kernel's timer slack, about 50 µs) to its end. Open MPI makes the same call for its own blocking calls
// (mpi_yield_when_idle, set when oversubscribed), but only yields.

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace artune {

/// Idle polls in a row before a waiting rank yields.
inline constexpr int kPeerWaitSpinPolls = 256;
/// How long an oversubscribed rank yields before it sleeps.
inline constexpr std::chrono::nanoseconds kPeerWaitYieldFor = std::chrono::microseconds(100);
/// The longest sleep.
inline constexpr std::chrono::nanoseconds kPeerWaitMaxSleep = std::chrono::microseconds(200);

/// What one idle poll does next: poll again at once, yield the core, or sleep `sleep`.
struct PeerWaitStep {
  enum Kind { kPoll, kYield, kSleep } kind = kPoll;
  std::chrono::nanoseconds sleep{0};
  friend bool operator==(const PeerWaitStep&, const PeerWaitStep&) = default;
};

/// The step after the `polls`-th idle poll in a row, `waited` after the wait began.
constexpr PeerWaitStep peer_wait_step(int polls, std::chrono::nanoseconds waited, bool oversubscribed) noexcept {
  if (polls <= kPeerWaitSpinPolls) return {};
  if (!oversubscribed || waited <= kPeerWaitYieldFor) return {PeerWaitStep::kYield, {}};
  return {PeerWaitStep::kSleep, std::min(waited / 8, kPeerWaitMaxSleep)};
}

/// The waiting state of one rank: counts idle polls and takes peer_wait_step's step.
class PeerWaiter {
 public:
  using Clock = std::chrono::steady_clock;

  void set_oversubscribed(bool oversubscribed) noexcept { oversubscribed_ = oversubscribed; }
  /// Something completed: the next wait starts with polling again.
  void progress() noexcept { polls_ = 0; }
  /// One poll found nothing; `since` is when the wait began (the last progress). Returns false while it only
  /// polls, without reading the clock (the polling loop stays as tight as before), true once it yields or sleeps:
  /// from then on the caller checks its timeout.
  bool idle(Clock::time_point since) {
    if (++polls_ <= kPeerWaitSpinPolls) return false;
    const PeerWaitStep step = peer_wait_step(polls_, Clock::now() - since, oversubscribed_);
    if (step.kind == PeerWaitStep::kYield) sched_yield();
    if (step.kind == PeerWaitStep::kSleep) std::this_thread::sleep_for(step.sleep);
    return true;
  }

 private:
  bool oversubscribed_ = false;
  int polls_ = 0;
};

}  // namespace artune
