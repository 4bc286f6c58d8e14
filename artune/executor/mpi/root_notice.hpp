#pragma once
// How the ranks of an mpi-backend job that failed agree on who reports: rank 0 announces that it reports
// (and ends the job) before it throws; a rank that gave up waits for that announcement instead of a fixed
// grace, stays silent when it arrives, and speaks itself only when rank 0 is silent (rank 0 is the one
// that stopped). Built when MPI is found.

#include "artune/executor/mpi/mpi_init.hpp"

namespace artune {

/// A private communicator (a duplicate of the backend's) on which rank 0 announces a failure.
class RootNotice {
 public:
  /// Duplicates `comm` (collective over it).
  explicit RootNotice(MPI_Comm comm);
  ~RootNotice();
  RootNotice(const RootNotice&) = delete;
  RootNotice& operator=(const RootNotice&) = delete;

  /// Rank 0: tells every other rank, without blocking, that it reports this failure.
  void announce();
  /// Another rank: true when rank 0's announcement arrives within `seconds` (it may have come earlier).
  bool wait(double seconds);

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int payload_ = 1;
};

}  // namespace artune
