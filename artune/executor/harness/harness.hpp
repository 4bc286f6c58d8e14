#pragma once
// The harness's side of a backend: what an nccl-tests-style sweep (runner.hpp), calibration and `artune run`
// need beyond running a plan on caller memory: the backend's own buffers filled with known inputs, in-place
// runs (one, or n back to back as nccl-tests times them), the count of wrong elements, and the reductions of
// a per-process figure over the processes of an mpi/nccl run. Every built-in backend is one (make_backend).

#include <cstdint>

#include "artune/executor/backend.hpp"

namespace artune {

class HarnessBackend : public Backend {
 public:
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
  /// Counts elements of this process's participant buffers that differ from the expected
  /// result for `iteration` (nccl-tests #wrong; summed over all ranks by the caller for mpi/nccl).
  virtual std::int64_t count_wrong(int iteration) = 0;
  /// True on the process that prints (rank 0 under mpirun; always for single-process backends).
  virtual bool is_root() const { return true; }
  /// Combines a per-process value over all processes (sum); identity for single-process backends.
  virtual double all_sum(double value) { return value; }
  /// Combines a per-process value over all processes (max).
  virtual double all_max(double value) { return value; }
};

}  // namespace artune
