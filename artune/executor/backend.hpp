#pragma once
// The executor interface: one Backend per kind (cpu, mpi, cuda, nccl), all
// running the same verified Plan. Prepare once, run many times.

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
  /// Fills every participant's buffer 0 of this process with the inputs of iteration `iteration`
  /// (values from verification.hpp's input_value).
  virtual void fill_inputs(int iteration) = 0;
  /// Executes the prepared plan once, in place; blocks until done on this process.
  virtual void run() = 0;
  /// Executes the prepared plan `n` times back to back and waits once at the end, as nccl-tests times
  /// (the cuda backend launches its CUDA graph n times on one stream). Default: n calls of run().
  virtual void run_back_to_back(int n) {
    for (int i = 0; i < n; ++i) run();
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
  /// Counts elements of this process's participant buffers that differ from the expected
  /// result for `iteration` (nccl-tests #wrong; summed over all ranks by the caller for mpi/nccl).
  virtual std::int64_t count_wrong(int iteration) = 0;
  /// Participants (ranks) whose buffers live in this process.
  virtual std::vector<int> local_ranks() const = 0;
  /// True on the process that prints (rank 0 under mpirun; always for single-process backends).
  virtual bool is_root() const { return true; }
  /// Combines a per-process value over all processes (sum); identity for single-process backends.
  virtual double all_sum(double value) { return value; }
  /// Combines a per-process value over all processes (max).
  virtual double all_max(double value) { return value; }
  /// The backend's name.
  virtual std::string_view name() const = 0;
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

// make_backend lives in backend_factory.hpp; included here so that callers of the interface keep
// compiling unchanged (new code includes backend_factory.hpp where it creates backends).
#include "artune/executor/backend_factory.hpp"  // IWYU pragma: export
