#pragma once
// The nccl backend's communicators and what bounds them (built with NCCL only).
//
// world_ (all ranks, non-blocking) only bootstraps: every other communicator is
// split from it. Sends and receives go on peers() (all ranks again) and group ops
// on a communicator per group (a cache keyed by members in NCCL rank order and
// forced NCCL choice, kept across prepare() calls, split with splitShare = 1).
// Those are blocking (config.blocking = 1): a call returns once NCCL has enqueued
// it, in the caller's thread, with no background job and no polling.
//
// Never hang: every section that can wait on a peer runs inside watched(), armed
// on a watchdog thread (nccl_watchdog.hpp) that polls ncclCommGetAsyncError every
// millisecond and, on an error or after the timeout, aborts every communicator
// (ncclCommAbort): the NCCL kernels and host calls the caller is blocked in end.
// A stuck or dead peer ends in Timeout, an NCCL error in BackendFailure with
// ncclGetErrorString and NCCL's last-error text; any error inside a section
// aborts every communicator too, so no peer waits on work that cannot complete.
// Only the bootstrap of world_ itself (its init, a split NCCL runs in its own
// thread, its finalise) is polled, once per communicator.

#include <fmt/format.h>
#include <nccl.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/executor/nccl/nccl_forced_choice.hpp"
#include "artune/executor/nccl/nccl_program.hpp"
#include "artune/executor/nccl/nccl_registry.hpp"
#include "artune/executor/nccl/nccl_watchdog.hpp"

namespace artune::nccl {

/// ncclGetErrorString(r) and, when there is one, NCCL's last-error text for `comm`.
std::string nccl_message(ncclResult_t r, ncclComm_t comm);
/// Throws BackendFailure naming the call unless it succeeded or (non-blocking) is in progress.
void check_nccl(ncclResult_t r, const char* call, ncclComm_t comm = nullptr);
#define ARTUNE_NCCL_CHECK(call, comm) ::artune::nccl::check_nccl((call), #call, (comm))

/// What the watchdog watches: the communicators of the armed section (set before arming, read by the
/// watchdog's thread only while armed).
class CommWatch final : public WatchTarget {
 public:
  std::string async_error() override;
  void abort() noexcept override;
  std::vector<ncclComm_t> comms;
};

/// One rank's communicators, their watchdog and their buffer registrations.
class Communicators {
 public:
  /// A communicator of the cache: its members in NCCL rank order and what it is forced to.
  using CacheKey = std::pair<CommKey, NcclForcedChoice>;

  Communicators(int rank, double timeout_s);
  /// Aborts whatever is left (close() first for an orderly end).
  ~Communicators();
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

  /// Creates world_ (collective over `size` ranks) and peers(); starts the watchdog.
  void init(int size, const ncclUniqueId& id);
  /// The cache slot of each needed group, splitting those not cached yet (every rank, same order).
  std::vector<int> groups_for(const std::vector<CacheKey>& needed);
  /// The communicator of cache slot `slot` (null where this rank is no member).
  ncclComm_t group(int slot) const { return groups_.at(static_cast<std::size_t>(slot)); }
  /// The all-ranks blocking communicator of sends and receives.
  ncclComm_t peers() const { return peers_; }

  /// Runs `body` armed on the watchdog (watching every communicator). Afterwards, whatever happened: the
  /// watchdog's abort (Timeout or an asynchronous error) or an error of `body` aborts every communicator.
  template <class Body>
  void watched(const char* what, Body&& body);
  /// Aborts every communicator and throws `error` as Timeout or BackendFailure.
  [[noreturn]] void abort_all(const Error& error);
  /// Aborts every communicator; never throws.
  void abort_comms() noexcept;
  bool aborted() const { return aborted_; }

  /// ncclGroupStart/ncclGroupEnd (an error in between closes the group at the abort).
  void group_start();
  void group_end(ncclComm_t comm);

  /// Registrations of buffers with these communicators (released before their buffers are freed).
  Registry& registry() { return registry_; }

  /// An orderly end: waits for `stream`, deregisters, finalises and frees every communicator, bounded by
  /// the watchdog (a stuck peer: everything is aborted instead). Never throws.
  void close(cudaStream_t stream) noexcept;

 private:
  ncclComm_t split(int key, const NcclForcedChoice& forced, const char* what);
  void wait_ready(const std::vector<ncclComm_t>& comms, const char* what);
  void forget(ncclComm_t comm) noexcept;
  std::vector<ncclComm_t> blocking_comms() const;
  std::vector<ncclComm_t> all_comms() const;
  void destroy_world() noexcept;
  Registry::Hooks registry_hooks();

  int rank_;
  double timeout_s_;
  bool aborted_ = false;
  bool group_open_ = false;  // between ncclGroupStart and ncclGroupEnd (an error there must close it)
  bool register_warned_ = false;
  ncclComm_t world_ = nullptr;      // non-blocking, bootstrap only: the parent of every split
  ncclComm_t peers_ = nullptr;      // blocking, all ranks: sends and receives
  ncclComm_t splitting_ = nullptr;  // a split in progress (NCCL may write it from its thread)
  std::vector<ncclComm_t> groups_;  // the cache (null where this rank is no member)
  std::vector<CacheKey> keys_;      // per cache slot: its key
  Registry registry_{registry_hooks()};
  // Last: destroyed first, so its thread has stopped before anything it watches goes.
  CommWatch watch_;
  std::unique_ptr<Watchdog> watchdog_;
};

template <class Body>
void Communicators::watched(const char* what, Body&& body) {
  watch_.comms = all_comms();
  watchdog_->arm(fmt::format("rank {}: {}", rank_, what), timeout_s_);
  std::exception_ptr failure;
  try {
    body();
  } catch (...) {
    failure = std::current_exception();
  }
  const WatchVerdict verdict = watchdog_->disarm();
  if (verdict.fired()) {
    for (ncclComm_t c : watch_.comms) forget(c);  // the watchdog aborted these
    if (verdict.kind == WatchVerdict::Kind::kTimedOut) abort_all(Timeout(verdict.message));
    abort_all(BackendFailure(verdict.message));
  }
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      if (!aborted_) abort_all(e);
      throw;
    } catch (...) {
      abort_comms();
      throw;
    }
  }
}

}  // namespace artune::nccl
