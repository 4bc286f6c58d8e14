#pragma once
// The executor interface: one Backend per kind (cpu, mpi, cuda, nccl), all
// running the same verified Plan. Prepare once, run many times on the caller's
// buffers (run_on): what the communicator needs. The nccl-tests-style harness
// (own inputs, in-place runs, checks) is harness/harness.hpp's HarnessBackend,
// which every built-in backend is; make_backend is in backend_factory.hpp.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/core/types.hpp"

namespace artune {

class Topology;

// BackendKind, which backend executes a plan, is defined in core/types.hpp (the public API names it).

/// The longest --timeout a backend honours (about 11.6 days): longer values saturate to it, so deadline
/// arithmetic (now + timeout) never overflows a clock.
inline constexpr double kMaxTimeoutSeconds = 1e6;

/// Settings shared by all backends.
struct BackendOptions {
  double timeout_s = 60;   ///< a stuck peer ends in a Timeout error after this long
  int machine_index = -1;  ///< mpi/nccl: this rank's declared machine (-1 = from hostname / environment)
  /// The topology the plan was built on (not owned; may be null): cuda/nccl read each plan
  /// device's kind (GPU or CPU helper), local GPU index and machine from it; without it they
  /// parse the device names ("gpu3", "m1/gpu3", "cpu0").
  const Topology* topology = nullptr;
  /// mpi: the MPI_Comm (passed as a pointer to it) whose ranks are the plan's ranks; the backend duplicates
  /// it. Null = MPI_COMM_WORLD. (A pointer so this header needs no mpi.h.)
  const void* mpi_comm = nullptr;
  /// cuda: capture each prepared plan once into a CUDA graph and replay it with one cudaGraphLaunch per
  /// run (false: issue every copy, kernel and event call from the host on every run).
  bool cuda_graph = true;
  /// nccl: run_back_to_back captures one run into a CUDA graph and launches it n times (false: issues the n
  /// runs' NCCL and CUDA calls on the stream one after the other). Either way one wait at the end.
  bool nccl_graph = false;
};

/// A prepared plan held outside its backend (Backend::new_slot / swap_slot); each backend that can hold
/// several defines its own.
class PlanSlot {
 public:
  virtual ~PlanSlot() = default;
};

/// Runs plans of one data type and reduce op on one kind of hardware.
class Backend {
 public:
  virtual ~Backend() = default;
  /// Allocates buffers, builds per-device schedules and communicators for `plan` (already verified).
  virtual void prepare(const Plan& plan, DataType type, ReduceOp op) = 0;
  /// Refuses (InvalidInput naming the flag) a plan this backend could not prepare on this machine, before
  /// anything is allocated: too many devices, buffers beyond available memory. The runner calls it with the
  /// sweep's largest plan up front; prepare() checks again. Default: nothing to refuse early.
  virtual void check_plan(const Plan& plan, DataType type) const {
    (void)plan;
    (void)type;
  }
  /// Like prepare(), for a plan that will only run on caller memory (run_on): a backend may leave the
  /// ranks' buffer 0 unallocated. Default: prepare().
  virtual void prepare_for_user_buffers(const Plan& plan, DataType type, ReduceOp op) { prepare(plan, type, op); }
  /// Re-targets the prepared plan to `plan`, the same plan built for another count (same_shape() in
  /// schedule.hpp; built and verified by the caller), keeping its buffers, workers and communicators: later
  /// runs execute `plan`. False (nothing changed) when the shapes differ or the backend cannot; then prepare
  /// `plan` instead. Only for plans prepared by prepare_for_user_buffers. Default: false.
  virtual bool retarget(const Plan& plan) {
    (void)plan;
    return false;
  }
  /// Executes the prepared plan once, in place, on caller memory: buffer 0 of local_ranks()[i] is `user[i]`
  /// (plan.count elements of the prepared type; host memory for cpu/mpi, memory of the rank's GPU for
  /// cuda/nccl). The pointers stay bound until the next run_on or prepare. Default: Unsupported.
  virtual void run_on(std::span<void* const> user);
  /// Like run_on, asynchronous on the caller's CUDA streams (cudaStream_t, streams[i] for user[i]; null =
  /// the legacy default stream): the plan starts after the work queued on every caller stream, and work
  /// queued on them afterwards starts after the plan; returns without waiting (no timeout applies, as with
  /// NCCL). Default (host backends): Unsupported.
  virtual void run_on_streams(std::span<void* const> user, std::span<void* const> streams);
  /// Participants (ranks) whose buffers live in this process.
  virtual std::vector<int> local_ranks() const = 0;
  /// The backend's name.
  virtual std::string_view name() const = 0;
  /// What a plan's group op of collective `c` runs as here (the communicator's PlanInfo::runs_as):
  /// "cpu group op", "MPI_Iallreduce", "cuda kernels", "ncclAllReduce".
  virtual std::string_view group_op_name(Collective c) const = 0;
  /// True when retarget() re-targets a same-shape plan in place (cpu); false when it always says no.
  virtual bool retargets() const { return false; }

  /// Several prepared plans on one backend (the communicator's plan cache): new_slot() gives an empty
  /// slot, swap_slot() exchanges the backend's prepared plan with the slot's (between runs; workers and
  /// threads are kept). A backend that cannot says so in holds_slots() and returns null from new_slot(): its
  /// callers keep one backend per plan. Default: cannot.
  virtual bool holds_slots() const { return false; }
  /// See holds_slots(). Default: null.
  virtual std::unique_ptr<PlanSlot> new_slot() { return nullptr; }
  /// See new_slot(). Default: Unsupported.
  virtual void swap_slot(PlanSlot& slot);
  /// Worker threads the backend owns now (cpu; 0 for the others).
  virtual std::size_t worker_count() const { return 0; }
};

/// The timeout a backend waits: `seconds` saturated to kMaxTimeoutSeconds; InvalidInput naming --timeout
/// when it is not a number > 0.
double effective_timeout_s(double seconds);
/// Host memory this process can still get, in bytes: the least of /proc/meminfo's MemAvailable (physical
/// memory when unreadable), the cgroup limit less its usage, and the address-space limit (ulimit -v).
std::uint64_t available_host_memory();
/// Refuses, before anything is allocated, host buffers of `needed` bytes for a `count`-element message
/// of `type` that would not fit in 90% of available_host_memory(): InvalidInput naming -e/--maxbytes
/// (the largest message size) and the amount needed, instead of an allocation failure or the OOM killer.
/// `who` names the backend and what it holds ("cpu backend, 8 devices").
void check_host_memory(double needed, std::int64_t count, DataType type, std::string_view who);

}  // namespace artune
