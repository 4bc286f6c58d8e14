#include "artune/executor/mpi/root_notice.hpp"

#include <chrono>
#include <thread>

namespace artune {

namespace {
constexpr int kNoticeTag = 1;
}  // namespace

RootNotice::RootNotice(MPI_Comm comm) {
  check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup", "mpi backend: ");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

RootNotice::~RootNotice() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void RootNotice::announce() {
  // Freed at once: MPI completes the sends on its own (payload_ lives as long as this object). A send
  // that fails (a peer that died) leaves that peer to its own report.
  for (int r = 1; r < size_; ++r) {
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Isend(&payload_, 1, MPI_INT, r, kNoticeTag, comm_, &req) == MPI_SUCCESS) MPI_Request_free(&req);
  }
}

bool RootNotice::wait(double seconds) {
  MPI_Request req = MPI_REQUEST_NULL;
  int received = 0;
  if (MPI_Irecv(&received, 1, MPI_INT, 0, kNoticeTag, comm_, &req) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace artune
