// Run under mpirun by test_communicator_mpi: `prog check` all-reduces caller buffers through
// Communicator::create_mpi (every type and op, odd counts, in and out of place, MPI_COMM_WORLD and a
// split half of it) and prints the wrong elements summed over ranks; `prog collectives` does the same for
// all-gather and reduce-scatter (every type, reduce-scatter every op, odd blocks); `prog fault` makes a few calls with
// a 3 s timeout while ARTUNE_TEST_FAULT stops or kills a rank, and prints what each survivor caught; `prog async`
// (MPI_THREAD_MULTIPLE) makes asynchronous calls with a synchronous one between them, and checks that under the other
// modes' MPI_Init (MPI_THREAD_SINGLE) an asynchronous call is refused.

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "artune/communicator.hpp"
#include "artune/executor/harness/verification.hpp"
#include "tests/executor/collective_calls.hpp"

using namespace artune;

namespace {

// Wrong elements of this rank over every type, op, count and placement on `comm`.
long long check(const CommOptions& options, const void* mpi_comm, int ranks, int rank, int* checks) {
  Communicator comm = Communicator::create_mpi(options, mpi_comm);
  if (comm.size() != ranks || comm.rank() != rank) return 1000000;
  long long wrong = 0;
  for (DataType type : all_data_types()) {
    for (ReduceOp op : all_reduce_ops()) {
      if (max_verifiable_ranks(type, op) < ranks) continue;
      for (std::int64_t count : {1, 7, 1031, 70001}) {
        const std::size_t bytes = static_cast<std::size_t>(count) * element_size(type);
        std::vector<std::byte> send(bytes), recv(bytes), expected(bytes), input(bytes);
        for (int it = 0; it < 2; ++it) {
          for (bool in_place : {false, true}) {
            fill_input(send.data(), type, op, ranks, rank, 0, count, it);
            fill_expected(expected.data(), type, op, ranks, 0, count, it);
            void* out = in_place ? send.data() : recv.data();
            comm.allreduce(send.data(), out, count, type, op);
            wrong += count_mismatches(out, expected.data(), type, op, count);
            if (!in_place) {
              fill_input(input.data(), type, op, ranks, rank, 0, count, it);
              if (std::memcmp(input.data(), send.data(), bytes) != 0) wrong += 1000000;
            }
            ++*checks;
          }
        }
      }
    }
  }
  if (comm.last_plan().label != options.spec) wrong += 1000000;
  return wrong;
}

// Wrong elements of this rank over all-gathers and reduce-scatters of every type (and op) on MPI_COMM_WORLD.
long long check_collectives(int ranks, int* checks) {
  CommOptions o;
  o.tune_sizes = {64, 4096, 65536};  // plans tuned in memory per collective at its first call
  Communicator comm = Communicator::create_mpi(o);
  long long wrong = 0;
  for (DataType type : all_data_types()) {
    for (std::int64_t count : {1, 7, 1031}) {
      for (bool in_place : {false, true}) {
        wrong += artune_test::collective_wrong(comm, Collective::kAllGather, type, ReduceOp::kSum, count, in_place, 0);
        ++*checks;
        for (ReduceOp op : all_reduce_ops()) {
          if (max_verifiable_ranks(type, op) < ranks) continue;
          wrong += artune_test::collective_wrong(comm, Collective::kReduceScatter, type, op, count, in_place, 1);
          ++*checks;
        }
      }
    }
  }
  if (comm.last_plan().collective != Collective::kReduceScatter) wrong += 1000000;
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  if (mode == "async") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int status = 0;
  if (mode == "async") {
    long long wrong = 0;
    try {
      CommOptions o;  // plans tuned in memory (mpi profile)
      Communicator comm = Communicator::create_mpi(o);
      const std::int64_t n = 70001;
      std::vector<double> a(n), b(n, 1.0 + rank), c(n, 10.0 * rank);
      for (std::int64_t i = 0; i < n; ++i) a[static_cast<std::size_t>(i)] = static_cast<double>(rank + i % 13);
      std::vector<std::int32_t> block(5, rank), all(static_cast<std::size_t>(5 * size), -1);
      Request ra = comm.allreduce_async(a.data(), a.data(), n, DataType::kFloat64, ReduceOp::kSum);
      Request rb = comm.allreduce_async(b.data(), b.data(), n, DataType::kFloat64, ReduceOp::kMax);
      comm.allreduce(c.data(), c.data(), n, DataType::kFloat64, ReduceOp::kMin);  // queued behind them
      Request rg = comm.allgather_async(block.data(), all.data(), 5, DataType::kInt32);
      ra.wait();
      rb.wait();
      rg.wait();
      const double ranks_sum = size * (size - 1) / 2.0;
      for (std::int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<std::size_t>(i);
        wrong += a[k] != ranks_sum + size * static_cast<double>(i % 13);
        wrong += b[k] != size;
        wrong += c[k] != 0.0;
      }
      for (int k = 0; k < 5 * size; ++k) wrong += all[static_cast<std::size_t>(k)] != k / 5;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      wrong += 1000000;
    }
    long long total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) std::printf("communicator_mpi async: %lld wrong\n", total);
    status = total == 0 ? 0 : 1;
  } else if (mode == "check") {
    int checks = 0;
    long long wrong = 0;
    try {
      CommOptions o;
      o.spec = "rechd";
      wrong += check(o, nullptr, size, rank, &checks);
      // A split half of the world: the communicator's ranks are that MPI_Comm's.
      MPI_Comm half;
      MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
      int half_size = 0;
      MPI_Comm_size(half, &half_size);
      o.spec = "xring";
      o.topology = "uniform:" + std::to_string(half_size);
      wrong += check(o, &half, half_size, rank / 2, &checks);
      MPI_Comm_free(&half);
      // MPI_Init (MPI_THREAD_SINGLE): an asynchronous call, which would run MPI on a progress thread, is refused.
      int level = MPI_THREAD_MULTIPLE;
      MPI_Query_thread(&level);
      if (level < MPI_THREAD_SERIALIZED) {
        CommOptions single;
        single.spec = "rechd";
        Communicator comm = Communicator::create_mpi(single);
        float x = 1.0f;
        try {
          (void)comm.allreduce_async(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
          wrong += 1;
          std::fprintf(stderr, "rank %d: an asynchronous call under MPI_THREAD_SINGLE was accepted\n", rank);
        } catch (const InvalidInput& e) {
          if (std::strstr(e.what(), "MPI_Init_thread(MPI_THREAD_MULTIPLE)") == nullptr) wrong += 1;
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      wrong += 1000000;
    }
    long long total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) std::printf("communicator_mpi: %d checks per rank, %lld wrong\n", checks, total);
    status = total == 0 ? 0 : 1;
  } else if (mode == "collectives") {
    int checks = 0;
    long long wrong = 0;
    try {
      wrong += check_collectives(size, &checks);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      wrong += 1000000;
    }
    long long total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) std::printf("communicator_mpi collectives: %d checks per rank, %lld wrong\n", checks, total);
    status = total == 0 ? 0 : 1;
  } else {
    CommOptions o;
    o.spec = "xring";
    o.timeout_s = 3;
    Communicator comm = Communicator::create_mpi(o);
    std::vector<float> data(1000, 1.0f);
    try {
      for (int call = 0; call < 6; ++call)
        comm.allreduce(data.data(), data.data(), 1000, DataType::kFloat32, ReduceOp::kSum);
      std::printf("rank %d: no error\n", rank);
    } catch (const Error& e) {
      std::printf("rank %d: caught %s: %s\n", rank, e.code() == ErrorCode::kTimeout ? "Timeout" : "Error", e.what());
      status = 3;
    }
    std::fflush(stdout);
    // A broken mpi communicator ends the job (MPI_Abort) when destroyed: a dead peer leaves MPI unusable.
  }
  if (status == 0) MPI_Finalize();
  return status;
}
