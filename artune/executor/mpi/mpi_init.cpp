#include "artune/executor/mpi/mpi_init.hpp"

#include <fmt/format.h>

#include <exception>
#include <limits>
#include <string>

#include "artune/core/error.hpp"

namespace artune {

namespace {

[[noreturn]] void throw_as(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::kInvalidInput: throw InvalidInput(message);
    case ErrorCode::kUnsupported: throw Unsupported(message);
    case ErrorCode::kTimeout: throw Timeout(message);
    case ErrorCode::kWrongResult: throw Error(ErrorCode::kWrongResult, message);
    case ErrorCode::kInternal: throw InternalError(message);
    case ErrorCode::kBackendFailure: break;
  }
  throw BackendFailure(message);
}

}  // namespace

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

void agree_on(MPI_Comm comm, const char* what, const std::function<void()>& step) {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  std::string message;
  ErrorCode code = ErrorCode::kBackendFailure;
  bool failed = false;
  try {
    step();
  } catch (const Error& e) {
    failed = true;
    message = e.what();
    code = e.code();
  } catch (const std::exception& e) {
    failed = true;
    message = e.what();
  }
  // The lowest failing rank (INT_MAX: none), then its code and message from it.
  int first = failed ? rank : std::numeric_limits<int>::max();
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (first == std::numeric_limits<int>::max()) return;
  int header[2] = {static_cast<int>(code), static_cast<int>(message.size())};
  check_mpi(MPI_Bcast(header, 2, MPI_INT, first, comm), "MPI_Bcast");
  message.resize(static_cast<std::size_t>(header[1]));
  check_mpi(MPI_Bcast(message.data(), header[1], MPI_CHAR, first, comm), "MPI_Bcast");
  throw_as(static_cast<ErrorCode>(header[0]), fmt::format("{}: rank {}: {}", what, first, message));
}

}  // namespace artune
