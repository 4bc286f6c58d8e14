#include "artune/executor/nccl/nccl_comms.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "artune/executor/cuda/cuda_check.hpp"

namespace artune::nccl {
namespace {

using Clock = std::chrono::steady_clock;

// How often the watchdog looks at an armed section: the latency of seeing a timeout or an asynchronous error.
constexpr std::chrono::milliseconds kWatchPeriod{1};

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The configuration of every communicator split from world_: blocking (calls return once enqueued; the
// watchdog bounds them) and sharing the parent's resources (splitShare: no new buffers, channels or proxy
// per split), with the forced channel count of an nccl.ALGO.PROTO plan (its algorithm and protocol go
// through the environment, ScopedNcclForcedChoice).
ncclConfig_t split_config(const NcclForcedChoice& forced) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.splitShare = 1;
  apply_nccl_forced_channels(forced, config.minCTAs, config.maxCTAs);
  return config;
}

}  // namespace

std::string nccl_message(ncclResult_t r, ncclComm_t comm) {
  std::string msg = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') msg += fmt::format(" ({})", last);
  return msg;
}

void check_nccl(ncclResult_t r, const char* call, ncclComm_t comm) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw BackendFailure(fmt::format("{}: {}", call, nccl_message(r, comm)));
}

std::string CommWatch::async_error() {
  for (ncclComm_t c : comms) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c, &state);
    if (r != ncclSuccess) return fmt::format("ncclCommGetAsyncError: {}", nccl_message(r, c));
    if (state != ncclSuccess && state != ncclInProgress) return nccl_message(state, c);
  }
  return {};
}

void CommWatch::abort() noexcept {
  for (ncclComm_t c : comms) ncclCommAbort(c);
}

Communicators::Communicators(int rank, double timeout_s) : rank_(rank), timeout_s_(timeout_s) {}

Communicators::~Communicators() { abort_comms(); }

void Communicators::init(int size, const ncclUniqueId& id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ARTUNE_NCCL_CHECK(ncclCommInitRankConfig(&world_, size, id, rank_, &config), world_);
  wait_ready({world_}, "ncclCommInitRankConfig");
  watchdog_ = std::make_unique<Watchdog>(watch_, kWatchPeriod);
  peers_ = split(rank_, NcclForcedChoice{}, "ncclCommSplit (all ranks, for sends and receives)");
}

std::vector<int> Communicators::groups_for(const std::vector<CacheKey>& needed) {
  const auto plan = plan_communicators(keys_, needed);
  for (const auto& [members, forcing] : plan.create) {
    int key = -1;
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (members[k] == rank_) key = static_cast<int>(k);
    }
    groups_.push_back(split(key, forcing, "ncclCommSplit"));
    keys_.push_back({members, forcing});
  }
  return plan.slot;
}

// Splits a communicator from world_ that this rank joins as NCCL rank `key` (key < 0: not a member,
// NCCL_SPLIT_NOCOLOR; returns null). Every rank calls it, in the same order. Whether NCCL runs the split in
// the call or (the parent being non-blocking) in its own thread, it is bounded: the call by the watchdog, a
// split still in progress by polling parent and child under the deadline. The new communicator is written
// into splitting_ (a member: NCCL's thread may write it late), so an abort in between aborts it too.
//
// The parent is polled after every split, whatever ncclCommSplit returned: with a non-blocking parent NCCL
// 2.28 runs the split in its group thread and still returns ncclSuccess (the group's ncclInProgress is not
// passed on: src/init.cc ncclCommSplit returns the child setup's status), leaving *newcomm null until that
// thread ends; the parent reads ncclInProgress meanwhile (src/group.cc). Seen on the first GPU run (H200,
// the nvidia-nccl-cu13 2.28.9 wheel): "returned no communicator" at once.
ncclComm_t Communicators::split(int key, const NcclForcedChoice& forced, const char* what) {
  ncclConfig_t config = split_config(forced);
  const ScopedNcclForcedChoice forcing(forced);  // NCCL reads it until the communicator is ready
  splitting_ = nullptr;
  watched(what, [&] {
    const ncclResult_t r =
        ncclCommSplit(world_, key >= 0 ? 0 : NCCL_SPLIT_NOCOLOR, std::max(key, 0), &splitting_, &config);
    check_nccl(r, "ncclCommSplit", world_);
  });
  wait_ready({world_}, what);  // the split's group thread has ended: splitting_ holds its result
  if ((splitting_ != nullptr) != (key >= 0)) {
    abort_all(BackendFailure(fmt::format("nccl backend: rank {}: {} returned {} communicator", rank_, what,
                                         key >= 0 ? "no" : "an unexpected")));
  }
  if (splitting_ != nullptr) wait_ready({splitting_}, what);
  return std::exchange(splitting_, nullptr);
}

