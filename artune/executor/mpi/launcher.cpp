#include "artune/executor/mpi/launcher.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "artune/core/error.hpp"

namespace artune {

namespace {

std::optional<long> parse_long(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

}  // namespace

std::optional<int> first_env_int(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    const auto x = parse_long(v);
    if (!x || *x < 0 || *x > 1L << 30) return std::nullopt;
    return static_cast<int>(*x);
  }
  return std::nullopt;
}

std::optional<int> launcher_world_size() {
  return first_env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE"});
}

std::optional<int> launcher_rank() {
  return first_env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK"});
}

std::optional<int> launcher_local_rank() {
  return first_env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMIX_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                        "SLURM_LOCALID"});
}

int parse_machine_index(std::string_view text, std::string_view what) {
  const auto v = parse_long(text);
  if (!v || *v < 0 || *v > kMaxMachineIndex) {
    throw InvalidInput(fmt::format("{}: '{}' is not a machine index (0 to {})", what, text, kMaxMachineIndex));
  }
  return static_cast<int>(*v);
}

int env_machine_index() {
  const char* env = std::getenv("ARTUNE_MACHINE_INDEX");
  if (env == nullptr || *env == '\0') return -1;
  return parse_machine_index(env, "ARTUNE_MACHINE_INDEX");
}

int declared_machine_index(int given) { return given >= 0 ? given : env_machine_index(); }

}  // namespace artune
