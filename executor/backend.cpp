#include "executor/backend.hpp"

#include <fmt/format.h>

#include <string>

#include "artune_config.hpp"
#include "core/error.hpp"
#include "executor/cpu/cpu_backend.hpp"
#if ARTUNE_HAVE_MPI
#include "executor/mpi/mpi_backend.hpp"
#endif
#if ARTUNE_HAVE_CUDA_BACKEND
#include "executor/cuda/cuda_backend.hpp"
#endif
#if ARTUNE_HAVE_NCCL_BACKEND
#include "executor/nccl/nccl_backend.hpp"
#endif

namespace artune {

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  switch (kind) {
    case BackendKind::kCpu: return make_cpu_backend(options);
    case BackendKind::kMpi:
#if ARTUNE_HAVE_MPI
      return make_mpi_backend(options);
#else
      throw Unsupported("mpi backend not built: MPI was not found at configure time");
#endif
    case BackendKind::kCuda:
#if ARTUNE_HAVE_CUDA_BACKEND
      return make_cuda_backend(options);
#else
      throw Unsupported("cuda backend not built: CUDA was not found at configure time");
#endif
    case BackendKind::kNccl:
#if ARTUNE_HAVE_NCCL_BACKEND
      return make_nccl_backend(options);
#else
      throw Unsupported("nccl backend not built: NCCL (with CUDA and MPI) was not found at configure time");
#endif
  }
  throw Unsupported("unknown backend");
}

BackendKind parse_backend_kind(std::string_view text, std::string_view what) {
  for (BackendKind k : {BackendKind::kCpu, BackendKind::kMpi, BackendKind::kCuda, BackendKind::kNccl}) {
    if (text == to_string(k)) return k;
  }
  throw InvalidInput(fmt::format("{}: unknown backend '{}' (cpu, mpi, cuda, nccl)", what, text));
}

std::string_view to_string(BackendKind kind) noexcept {
  switch (kind) {
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kMpi: return "mpi";
    case BackendKind::kCuda: return "cuda";
    case BackendKind::kNccl: return "nccl";
  }
  return "?";
}

}  // namespace artune
