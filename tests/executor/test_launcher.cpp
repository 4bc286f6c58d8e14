// executor/mpi/launcher.hpp: what the launcher's environment says (rank, size, local rank) and the one
// parser of machine indices (ARTUNE_MACHINE_INDEX, --machine-index) that the CLI and both backends use.

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/executor/mpi/launcher.hpp"

using namespace artune;

namespace {

// Sets (or, with nullptr, clears) variables for one test case and restores them afterwards.
class EnvScope {
 public:
  EnvScope(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.push_back({name, old != nullptr, old != nullptr ? old : ""});
      if (value != nullptr) {
        setenv(name, value, 1);
      } else {
        unsetenv(name);
      }
    }
  }
  ~EnvScope() {
    for (const auto& s : saved_) {
      if (s.had) {
        setenv(s.name.c_str(), s.value.c_str(), 1);
      } else {
        unsetenv(s.name.c_str());
      }
    }
  }

 private:
  struct Saved {
    std::string name;
    bool had;
    std::string value;
  };
  std::vector<Saved> saved_;
};

const std::initializer_list<std::pair<const char*, const char*>> kNoLauncher = {{"OMPI_COMM_WORLD_RANK", nullptr},
                                                                                {"PMI_RANK", nullptr},
                                                                                {"PMIX_RANK", nullptr},
                                                                                {"MV2_COMM_WORLD_RANK", nullptr},
                                                                                {"OMPI_COMM_WORLD_SIZE", nullptr},
                                                                                {"PMI_SIZE", nullptr},
                                                                                {"PMIX_SIZE", nullptr},
                                                                                {"MV2_COMM_WORLD_SIZE", nullptr},
                                                                                {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr},
                                                                                {"MPI_LOCALRANKID", nullptr},
                                                                                {"PMIX_LOCAL_RANK", nullptr},
                                                                                {"MV2_COMM_WORLD_LOCAL_RANK", nullptr},
                                                                                {"SLURM_LOCALID", nullptr},
                                                                                {"ARTUNE_MACHINE_INDEX", nullptr}};

}  // namespace

TEST_CASE("launcher.rank_size_local_rank") {
  EnvScope clean(kNoLauncher);
  CHECK_FALSE(launcher_rank().has_value());
  CHECK_FALSE(launcher_world_size().has_value());
  CHECK_FALSE(launcher_local_rank().has_value());
  {
    EnvScope mpich({{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"}});
    CHECK(launcher_rank() == 5);
    CHECK(launcher_world_size() == 8);
    CHECK(launcher_local_rank() == 1);
    // Open MPI's variables come first when both are set; MVAPICH's are read too.
    EnvScope ompi({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
    CHECK(launcher_rank() == 3);
    CHECK(launcher_local_rank() == 0);
  }
  {
    EnvScope mv2({{"MV2_COMM_WORLD_RANK", "7"}, {"MV2_COMM_WORLD_SIZE", "16"}});
    CHECK(launcher_rank() == 7);
    CHECK(launcher_world_size() == 16);
  }
  {
    // Garbage is "not announced", never a wrong rank.
    EnvScope bad({{"OMPI_COMM_WORLD_RANK", "2x"}, {"PMI_SIZE", "-4"}});
    CHECK_FALSE(launcher_rank().has_value());
    CHECK_FALSE(launcher_world_size().has_value());
  }
}

TEST_CASE("launcher.machine_index_has_one_bound") {
  CHECK(parse_machine_index("0", "--machine-index") == 0);
  CHECK(parse_machine_index("1048576", "--machine-index") == kMaxMachineIndex);
  for (const char* bad : {"1048577", "-1", "x", "", "3 ", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_machine_index(bad, "ARTUNE_MACHINE_INDEX"), doctest::Contains("ARTUNE_MACHINE_INDEX: '"),
                         InvalidInput);
  }
  EnvScope clean(kNoLauncher);
  CHECK(env_machine_index() == -1);
  CHECK(declared_machine_index(4) == 4);
  EnvScope set({{"ARTUNE_MACHINE_INDEX", "2"}});
  CHECK(env_machine_index() == 2);
  CHECK(declared_machine_index(-1) == 2);
  CHECK(declared_machine_index(0) == 0);  // the flag wins over the environment
  EnvScope wrong({{"ARTUNE_MACHINE_INDEX", "2000000"}});
  CHECK_THROWS_WITH_AS(declared_machine_index(-1),
                       "ARTUNE_MACHINE_INDEX: '2000000' is not a machine index (0 to 1048576)", InvalidInput);
}
