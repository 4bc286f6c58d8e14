#include "cli/tuner_common.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli/common.hpp"
#include "cli/mpi_session.hpp"
#include "artune/core/error.hpp"

namespace artune::cli {

void check_measure_flags(int iters, int warmup, double timeout) {
  if (iters < 1) throw InvalidInput(fmt::format("--iters: {} must be ≥ 1", iters));
  if (warmup < 0) throw InvalidInput(fmt::format("--warmup: {} must be ≥ 0", warmup));
  if (!std::isfinite(timeout) || !(timeout > 0) || timeout > 1e6) {
    throw InvalidInput(fmt::format("--timeout: {} must be a finite number of seconds in (0, 1e6]", timeout));
  }
}

void check_backend_devices(BackendKind kind, const Topology& topo, std::string_view backend_flag) {
  if (kind == BackendKind::kCpu && topo.gpus().size() > kCpuBackendMaxDevices) {
    throw InvalidInput(fmt::format("-t: topology '{}' has {} GPUs; the cpu backend ({}) runs at most {}", topo.name(),
                                   topo.gpus().size(), backend_flag, kCpuBackendMaxDevices));
  }
}

void refuse_cpu_under_mpirun(const std::string& backend, std::string_view flag, int world) {
  if (backend != "cpu") return;
  if (launcher_rank().value_or(0) != 0) {
    std::fflush(stdout);
    std::exit(exit_status(ErrorCode::kInvalidInput));
  }
  throw InvalidInput(
      fmt::format("{} cpu: the cpu backend runs every device as a thread of one process and ignores "
                  "the {} MPI ranks; under mpirun use {} mpi (or run without mpirun)",
                  flag, world, flag));
}

}  // namespace artune::cli
