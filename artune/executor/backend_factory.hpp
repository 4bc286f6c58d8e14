#pragma once
// The one place that knows every backend: make_backend picks the one a BackendKind names, or
// says why this build or machine lacks it, and which of them drive several ranks from one process. backend.cpp (the interface) includes none of them.

#include <memory>

#include "artune/executor/harness/harness.hpp"

namespace artune {

/// Creates a backend (its timeout saturated by effective_timeout_s); Unsupported when this build or
/// machine lacks it ("no CUDA device available"), BackendFailure when the device query fails otherwise.
std::unique_ptr<HarnessBackend> make_backend(BackendKind kind, const BackendOptions& options);
/// True for the backends that drive several ranks from one process (cpu, cuda: Communicator::create_local);
/// mpi and nccl run one rank per process.
bool drives_local_ranks(BackendKind kind);

}  // namespace artune
