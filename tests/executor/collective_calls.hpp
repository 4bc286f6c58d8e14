#pragma once
// One rank's all-gather or reduce-scatter through a Communicator with the verification inputs of
// executor/harness/verification.hpp, checked exactly (shared by test_communicator_collectives and the mpi program).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "artune/communicator.hpp"
#include "artune/executor/harness/verification.hpp"

namespace artune_test {

/// Runs `c` (kAllGather or kReduceScatter) of `count_per_rank` elements on `comm`, in place (NCCL's
/// convention) or not, and returns this rank's wrong elements; out of place, a changed send buffer counts
/// 1000000.
inline std::int64_t collective_wrong(artune::Communicator& comm, artune::Collective c, artune::DataType type,
                                     artune::ReduceOp op, std::int64_t count_per_rank, bool in_place, int iteration) {
  using artune::Collective;
  const int ranks = comm.size();
  const int rank = comm.rank();
  const std::int64_t total = count_per_rank * ranks;
  const std::size_t elem = artune::element_size(type);
  const std::size_t block = static_cast<std::size_t>(count_per_rank) * elem;
  const std::size_t own = block * static_cast<std::size_t>(rank);
  std::vector<std::byte> full(static_cast<std::size_t>(total) * elem);
  artune::fill_collective_input(full.data(), type, op, c, ranks, rank, total, iteration);
  const std::vector<std::byte> input = full;
  std::int64_t wrong = 0;
  if (c == Collective::kAllGather) {
    if (in_place) {
      comm.allgather(full.data() + own, full.data(), count_per_rank, type);
      return artune::count_collective_wrong(full.data(), type, op, c, ranks, rank, total, iteration);
    }
    const std::vector<std::byte> send(input.begin() + static_cast<std::ptrdiff_t>(own),
                                      input.begin() + static_cast<std::ptrdiff_t>(own + block));
    std::vector<std::byte> copy = send;
    std::vector<std::byte> recv(full.size(), std::byte{0x5a});
    comm.allgather(copy.data(), recv.data(), count_per_rank, type);
    wrong = artune::count_collective_wrong(recv.data(), type, op, c, ranks, rank, total, iteration);
    if (copy != send) wrong += 1000000;
    return wrong;
  }
  if (in_place) {
    comm.reducescatter(full.data(), full.data() + own, count_per_rank, type, op);
    return artune::count_collective_wrong(full.data(), type, op, c, ranks, rank, total, iteration);
  }
  std::vector<std::byte> recv(block, std::byte{0x5a});
  comm.reducescatter(full.data(), recv.data(), count_per_rank, type, op);
  if (full != input) wrong += 1000000;
  // count_collective_wrong reads block `rank` of a whole buffer.
  std::vector<std::byte> out(full.size());
  if (block > 0) std::memcpy(out.data() + own, recv.data(), block);
  return wrong + artune::count_collective_wrong(out.data(), type, op, c, ranks, rank, total, iteration);
}

}  // namespace artune_test
