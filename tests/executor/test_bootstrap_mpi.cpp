// Error agreement at bootstrap (executor/mpi/mpi_init.hpp agree_on), as the nccl backend uses it
// before every collective bootstrap step: run under `mpirun -np 4` with
// ARTUNE_TEST_FAULT=boot:rank2:iter2. Step 2 fails on rank 2 only; every rank must throw the same
// error naming rank 2 and then still reach the next collective (nobody left blocked). Exit 0 when
// every check passed on every rank.

#include <cstdio>
#include <stdexcept>
#include <string>

#include "artune/core/error.hpp"
#include "artune/executor/mpi/mpi_init.hpp"
#include "artune/executor/test_fault.hpp"

using namespace artune;

namespace {

int g_failures = 0;
int g_rank = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
}

// One bootstrap step as the backend runs it: counted, and failing where the injected fault says.
struct Bootstrap {
  TestFault fault = read_test_fault();
  int steps = 0;
  void step() {
    ++steps;
    if (fault.fires("boot", g_rank, steps)) throw BackendFailure("injected failure of a bootstrap step");
  }
};

}  // namespace

int main() {
  ensure_mpi();
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  expect(size == 4, "runs with 4 ranks");
  Bootstrap boot;
  expect(boot.fault.kind == "boot" && boot.fault.rank == 2 && boot.fault.iteration == 2,
         "ARTUNE_TEST_FAULT=boot:rank2:iter2 is set");

  // Step 1: nobody fails, nobody throws.
  try {
    agree_on(MPI_COMM_WORLD, "bootstrap", [&] { boot.step(); });
  } catch (const Error& e) {
    expect(false, std::string("step 1 threw: ") + e.what());
  }

  // Step 2: rank 2 fails; every rank throws the same BackendFailure naming rank 2.
  std::string message;
  ErrorCode code = ErrorCode::kWrongResult;
  try {
    agree_on(MPI_COMM_WORLD, "bootstrap (NCCL unique id)", [&] { boot.step(); });
  } catch (const Error& e) {
    message = e.what();
    code = e.code();
  }
  expect(code == ErrorCode::kBackendFailure, "step 2: a BackendFailure on every rank");
  expect(message == "bootstrap (NCCL unique id): rank 2: injected failure of a bootstrap step",
         "step 2: message names rank 2: '" + message + "'");

  // Two ranks fail differently: the lowest one's error (InvalidInput from rank 1) on all; a plain
  // std::exception (rank 3) counts as a BackendFailure.
  message.clear();
  code = ErrorCode::kWrongResult;
  try {
    agree_on(MPI_COMM_WORLD, "bootstrap", [&] {
      if (g_rank == 3) throw std::runtime_error("plain exception");
      if (g_rank == 1) throw InvalidInput("bad plan");
    });
  } catch (const Error& e) {
    message = e.what();
    code = e.code();
  }
  expect(code == ErrorCode::kInvalidInput, "step 3: InvalidInput on every rank");
  expect(message == "bootstrap: rank 1: bad plan", "step 3: rank 1's message: '" + message + "'");
  message.clear();
  try {
    agree_on(MPI_COMM_WORLD, "bootstrap", [&] {
      if (g_rank == 3) throw std::runtime_error("plain exception");
    });
  } catch (const BackendFailure& e) {
    message = e.what();
  } catch (const Error& e) {
    expect(false, std::string("step 4: not a BackendFailure: ") + e.what());
  }
  expect(message == "bootstrap: rank 3: plain exception", "step 4: rank 3's message: '" + message + "'");

  // Everyone is still in step: the next collective completes.
  int total = g_failures;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  if (g_rank == 0) std::printf("bootstrap agreement: %d failures over 4 ranks\n", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
