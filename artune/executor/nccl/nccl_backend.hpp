#pragma once
// The nccl backend: one MPI rank per GPU (launched with mpirun), NCCL
// communicators bootstrapped through MPI. Each rank executes its own slice of
// the plan: transfers become ncclSend/ncclRecv pairs inside group calls,
// reductions run as local kernels, `group` ops run as NCCL collectives on
// communicators split per group.
//
// Only declared when the build found NCCL (ARTUNE_HAVE_NCCL_BACKEND in
// artune_config.hpp); make_backend() calls it for BackendKind::kNccl.

#include <memory>

#include "artune/executor/harness/harness.hpp"

namespace artune {

/// Creates the nccl backend (initialises MPI if needed); Unsupported("no CUDA device available") without a GPU.
std::unique_ptr<HarnessBackend> make_nccl_backend(const BackendOptions& options);

}  // namespace artune
