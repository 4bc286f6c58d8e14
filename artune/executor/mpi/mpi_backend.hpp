#pragma once
// The mpi backend: launched as `mpirun -np P artune run …`, every MPI rank is
// one plan participant and runs its own slice of the plan
// (split_for_process): transfers are MPI_Isend/MPI_Irecv tagged with the op
// id, a received reduce lands in a staging buffer and is combined in place,
// local ops run directly, and `group` ops are non-blocking MPI collectives on
// communicators split per member list (created once in prepare and cached).
// Helper devices (a CPU gather shard) live on the lowest rank of their
// machine. The engine starts every action whose local deps are done and polls
// with MPI_Testsome; nothing ever blocks without a deadline, so a dead or
// stopped peer ends in a Timeout naming the stuck op and peer, after which
// the job is aborted (MPI_Abort) so that no rank hangs.
//
// Machine indices: ARTUNE_MACHINE_INDEX (or BackendOptions::machine_index)
// declares a rank's machine; prepare() checks it against the topology's
// machine of that rank's device, so 2x4 / 4x2 clusters can be exercised on
// one host with the same checks a real cluster gets.
//
// Test-only fault injection: ARTUNE_TEST_FAULT=stop|kill|flip:rankR:iterN (see
// executor/test_fault.hpp) makes rank R stop, die or corrupt an input at its N-th run.

#include <memory>

#include "artune/executor/harness/harness.hpp"

namespace artune {

/// Creates the mpi backend (initialises MPI when nobody has).
std::unique_ptr<HarnessBackend> make_mpi_backend(const BackendOptions& options);

}  // namespace artune
