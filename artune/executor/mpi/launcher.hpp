#pragma once
// What an MPI launcher (mpirun of Open MPI, MPICH/Hydra's PMI, PMIx, MVAPICH) tells a
// process through its environment, readable before (and without) MPI: world size, rank,
// local rank; and artune's own ARTUNE_MACHINE_INDEX. No MPI dependency, so the CLI and
// every backend read them the same way. MPI initialisation itself: mpi/mpi_init.hpp.

#include <optional>
#include <string_view>

namespace artune {

/// The largest machine index ARTUNE_MACHINE_INDEX and --machine-index accept.
inline constexpr int kMaxMachineIndex = 1 << 20;

/// World size the launcher announces; nullopt outside a launcher.
std::optional<int> launcher_world_size();
/// This process's rank as the launcher announces it; nullopt outside a launcher.
std::optional<int> launcher_rank();
/// This process's rank among the processes of its host; nullopt when the launcher does not say.
std::optional<int> launcher_local_rank();

/// Reads the first of `names` that is set and non-empty as a non-negative int; nullopt when none is set
/// or the value is not such a number.
std::optional<int> first_env_int(std::initializer_list<const char*> names);

/// Parses a machine index in [0, kMaxMachineIndex]; InvalidInput naming `what` otherwise.
int parse_machine_index(std::string_view text, std::string_view what);
/// ARTUNE_MACHINE_INDEX, parsed by parse_machine_index; -1 when unset or empty.
int env_machine_index();
/// The machine index a backend uses: `given` when ≥ 0 (--machine-index), else env_machine_index().
int declared_machine_index(int given);

}  // namespace artune
