// artune example: one communicator per MPI rank (mpi backend), all-reducing a caller buffer with the
// recursive halving-doubling plan, in place and out of place.
//
//   c++ -std=c++20 mpi_allreduce.cpp $(pkg-config --cflags --libs artune ompi-cxx)
//   mpirun -np 4 ./a.out

#include <mpi.h>

#include <artune/communicator.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int status = 0;
  try {
    artune::CommOptions options;
    options.spec = "rechd";  // or .table = "table.json" (tuned for the topology in .topology)
    MPI_Comm world = MPI_COMM_WORLD;
    artune::Communicator comm = artune::Communicator::create_mpi(options, &world);
    std::vector<double> send(1001, rank + 1.0);
    std::vector<double> recv(send.size());
    comm.allreduce(send.data(), recv.data(), 1001, artune::DataType::kFloat64, artune::ReduceOp::kSum);
    comm.allreduce(send.data(), send.data(), 1001, artune::DataType::kFloat64, artune::ReduceOp::kMax);
    const double want = size * (size + 1) / 2.0;
    if (recv[1000] != want || send[0] != size) status = 1;
    if (rank == 0) {
      std::printf("mpi_allreduce: %d ranks, sum %.1f (expected %.1f), max %.1f, plan %s\n", size, recv[1000], want,
                  send[0], comm.last_plan().label.c_str());
    }
  } catch (const artune::Error& e) {
    std::fprintf(stderr, "mpi_allreduce: rank %d: %s\n", rank, e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