// Polls (the bootstrap of world_ only: its init and a split NCCL runs in its thread) until no communicator
// in `comms` is in progress; errors and the deadline abort.
void Communicators::wait_ready(const std::vector<ncclComm_t>& comms, const char* what) {
  const auto deadline = deadline_after(timeout_s_);
  for (ncclComm_t c : comms) {
    for (int spins = 0;; ++spins) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(c, &state);
      if (r != ncclSuccess) abort_all(BackendFailure(fmt::format("ncclCommGetAsyncError: {}", nccl_message(r, c))));
      if (state == ncclSuccess) break;
      if (state != ncclInProgress) abort_all(BackendFailure(fmt::format("{}: {}", what, nccl_message(state, c))));
      if (Clock::now() > deadline) {
        abort_all(Timeout(fmt::format(
            "nccl backend: rank {}: {} did not complete within {} s (a peer is stuck or gone); communicators aborted",
            rank_, what, timeout_s_)));
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void Communicators::forget(ncclComm_t comm) noexcept {
  for (ncclComm_t* c : {&world_, &peers_, &splitting_}) {
    if (*c == comm) *c = nullptr;
  }
  for (ncclComm_t& c : groups_) {
    if (c == comm) c = nullptr;
  }
}

std::vector<ncclComm_t> Communicators::blocking_comms() const {
  std::vector<ncclComm_t> out;
  for (ncclComm_t c : groups_) {
    if (c != nullptr) out.push_back(c);
  }
  if (peers_ != nullptr) out.push_back(peers_);
  return out;
}

std::vector<ncclComm_t> Communicators::all_comms() const {
  std::vector<ncclComm_t> out = blocking_comms();
  if (world_ != nullptr) out.push_back(world_);
  return out;
}

void Communicators::abort_all(const Error& error) {
  abort_comms();
  if (error.code() == ErrorCode::kTimeout) throw Timeout(error.what());
  throw BackendFailure(error.what());
}

// NCCL kernels waiting on a peer exit, and nothing afterwards (destructor included) waits for them.
void Communicators::abort_comms() noexcept {
  if (group_open_) {
    // An error between ncclGroupStart and ncclGroupEnd: close the group (NCCL discards it).
    group_open_ = false;
    (void)ncclGroupEnd();
  }
  aborted_ = true;
  registry_.forget_all();  // the aborts free the registrations with their communicators
  // The parent first: aborting it also ends a split still running in NCCL's thread, which writes its new
  // communicator into splitting_; that is read after.
  for (ncclComm_t* c : {&world_, &splitting_, &peers_}) {
    if (*c != nullptr) ncclCommAbort(*c);
    *c = nullptr;
  }
  for (ncclComm_t& c : groups_) {
    if (c != nullptr) ncclCommAbort(c);
    c = nullptr;
  }
  keys_.clear();
}

void Communicators::group_start() {
  ARTUNE_NCCL_CHECK(ncclGroupStart(), nullptr);
  group_open_ = true;
}

void Communicators::group_end(ncclComm_t comm) {
  group_open_ = false;
  ARTUNE_NCCL_CHECK(ncclGroupEnd(), comm);
}

void Communicators::close(cudaStream_t stream) noexcept {
  if (aborted_ || watchdog_ == nullptr) return;  // aborted, or never initialised (the destructor aborts)
  try {
    watched("teardown", [&] {
      ARTUNE_CUDA_CHECK(cudaStreamSynchronize(stream));
      registry_.release_all();
      for (ncclComm_t c : blocking_comms()) ARTUNE_NCCL_CHECK(ncclCommFinalize(c), c);
    });
  } catch (const std::exception&) {
    return;  // aborted
  }
  for (ncclComm_t c : blocking_comms()) ncclCommDestroy(c);
  groups_.clear();
  keys_.clear();
  peers_ = nullptr;
  destroy_world();
}

// Finalises world_ (non-blocking: polled under the deadline), then frees it; a failing or stuck finalise aborts.
void Communicators::destroy_world() noexcept {
  ncclComm_t comm = std::exchange(world_, nullptr);
  if (comm == nullptr) return;
  const ncclResult_t r = ncclCommFinalize(comm);
  if (r != ncclSuccess && r != ncclInProgress) {
    ncclCommAbort(comm);
    return;
  }
  const auto deadline = deadline_after(timeout_s_);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess || (state != ncclInProgress && state != ncclSuccess) ||
        Clock::now() > deadline) {
      ncclCommAbort(comm);
      return;
    }
    if (state == ncclSuccess) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ncclCommDestroy(comm);
}

Registry::Hooks Communicators::registry_hooks() {
  return {[this](void* comm, void* buffer, std::size_t bytes) -> void* {
            void* handle = nullptr;
            const ncclResult_t r = ncclCommRegister(static_cast<ncclComm_t>(comm), buffer, bytes, &handle);
            if (r == ncclSuccess) return handle;
            // Not fatal: NCCL copies through its own buffers as it does for unregistered memory.
            if (!register_warned_) {
              std::fprintf(stderr, "nccl backend: rank %d: ncclCommRegister: %s (buffers stay unregistered)\n", rank_,
                           nccl_message(r, static_cast<ncclComm_t>(comm)).c_str());
            }
            register_warned_ = true;
            return nullptr;
          },
          [](void* comm, void* handle) { (void)ncclCommDeregister(static_cast<ncclComm_t>(comm), handle); }};
}

}  // namespace artune::nccl
