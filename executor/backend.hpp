#pragma once
// The executor interface: one Backend per kind (cpu, mpi, cuda, nccl), all
// running the same verified Plan. Prepare once, run many times.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/plan.hpp"
#include "core/types.hpp"

namespace artune {

class Topology;

/// Which backend executes a plan.
enum class BackendKind { kCpu, kMpi, kCuda, kNccl };

/// Settings shared by all backends.
struct BackendOptions {
  double timeout_s = 60;     ///< a stuck peer ends in a Timeout error after this long
  int machine_index = -1;    ///< mpi/nccl: this rank's declared machine (-1 = from hostname / environment)
  /// The topology the plan was built on (not owned; may be null): cuda/nccl read each plan
  /// device's kind (GPU or CPU helper), local GPU index and machine from it; without it they
  /// parse the device names ("gpu3", "m1/gpu3", "cpu0").
  const Topology* topology = nullptr;
};

/// Runs plans of one data type and reduce op on one kind of hardware.
class Backend {
 public:
  virtual ~Backend() = default;
  /// Allocates buffers, builds per-device schedules and communicators for `plan` (already verified).
  virtual void prepare(const Plan& plan, DataType type, ReduceOp op) = 0;
  /// Fills every participant's buffer 0 of this process with the inputs of iteration `iteration`
  /// (values from verification.hpp's input_value).
  virtual void fill_inputs(int iteration) = 0;
  /// Executes the prepared plan once, in place; blocks until done on this process.
  virtual void run() = 0;
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

/// Creates a backend; Unsupported when this build or machine lacks it ("no CUDA device available").
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options);
/// Parses "cpu", "mpi", "cuda", "nccl"; InvalidInput naming `what`.
BackendKind parse_backend_kind(std::string_view text, std::string_view what = "--backend");
/// Name of a backend kind.
std::string_view to_string(BackendKind kind) noexcept;

}  // namespace artune
