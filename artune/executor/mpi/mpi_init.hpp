#pragma once
// MPI start-up shared by the mpi and nccl backends and the CLI: one thread level for
// every caller, and one error check. Built when MPI is found.

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings warn under -Wextra)
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <functional>

namespace artune {

/// The thread level artune asks for: only the thread that initialised MPI calls it (the nccl
/// backend's host thread; the mpi backend and the CLI run single-threaded MPI code). Every artune
/// caller asks for this one level, so which of them initialises MPI first no longer matters.
inline constexpr int kMpiThreadLevel = MPI_THREAD_FUNNELED;

/// Initialises MPI with MPI_Init_thread(`thread_level`) unless it already is (a caller's own MPI_Init
/// is kept, whatever level it chose); true when this call initialised it (the caller then owns
/// MPI_Finalize). BackendFailure naming MPI_Init_thread when it fails.
bool ensure_mpi(int thread_level = kMpiThreadLevel);

/// Throws BackendFailure "<call>: <MPI_Error_string>" unless `rc` is MPI_SUCCESS; `who` prefixes the
/// message when not empty ("mpi backend: ").
void check_mpi(int rc, const char* call, const char* who = "");

/// Runs `step` on this rank, then agrees over `comm` (collective) before anyone goes on: when `step`
/// threw an artune::Error (or any std::exception, taken as a BackendFailure) on some rank, every rank
/// throws the same code with the message of the lowest failing rank, "<what>: rank R: <message>". A
/// bootstrap step that fails on one rank (a CUDA query, ncclGetUniqueId) thus never leaves the others
/// blocked in the collective that follows it.
void agree_on(MPI_Comm comm, const char* what, const std::function<void()>& step);

}  // namespace artune
