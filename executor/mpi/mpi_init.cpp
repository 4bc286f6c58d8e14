#include "executor/mpi/mpi_init.hpp"

#include <fmt/format.h>

#include <string>

#include "core/error.hpp"

namespace artune {

bool ensure_mpi(int thread_level) {
  int initialised = 0;
  check_mpi(MPI_Initialized(&initialised), "MPI_Initialized");
  if (initialised) return false;
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, thread_level, &provided), "MPI_Init_thread");
  return true;
}

void check_mpi(int rc, const char* call, const char* who) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  const std::string what = len > 0 ? std::string(text, static_cast<std::size_t>(len)) : fmt::format("error {}", rc);
  throw BackendFailure(fmt::format("{}{} failed: {}", who, call, what));
}

}  // namespace artune
