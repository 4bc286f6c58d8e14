#include "artune/executor/backend_factory.hpp"

#include "artune_config.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#if ARTUNE_HAVE_MPI
#include "artune/executor/mpi/mpi_backend.hpp"
#endif
#if ARTUNE_HAVE_CUDA_BACKEND
#include "artune/executor/cuda/cuda_backend.hpp"
#endif
#if ARTUNE_HAVE_NCCL_BACKEND
#include "artune/executor/nccl/nccl_backend.hpp"
#endif

namespace artune {

std::unique_ptr<HarnessBackend> make_backend(BackendKind kind, const BackendOptions& given) {
  BackendOptions options = given;
  options.timeout_s = effective_timeout_s(given.timeout_s);
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

bool drives_local_ranks(BackendKind kind) { return kind == BackendKind::kCpu || kind == BackendKind::kCuda; }

}  // namespace artune
